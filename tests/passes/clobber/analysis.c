// SPDX-License-Identifier: Apache-2.0
// The clobber analysis, one case per function: which writes of a FASE are
// logged (clobber writes) and why the others are not. The undo setting
// logs every write to PM, to memory the FASE allocated as well.
//
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -mllvm -pmkit-clobber-report \
// RUN:   -c %s -o /dev/null 2>&1 | %FileCheck %s
// RUN: %clang_pm -O2 -g -mllvm -pmkit-mode=clobber -mllvm -pmkit-clobber-report \
// RUN:   -mllvm -pmkit-clobber-setting=undo -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=UNDO
// RUN: %clang_pm -O2 -fno-discard-value-names -mllvm -pmkit-mode=clobber \
// RUN:   -S -emit-llvm %s -o - \
// RUN:   | %FileCheck %s --check-prefix=IR
#include <pmkit/pmkit.h>
#include <stdatomic.h>
#include <string.h>

struct rec {
  long a, b, c;
  long arr[4];
  _Atomic long cnt;
  struct rec *next;
};
extern pmkit_pool *pool;

// A read, then a write of the same field: the write clobbers an input.
// CHECK-LABEL: pmkit-clobber: read_then_write
// CHECK-NEXT: analysis.c:[[#@LINE+3]]: store: logged: clobbers an input read
// UNDO-LABEL: pmkit-clobber: read_then_write
// UNDO-NEXT: analysis.c:[[#@LINE+1]]: store: logged: undo setting
PMKIT_FASE void read_then_write(struct rec *r) { r->a = r->a + 1; }

// Nothing read before the writes: re-execution simply writes them again.
// CHECK-LABEL: pmkit-clobber: blind_writes
// CHECK-NEXT: analysis.c:[[#@LINE+5]]: store: not logged: no input read
// CHECK-NEXT: analysis.c:[[#@LINE+5]]: store: not logged: no input read
// UNDO-LABEL: pmkit-clobber: blind_writes
// UNDO-NEXT: store: logged: undo setting
PMKIT_FASE void blind_writes(struct rec *r, long v) {
  r->a = v;
  r->b = v;
}

// A read of one field, then a write of another: no alias, no log.
// CHECK-LABEL: pmkit-clobber: other_field
// CHECK-NEXT: analysis.c:[[#@LINE+1]]: store: not logged: no input read
PMKIT_FASE void other_field(struct rec *r) { r->b = r->a * 2; }

// The first write covers the address, so the later read is of a value the
// FASE wrote, and the second write is dominated by the first.
// CHECK-LABEL: pmkit-clobber: write_read_write
// CHECK-NEXT: analysis.c:[[#@LINE+3]]: store: not logged: no input read
// CHECK-NEXT: analysis.c:[[#@LINE+4]]: store: not logged: an earlier write
PMKIT_FASE void write_read_write(struct rec *r, long v) {
  r->c = v;
  __asm__ volatile("" ::: "memory"); // keeps both stores and the load
  r->c = r->c * 3;
}

// In a loop, a read in a later iteration follows a write of an earlier one.
// CHECK-LABEL: pmkit-clobber: loop
// CHECK: analysis.c:[[#@LINE+3]]: store: logged: clobbers an input read
PMKIT_FASE void loop(struct rec *r, int n) {
  for (int i = 0; i < n; i++)
    r->arr[i & 3] = r->arr[(i + 1) & 3] + i;
}

// Memory the FASE allocated is never an input.
// CHECK-LABEL: pmkit-clobber: fresh
// CHECK: analysis.c:[[#@LINE+9]]: store: not logged: memory this FASE
// CHECK: analysis.c:[[#@LINE+9]]: store: not logged: memory this FASE
// CHECK: analysis.c:[[#@LINE+9]]: store: logged: clobbers an input read
// UNDO-LABEL: pmkit-clobber: fresh
// UNDO: analysis.c:[[#@LINE+5]]: store: logged: undo setting
PMKIT_FASE void fresh(struct rec *r) {
  struct rec *n;
  if (pmkit_zalloc(pool, sizeof *n, (void **)&n))
    return;
  n->a = r->a;
  n->next = r->next;
  r->next = n;
}

// An atomic read-modify-write reads before it writes.
// CHECK-LABEL: pmkit-clobber: rmw
// CHECK-NEXT: analysis.c:[[#@LINE+1]]: atomicrmw: logged: clobbers an input
PMKIT_FASE void rmw(struct rec *r) { atomic_fetch_add(&r->cnt, 1); }

// A copy into a field read earlier is a clobber write of its length.
// CHECK-LABEL: pmkit-clobber: copy
// CHECK-NEXT: analysis.c:[[#@LINE+3]]: call: logged: clobbers an input read
PMKIT_FASE void copy(struct rec *r, const struct rec *src) {
  if (r->arr[0] != src->a)
    memcpy(r->arr, src->arr, sizeof r->arr);
}

