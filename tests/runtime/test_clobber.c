/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_clobber.c -- clobber mode's runtime (runtime/clobber/clobber.c)
 * called directly, the way code from the pmkit-clobber pass calls it
 * (include/pmkit/abi.h): each FASE below is written out by hand as the pass
 * would instrument it (enter, one arg call per parameter, begin, a log
 * before each clobber write, a write-back after each PM write, exit), with
 * its replay stub and a FASE table registered by a constructor. Checked:
 * what a FASE's log records (pmkit_clobber_stats: entries, bytes, fences);
 * nesting (one section, one commit); the log calls that save nothing (NULL,
 * size 0, DRAM, another pool, outside a FASE); a crash mid-FASE (the child
 * stops with PMKIT_CRASH_EXIT inside the body): pmkit_clobber_inflight_get
 * reports the call, pmkit_recover restores the clobbered inputs and then
 * re-executes the FASE with its logged arguments (buffers copied, scratch
 * buffers zeroed), or, under the undo setting, rolls it back; a FASE this
 * program lacks is refused; a torn begin counts as never begun; a crash at
 * every crash point of a FASE leaves it done exactly once or not at all;
 * misuse (exit without enter, an unregistered FASE, a volatile pointer
 * argument) stops the program with its message.
 * Usage: test_clobber [child POOL SCENARIO WHERE]
 */
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "pmkit/abi.h"
#include "testutil.h"

struct root {
  uint64_t a, b, n; /* transfer moves `amount` from a to b; n counts them */
  char tag[16];     /* the last transfer's tag, from an input buffer */
  uint64_t calls;   /* outer's count */
  uint64_t ux, uy;  /* written by the undo FASE */
  uint64_t s;       /* written by the scratch FASE */
};

#define A0 1000u
#define AMOUNT 7u
#define TAG_LEN 16u
#define SCRATCH_LEN 32u
static const char TAG[TAG_LEN] = "sixteen-byte-tag";

/* FASE ids: the pass uses the FNV-1a hash of the symbol name; any unique
 * id will do here. */
#define ID_TRANSFER 0x7472616e73666572ull
#define ID_OUTER 0x6f75746572ull
#define ID_UNDO 0x756e646full
#define ID_SCRATCH 0x73637261746368ull
#define ID_BATCH 0x6261746368ull
#define ID_GHOST 0x67686f7374ull /* registered only by the child */

/* Where the child's FASE stops as if the power failed (0: nowhere). */
static int crash_where;
static void crash_here(int where) {
  if (crash_where == where)
    _exit(PMKIT_CRASH_EXIT);
}

/* What the replay stubs saw: recovery's arguments and inputs. */
static struct {
  unsigned runs;
  uint64_t a;               /* transfer: r->a on entry */
  char tag[TAG_LEN];        /* transfer: the tag buffer */
  unsigned char scratch[8]; /* scratch: the first bytes of the buffer */
  int scratch_null;
} seen;

/* transfer(r, amount, tag): three clobber writes (a, b, n read first), one
 * plain write of an input buffer's bytes. */
static void transfer(struct root *r, uint64_t amount, const char *tag) {
  if (__pmkit_clobber_enter(ID_TRANSFER)) {
    __pmkit_clobber_arg_ptr(r);
    __pmkit_clobber_arg(amount);
    __pmkit_clobber_arg_buf(tag, TAG_LEN, 0);
    __pmkit_clobber_begin();
  }
  uint64_t a = r->a;
  __pmkit_clobber_log(&r->a, 8);
  r->a = a - amount;
  __pmkit_clobber_wb(&r->a, 8);
  crash_here(1);
  uint64_t b = r->b;
  __pmkit_clobber_log(&r->b, 8);
  r->b = b + amount;
  __pmkit_clobber_wb(&r->b, 8);
  uint64_t n = r->n;
  __pmkit_clobber_log(&r->n, 8);
  r->n = n + 1;
  __pmkit_clobber_wb(&r->n, 8);
  memcpy(r->tag, tag, TAG_LEN); /* not read first: no log */
  __pmkit_clobber_wb(r->tag, TAG_LEN);
  crash_here(2);
  __pmkit_clobber_exit();
}

/* outer(r): a clobber write, then transfer nested in it. */
static void outer(struct root *r) {
  if (__pmkit_clobber_enter(ID_OUTER)) {
    __pmkit_clobber_arg_ptr(r);
    __pmkit_clobber_begin();
  }
  uint64_t c = r->calls;
  __pmkit_clobber_log(&r->calls, 8);
  r->calls = c + 1;
  __pmkit_clobber_wb(&r->calls, 8);
  transfer(r, AMOUNT, TAG);
  __pmkit_clobber_exit();
}

