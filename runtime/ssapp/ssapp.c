/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ssapp.c -- the runtime of ssapp mode (SSAPP, for platforms whose caches
 * persist): the calls the pmkit-ssapp pass inserts into a failure-atomic
 * function (abi.h), the per-thread frames those functions keep their
 * values in, and pmkit_recover's part for them, which decides per the
 * SSAPP paper's Table 3 where each interrupted FASE resumes and runs the
 * generated recovery versions, one thread per interrupted FASE.
 *
 * A thread's state is one block of the pool found through its context
 * slot (extension words PMKIT_EXT_SSAPP..+3: the block, an owner mark, the
 * section number its FASE in flight began under, and that FASE's frame).
 * The block holds the locks the FASE in flight holds (recovery takes them
 * again before any FASE resumes, so interrupted critical sections stay
 * exclusive) and the thread's frames, one per FASE, allocated on first use
 * and reused. A frame is laid out by the pass: word 0 is the crash buoy,
 * then the RISEs' torn-bit flippers, value slots and the FASE's locals.
 *
 * The section itself (IDLE -> ACTIVE -> IDLE and the allocation journal)
 * is the core's pmkit_fase_begin/commit/replay. The mode assumes eADR: a
 * store is persistent once it is visible, in program order (x86-TSO), so
 * nothing here is written back. Entry points: __pmkit_ssapp_enter,
 * __pmkit_ssapp_begin, __pmkit_ssapp_exit, and pmk_ssapp_mode, whose
 * recover pmkit_recover calls.
 */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/mode.h"

#define MAX_FRAMES 64u /* FASEs one thread may run */
#define MAX_HELD 64u   /* PM locks one FASE may hold at once */
#define COPY_MAX 4096u /* bytes of one memmove in a FASE */
#define MAX_RELOC 256u /* pointer slots relocated at once */
#define HELD_STATIC 4u /* a held lock in static data, not the pool */
/* An RMW's tag in bits 48..63 of its word: the writer's context slot
 * (6 bits) and a sequence number 1..1023 (10 bits); 0: no tag. */
#define TAG_SHIFT 48
#define VAL_MASK ((1ull << TAG_SHIFT) - 1)
#define TAG_OF(w) ((w) >> TAG_SHIFT)
#define TAG(slot, seq) ((uint64_t)(slot) << 10 | (seq))
#define CUR(rise, t, seq) ((rise) | (uint64_t)(seq) << 32 | (t))
#define OWNER_MAGIC 0x50415353u /* "SSAP" in ext word 1 */
#define BLK_MAGIC 0x4b4c425050415353ull

/* Extension words of a context slot owned by this runtime. */
enum {
  EXT_BLK = PMKIT_EXT_SSAPP, /* pool offset of the thread's block         */
  EXT_OWNER,                 /* OWNER_MAGIC                                */
  EXT_SEQ,                   /* the core's section number at begin         */
  EXT_FRAME,                 /* pool offset of the FASE in flight's frame  */
};

struct blk {
  uint64_t magic;
  uint64_t pad[7];
  /* Locks held: the lock's name (lock_name) | PMKIT_SSAPP_LOCK_*; 0 is a
   * free entry. */
  uint64_t held[MAX_HELD];
  /* A memmove's bytes between its two RISEs (__pmkit_ssapp_copy_in). */
  uint64_t copy_len;
  uint64_t copy[COPY_MAX / 8];
  /* The atomic RMW in flight (__pmkit_ssapp_rmw): its word and expected
   * value, then `rmw_cur` (its RISE, torn bit and tag sequence number),
   * written last, 0 from the next FASE's begin on; `rmw_seen`, set by another
   * thread about to overwrite the value this RMW wrote, to the rmw_cur it saw;
   * `rmw_seq`, the last sequence number used. */
  uint64_t rmw_addr, rmw_exp, rmw_cur, rmw_seen, rmw_seq;
  /* Recovery's relocation of static pointers in the frame, redone from
   * here if a crash interrupts it: the base it moves to, then the new
   * value of each pointer slot, then `reloc_n` (written last). */
  uint64_t reloc_to, reloc_n;
  /* The shape (fase_shape) of the FASE in flight, so that recovery refuses
   * to resume it in a program built differently. */
  uint64_t shape;
  struct {
    uint64_t off, val;
  } reloc[MAX_RELOC];
  struct {
    uint64_t id;     /* FASE id */
    uint64_t *frame; /* a pointer, not an offset: `pmkit pool gc` sees it */
  } frame[MAX_FRAMES];
};

/* The calling thread's FASE in flight. */
static __thread struct {
  const struct __pmkit_ssapp_fase *fase;
  pmkit_pool *pool;
  pmkit_ctx *ctx;
  struct blk *blk;
  uint64_t *frame;
  unsigned held_hi; /* held[] entries at and above it are 0 */
  int recovering;
  struct { /* the thread's last FASE, for the next call's enter */
    uint64_t id, serial;
    const struct __pmkit_ssapp_fase *fase;
    uint64_t *frame;
    uint64_t shape;
  } last;
} cur;

static struct pmk_registry table = PMK_REGISTRY_INIT;

static _Noreturn void fail(const char *what, const char *detail) {
  pmk_fase_fail("ssapp", (const void *)cur.fase, what, detail);
}

void __pmkit_ssapp_register(const struct __pmkit_ssapp_fase *t, uint32_t n) {
  pmk_registry_add(&table, t, sizeof *t, n, "ssapp");
  pmk_use_eadr(); /* the mode's platform: caches persist */
}

static const struct __pmkit_ssapp_fase *lookup(uint64_t id) {
  return pmk_registry_find(&table, id);
}

/* An 8-byte store that the compiler keeps in program order with the
 * FASE's own stores (the core's crash point before it). */
static inline void put(uint64_t *w, uint64_t v) { pmk_store64_line(w, v); }

static void take(void *lock, uint64_t kind) {
  if (kind == PMKIT_SSAPP_LOCK_MUTEX)
    pmkit_mutex_lock(lock);
  else if (kind == PMKIT_SSAPP_LOCK_READ)
    pmkit_rwlock_rdlock(lock);
  else
    pmkit_rwlock_wrlock(lock);
}

static void give(void *lock, uint64_t kind) {
  if (kind == PMKIT_SSAPP_LOCK_MUTEX)
    pmkit_mutex_unlock(lock);
  else
    pmkit_rwlock_unlock(lock);
}

/* The main program's static data: where it is mapped in this run. */
static struct {
  pthread_once_t once;
  uintptr_t bias, lo, hi;
} exe = {PTHREAD_ONCE_INIT, 0, 0, 0};

static int first_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  (void)arg;
  exe.bias = info->dlpi_addr;
  for (unsigned i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
      continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (!exe.lo || lo < exe.lo)
      exe.lo = lo;
    if (lo + ph->p_memsz > exe.hi)
      exe.hi = lo + ph->p_memsz;
  }
  return 1; /* the first object is the program */
}

