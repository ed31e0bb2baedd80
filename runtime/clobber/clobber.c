/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clobber.c -- the runtime of clobber mode (Clobber-NVM): the calls the
 * pmkit-clobber pass inserts into a failure-atomic function (abi.h), the
 * per-thread persistent log they fill, and pmkit_recover's part for them.
 *
 * A thread's log is one block of the pool, allocated on its first FASE and
 * found through its context slot (extension words PMKIT_EXT_CLOBBER..+3).
 * It holds the vlog (the FASE's id and its arguments: values, pool offsets,
 * copies of declared volatile buffers) and the clobber entries (address,
 * size, old bytes), each guarded by a check word over its contents and the
 * log's sequence number, so a torn entry, or one left by an earlier FASE,
 * is never rolled back. The section itself (IDLE -> ACTIVE -> IDLE, the
 * allocation journal) is the core's pmkit_fase_begin/commit/replay.
 *
 * ADR: the vlog is flushed before the section becomes ACTIVE; an entry is
 * flushed and fenced before the clobber write it protects; the FASE's own
 * writes are written back by the pass and fenced once, at commit. eADR
 * (modules built with -pmkit-clobber-domain=eadr): the same order with the
 * log's flushes and fences gone; the core's own follow PMKIT_DOMAIN. Entry
 * points: __pmkit_clobber_enter,
 * __pmkit_clobber_log, __pmkit_clobber_exit, pmk_clobber_recover_slot.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"

/* Bytes of a thread's log block: header, vlog, clobber entries. */
#define LOG_BYTES (1u << 20)
#define VLOG_BYTES 4096u
#define MAX_ARGS 32u
_Static_assert(sizeof(((pmkit_clobber_inflight *)0)->args) == MAX_ARGS * 8,
               "pmkit_clobber_inflight holds every argument");
#define MAX_FASES 1024u
#define OWNER_MAGIC 0x424f4c43u /* "CLOB" in ext word 1 (low half) */

/* Extension words of a context slot owned by this runtime. */
enum {
  EXT_LOG = PMKIT_EXT_CLOBBER, /* pool offset of the thread's log block   */
  EXT_KIND,                    /* OWNER_MAGIC | setting << 32              */
};
enum { KIND_CLOBBER = 1, KIND_UNDO = 2 };

/* vlog record kinds (one word: kind | length << 8, then the payload). */
enum { ARG_VAL = 1, ARG_PM, ARG_NULL, ARG_IN, ARG_SCRATCH };

struct log_hdr {
  uint64_t seq;      /* entries are valid only under this number        */
  uint64_t nargs;    /* vlog records                                    */
  uint64_t vlog_len; /* bytes of vlog                                   */
  uint64_t pad[5];
};
struct log_blk {
  struct log_hdr h;
  uint64_t vlog[VLOG_BYTES / 8];
  unsigned char ents[LOG_BYTES - sizeof(struct log_hdr) - VLOG_BYTES];
};
_Static_assert(sizeof(struct log_blk) == LOG_BYTES, "log block layout");

/* One clobber entry: the old bytes follow, padded to 8. */
struct ent {
  uint64_t off;
  uint32_t size;
  uint32_t check;
};

struct staged {
  uint32_t kind;
  uint64_t val; /* value, or address of a buffer                       */
  uint64_t len; /* buffer bytes                                        */
};

/* The calling thread's FASE in flight. */
static __thread struct {
  unsigned depth;   /* nesting of FASE calls; 0 outside              */
  int began;        /* the outermost FASE holds a section             */
  int replaying;    /* recovery re-executes: the section exists       */
  uint32_t setting; /* KIND_* of the FASE in flight                   */
  const struct __pmkit_clobber_fase *fase;
  unsigned nargs;
  struct staged args[MAX_ARGS];
  pmkit_pool *pool;
  pmkit_ctx *ctx;
  struct log_blk *log;
  uint64_t used; /* bytes of entries appended                         */
  uint64_t seq;
  uint64_t fences0; /* pmk_sfences at the start of the section        */
} cur;