/* undo_fase(r, v), built with the undo setting: every PM write logged. */
static void undo_fase(struct root *r, uint64_t v) {
  if (__pmkit_clobber_enter(ID_UNDO)) {
    __pmkit_clobber_arg_ptr(r);
    __pmkit_clobber_arg(v);
    __pmkit_clobber_begin();
  }
  __pmkit_clobber_log(&r->ux, 8);
  r->ux = v;
  __pmkit_clobber_wb(&r->ux, 8);
  crash_here(1);
  __pmkit_clobber_log(&r->uy, 8);
  r->uy = v;
  __pmkit_clobber_wb(&r->uy, 8);
  __pmkit_clobber_exit();
}

/* scratch_fase(r, buf, len): buf is PMKIT_FASE_SCRATCH (only its length is
 * logged); r->s gets its first byte. */
static void scratch_fase(struct root *r, unsigned char *buf, uint64_t len) {
  if (__pmkit_clobber_enter(ID_SCRATCH)) {
    __pmkit_clobber_arg_ptr(r);
    __pmkit_clobber_arg_buf(buf, len, 1);
    __pmkit_clobber_arg(len);
    __pmkit_clobber_begin();
  }
  r->s = buf[0];
  __pmkit_clobber_wb(&r->s, 8);
  crash_here(1);
  __pmkit_clobber_exit();
}

/* The log calls that save nothing, then two entries under one fence. */
static pmkit_pool *other_pool; /* a second pool, for batch_fase */
static void batch_fase(struct root *r) {
  if (__pmkit_clobber_enter(ID_BATCH)) {
    __pmkit_clobber_arg_ptr(r);
    __pmkit_clobber_begin();
  }
  uint64_t local = 0;
  __pmkit_clobber_log(NULL, 8);   /* not PM */
  __pmkit_clobber_log(&local, 8); /* DRAM */
  __pmkit_clobber_log(&r->a, 0);  /* nothing to save */
  __pmkit_clobber_log(NULL, 0);   /* nothing pending: no fence */
  if (other_pool) {               /* another pool than the FASE's */
    void *o = pmkit_pool_base(other_pool);
    __pmkit_clobber_log((char *)o + 8192, 8);
  }
  uint64_t a = r->a, b = r->b;
  __pmkit_clobber_log_batch(&r->a, 8);
  __pmkit_clobber_log_batch(&r->b, 8);
  __pmkit_clobber_log(NULL, 0); /* one fence for both */
  r->a = b;
  r->b = a;
  __pmkit_clobber_wb(&r->a, 16);
  __pmkit_clobber_exit();
}

/* ghost(r): a FASE only the child has (registered in child mode). */
static void ghost(struct root *r) {
  if (__pmkit_clobber_enter(ID_GHOST)) {
    __pmkit_clobber_arg_ptr(r);
    __pmkit_clobber_begin();
  }
  uint64_t a = r->a;
  __pmkit_clobber_log(&r->a, 8);
  r->a = a + 1;
  __pmkit_clobber_wb(&r->a, 8);
  crash_here(1);
  __pmkit_clobber_exit();
}

/* Replay stubs: decode the argument words, call the FASE (recording what
 * recovery passed). */
static void replay_transfer(const uint64_t *args) {
  struct root *r = (struct root *)(uintptr_t)args[0];
  seen.runs++;
  seen.a = r->a;
  memcpy(seen.tag, (const char *)(uintptr_t)args[2], TAG_LEN);
  transfer(r, args[1], (const char *)(uintptr_t)args[2]);
}
static void replay_outer(const uint64_t *args) {
  seen.runs++;
  outer((struct root *)(uintptr_t)args[0]);
}
static void replay_undo(const uint64_t *args) {
  seen.runs++; /* never: recovery rolls an undo FASE back */
  undo_fase((struct root *)(uintptr_t)args[0], args[1]);
}
static void replay_scratch(const uint64_t *args) {
  unsigned char *buf = (unsigned char *)(uintptr_t)args[1];
  seen.runs++;
  seen.scratch_null = buf == NULL;
  if (buf)
    memcpy(seen.scratch, buf, sizeof seen.scratch);
  scratch_fase((struct root *)(uintptr_t)args[0], buf, args[2]);
}
static void replay_batch(const uint64_t *args) {
  seen.runs++;
  batch_fase((struct root *)(uintptr_t)args[0]);
}
static void replay_ghost(const uint64_t *args) {
  ghost((struct root *)(uintptr_t)args[0]);
}

static const struct __pmkit_clobber_fase fases[] = {
    {ID_TRANSFER, "transfer", replay_transfer, 3, 0},
    {ID_OUTER, "outer", replay_outer, 1, 0},
    {ID_UNDO, "undo_fase", replay_undo, 2, PMKIT_CLOBBER_UNDO},
    {ID_SCRATCH, "scratch_fase", replay_scratch, 3, 0},
    {ID_BATCH, "batch_fase", replay_batch, 1, 0},
};
static const struct __pmkit_clobber_fase ghost_fase[] = {
    {ID_GHOST, "ghost", replay_ghost, 1, 0},
};