static void find_exe(void) { dl_iterate_phdr(first_object, NULL); }

/* A lock's name that holds across runs: its offset in the FASE's pool, or
 * (HELD_STATIC) its offset in the program's static data, which the same
 * program maps at the same offset from its base in every run. 0 if it is
 * in neither (the heap, a stack, another library). */
static uint64_t lock_name(const void *lock) {
  if (pmkit_pool_of(lock) == cur.pool)
    return pmkit_off(cur.pool, lock);
  pthread_once(&exe.once, find_exe);
  uintptr_t a = (uintptr_t)lock;
  if (a >= exe.lo && a < exe.hi)
    return (a - exe.bias) | HELD_STATIC;
  return 0;
}

static void *lock_at(pmkit_pool *p, uint64_t h) {
  if (!(h & HELD_STATIC))
    return pmk_at(p, h & ~7ull);
  pthread_once(&exe.once, find_exe);
  return (void *)(exe.bias + (h & ~7ull));
}

/* What a resumed FASE depends on: its RISEs (kinds, torn-bit slots) and
 * its frame's size, hashed. */
static uint64_t fase_shape(const struct __pmkit_ssapp_fase *f) {
  uint64_t h = pmk_fnv1a(&f->frame_bytes, sizeof f->frame_bytes);
  h ^=
      pmk_fnv1a(f->rises, f->nrises * sizeof *f->rises) * 0x9e3779b97f4a7c15ull;
  uint32_t nslots = 0;
  for (uint32_t i = 0; i < f->nrises; i++)
    nslots += f->rises[i].nslots;
  h ^= pmk_fnv1a(f->slots, nslots * sizeof *f->slots) * 0xbf58476d1ce4e5b9ull;
  return h | 1; /* never 0, which a fresh block holds */
}