/* Per-slot counters (a line each), summed by pmkit_clobber_stats. */
static struct {
  _Atomic uint64_t fases, entries, log_bytes, vlog_bytes, fences, replays,
      rollbacks;
  char pad[8];
} stats[PMKIT_MAX_THREADS] __attribute__((aligned(64)));

/* Filled by constructors; an entry is written before `n` admits it, so
 * lookups (every outermost FASE call) read it without the lock. */
static struct {
  pthread_mutex_t lock;
  _Atomic uint32_t n;
  const struct __pmkit_clobber_fase *fase[MAX_FASES];
} table = {PTHREAD_MUTEX_INITIALIZER, 0, {0}};

/* A failure the FASE cannot report to its caller: the program stops, as it
 * would on a failed assertion, with the reason. */
static _Noreturn void fail(const char *what, const char *detail) {
  const char *name = cur.fase ? cur.fase->name : "?";
  fprintf(stderr, "pmkit clobber: FASE %s: %s%s%s\n", name, what,
          detail && *detail ? ": " : "", detail ? detail : "");
  abort();
}

void __pmkit_clobber_register(const struct __pmkit_clobber_fase *t,
                              uint32_t n) {
  pthread_mutex_lock(&table.lock);
  for (uint32_t i = 0; i < n; i++) {
    for (uint32_t j = 0; j < table.n; j++)
      if (table.fase[j]->id == t[i].id && table.fase[j] != &t[i]) {
        fprintf(stderr,
                "pmkit clobber: FASEs %s and %s have the same id %#llx: "
                "rename one\n",
                table.fase[j]->name, t[i].name, (unsigned long long)t[i].id);
        abort();
      }
    if (table.n == MAX_FASES) {
      fprintf(stderr, "pmkit clobber: more than %u FASEs in one program\n",
              MAX_FASES);
      abort();
    }
    table.fase[table.n] = &t[i];
    atomic_store_explicit(&table.n, table.n + 1, memory_order_release);
  }
  pthread_mutex_unlock(&table.lock);
}

static const struct __pmkit_clobber_fase *lookup(uint64_t id) {
  uint32_t n = atomic_load_explicit(&table.n, memory_order_acquire);
  for (uint32_t i = 0; i < n; i++)
    if (table.fase[i]->id == id)
      return table.fase[i];
  return NULL;
}

int __pmkit_clobber_enter(uint64_t id) {
  if (cur.depth++ || cur.replaying)
    return 0; /* nested: part of the outer FASE */
  cur.fase = lookup(id);
  if (!cur.fase)
    fail("not registered", "was the program linked with its pass output?");
  cur.setting = cur.fase->flags & PMKIT_CLOBBER_UNDO ? KIND_UNDO : KIND_CLOBBER;
  cur.nargs = 0;
  cur.began = 0;
  return 1;
}

static void stage(uint32_t kind, uint64_t val, uint64_t len) {
  if (cur.nargs == MAX_ARGS)
    fail("too many arguments", "at most 32");
  cur.args[cur.nargs++] = (struct staged){kind, val, len};
}

void __pmkit_clobber_arg(uint64_t v) { stage(ARG_VAL, v, 0); }

void __pmkit_clobber_arg_ptr(const void *p) {
  if (!p)
    stage(ARG_NULL, 0, 0);
  else if (pmkit_pool_of(p))
    stage(ARG_PM, (uint64_t)(uintptr_t)p, 0);
  else {
    char why[96];
    snprintf(why, sizeof why,
             "argument %u points to volatile memory; declare it with "
             "PMKIT_FASE_IN or PMKIT_FASE_SCRATCH",
             cur.nargs + 1);
    fail("cannot be re-executed", why);
  }
}

void __pmkit_clobber_arg_buf(const void *p, uint64_t len, uint32_t scratch) {
  if (!p || pmkit_pool_of(p)) /* a PM buffer is an input like any other */
    __pmkit_clobber_arg_ptr(p);
  else
    stage(scratch ? ARG_SCRATCH : ARG_IN, (uint64_t)(uintptr_t)p, len);
}