__attribute__((constructor)) static void register_fases(void) {
  __pmkit_clobber_register(fases, sizeof fases / sizeof *fases);
}

/* ---- helpers ------------------------------------------------------------ */

static const char *path;

/* A base address for pools that must share one (64 KiB aligned, inside
 * the range pmkit's automatic bases use). */
static pmkit_pool_opts fixed_base = {.base = 0x3f1234560000ull};

/* A fresh pool with the root's balances set (at fixed_base if `fixed`). */
static void setup_at(int fixed) {
  pmkit_pool *p;
  struct root *r;
  unlink(path);
  CHECK_OK(pmkit_pool_create(path, 8 << 20, fixed ? &fixed_base : NULL, &p));
  CHECK_OK(pmkit_root(p, sizeof *r, (void **)&r));
  r->a = A0;
  pmkit_persist(r, sizeof *r);
  CHECK_OK(pmkit_pool_close(p));
}
static void setup(void) { setup_at(0); }

static pmkit_pool *open_root(struct root **r) {
  pmkit_pool *p;
  CHECK_OK(pmkit_pool_open(path, NULL, &p));
  CHECK_OK(pmkit_root(p, sizeof **r, (void **)r));
  return p;
}

/* Run this program's child mode (one FASE, maybe stopped mid-way) with at
 * most one environment variable set; its wait status. */
static int run_child(const char *scenario, int where, const char *var,
                     const char *val) {
  char w[16];
  snprintf(w, sizeof w, "%d", where);
  return test_run_self(var, val,
                       (const char *[]){"child", path, scenario, w, NULL});
}

static int child(const char *pool, const char *scenario, int where) {
  pmkit_pool *p;
  struct root *r;
  crash_where = where;
  if (pmkit_pool_open(pool, NULL, &p) || pmkit_root(p, sizeof *r, (void **)&r))
    return 3;
  if (!strcmp(scenario, "transfer"))
    transfer(r, AMOUNT, TAG);
  else if (!strcmp(scenario, "outer"))
    outer(r);
  else if (!strcmp(scenario, "undo"))
    undo_fase(r, 99);
  else if (!strcmp(scenario, "scratch")) {
    unsigned char buf[SCRATCH_LEN];
    memset(buf, 0xab, sizeof buf);
    scratch_fase(r, buf, sizeof buf);
  } else if (!strcmp(scenario, "switch")) {
    /* The same FASE, same arguments, first on another pool at the same
     * base (closed again), then on this one, stopped mid-way there. */
    struct root *x;
    pmkit_pool *q;
    CHECK_OK(pmkit_pool_close(p));
    char other[4200];
    snprintf(other, sizeof other, "%s.other", pool);
    unlink(other);
    int stop = crash_where;
    crash_where = 0;
    CHECK_OK(pmkit_pool_create(other, 8 << 20, &fixed_base, &q));
    CHECK_OK(pmkit_root(q, sizeof *x, (void **)&x));
    x->a = A0;
    transfer(x, AMOUNT, TAG);
    CHECK_OK(pmkit_pool_close(q));
    unlink(other);
    CHECK_OK(pmkit_pool_open(pool, NULL, &p));
    CHECK_OK(pmkit_root(p, sizeof *r, (void **)&r));
    crash_where = stop;
    transfer(r, AMOUNT, TAG);
  } else if (!strcmp(scenario, "ghost")) {
    __pmkit_clobber_register(ghost_fase, 1);
    ghost(r);
  } else
    return 4;
  return pmkit_pool_close(p) ? 3 : 0;
}

/* A fresh pool, the child's FASE stopped at `where`: a crash mid-FASE. */
static void crash_mid_fase(const char *scenario, int where) {
  setup();
  int st = run_child(scenario, where, NULL, NULL);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == PMKIT_CRASH_EXIT);
}

static pmkit_clobber_stats delta(const pmkit_clobber_stats *before) {
  pmkit_clobber_stats now, d;
  CHECK_OK(pmkit_clobber_stats_get(&now));
  d.fases = now.fases - before->fases;
  d.entries = now.entries - before->entries;
  d.log_bytes = now.log_bytes - before->log_bytes;
  d.vlog_bytes = now.vlog_bytes - before->vlog_bytes;
  d.fences = now.fences - before->fences;
  d.replays = now.replays - before->replays;
  d.rollbacks = now.rollbacks - before->rollbacks;
  return d;
}