static struct blk *thread_blk(pmkit_pool *p, pmkit_ctx *c) {
  uint64_t *ext = pmkit_ctx_ext(c);
  if (ext[EXT_BLK] && ext[EXT_BLK] + sizeof(struct blk) <= p->size) {
    struct blk *b = pmk_at(p, ext[EXT_BLK]);
    if (b->magic == BLK_MAGIC)
      return b;
  }
  void *b;
  if (pmkit_zalloc(p, sizeof(struct blk), &b))
    fail("no room for the thread's state", pmkit_errormsg());
  put(&((struct blk *)b)->magic, BLK_MAGIC);
  /* A crash before this store leaks the block to `pmkit pool gc`. */
  put(&ext[EXT_BLK], pmkit_off(p, b));
  return b;
}

static uint64_t *thread_frame(pmkit_pool *p, struct blk *b,
                              const struct __pmkit_ssapp_fase *f) {
  unsigned i;
  for (i = 0; i < MAX_FRAMES && b->frame[i].id; i++)
    if (b->frame[i].id == f->id)
      return b->frame[i].frame;
  if (i == MAX_FRAMES)
    fail("no room for another frame", "a thread ran more than 64 FASEs");
  void *fr;
  if (pmkit_zalloc(p, f->frame_bytes ? f->frame_bytes : 8, &fr))
    fail("no room for the FASE's frame", pmkit_errormsg());
  /* The offset before the id that makes the entry count. */
  put((uint64_t *)&b->frame[i].frame, (uint64_t)(uintptr_t)fr);
  put(&b->frame[i].id, f->id);
  return fr;
}

uint64_t *__pmkit_ssapp_enter(uint64_t id, const void *anchor) {
  if (cur.frame && !cur.recovering)
    fail("called inside another FASE", "FASEs the pass cannot inline "
                                       "(recursive ones) cannot nest");
  pmkit_pool *p = anchor ? pmkit_pool_of(anchor) : NULL;
  if (!p && !(p = pmk_only_pool()))
    fail("no pool", "open exactly one pool, or pass a pointer into the "
                    "FASE's pool as an argument");
  /* The same FASE as the thread's last one, in the same opening of the
   * same pool: its frame is known. */
  if (cur.last.id == id && cur.pool == p && cur.last.serial == p->serial) {
    cur.fase = cur.last.fase;
    return cur.frame = cur.last.frame;
  }
  const struct __pmkit_ssapp_fase *f = lookup(id);
  if (!f) {
    char what[64];
    snprintf(what, sizeof what, "id %#llx not registered",
             (unsigned long long)id);
    cur.fase = NULL; /* the message is not about the thread's last FASE */
    fail(what, "was the module built with the pmkit-ssapp pass?");
  }
  cur.fase = f;
  if (cur.pool != p || cur.last.serial != p->serial) {
    pmkit_ctx *c;
    if (pmkit_ctx_get(p, &c))
      fail("no thread context", pmkit_errormsg());
    cur.pool = p;
    cur.ctx = c;
    cur.blk = thread_blk(p, c);
    cur.held_hi = MAX_HELD; /* begin clears what an earlier run left */
  }
  cur.frame = thread_frame(p, cur.blk, f);
  cur.last.id = id;
  cur.last.serial = p->serial;
  cur.last.fase = f;
  cur.last.frame = cur.frame;
  cur.last.shape = fase_shape(f);
  return cur.frame;
}

void __pmkit_ssapp_check_ptr(const void *p, uint32_t argno) {
  if (p && !pmkit_in_pool(p)) {
    char why[96];
    snprintf(why, sizeof why,
             "argument %u points to volatile memory, which a crash loses",
             argno);
    fail("cannot begin", why);
  }
}

void __pmkit_ssapp_begin(void) {
  uint64_t *ext = pmkit_ctx_ext(cur.ctx);
  /* All before the core's ACTIVE store, which comes last in program order
   * and so persists last. */
  put(&cur.frame[0], 0); /* no RISE entered yet: resume at the first */
  pthread_once(&exe.once, find_exe);
  if (cur.frame[1] != exe.bias) /* where this run's static data is */
    put(&cur.frame[1], exe.bias);
  for (unsigned i = 0; i < cur.held_hi; i++)
    if (cur.blk->held[i])
      put(&cur.blk->held[i], 0);
  cur.held_hi = 0;
  if (cur.blk->shape != cur.last.shape)
    put(&cur.blk->shape, cur.last.shape);
  /* The last FASE's RMW attempt is no longer this thread's in flight: an
   * attempt's record names its RISE and torn bit but not its FASE, and
   * another FASE's RMW RISE of the same number, interrupted before its
   * attempt's first record, took it for its own (and its increment was
   * lost). Nobody needs to tell a committed FASE its tag was seen. */
  if (cur.blk->rmw_cur)
    put(&cur.blk->rmw_cur, 0);
  put(&ext[EXT_OWNER], OWNER_MAGIC);
  put(&ext[EXT_SEQ], cur.ctx->pm->seq + 1);
  put(&ext[EXT_FRAME], pmkit_off(cur.pool, cur.frame));
  if (pmkit_fase_begin(cur.ctx, cur.fase->id))
    fail("cannot begin", pmkit_errormsg());
}