/* The pool the FASE works on: its first PM argument's, or the only one. */
static pmkit_pool *fase_pool(void) {
  for (unsigned i = 0; i < cur.nargs; i++)
    if (cur.args[i].kind == ARG_PM)
      return pmkit_pool_of((void *)(uintptr_t)cur.args[i].val);
  return pmk_only_pool();
}

static struct log_blk *thread_log(pmkit_pool *p, pmkit_ctx *c) {
  uint64_t *ext = pmkit_ctx_ext(c);
  if (ext[EXT_LOG])
    return pmk_at(p, ext[EXT_LOG]);
  void *b;
  if (pmkit_zalloc(p, sizeof(struct log_blk), &b))
    fail("no room for the thread's log", pmkit_errormsg());
  pmk_fence();
  /* A crash before this store leaks the block to `pmkit pool gc`. */
  pmk_store64(&ext[EXT_LOG], pmkit_off(p, b));
  pmk_fence();
  return b;
}

static void put_word(unsigned char *v, uint64_t *at, uint64_t w) {
  if (*at + 8 > VLOG_BYTES)
    fail("arguments too large", "more than 4 KiB of vlog");
  memcpy(v + *at, &w, 8);
  *at += 8;
}

/* Write the vlog: what re-execution needs from volatile state. */
static uint64_t write_vlog(pmkit_pool *p) {
  unsigned char *v = (unsigned char *)cur.log->vlog;
  uint64_t at = 0;
  for (unsigned i = 0; i < cur.nargs; i++) {
    struct staged *a = &cur.args[i];
    uint64_t w = a->val;
    if (a->kind == ARG_PM) {
      if (pmkit_pool_of((void *)(uintptr_t)a->val) != p)
        fail("arguments point into two pools", NULL);
      w = pmkit_off(p, (void *)(uintptr_t)a->val);
    } else if (a->kind == ARG_IN || a->kind == ARG_SCRATCH)
      w = a->len;
    put_word(v, &at, a->kind);
    put_word(v, &at, w);
    if (a->kind == ARG_IN) {
      uint64_t n = (a->len + 7) & ~(uint64_t)7;
      if (at + n > VLOG_BYTES)
        fail("arguments too large", "more than 4 KiB of vlog");
      memcpy(v + at, (void *)(uintptr_t)a->val, a->len);
      at += n;
    }
  }
  if (!(cur.fase->flags & PMKIT_CLOBBER_EADR))
    pmkit_flush(v, at);
  return at;
}

void __pmkit_clobber_begin(void) {
  pmkit_pool *p = fase_pool();
  if (!p)
    fail("cannot tell which pool it works on",
         "no argument points into a pool and several pools are open");
  pmkit_ctx *c;
  if (pmkit_ctx_get(p, &c))
    fail("no thread context", pmkit_errormsg());
  cur.pool = p;
  cur.ctx = c;
  cur.log = thread_log(p, c);
  uint64_t fences0 = pmk_sfences;
  uint64_t vlen = 0;
  if (cur.setting == KIND_CLOBBER) {
    vlen = write_vlog(p);
    if (cur.log->h.nargs != cur.nargs)
      pmk_store64(&cur.log->h.nargs, cur.nargs);
    if (cur.log->h.vlog_len != vlen)
      pmk_store64(&cur.log->h.vlog_len, vlen);
  }
  uint64_t *ext = pmkit_ctx_ext(c);
  uint64_t kind = OWNER_MAGIC | (uint64_t)cur.setting << 32;
  if (ext[EXT_KIND] != kind)
    pmk_store64(&ext[EXT_KIND], kind);
  cur.seq = cur.log->h.seq + 1;
  pmk_store64(&cur.log->h.seq, cur.seq);
  cur.used = 0;
  /* Orders all of the above before ACTIVE, and ACTIVE before the body. */
  if (pmkit_fase_begin(c, cur.fase->id))
    fail("cannot begin", pmkit_errormsg());
  cur.began = 1;
  cur.fences0 = fences0;
  unsigned s = pmkit_ctx_id(c);
  atomic_fetch_add_explicit(&stats[s].vlog_bytes, vlen, memory_order_relaxed);
}