/* Fences a FASE issues between begin and commit under ADR: begin's, one
 * per fenced log call, the write-backs' and the commit's. */
static uint64_t fences_for(uint64_t fenced_logs) {
  return pmkit_flush_kind() == PMKIT_FLUSH_NONE ? 0 : fenced_logs + 3;
}

/* ---- cases -------------------------------------------------------------- */

/* A FASE's log: three entries of 8 bytes (16-byte headers), a vlog of two
 * kind words, three argument words and the 16-byte buffer; the FASE's
 * effects, one commit, an idle slot. */
static void log_records(void) {
  setup();
  struct root *r;
  pmkit_pool *p = open_root(&r);
  pmkit_clobber_stats before;
  CHECK_OK(pmkit_clobber_stats_get(&before));
  transfer(r, AMOUNT, TAG);
  pmkit_clobber_stats d = delta(&before);
  CHECK(d.fases == 1 && d.entries == 3);
  CHECK(d.log_bytes == 3 * (16 + 8));
  CHECK(d.vlog_bytes == (2 + 3 + TAG_LEN / 8) * 8);
  CHECK(d.fences == fences_for(3));
  CHECK(d.replays == 0 && d.rollbacks == 0);
  CHECK(r->a == A0 - AMOUNT && r->b == AMOUNT && r->n == 1);
  CHECK(memcmp(r->tag, TAG, TAG_LEN) == 0);
  pmkit_ctx *c;
  CHECK_OK(pmkit_ctx_get(p, &c));
  CHECK(pmkit_ctx_state_of(c) == PMKIT_CTX_IDLE);
  /* Again: the same counts, and the thread's log is reused (no block). */
  pmkit_pool_info i0, i1;
  CHECK_OK(pmkit_pool_stat(p, &i0));
  CHECK_OK(pmkit_clobber_stats_get(&before));
  transfer(r, AMOUNT, TAG);
  d = delta(&before);
  CHECK(d.fases == 1 && d.entries == 3 && d.log_bytes == 72);
  CHECK_OK(pmkit_pool_stat(p, &i1));
  CHECK(i1.blocks_used == i0.blocks_used);
  CHECK(r->a == A0 - 2 * AMOUNT && r->b == 2 * AMOUNT && r->n == 2);
  CHECK_RC(pmkit_clobber_stats_get(NULL), PMKIT_E_INVAL);
  CHECK_OK(pmkit_pool_close(p));
}

/* Nesting: the inner FASE's enter says 0 (its arguments are not logged, it
 * does not begin), its log goes to the outer section, its exit does not
 * commit; the outer's does, once. Then a new outermost call begins again. */
static void nesting(void) {
  setup();
  struct root *r;
  pmkit_pool *p = open_root(&r);
  pmkit_ctx *c;
  CHECK_OK(pmkit_ctx_get(p, &c));
  pmkit_clobber_stats before;
  CHECK_OK(pmkit_clobber_stats_get(&before));
  CHECK(__pmkit_clobber_enter(ID_OUTER) == 1);
  __pmkit_clobber_arg_ptr(r);
  __pmkit_clobber_begin();
  CHECK(pmkit_ctx_state_of(c) == PMKIT_CTX_ACTIVE);
  CHECK(pmkit_fase_tag(c) == ID_OUTER);
  CHECK(__pmkit_clobber_enter(ID_TRANSFER) == 0); /* nested */
  CHECK(__pmkit_clobber_enter(ID_UNDO) == 0);     /* deeper */
  __pmkit_clobber_exit();
  __pmkit_clobber_exit();
  CHECK(pmkit_ctx_state_of(c) == PMKIT_CTX_ACTIVE); /* no commit yet */
  __pmkit_clobber_exit();
  CHECK(pmkit_ctx_state_of(c) == PMKIT_CTX_IDLE);
  pmkit_clobber_stats d = delta(&before);
  CHECK(d.fases == 1 && d.entries == 0 && d.vlog_bytes == 3 * 8);

  /* outer(): its entry and transfer's three, one commit. */
  CHECK_OK(pmkit_clobber_stats_get(&before));
  outer(r);
  d = delta(&before);
  CHECK(d.fases == 1 && d.entries == 4 && d.log_bytes == 4 * 24);
  CHECK(d.vlog_bytes == (2 + 1) * 8); /* outer's argument only */
  CHECK(d.fences == fences_for(4));
  CHECK(r->calls == 1 && r->n == 1 && r->a == A0 - AMOUNT);
  CHECK(pmkit_ctx_state_of(c) == PMKIT_CTX_IDLE);
  CHECK(__pmkit_clobber_enter(ID_TRANSFER) == 1); /* outermost again */
  __pmkit_clobber_exit();                         /* never began: no commit */
  CHECK(pmkit_ctx_state_of(c) == PMKIT_CTX_IDLE);
  CHECK_OK(pmkit_pool_close(p));
}