static void release_held(void) {
  for (unsigned i = 0; i < cur.held_hi; i++) {
    uint64_t h = cur.blk->held[i];
    if (!h)
      continue;
    put(&cur.blk->held[i], 0);
    give(lock_at(cur.pool, h), h & 3);
  }
}

void __pmkit_ssapp_exit(void) {
  if (pmkit_fase_commit(cur.ctx))
    fail("cannot commit", pmkit_errormsg());
  /* Recovery runs no code after the FASE: what the program would release
   * after it returns, recovery releases here. */
  if (cur.recovering)
    release_held();
  cur.frame = NULL;
}

int __pmkit_ssapp_alloc(void *pool, uint64_t size, void **out, uint32_t zero) {
  (void)pool; /* the FASE's: a pool handle from before a crash is stale */
  pmkit_pool *p = cur.pool;
  /* The buoy records which journal entry this allocation is, so that a
   * re-execution after a crash replays exactly it. */
  uint64_t cb = cur.frame[0] & ~(0xffull << 32);
  put(&cur.frame[0], cb | (pmk_fase_journaled(p) + 1) << 32);
  return zero ? pmkit_zalloc(p, size, out) : pmkit_alloc(p, size, out);
}

int __pmkit_ssapp_free(void *pool, void *blk) {
  (void)pool;
  return pmkit_free(cur.pool, blk);
}

static int held_index(uint64_t name) {
  for (unsigned i = 0; i < cur.held_hi; i++)
    if ((cur.blk->held[i] & ~3ull) == name)
      return (int)i;
  if (!name && cur.held_hi < MAX_HELD)
    return (int)cur.held_hi++; /* a free entry past the used ones */
  return -1;
}

void __pmkit_ssapp_lock(void *lock, uint32_t kind) {
  if (!cur.frame) { /* not in a FASE: a plain lock */
    take(lock, kind);
    return;
  }
  uint64_t name = lock_name(lock);
  if (!name)
    fail("takes a lock outside its pool and the program's static data",
         "recovery could not find it again: place the lock in the pool");
  if (held_index(name) >= 0)
    return; /* a re-executed RISE: taken before the crash */
  int free_at = held_index(0);
  if (free_at < 0)
    fail("holds too many locks", "more than 64 at once");
  take(lock, kind);
  put(&cur.blk->held[free_at], name | kind);
}

void __pmkit_ssapp_unlock(void *lock, uint32_t kind) {
  uint64_t name = cur.frame ? lock_name(lock) : 0;
  int i = name ? held_index(name) : -1;
  if (i >= 0)
    put(&cur.blk->held[i], 0);
  else if (cur.recovering)
    return; /* a re-executed RISE: released before the crash */
  /* Held, or taken before the FASE began (two-phase locking is broken,
   * but the lock is the program's to release). */
  give(lock, kind);
}

static uint32_t copy_sum(const struct blk *b) {
  return (uint32_t)pmk_fnv1a(b->copy, b->copy_len);
}

void __pmkit_ssapp_copy_in(const void *src, uint64_t n, uint64_t *slot,
                           uint64_t t) {
  if (n > COPY_MAX)
    fail("moves too many bytes at once", "more than 4 KiB in one memmove");
  memcpy(cur.blk->copy, src, n);
  put(&cur.blk->copy_len, n);
  put(slot, copy_sum(cur.blk) | t);
}

void __pmkit_ssapp_copy_out(void *dst, uint64_t n) {
  memcpy(dst, cur.blk->copy, n);
}