static uint32_t check_of(uint64_t seq, const struct ent *e,
                         const unsigned char *bytes) {
  uint64_t h = seq * 0x9e3779b97f4a7c15ull ^ e->off;
  h = (h ^ e->size) * 0xff51afd7ed558ccdull;
  for (uint32_t i = 0; i < e->size; i += 8) {
    uint64_t w = 0;
    memcpy(&w, bytes + i, e->size - i < 8 ? e->size - i : 8);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
  }
  return (uint32_t)(h ^ h >> 32) | 1u; /* never 0: zeroed memory is no entry */
}

void __pmkit_clobber_log(const void *addr, uint64_t size) {
  if (!cur.depth || !cur.began || !__pmkit_maybe_pm(addr) || size == 0)
    return;
  pmkit_pool *p = cur.pool;
  uintptr_t a = (uintptr_t)addr;
  if (a < p->base || a + size > p->base + p->size)
    return; /* another pool, or DRAM inside the bounding box */
  uint64_t n = sizeof(struct ent) + ((size + 7) & ~(uint64_t)7);
  if (size > UINT32_MAX || cur.used + n > sizeof cur.log->ents)
    fail("clobber log full", "more than 1 MiB logged in one FASE");
  pmk_crash_point();
  struct ent *e = (struct ent *)(cur.log->ents + cur.used);
  unsigned char *bytes = (unsigned char *)(e + 1);
  e->off = a - p->base;
  e->size = (uint32_t)size;
  memcpy(bytes, addr, size);
  e->check = check_of(cur.seq, e, bytes);
  if (!(cur.fase->flags & PMKIT_CLOBBER_EADR)) {
    pmkit_flush(e, n);
    pmk_fence(); /* the entry persists before the write it protects */
  }
  cur.used += n;
  unsigned s = pmkit_ctx_id(cur.ctx);
  atomic_fetch_add_explicit(&stats[s].entries, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&stats[s].log_bytes, n, memory_order_relaxed);
}

void __pmkit_clobber_exit(void) {
  if (!cur.depth)
    fail("exit without entry", NULL);
  if (--cur.depth)
    return;
  int replaying = cur.replaying;
  cur.replaying = 0;
  if (!cur.began)
    return;
  cur.began = 0;
  pmk_crash_point();
  pmk_fence(); /* the body's write-backs complete before the commit */
  if (pmkit_fase_commit(cur.ctx))
    fail("cannot commit", pmkit_errormsg());
  unsigned s = pmkit_ctx_id(cur.ctx);
  atomic_fetch_add_explicit(&stats[s].fases, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&stats[s].fences, pmk_sfences - cur.fences0,
                            memory_order_relaxed);
  if (replaying)
    atomic_fetch_add_explicit(&stats[s].replays, 1, memory_order_relaxed);
  cur.fase = NULL;
}

int pmkit_clobber_stats_get(pmkit_clobber_stats *out) {
  if (!out)
    return pmk_err(PMKIT_E_INVAL, "pmkit_clobber_stats_get: NULL argument");
  memset(out, 0, sizeof *out);
  for (unsigned i = 0; i < PMKIT_MAX_THREADS; i++) {
    out->fases += atomic_load(&stats[i].fases);
    out->entries += atomic_load(&stats[i].entries);
    out->log_bytes += atomic_load(&stats[i].log_bytes);
    out->vlog_bytes += atomic_load(&stats[i].vlog_bytes);
    out->fences += atomic_load(&stats[i].fences);
    out->replays += atomic_load(&stats[i].replays);
    out->rollbacks += atomic_load(&stats[i].rollbacks);
  }
  return 0;
}

/* ---- recovery --------------------------------------------------------- */

/* Restore the clobbered inputs of the section in flight, newest first. A
 * crash in here leaves the entries valid, so recovery starts over. */