/* The log calls that save nothing: NULL, DRAM, size 0, another pool's
 * address, a call outside any FASE; _batch entries share one fence. */
static void log_inputs(void) {
  setup();
  const char *opath = test_pool_path("clobber-other");
  CHECK_OK(pmkit_pool_create(opath, 4 << 20, NULL, &other_pool));
  struct root *r;
  pmkit_pool *p = open_root(&r);
  r->b = 5;
  pmkit_clobber_stats before;
  CHECK_OK(pmkit_clobber_stats_get(&before));
  __pmkit_clobber_log(&r->a, 8); /* outside a FASE: a no-op */
  __pmkit_clobber_log_batch(&r->a, 8);
  pmkit_clobber_stats d = delta(&before);
  CHECK(d.entries == 0 && d.fences == 0);
  batch_fase(r);
  d = delta(&before);
  CHECK(d.fases == 1 && d.entries == 2 && d.log_bytes == 2 * 24);
  CHECK(d.fences == fences_for(1));
  CHECK(r->a == 5 && r->b == A0);
  CHECK_OK(pmkit_pool_close(other_pool));
  other_pool = NULL;
  unlink(opath);
  CHECK_OK(pmkit_pool_close(p));
}

/* A crash after transfer's first clobber write: inflight reports the call
 * with its arguments (the buffer as NULL) and changes nothing; recovery
 * restores a, then re-executes with the logged amount and a copy of the
 * tag; once only. */
static void crash_rollback_reexecute(void) {
  crash_mid_fase("transfer", 1);
  struct root *r;
  pmkit_pool *p = open_root(&r);
  CHECK(r->a == A0 - AMOUNT && r->b == 0 && r->n == 0); /* clobbered */
  pmkit_ctx_state s;
  CHECK_OK(pmkit_ctx_peek(p, 0, &s));
  CHECK(s == PMKIT_CTX_ACTIVE);
  pmkit_clobber_inflight inf;
  CHECK(pmkit_clobber_inflight_get(p, 0, &inf) == 1);
  CHECK(inf.id == ID_TRANSFER && inf.name && !strcmp(inf.name, "transfer"));
  CHECK(inf.undo == 0 && inf.nargs == 3);
  CHECK(inf.args[0] == (uint64_t)(uintptr_t)r && inf.args[1] == AMOUNT &&
        inf.args[2] == 0);
  CHECK_OK(pmkit_ctx_peek(p, 0, &s));
  CHECK(s == PMKIT_CTX_ACTIVE); /* a look, not a recovery */
  CHECK(pmkit_clobber_inflight_get(p, 1, &inf) == 0 && inf.id == 0);
  CHECK(pmkit_clobber_inflight_get(p, PMKIT_MAX_THREADS, &inf) ==
        PMKIT_E_INVAL);
  CHECK(pmkit_clobber_inflight_get(p, 0, NULL) == PMKIT_E_INVAL);
  CHECK(pmkit_clobber_inflight_get(NULL, 0, &inf) == PMKIT_E_INVAL);

  pmkit_clobber_stats before;
  CHECK_OK(pmkit_clobber_stats_get(&before));
  memset(&seen, 0, sizeof seen);
  CHECK(pmkit_recover(p) == 1);
  CHECK(seen.runs == 1 && seen.a == A0); /* rolled back, then re-executed */
  CHECK(memcmp(seen.tag, TAG, TAG_LEN) == 0);
  CHECK(r->a == A0 - AMOUNT && r->b == AMOUNT && r->n == 1);
  CHECK(memcmp(r->tag, TAG, TAG_LEN) == 0);
  pmkit_clobber_stats d = delta(&before);
  CHECK(d.rollbacks == 1 && d.replays == 1 && d.fases == 1);
  CHECK(d.entries == 3 && d.vlog_bytes == 0); /* the re-execution's log */
  CHECK_OK(pmkit_ctx_peek(p, 0, &s));
  CHECK(s == PMKIT_CTX_IDLE);
  CHECK(pmkit_recover(p) == 0); /* nothing left */
  CHECK(seen.runs == 1);
  CHECK_OK(pmkit_pool_check(p));
  CHECK_OK(pmkit_pool_close(p));
  /* And the next run's FASEs work on the recovered pool. */
  p = open_root(&r);
  transfer(r, AMOUNT, TAG);
  CHECK(r->a == A0 - 2 * AMOUNT && r->b == 2 * AMOUNT && r->n == 2);
  CHECK_OK(pmkit_pool_close(p));
}

/* A crash after the body, before exit: recovery restores all three inputs
 * and re-executes; the result is the same single transfer. */
