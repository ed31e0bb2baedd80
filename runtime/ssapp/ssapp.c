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
 * __pmkit_ssapp_begin, __pmkit_ssapp_exit, pmk_ssapp_recover.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

#define MAX_FRAMES 64u          /* FASEs one thread may run */
#define MAX_HELD 16u            /* PM locks one FASE may hold at once */
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
  /* Locks held: pool offset | PMKIT_SSAPP_LOCK_* (locks are 8-aligned);
   * 0 is a free entry. */
  uint64_t held[MAX_HELD];
  struct {
    uint64_t id, off; /* FASE id, its frame's pool offset */
  } frame[MAX_FRAMES];
};

/* The calling thread's FASE in flight. */
static __thread struct {
  const struct __pmkit_ssapp_fase *fase;
  pmkit_pool *pool;
  pmkit_ctx *ctx;
  struct blk *blk;
  uint64_t *frame;
  int recovering;
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
      return pmk_at(p, b->frame[i].off);
  if (i == MAX_FRAMES)
    fail("no room for another frame", "a thread ran more than 64 FASEs");
  void *fr;
  if (pmkit_zalloc(p, f->frame_bytes ? f->frame_bytes : 8, &fr))
    fail("no room for the FASE's frame", pmkit_errormsg());
  /* The offset before the id that makes the entry count. */
  put(&b->frame[i].off, pmkit_off(p, fr));
  put(&b->frame[i].id, f->id);
  return fr;
}

uint64_t *__pmkit_ssapp_enter(uint64_t id, const void *anchor) {
  if (cur.frame && !cur.recovering)
    fail("called inside another FASE", "FASEs the pass cannot inline "
                                       "(recursive ones) cannot nest");
  const struct __pmkit_ssapp_fase *f = lookup(id);
  if (!f)
    fail("not registered", "was the module built with the pmkit-ssapp pass?");
  cur.fase = f;
  pmkit_pool *p = anchor ? pmkit_pool_of(anchor) : NULL;
  if (!p && !(p = pmk_only_pool()))
    fail("no pool", "open exactly one pool, or pass a pointer into the "
                    "FASE's pool as an argument");
  pmkit_ctx *c;
  if (pmkit_ctx_get(p, &c))
    fail("no thread context", pmkit_errormsg());
  cur.pool = p;
  cur.ctx = c;
  cur.blk = thread_blk(p, c);
  cur.frame = thread_frame(p, cur.blk, f);
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
  for (unsigned i = 0; i < MAX_HELD; i++)
    if (cur.blk->held[i])
      put(&cur.blk->held[i], 0);
  put(&ext[EXT_OWNER], OWNER_MAGIC);
  put(&ext[EXT_SEQ], cur.ctx->pm->seq + 1);
  put(&ext[EXT_FRAME], pmkit_off(cur.pool, cur.frame));
  if (pmkit_fase_begin(cur.ctx, cur.fase->id))
    fail("cannot begin", pmkit_errormsg());
}

static void release_held(void) {
  for (unsigned i = 0; i < MAX_HELD; i++) {
    uint64_t h = cur.blk->held[i];
    if (!h)
      continue;
    put(&cur.blk->held[i], 0);
    give(pmk_at(cur.pool, h & ~7ull), h & 7);
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
  struct pmk_tc *tc = pmk_tc(p);
  /* The buoy records which journal entry this allocation is, so that a
   * re-execution after a crash replays exactly it. */
  uint64_t cb = cur.frame[0] & ~(0xffull << 32);
  put(&cur.frame[0], cb | (tc->nj + 1) << 32);
  return zero ? pmkit_zalloc(p, size, out) : pmkit_alloc(p, size, out);
}

int __pmkit_ssapp_free(void *pool, void *blk) {
  (void)pool;
  return pmkit_free(cur.pool, blk);
}

static int held_index(uint64_t off) {
  for (unsigned i = 0; i < MAX_HELD; i++)
    if ((cur.blk->held[i] & ~7ull) == off)
      return (int)i;
  return -1;
}

void __pmkit_ssapp_lock(void *lock, uint32_t kind) {
  if (!cur.frame) { /* not in a FASE: a plain lock */
    take(lock, kind);
    return;
  }
  if (pmkit_pool_of(lock) != cur.pool)
    fail("takes a lock outside its pool",
         "recovery could not take it again: place the lock in the pool");
  uint64_t off = pmkit_off(cur.pool, lock);
  if (held_index(off) >= 0)
    return; /* a re-executed RISE: taken before the crash */
  int free_at = held_index(0);
  if (free_at < 0)
    fail("holds too many locks", "more than 16 at once");
  take(lock, kind);
  put(&cur.blk->held[free_at], off | kind);
}

void __pmkit_ssapp_unlock(void *lock, uint32_t kind) {
  int i = cur.frame && pmkit_pool_of(lock) == cur.pool
              ? held_index(pmkit_off(cur.pool, lock))
              : -1;
  if (i >= 0)
    put(&cur.blk->held[i], 0);
  else if (cur.recovering)
    return; /* a re-executed RISE: released before the crash */
  /* Held, or taken before the FASE began (two-phase locking is broken,
   * but the lock is the program's to release). */
  give(lock, kind);
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
};

/* Where the FASE resumes (Table 3): after a read or RMW RISE whose torn-bit
 * slots all match the buoy, else at the start of the buoy's RISE -- and
 * then, for a read RISE, with its slots invalidated first, so that a
 * re-execution that a crash interrupts again cannot pass the check with
 * slots left from an earlier execution. */
static int resume_point(struct job *j) {
  const struct __pmkit_ssapp_fase *f = j->fase;
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
    uint32_t off = f->slots[rs->first + i];
    if (off + 8 > f->frame_bytes)
      return pmk_err(PMKIT_E_CORRUPT, "FASE %s: slot outside its frame",
                     f->name);
    tsa &= (j->frame[off / 8] & ~0xffffffffull) == want;
  }
  switch (rs->kind) {
  case PMKIT_RISE_READ:
  case PMKIT_RISE_RMW:
    if (tsa) {
      j->resume = 2 * r + 1;
      return 0;
    }
    for (uint32_t i = 0; i < rs->nslots; i++)
      put(&j->frame[f->slots[rs->first + i] / 8], PMKIT_SSAPP_INVALID);
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
  if ((j->err = pmkit_ctx_adopt(j->pool, j->slot, &c)) != 0)
    return NULL;
  if ((j->err = pmkit_fase_replay(c)) != 0) {
    pmkit_ctx_release(c);
    return NULL;
  }
  struct pmk_tc *tc = pmk_tc(j->pool);
  tc->rcur = j->replay_all ? tc->nj : j->cursor;
  cur.fase = j->fase;
  cur.pool = j->pool;
  cur.ctx = c;
  cur.blk = j->blk;
  cur.frame = j->frame;
  cur.recovering = 1;
  j->fase->recover(j->frame, j->resume);
  cur.recovering = 0;
  cur.frame = NULL;
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
  return 1;
}

int pmk_ssapp_recover(pmkit_pool *p) {
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
      void *l = pmk_at(p, h & ~7ull);
      if ((h & 7) != PMKIT_SSAPP_LOCK_MUTEX)
        take(l, h & 7); /* readers share; a writer was alone */
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
    if (jobs[i].err)
      return jobs[i].err;
  return (int)n;
}