static int roll_back(pmkit_pool *p, struct log_blk *l, unsigned slot) {
  uint64_t cap = 64, n = 0, at = 0;
  uint64_t *pos = malloc(cap * sizeof *pos);
  if (!pos)
    return pmk_err(PMKIT_E_NOMEM, "no memory to roll back slot %u", slot);
  while (at + sizeof(struct ent) <= sizeof l->ents) {
    const struct ent *e = (const struct ent *)(l->ents + at);
    uint64_t len = sizeof *e + (((uint64_t)e->size + 7) & ~(uint64_t)7);
    if (e->check == 0 || at + len > sizeof l->ents || e->off >= p->size ||
        e->size > p->size - e->off ||
        e->check != check_of(l->h.seq, e, (const unsigned char *)(e + 1)))
      break; /* the end, or a torn entry: its write never happened */
    if (n == cap) {
      uint64_t *q = realloc(pos, (cap *= 2) * sizeof *pos);
      if (!q) {
        free(pos);
        return pmk_err(PMKIT_E_NOMEM, "no memory to roll back slot %u", slot);
      }
      pos = q;
    }
    pos[n++] = at;
    at += len;
  }
  while (n--) {
    const struct ent *e = (const struct ent *)(l->ents + pos[n]);
    pmk_crash_point();
    memcpy(pmk_at(p, e->off), e + 1, e->size);
    pmkit_flush(pmk_at(p, e->off), e->size);
  }
  free(pos);
  pmk_fence();
  atomic_fetch_add_explicit(&stats[slot].rollbacks, 1, memory_order_relaxed);
  return 0;
}

/* Decode the vlog into argument words; buffers become fresh DRAM copies
 * (the FASE may write them; the vlog must survive a crash of recovery), or
 * 0 without `bufs` (a look, not a re-execution). */
static int decode_args(pmkit_pool *p, struct log_blk *l, uint64_t *args,
                       void **bufs, unsigned *nbufs) {
  const unsigned char *v = (const unsigned char *)l->vlog;
  uint64_t at = 0;
  *nbufs = 0;
  if (l->h.nargs > MAX_ARGS || l->h.vlog_len > VLOG_BYTES)
    return pmk_err(PMKIT_E_CORRUPT, "clobber vlog header is malformed");
  for (uint64_t i = 0; i < l->h.nargs; i++) {
    uint64_t kind, w;
    if (at + 16 > l->h.vlog_len)
      return pmk_err(PMKIT_E_CORRUPT, "clobber vlog is truncated");
    memcpy(&kind, v + at, 8);
    memcpy(&w, v + at + 8, 8);
    at += 16;
    switch (kind) {
    case ARG_VAL:
      args[i] = w;
      break;
    case ARG_NULL:
      args[i] = 0;
      break;
    case ARG_PM:
      if (w >= p->size)
        return pmk_err(PMKIT_E_CORRUPT, "clobber vlog: offset out of pool");
      args[i] = (uint64_t)(uintptr_t)pmk_at(p, w);
      break;
    case ARG_IN:
    case ARG_SCRATCH: {
      uint64_t n = (w + 7) & ~(uint64_t)7;
      if (kind == ARG_IN && at + n > l->h.vlog_len)
        return pmk_err(PMKIT_E_CORRUPT, "clobber vlog is truncated");
      if (!bufs) {
        args[i] = 0;
        at += kind == ARG_IN ? n : 0;
        break;
      }
      void *b = calloc(1, w ? w : 1);
      if (!b)
        return pmk_err(PMKIT_E_NOMEM, "no memory for a FASE argument");
      bufs[(*nbufs)++] = b;
      if (kind == ARG_IN) {
        memcpy(b, v + at, w);
        at += n;
      }
      args[i] = (uint64_t)(uintptr_t)b;
      break;
    }
    default:
      return pmk_err(PMKIT_E_CORRUPT, "clobber vlog: unknown record %llu",
                     (unsigned long long)kind);
    }
  }
  return 0;
}

/* Adopt slot `id` if a section of this runtime is in flight there; its
 * log and setting. 0 if not (nothing adopted). */