static void crash_before_exit(void) {
  crash_mid_fase("transfer", 2);
  struct root *r;
  pmkit_pool *p = open_root(&r);
  CHECK(r->a == A0 - AMOUNT && r->b == AMOUNT && r->n == 1); /* all done */
  memset(&seen, 0, sizeof seen);
  CHECK(pmkit_recover(p) == 1);
  CHECK(seen.runs == 1 && seen.a == A0);
  CHECK(r->a == A0 - AMOUNT && r->b == AMOUNT && r->n == 1);
  CHECK_OK(pmkit_pool_close(p));
}

/* A crash inside a nested FASE: the section is the outer one's; recovery
 * re-executes outer (with its one argument), which runs transfer again. */
static void crash_nested(void) {
  crash_mid_fase("outer", 1);
  struct root *r;
  pmkit_pool *p = open_root(&r);
  CHECK(r->calls == 1 && r->a == A0 - AMOUNT && r->n == 0);
  pmkit_clobber_inflight inf;
  CHECK(pmkit_clobber_inflight_get(p, 0, &inf) == 1);
  CHECK(inf.id == ID_OUTER && inf.nargs == 1);
  CHECK(inf.args[0] == (uint64_t)(uintptr_t)r);
  memset(&seen, 0, sizeof seen);
  CHECK(pmkit_recover(p) == 1);
  CHECK(seen.runs == 1); /* outer's stub; transfer runs nested */
  CHECK(r->calls == 1 && r->a == A0 - AMOUNT && r->b == AMOUNT && r->n == 1);
  CHECK_OK(pmkit_pool_close(p));
}

/* The undo setting: no vlog (nargs 0), recovery rolls every logged write
 * back and aborts the section instead of re-executing it. */
static void undo_setting(void) {
  setup();
  struct root *r;
  pmkit_pool *p = open_root(&r);
  pmkit_clobber_stats before;
  CHECK_OK(pmkit_clobber_stats_get(&before));
  undo_fase(r, 5);
  pmkit_clobber_stats d = delta(&before);
  CHECK(d.fases == 1 && d.entries == 2 && d.vlog_bytes == 0);
  CHECK(r->ux == 5 && r->uy == 5);
  CHECK_OK(pmkit_pool_close(p));

  crash_mid_fase("undo", 1);
  p = open_root(&r);
  CHECK(r->ux == 99 && r->uy == 0);
  pmkit_clobber_inflight inf;
  CHECK(pmkit_clobber_inflight_get(p, 0, &inf) == 1);
  CHECK(inf.id == ID_UNDO && inf.undo == 1 && inf.nargs == 0);
  CHECK_OK(pmkit_clobber_stats_get(&before));
  memset(&seen, 0, sizeof seen);
  CHECK(pmkit_recover(p) == 1);
  CHECK(seen.runs == 0); /* not re-executed */
  CHECK(r->ux == 0 && r->uy == 0);
  d = delta(&before);
  CHECK(d.rollbacks == 1 && d.replays == 0 && d.fases == 0);
  pmkit_ctx_state s;
  CHECK_OK(pmkit_ctx_peek(p, 0, &s));
  CHECK(s == PMKIT_CTX_IDLE);
  CHECK_OK(pmkit_pool_close(p));
}

/* A scratch buffer: only its length is logged; recovery passes zeroed
 * memory of that length. */
static void scratch_buffer(void) {
  setup();
  struct root *r;
  pmkit_pool *p = open_root(&r);
  pmkit_clobber_stats before;
  CHECK_OK(pmkit_clobber_stats_get(&before));
  unsigned char buf[SCRATCH_LEN] = {42};
  scratch_fase(r, buf, sizeof buf);
  pmkit_clobber_stats d = delta(&before);
  CHECK(d.vlog_bytes == (2 + 3) * 8 && d.entries == 0);
  CHECK(r->s == 42);
  CHECK_OK(pmkit_pool_close(p));

  crash_mid_fase("scratch", 1);
  p = open_root(&r);
  CHECK(r->s == 0xab);
  pmkit_clobber_inflight inf;
  CHECK(pmkit_clobber_inflight_get(p, 0, &inf) == 1);
  CHECK(inf.nargs == 3 && inf.args[1] == 0 && inf.args[2] == SCRATCH_LEN);
  memset(&seen, 0, sizeof seen);
  CHECK(pmkit_recover(p) == 1);
  static const unsigned char zeros[8];
  CHECK(seen.runs == 1 && !seen.scratch_null);
  CHECK(memcmp(seen.scratch, zeros, sizeof zeros) == 0);
  CHECK(r->s == 0);
  CHECK_OK(pmkit_pool_close(p));
}

/* A FASE this program does not have: inflight names no function, recovery
 * restores its inputs and refuses (PMKIT_E_STATE), leaving it in flight. */