// Reads of a declared volatile buffer are logged with the arguments.
// CHECK-LABEL: pmkit-clobber: from_buffer
// CHECK-NEXT: analysis.c:[[#@LINE+3]]: call: not logged: no input read
PMKIT_FASE PMKIT_FASE_IN(2, 3) void from_buffer(struct rec *r, const long *v,
                                                unsigned long n) {
  memcpy(r->arr, v, n < sizeof r->arr ? n : sizeof r->arr);
}

// A callee with a body is inlined and analysed as part of the FASE.
static __attribute__((noinline)) void bump(long *p) { *p += 1; }
// CHECK-LABEL: pmkit-clobber: calls_bump
// CHECK-NEXT: store: logged: clobbers an input read
PMKIT_FASE void calls_bump(struct rec *r) { bump(&r->b); }

// Entry and exit: the outermost call records its arguments and begins; each
// return commits. The table maps the FASE's id to a replay stub.
// IR-LABEL: define {{.*}}void @read_then_write(
// IR: call i32 @__pmkit_clobber_enter(i64 {{-?[0-9]+}})
// IR: call void @__pmkit_clobber_arg_ptr(ptr %r)
// IR-NEXT: call void @__pmkit_clobber_begin()
// IR: call void @__pmkit_clobber_log(
// IR: call void @__pmkit_clobber_wb(
// IR: call void @__pmkit_clobber_exit()
// IR-NEXT: ret void
// IR-LABEL: define {{.*}}void @from_buffer(
// IR: call void @__pmkit_clobber_arg_buf(ptr %v, i64 %n, i32 0)

// Clobber writes in a row, with no call between them, share one fence: all
// their entries are logged before the first of them (the second address is
// computed there), the last one fenced; each line is written back at commit.
// CHECK-LABEL: pmkit-clobber: swap
// CHECK-NEXT: store: logged: clobbers an input read
// CHECK-NEXT: store: logged: clobbers an input read
// IR-LABEL: define {{.*}}void @swap(
// IR: call void @__pmkit_clobber_begin()
// IR: call void @__pmkit_clobber_log_batch(ptr %r, i64 8)
// IR-NEXT: call void @__pmkit_clobber_log(ptr %c, i64 8)
// IR-NEXT: store i64 %{{.*}}, ptr %r
// IR-NOT: __pmkit_clobber_log
// IR: call void @__pmkit_clobber_wb(ptr %r, i64 8)
// IR: call void @__pmkit_clobber_wb(ptr %c, i64 8)
// IR: call void @__pmkit_clobber_exit()
PMKIT_FASE void swap(struct rec *r) {
  long t = r->a;
  r->a = r->c;
  r->c = t;
}

// A restrict parameter the FASE does not let escape is only reached through
// itself: a read through another pointer, even one loaded from PM, cannot
// be of it, so its write clobbers nothing (without restrict it would).
// CHECK-LABEL: pmkit-clobber: counted
// CHECK-NEXT: store: logged: clobbers an input read (load at {{.*}}analysis.c:[[#@LINE+5]])
// CHECK-NEXT: store: not logged: no input read can precede it
// UNDO-LABEL: pmkit-clobber: counted
// UNDO-NEXT: store: logged: undo setting
PMKIT_FASE void counted(struct rec *r, long *restrict done) {
  r->next->a += 1;
  *done = 1;
}

// A loop's clobber writes, at addresses computed from the induction
// variable and an index array nothing in the loop writes: a copy of the
// loop logs every iteration's bytes before it, with one fence at its end,
// and the loop itself logs nothing.
// CHECK-LABEL: pmkit-clobber: bump_all
// CHECK-NEXT: store: logged: clobbers an input read (load at {{.*}}analysis.c:[[#@LINE+14]]), before its loop
// IR-LABEL: define {{.*}}void @bump_all(
// IR: pmkit.prelog:
// IR: call void @__pmkit_clobber_log_batch(
// IR: pmkit.prelog.done:
// IR-NEXT: call void @__pmkit_clobber_log(ptr null, i64 0)
// IR-NOT: call void @__pmkit_clobber_log
// IR: call void @__pmkit_clobber_wb(
// IR-NOT: call void @__pmkit_clobber_log
// IR: {{^}}}
PMKIT_FASE void bump_all(struct rec *r, const unsigned char *restrict idx,
                         unsigned n) {
#pragma clang loop unroll(disable)
  for (unsigned j = 0; j < n; j++)
    r->arr[idx[j] & 3] += 1;
}

// A loop that follows pointers it reads: the next address is known only in
// its iteration, so each write is logged where it is.
// CHECK-LABEL: pmkit-clobber: chain
// CHECK-NEXT: store: logged: clobbers an input read (load at {{.*}}analysis.c:[[#@LINE+8]]){{$}}
// IR-LABEL: define {{.*}}void @chain(
// IR-NOT: pmkit.prelog
// IR: call void @__pmkit_clobber_log(
// IR-NOT: pmkit.prelog
// IR: {{^}}}
PMKIT_FASE void chain(struct rec *r, unsigned n) {
  for (unsigned j = 0; j < n && r; j++, r = r->next)
    r->a += 1;
}

// The replay stubs and the table come after the functions.
// IR: define internal void @__pmkit_clobber_replay.read_then_write(ptr
// IR: @__pmkit_clobber_register(ptr @__pmkit_clobber_table, i32 14)