static int adopt_inflight(pmkit_pool *p, unsigned id, pmkit_ctx **c,
                          struct log_blk **l, uint32_t *kind) {
  pmkit_ctx_state st;
  if (pmkit_ctx_peek(p, id, &st) || st != PMKIT_CTX_ACTIVE)
    return 0;
  if (pmkit_ctx_adopt(p, id, c))
    return 0; /* held by a thread of this run: not ours to recover */
  uint64_t *ext = pmkit_ctx_ext(*c);
  *kind = (uint32_t)(ext[EXT_KIND] >> 32);
  if ((uint32_t)ext[EXT_KIND] != OWNER_MAGIC || !ext[EXT_LOG] ||
      ext[EXT_LOG] + sizeof(struct log_blk) > p->size ||
      (*kind != KIND_CLOBBER && *kind != KIND_UNDO)) {
    pmkit_ctx_release(*c);
    return 0; /* another runtime's section */
  }
  *l = pmk_at(p, ext[EXT_LOG]);
  return 1;
}

int pmkit_clobber_inflight_get(pmkit_pool *p, unsigned id,
                               pmkit_clobber_inflight *out) {
  if (!p || !out || id >= PMKIT_MAX_THREADS)
    return pmk_err(PMKIT_E_INVAL, "pmkit_clobber_inflight_get: bad argument");
  pmkit_ctx *c;
  struct log_blk *l;
  uint32_t kind;
  memset(out, 0, sizeof *out);
  if (!adopt_inflight(p, id, &c, &l, &kind))
    return 0;
  out->id = pmkit_fase_tag(c);
  const struct __pmkit_clobber_fase *f = lookup(out->id);
  out->name = f ? f->name : NULL;
  out->undo = kind == KIND_UNDO;
  int r = 1;
  if (kind == KIND_CLOBBER) {
    unsigned nbufs;
    r = decode_args(p, l, out->args, NULL, &nbufs);
    out->nargs = (unsigned)l->h.nargs;
    r = r ? r : 1;
  }
  pmkit_ctx_release(c);
  return r;
}

int pmk_clobber_recover_slot(pmkit_pool *p, unsigned id) {
  pmkit_ctx *c;
  struct log_blk *l;
  uint32_t kind;
  if (!adopt_inflight(p, id, &c, &l, &kind))
    return 0;
  int r = roll_back(p, l, id);
  if (r)
    goto out;
  /* PMKIT_CLOBBER_RECOVER=rollback: recovery that forgets to re-execute,
   * for showing that a checker notices a FASE that began and never ended. */
  const char *how = getenv("PMKIT_CLOBBER_RECOVER");
  if (kind == KIND_UNDO || (how && !strcmp(how, "rollback"))) {
    /* the classic baseline: the FASE never ran */
    r = pmkit_fase_abort(c);
    r = r ? r : 1;
    goto out;
  }
  const struct __pmkit_clobber_fase *f = lookup(pmkit_fase_tag(c));
  if (!f) {
    r = pmk_err(PMKIT_E_STATE,
                "slot %u: the interrupted FASE (id %#llx) is not in this "
                "program",
                id, (unsigned long long)pmkit_fase_tag(c));
    goto out;
  }
  uint64_t args[MAX_ARGS] = {0};
  void *bufs[MAX_ARGS];
  unsigned nbufs;
  r = decode_args(p, l, args, bufs, &nbufs);
  if (r == 0 && l->h.nargs != f->nargs)
    r = pmk_err(PMKIT_E_CORRUPT,
                "slot %u: FASE %s takes %u arguments, vlog "
                "holds %llu",
                id, f->name, f->nargs, (unsigned long long)l->h.nargs);
  if (r == 0) {
    /* Entries of the re-execution get a new number; the rolled-back ones
     * are dead from here on (the roll-back was fenced first). */
    pmk_store64(&l->h.seq, l->h.seq + 1);
    pmk_fence();
    if (pmkit_fase_replay(c))
      fail("cannot replay", pmkit_errormsg());
    cur.fase = f;
    cur.setting = KIND_CLOBBER;
    cur.pool = p;
    cur.ctx = c;
    cur.log = l;
    cur.seq = l->h.seq;
    cur.used = 0;
    cur.began = 1;
    cur.replaying = 1;
    cur.depth = 0;
    cur.fences0 = pmk_sfences;
    f->replay(args);
    r = 1;
  }
  for (unsigned i = 0; i < nbufs; i++)
    free(bufs[i]);
out:
  pmkit_ctx_release(c);
  return r;
}