static void unknown_fase(void) {
  crash_mid_fase("ghost", 1);
  struct root *r;
  pmkit_pool *p = open_root(&r);
  CHECK(r->a == A0 + 1);
  pmkit_clobber_inflight inf;
  CHECK(pmkit_clobber_inflight_get(p, 0, &inf) == 1);
  CHECK(inf.id == ID_GHOST && inf.name == NULL && inf.nargs == 1);
  CHECK_RC(pmkit_recover(p), PMKIT_E_STATE);
  CHECK(strstr(pmkit_errormsg(), "not in this program"));
  CHECK(r->a == A0); /* the first pass restored it */
  pmkit_ctx_state s;
  CHECK_OK(pmkit_ctx_peek(p, 0, &s));
  CHECK(s == PMKIT_CTX_ACTIVE);
  CHECK_RC(pmkit_recover(p), PMKIT_E_STATE); /* still refused */
  CHECK(r->a == A0);
  CHECK_OK(pmkit_pool_close(p));
}

/* A torn begin (the section ACTIVE without the words its begin check
 * covers: here a logged argument altered) counts as a FASE that never
 * began: inflight resets the slot to IDLE and reports nothing. */
static void torn_begin(void) {
  crash_mid_fase("transfer", 1);
  struct root *r;
  pmkit_pool *p = open_root(&r);
  pmkit_ctx *c;
  CHECK_OK(pmkit_ctx_adopt(p, 0, &c));
  /* clobber.c: ext word 0 is the log block's offset; its vlog holds two
   * kind words, then one word per argument (amount is the second). */
  uint64_t *vlog = (uint64_t *)((char *)pmkit_pool_base(p) +
                                pmkit_ctx_ext(c)[PMKIT_EXT_CLOBBER]);
  CHECK(vlog[2 + 1] == AMOUNT);
  vlog[2 + 1] = AMOUNT + 1;
  CHECK_OK(pmkit_ctx_release(c));
  pmkit_clobber_inflight inf;
  CHECK(pmkit_clobber_inflight_get(p, 0, &inf) == 0);
  pmkit_ctx_state s;
  CHECK_OK(pmkit_ctx_peek(p, 0, &s));
  CHECK(s == PMKIT_CTX_IDLE);
  memset(&seen, 0, sizeof seen);
  CHECK(pmkit_recover(p) == 0 && seen.runs == 0);
  /* What the crashed FASE wrote stays: a torn begin is taken to mean that
   * nothing of the FASE persisted, which a real crash guarantees (begin
   * fences before the body) but a damaged vlog does not. */
  if (r->a != A0)
    printf("torn_begin: a is %llu after recovery (the FASE's first write "
           "stays; %u expected had it been rolled back)\n",
           (unsigned long long)r->a, A0);
  CHECK_OK(pmkit_pool_close(p));
}

/* Two pools at one base (created with a fixed base, or one a copy of the
 * other), each with one transfer done: pool Y by another process (amount
 * 3). A thread does a transfer on pool X (amount 7), closes it, opens Y and
 * does the same transfer there, and crashes mid-FASE. Its log block is at
 * the same address in both pools and both slots are at the same log number.
 * The FASE began, so recovery must complete it: inflight reports it with
 * its arguments, pmkit_recover re-executes it.
 * Once a bug: the vlog's copy in DRAM (clobber.c, write_vlog) was trusted
 * when the log's address and number matched, not the pool: the words equal
 * to X's vlog were not written to Y's, the begin check (over the copy) did
 * not match Y's vlog, and recovery took the FASE for a torn begin: it reset
 * the slot, rolled nothing back, re-executed nothing and returned 0,
 * leaving a half-done transfer (7 taken from a, not given to b). */
static void same_base_other_pool(void) {
  setup_at(1);
  struct root *r;
  pmkit_pool *p = open_root(&r);
  transfer(r, 3, TAG);
  CHECK_OK(pmkit_pool_close(p));
  int st = run_child("switch", 1, NULL, NULL);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == PMKIT_CRASH_EXIT);
  char copy[1100];
  snprintf(copy, sizeof copy, "%s.copy", path);
  char cmd[2400];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path, copy);
  CHECK(system(cmd) == 0);

  /* What inflight says (it resets a torn begin, so on the copy first). */
  p = open_root(&r);
  CHECK((uintptr_t)pmkit_pool_base(p) == fixed_base.base);
  CHECK(r->a == A0 - 3 - AMOUNT && r->n == 1); /* clobbered, in flight */
  pmkit_ctx_state s;
  CHECK_OK(pmkit_ctx_peek(p, 0, &s));
  CHECK(s == PMKIT_CTX_ACTIVE);
  pmkit_clobber_inflight inf;
  int found = pmkit_clobber_inflight_get(p, 0, &inf);
  CHECK_OK(pmkit_pool_close(p));
  CHECK(rename(copy, path) == 0);

  /* What recovery does. */
  p = open_root(&r);
  int n = pmkit_recover(p);
  printf("same_base_other_pool: inflight %d, recover %d; a = %llu, b = %llu, "
         "n = %llu (want 1, 1; %u, %u, 2)\n",
         found, n, (unsigned long long)r->a, (unsigned long long)r->b,
         (unsigned long long)r->n, A0 - 3 - AMOUNT, 3 + AMOUNT);
  CHECK(found == 1 && inf.id == ID_TRANSFER && inf.args[1] == AMOUNT);
  CHECK(n == 1);
  CHECK(r->a == A0 - 3 - AMOUNT && r->b == 3 + AMOUNT && r->n == 2);
  CHECK_OK(pmkit_pool_close(p));
}