/* ---- atomic RMW ----------------------------------------------------------
 * A FASE's RMW writes its word with a tag naming this thread's slot and a
 * sequence number; recovery knows it took effect if the word still carries
 * that tag, or if the thread that overwrote it said so first (rmw_seen), as
 * every RMW does for the tag it replaces. The sequence number skips the
 * one the word already carries from this slot, so an old tag is never
 * taken for the new one. */

static struct blk *slot_blk(pmkit_pool *p, unsigned slot) {
  uint64_t off = p->ctx[slot].pm->ext[EXT_BLK];
  if (!off || off + sizeof(struct blk) > p->size)
    return NULL;
  struct blk *b = pmk_at(p, off);
  return b->magic == BLK_MAGIC ? b : NULL;
}

/* Before replacing a tagged value: tell its writer, if that RMW is still
 * its RMW in flight (a crash may interrupt it before its RISE ends). */
static void notify(uint64_t tag, const uint64_t *word) {
  struct blk *q = slot_blk(cur.pool, (unsigned)(tag >> 10));
  if (!q)
    return;
  for (;;) {
    uint64_t seen = __atomic_load_n(&q->rmw_seen, __ATOMIC_ACQUIRE);
    uint64_t c = __atomic_load_n(&q->rmw_cur, __ATOMIC_ACQUIRE);
    if (q->rmw_addr != (uintptr_t)word || (c >> 32 & 1023) != (tag & 1023) ||
        seen == c)
      return;
    if (__atomic_compare_exchange_n(&q->rmw_seen, &seen, c, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
      return;
  }
}

static uint64_t apply_op(uint32_t op, uint64_t old, uint64_t v) {
  switch (op) {
  case PMKIT_SSAPP_RMW_XCHG:
    return v;
  case PMKIT_SSAPP_RMW_ADD:
    return old + v;
  case PMKIT_SSAPP_RMW_SUB:
    return old - v;
  case PMKIT_SSAPP_RMW_AND:
    return old & v;
  case PMKIT_SSAPP_RMW_OR:
    return old | v;
  default: /* PMKIT_SSAPP_RMW_XOR */
    return old ^ v;
  }
}

uint64_t __pmkit_ssapp_rmw(uint64_t *word, uint32_t op, uint64_t v,
                           uint64_t expected) {
  if (!cur.frame) { /* not in a FASE: a plain RMW on the untagged value */
    uint64_t w = __atomic_load_n(word, __ATOMIC_SEQ_CST);
    for (;;) {
      uint64_t old = w & VAL_MASK;
      if (op == PMKIT_SSAPP_RMW_CAS && old != expected)
        return old;
      uint64_t n = op == PMKIT_SSAPP_RMW_CAS ? v : apply_op(op, old, v);
      if (__atomic_compare_exchange_n(word, &w, n & VAL_MASK, 0,
                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return old;
    }
  }
  struct blk *b = cur.blk;
  uint64_t me = cur.ctx->id;
  uint64_t w = __atomic_load_n(word, __ATOMIC_SEQ_CST);
  uint64_t seq = b->rmw_seq % 1023 + 1;
  if (TAG_OF(w) == TAG(me, seq)) /* this slot's old tag: never reuse it */
    seq = seq % 1023 + 1;
  uint64_t cb = cur.frame[0];
  put(&b->rmw_seq, seq);
  put(&b->rmw_addr, (uintptr_t)word);
  for (;;) {
    uint64_t old = w & VAL_MASK;
    if (op == PMKIT_SSAPP_RMW_CAS && old != expected)
      return old; /* failed: nothing written */
    uint64_t n = op == PMKIT_SSAPP_RMW_CAS ? v : apply_op(op, old, v);
    if ((n | old) & ~VAL_MASK)
      fail("an atomic read-modify-write needs bits 48..63 of its word",
           "ssapp mode keeps its tag there: values must stay below 2^48");
    /* What recovery needs, rmw_cur last: the attempt it describes. */
    put(&b->rmw_exp, old);
    put(&b->rmw_cur, CUR(cb & 0xffffffffu, cb & PMKIT_SSAPP_TORN, seq));
    if (TAG_OF(w))
      notify(TAG_OF(w), word);
    if (__atomic_compare_exchange_n(word, &w, n | TAG(me, seq) << TAG_SHIFT, 0,
                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
      return old;
  }
}

/* ---- recovery ------------------------------------------------------------ */

struct job {
  pmkit_pool *pool;
  unsigned slot;
  const struct __pmkit_ssapp_fase *fase;
  struct blk *blk;
  uint64_t *frame;
  uint64_t resume;
  uint64_t cursor; /* allocation journal entries the resumed code skips */
  int replay_all;  /* cursor: all entries (nothing to re-execute) */
  pthread_t tid;
  int err;
  char msg[256]; /* err's message: it was the job's thread's */
};

/* Where the FASE resumes (Table 3): after a read or RMW RISE whose torn-bit
 * slots all match the buoy, else at the start of the buoy's RISE -- and
 * then, for a read RISE, with its slots invalidated first, so that a
 * re-execution that a crash interrupts again cannot pass the check with
 * slots left from an earlier execution. */
/* Whether the RMW of the RISE the buoy cb names took effect: its attempt
 * is recorded (rmw_cur names this RISE and torn bit), and its word still
 * carries its tag or its overwriter said it saw it. PMKIT_SSAPP_RECOVER=
 * naive says no, as a recovery without the tags would: the checkers must
 * then find the RMW applied twice; =skip says yes, and they must find it
 * lost. */
static int rmw_took_effect(const struct job *j, uint64_t cb) {
  const struct blk *b = j->blk;
  uint64_t c = b->rmw_cur;
  if (pmk_opt_is(PMK_OPT_SSAPP_RECOVER, "naive"))
    return 0;
  if (pmk_opt_is(PMK_OPT_SSAPP_RECOVER, "skip")) /* the opposite mistake */
    return 1;
  if ((c & 0xffffffffu) != (cb & 0xffffffffu) ||
      (c & PMKIT_SSAPP_TORN) != (cb & PMKIT_SSAPP_TORN))
    return 0; /* this RISE's attempt never got as far as its CAS */
  /* A later attempt began (rmw_seq is written first) and never recorded
   * itself: c is an older execution's, of the same RISE and torn bit (the
   * torn bit alternates, so the one two executions back matches). Taking
   * it for this one's lost a push: a crash before rmw_cur, recovery
   * re-executing the RISE with the torn bit flipped back, and a crash there
   * again (two threads of Concurrency Kit's stack, the real-program tier). */
  if ((c >> 32 & 1023) != b->rmw_seq)
    return 0;
  if (b->rmw_seen == c)
    return 1;
  uint64_t *word = (uint64_t *)(uintptr_t)b->rmw_addr;
  if (!pmkit_in_pool(word))
    return 0;
  return TAG_OF(__atomic_load_n(word, __ATOMIC_ACQUIRE)) ==
         TAG(j->slot, c >> 32 & 1023);
}

/* Pointers the crashed run kept in the frame into its static data (a lock
 * in a static array, say) point into this run's instead: the same program
 * maps its static data at the same offset from its base. */
/* Apply a planned relocation (idempotent: redone after a crash). */
static void relocate_apply(struct job *j) {
  struct blk *b = j->blk;
  uint64_t n = b->reloc_n == ~0ull ? 0 : b->reloc_n;
  for (uint64_t i = 0; i < n && i < MAX_RELOC; i++) {
    uint64_t *w = &j->frame[(b->reloc[i].off & ~7u) / 8], v = b->reloc[i].val;
    if (b->reloc[i].off & PMKIT_SSAPP_SLOT_TORN) {
      put(&w[0], (w[0] & ~0xffffffffull) | (v & 0xffffffffu));
      put(&w[1], (w[1] & ~0xffffffffull) | v >> 32);
    } else {
      put(w, v);
    }
  }
  put(&j->frame[1], b->reloc_to);
  put(&b->reloc_n, 0);
}

static void relocate(struct job *j) {
  const struct __pmkit_ssapp_fase *f = j->fase;
  struct blk *b = j->blk;
  pthread_once(&exe.once, find_exe);
  if (b->reloc_n) /* a recovery that a crash interrupted: finish its move */
    relocate_apply(j);
  uint64_t old = j->frame[1];
  if (!old || old == exe.bias)
    return;
  uint64_t delta = exe.bias - old, n = 0;
  uint64_t lo = exe.lo - exe.bias + old, hi = exe.hi - exe.bias + old;
  put(&b->reloc_to, exe.bias);
  for (uint32_t i = 0; i < f->nptrs && n < MAX_RELOC; i++) {
    uint32_t off = f->ptrs[i] & ~7u;
    int torn = f->ptrs[i] & PMKIT_SSAPP_SLOT_TORN;
    if (off + (torn ? 16 : 8) > f->frame_bytes)
      continue;
    const uint64_t *w = &j->frame[off / 8];
    uint64_t v =
        torn ? (w[0] & 0xffffffffu) | (w[1] & 0xffffffffu) << 32 : w[0];
    if (v < lo || v >= hi)
      continue;
    put(&b->reloc[n].off, f->ptrs[i]);
    put(&b->reloc[n].val, v + delta);
    n++;
  }
  put(&b->reloc_n, n ? n : ~0ull); /* the plan is complete */
  relocate_apply(j);
}

static int resume_point(struct job *j) {
  const struct __pmkit_ssapp_fase *f = j->fase;
  relocate(j);
  uint64_t cb = j->frame[0];
  uint64_t r = cb & 0xffffffffu;
  j->replay_all = 1;
  if (r == 0) {
    j->resume = 2; /* began, no RISE entered */
    return 0;
  }
  if (r > f->nrises)
    return pmk_err(PMKIT_E_CORRUPT,
                   "slot %u: FASE %s: crash buoy names RISE %llu of %u",
                   j->slot, f->name, (unsigned long long)r, f->nrises);
  const struct __pmkit_ssapp_rise *rs = &f->rises[r - 1];
  uint64_t want = cb & PMKIT_SSAPP_TORN;
  int tsa = 1;
  for (uint32_t i = 0; i < rs->nslots; i++) {
    uint32_t e = f->slots[rs->first + i], off = e & ~7u;
    if (off + 8 > f->frame_bytes)
      return pmk_err(PMKIT_E_CORRUPT, "FASE %s: slot outside its frame",
                     f->name);
    uint64_t w = j->frame[off / 8];
    tsa &= (w & ~0xffffffffull) == want;
    if (e & PMKIT_SSAPP_SLOT_SUM) /* a memmove's bytes: their checksum */
      tsa &= j->blk->copy_len <= COPY_MAX && (uint32_t)w == copy_sum(j->blk);
  }
  if (rs->kind == PMKIT_RISE_RMW && !tsa && rmw_took_effect(j, cb)) {
    /* Its result is the value it replaced: write the RISE's slots (the
     * pass gives an RMW RISE nothing else to keep), then continue. */
    uint64_t old = j->blk->rmw_exp;
    for (uint32_t i = 0; i < rs->nslots; i++)
      put(&j->frame[(f->slots[rs->first + i] & ~7u) / 8],
          (old >> (32 * i) & 0xffffffffu) | want);
    tsa = 1;
  }
  switch (rs->kind) {
  case PMKIT_RISE_READ:
  case PMKIT_RISE_RMW:
    if (tsa) {
      j->resume = 2 * r + 1;
      return 0;
    }
    for (uint32_t i = 0; i < rs->nslots; i++)
      put(&j->frame[(f->slots[rs->first + i] & ~7u) / 8], PMKIT_SSAPP_INVALID);
    break;
  case PMKIT_RISE_ALLOC:
    if (cb >> 32 & 0xff) { /* its allocation was (perhaps) journaled */
      j->cursor = (cb >> 32 & 0xff) - 1;
      j->replay_all = 0;
    }
    break;
  case PMKIT_RISE_WRITE:
  case PMKIT_RISE_CALL:
    break;
  default:
    return pmk_err(PMKIT_E_CORRUPT, "FASE %s: RISE %llu has kind %u", f->name,
                   (unsigned long long)r, rs->kind);
  }
  j->resume = 2 * r;
  return 0;
}

static void *run_job(void *arg) {
  struct job *j = arg;
  pmkit_ctx *c;
  if ((j->err = pmkit_ctx_adopt(j->pool, j->slot, &c)) != 0) {
    snprintf(j->msg, sizeof j->msg, "%s", pmkit_errormsg());
    return NULL;
  }
  if ((j->err = pmkit_fase_replay(c)) != 0) {
    snprintf(j->msg, sizeof j->msg, "%s", pmkit_errormsg());
    pmkit_ctx_release(c);
    return NULL;
  }
  pmk_fase_replay_from(j->pool,
                       j->replay_all ? pmk_fase_journaled(j->pool) : j->cursor);
  cur.fase = j->fase;
  cur.pool = j->pool;
  cur.ctx = c;
  cur.blk = j->blk;
  cur.frame = j->frame;
  cur.held_hi = MAX_HELD; /* what the crashed run held, anywhere */
  cur.last.id = 0;        /* another slot's frames: not this thread's */
  cur.recovering = 1;
  j->fase->recover(j->frame, j->resume);
  cur.recovering = 0;
  cur.frame = NULL;
  cur.pool = NULL;
  pmkit_ctx_release(c);
  return NULL;
}

/* Finds slot id's FASE in flight if this runtime began it: 1, 0, or < 0. */
static int inflight(pmkit_pool *p, unsigned id, struct job *j) {
  pmkit_ctx_state st;
  if (pmkit_ctx_peek(p, id, &st) || st != PMKIT_CTX_ACTIVE)
    return 0;
  pmkit_ctx *c = &p->ctx[id];
  const uint64_t *ext = pmkit_ctx_ext(c);
  if ((uint32_t)ext[EXT_OWNER] != OWNER_MAGIC || ext[EXT_SEQ] != c->pm->seq)
    return 0; /* another runtime's section */
  if (!ext[EXT_BLK] || ext[EXT_BLK] + sizeof(struct blk) > p->size ||
      !ext[EXT_FRAME] || ext[EXT_FRAME] >= p->size)
    return pmk_err(PMKIT_E_CORRUPT, "slot %u: ssapp state out of the pool", id);
  memset(j, 0, sizeof *j);
  j->pool = p;
  j->slot = id;
  j->blk = pmk_at(p, ext[EXT_BLK]);
  j->frame = pmk_at(p, ext[EXT_FRAME]);
  j->fase = lookup(c->pm->tag);
  if (!j->fase)
    return pmk_err(PMKIT_E_STATE,
                   "slot %u: the interrupted FASE (id %#llx) is not in this "
                   "program",
                   id, (unsigned long long)c->pm->tag);
  if (ext[EXT_FRAME] + j->fase->frame_bytes > p->size)
    return pmk_err(PMKIT_E_CORRUPT, "slot %u: frame out of the pool", id);
  if (j->blk->shape != fase_shape(j->fase))
    return pmk_err(PMKIT_E_STATE,
                   "slot %u: FASE %s was interrupted in a build of the "
                   "program whose RISEs differ from this one's: it can only "
                   "be resumed by the program that began it",
                   id, j->fase->name);
  return 1;
}

/* Resume every ssapp-mode FASE in flight, one thread each: the number
 * resumed, or a negative PMKIT_E_*. */
static int recover(pmkit_pool *p) {
  struct job jobs[PMKIT_MAX_THREADS];
  unsigned n = 0;
  for (unsigned id = 0; id < PMKIT_MAX_THREADS; id++) {
    int r = inflight(p, id, &jobs[n]);
    if (r < 0)
      return r;
    n += (unsigned)r;
  }
  if (!n)
    return 0;
  /* Every interrupted FASE holds its locks again before any resumes: the
   * locks are free (a crashed run's are reset), and two FASEs held the
   * same one only if both read it. */
  for (unsigned i = 0; i < n; i++) {
    int r = resume_point(&jobs[i]);
    if (r)
      return r;
    for (unsigned k = 0; k < MAX_HELD; k++) {
      uint64_t h = jobs[i].blk->held[k];
      if (!h)
        continue;
      void *l = lock_at(p, h);
      if ((h & 3) != PMKIT_SSAPP_LOCK_MUTEX)
        take(l, h & 3); /* readers share; a writer was alone */
      else if (pmkit_mutex_trylock(l))
        return pmk_err(PMKIT_E_CORRUPT,
                       "slot %u: two interrupted FASEs hold one lock",
                       jobs[i].slot);
    }
  }
  /* One thread per FASE: a resumed FASE may wait for a lock another holds
   * until that one completes, as it would have without the crash. */
  int started[PMKIT_MAX_THREADS] = {0};
  for (unsigned i = 1; i < n; i++)
    started[i] = !pthread_create(&jobs[i].tid, NULL, run_job, &jobs[i]);
  run_job(&jobs[0]);
  for (unsigned i = 1; i < n; i++)
    if (started[i])
      pthread_join(jobs[i].tid, NULL);
    else
      run_job(&jobs[i]); /* no thread: after the others, on this one */
  for (unsigned i = 0; i < n; i++)
    if (jobs[i].err) /* reported on this thread, where the caller asks */
      return pmk_err(jobs[i].err, "%s", jobs[i].msg);
  return (int)n;
}

/* First (order 0): its slots may still hold a clobber owner mark from an
 * earlier section, which clobber mode's recovery would misread. */
PMK_HIDDEN const struct pmk_mode pmk_ssapp_mode = {"ssapp", 0, recover};