/* A crash at every crash point of transfer (PMKIT_CRASH_AT): afterwards the
 * transfer is done exactly once or not at all; a section found in flight is
 * always completed; a + b is conserved. */
static void every_crash_point(void) {
  char report[1100];
  snprintf(report, sizeof report, "%s.report", path);
  setup();
  int st = run_child("transfer", 0, "PMKIT_CRASH_REPORT", report);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  FILE *f = fopen(report, "r");
  unsigned long long points = 0;
  CHECK(f && fscanf(f, "%llu", &points) == 1);
  fclose(f);
  unlink(report);
  CHECK(points > 10);
  unsigned in_flight = 0, done = 0, not_begun = 0;
  for (unsigned long long at = 1; at <= points; at++) {
    setup();
    char v[32];
    snprintf(v, sizeof v, "%llu", at);
    st = run_child("transfer", 0, "PMKIT_CRASH_AT", v);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == PMKIT_CRASH_EXIT);
    struct root *r;
    pmkit_pool *p = open_root(&r);
    pmkit_ctx_state s;
    CHECK_OK(pmkit_ctx_peek(p, 0, &s));
    int n = pmkit_recover(p);
    CHECK(n == (s == PMKIT_CTX_ACTIVE));
    if (r->n == 1) {
      CHECK(r->a == A0 - AMOUNT && r->b == AMOUNT);
      CHECK(memcmp(r->tag, TAG, TAG_LEN) == 0);
    } else {
      CHECK(r->n == 0 && r->a == A0 && r->b == 0);
      CHECK(s == PMKIT_CTX_IDLE); /* a FASE in flight is completed */
    }
    CHECK_OK(pmkit_ctx_peek(p, 0, &s));
    CHECK(s == PMKIT_CTX_IDLE);
    CHECK_OK(pmkit_pool_check(p));
    in_flight += (unsigned)n;
    done += r->n == 1;
    not_begun += r->n == 0;
    CHECK_OK(pmkit_pool_close(p));
  }
  CHECK(in_flight > 0 && not_begun > 0);
  printf("every_crash_point: %llu points: %u recovered in flight, %u done, "
         "%u not begun\n",
         points, in_flight, done, not_begun);
}

static void exit_without_enter(void) { __pmkit_clobber_exit(); }
static void enter_unregistered(void) { __pmkit_clobber_enter(12345); }
static void volatile_pointer(void) {
  static uint64_t dram;
  if (__pmkit_clobber_enter(ID_TRANSFER))
    __pmkit_clobber_arg_ptr(&dram);
}

/* Misuse stops the program (abort) with a message naming what. */
static void misuse_stops(void) {
  char out[1024];
  int st = test_run_stopping(exit_without_enter, out, sizeof out);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK(strstr(out, "pmkit clobber: FASE ?: exit without entry"));
  st = test_run_stopping(enter_unregistered, out, sizeof out);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK(strstr(out, "pmkit clobber: FASE ?: id 0x3039 not registered"));
  st = test_run_stopping(volatile_pointer, out, sizeof out);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK(strstr(out, "FASE transfer: cannot be re-executed") &&
        strstr(out, "argument 1 points to volatile memory"));
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "child"))
    return child(argv[2], argv[3], atoi(argv[4]));
  path = test_pool_path("clobber");
  TEST_CASE(log_records);
  TEST_CASE(nesting);
  TEST_CASE(log_inputs);
  TEST_CASE(crash_rollback_reexecute);
  TEST_CASE(crash_before_exit);
  TEST_CASE(crash_nested);
  TEST_CASE(undo_setting);
  TEST_CASE(scratch_buffer);
  TEST_CASE(unknown_fase);
  TEST_CASE(torn_begin);
  TEST_CASE(same_base_other_pool);
  TEST_CASE(every_crash_point);
  TEST_CASE(misuse_stops);
  unlink(path);
  return test_summary();
}
