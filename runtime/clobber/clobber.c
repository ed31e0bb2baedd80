/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clobber.c -- the runtime of clobber mode (Clobber-NVM): the calls the
 * pmkit-clobber pass inserts into a failure-atomic function (abi.h), the
 * per-thread persistent log they fill, and pmkit_recover's part for them.
 *
 * A thread's log is one block of the pool, allocated on its first FASE and
 * found through its context slot (extension words PMKIT_EXT_CLOBBER..+3:
 * the block, the setting, the log's sequence number and the vlog's size,
 * all in the slot's first line, which the core writes back at begin). The
 * block holds the vlog (the FASE's arguments: values, pool offsets, copies
 * of declared volatile buffers; only its changed lines are written back)
 * and the clobber entries (address, size, old bytes), each guarded by a
 * check word over its contents and the log's sequence number, so a torn
 * entry, or one left by an earlier FASE, is never rolled back. The section
 * itself (IDLE -> ACTIVE -> IDLE, the allocation journal) is the core's
 * pmkit_fase_begin/commit/replay.
 *
 * ADR: the vlog is flushed before the section becomes ACTIVE; an entry is
 * flushed and fenced before the clobber write it protects; the FASE's own
 * writes are written back by the pass and fenced once, at commit. eADR
 * (modules built with -pmkit-clobber-domain=eadr): the same order with the
 * flushes and fences gone, the core's too (such a module sets the domain).
 * Entry points: __pmkit_clobber_enter,
 * __pmkit_clobber_log, __pmkit_clobber_exit, and pmk_clobber_mode, whose
 * recover pmkit_recover calls (two passes over the slots: restore, then
 * re-execute).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/mode.h"

/* Bytes of a thread's log block: header, vlog, clobber entries. */
#define LOG_BYTES (1u << 20)
#define VLOG_BYTES 4096u
#define MAX_ARGS 32u
_Static_assert(sizeof(((pmkit_clobber_inflight *)0)->args) == MAX_ARGS * 8,
               "pmkit_clobber_inflight holds every argument");
#define OWNER_MAGIC 0x424f4c43u /* "CLOB" in ext word 1 (low half) */
#define WB_MAX 256u /* lines a FASE's body wrote, kept for its commit */

/* Extension words of a context slot owned by this runtime. */
enum {
  EXT_LOG = PMKIT_EXT_CLOBBER, /* pool offset of the thread's log block   */
  EXT_KIND,                    /* OWNER_MAGIC | setting << 32              */
  EXT_SEQ,  /* entries are valid only under this number                 */
  EXT_ARGS, /* arguments | vlog bytes << 8 | begin's check << 24         */
};
#define ARGS_N(w) ((w)&0xff)
#define ARGS_BYTES(w) ((w) >> 8 & 0xffff)
enum { KIND_CLOBBER = 1, KIND_UNDO = 2 };
_Static_assert(offsetof(struct pmk_ctx_pm, ext) + 8 * (EXT_ARGS + 1) <= 64,
               "the words begin sets share the slot's first line");

/* vlog: argument kinds (4 bits each) in the first two words, then a word
 * per argument (value, pool offset, or a buffer's length), then the bytes
 * of PMKIT_FASE_IN buffers in argument order, each padded to 8. */
enum { ARG_VAL = 1, ARG_PM, ARG_NULL, ARG_IN, ARG_SCRATCH };
#define KIND_WORDS 2u

struct log_blk {
  uint64_t vlog[VLOG_BYTES / 8];
  unsigned char ents[LOG_BYTES - VLOG_BYTES];
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
  struct staged *args; /* MAX_ARGS of them, on the heap: libpmkit's TLS
                          is static (the CLI loads it with dlopen) */
  pmkit_pool *pool;
  pmkit_ctx *ctx;
  struct log_blk *log;
  uint64_t used; /* bytes of entries appended                         */
  int unfenced;  /* entries appended by _batch, not yet fenced          */
  unsigned nwb;  /* lines the body wrote, written back at commit        */
  uintptr_t *wb; /* WB_MAX of them (malloc: the TLS block stays small)   */
  uint64_t seq;
  uint64_t fences0; /* pmk_sfences at the start of the section        */
  /* The vlog as this thread last wrote it, under log number shadow_seq,
   * in the opening of a pool shadow_serial names: compared against instead
   * of the persistent copy, whose lines the last write-back may have
   * evicted from the cache. (Another pool, or the same file opened again,
   * may map its log at the same address with the same log number.) */
  uint64_t *shadow;
  const struct log_blk *shadow_log;
  uint64_t shadow_seq, shadow_serial;
} cur;

/* Per-slot counters (a line each), summed by pmkit_clobber_stats. Only the
 * thread holding the slot writes them: no locked instructions. */
static struct {
  _Atomic uint64_t fases, entries, log_bytes, vlog_bytes, fences, replays,
      rollbacks;
  char pad[8];
} stats[PMKIT_MAX_THREADS] __attribute__((aligned(64)));

static inline void bump(_Atomic uint64_t *c, uint64_t n) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                        memory_order_relaxed);
}

static struct pmk_registry table = PMK_REGISTRY_INIT;

static _Noreturn void fail(const char *what, const char *detail) {
  pmk_fase_fail("clobber", (const void *)cur.fase, what, detail);
}

void __pmkit_clobber_register(const struct __pmkit_clobber_fase *t,
                              uint32_t n) {
  pmk_registry_add(&table, t, sizeof *t, n, "clobber");
  for (uint32_t i = 0; i < n; i++)
    if (t[i].flags & PMKIT_CLOBBER_EADR)
      pmk_use_eadr(); /* built for eADR: so is the whole runtime */
}

static const struct __pmkit_clobber_fase *lookup(uint64_t id) {
  return pmk_registry_find(&table, id);
}

int __pmkit_clobber_enter(uint64_t id) {
  if (cur.depth++ || cur.replaying)
    return 0; /* nested: part of the outer FASE */
  cur.fase = lookup(id);
  if (!cur.fase) {
    char what[64];
    snprintf(what, sizeof what, "id %#llx not registered",
             (unsigned long long)id);
    fail(what, "was the program linked with its pass output?");
  }
  cur.setting = cur.fase->flags & PMKIT_CLOBBER_UNDO ? KIND_UNDO : KIND_CLOBBER;
  cur.nargs = 0;
  cur.began = 0;
  return 1;
}

static void stage(uint32_t kind, uint64_t val, uint64_t len) {
  if (cur.nargs == MAX_ARGS)
    fail("too many arguments", "at most 32");
  if (!cur.args && !(cur.args = malloc(MAX_ARGS * sizeof *cur.args)))
    fail("no memory", "for the arguments");
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

/* The check begin stores with the vlog's size: over the words it wrote
 * for this FASE (setting, log number, vlog) and the section number the
 * core is about to give it. The core fences once, after all of them and
 * its ACTIVE state; a crash before that fence may persist the state but not
 * all of these, and recovery must then see that the FASE never began. */
static uint64_t begin_check(uint64_t kind, uint64_t seq, uint64_t args,
                            uint64_t ctx_seq, const uint64_t *vlog,
                            uint64_t words) {
  uint64_t h = ctx_seq * 0x9e3779b97f4a7c15ull ^ kind;
  h = (h ^ h >> 31) * 0xbf58476d1ce4e5b9ull ^ seq;
  h = (h ^ h >> 31) * 0xbf58476d1ce4e5b9ull ^ (args & 0xffffff);
  for (uint64_t i = 0; i < words; i++)
    h = (h ^ h >> 29) * 0x94d049bb133111ebull ^ vlog[i];
  h ^= h >> 32;
  return h & ((1ull << 40) - 1);
}

/* Store a vlog word only where it differs, noting its line as dirty: a
 * line the last FASE of this thread persisted unchanged needs no flush. */
static void put_word(uint64_t *v, uint64_t at, uint64_t w, uint64_t *dirty) {
  if (at >= VLOG_BYTES / 8)
    fail("arguments too large", "more than 4 KiB of vlog");
  if (cur.shadow[at] != w) {
    v[at] = cur.shadow[at] = w;
    *dirty |= 1ull << (at / 8);
  }
}

/* Write the vlog: what re-execution needs from volatile state. Returns its
 * bytes. */
static uint64_t write_vlog(pmkit_pool *p, uint64_t seq) {
  uint64_t *v = cur.log->vlog, dirty = 0, kinds[KIND_WORDS] = {0};
  if (!cur.shadow && !(cur.shadow = malloc(VLOG_BYTES)))
    fail("no memory", "for the vlog's copy");
  if (cur.shadow_log != cur.log || cur.shadow_seq != seq ||
      cur.shadow_serial != p->serial) {
    /* another thread, pool or opening wrote it since */
    memcpy(cur.shadow, v, VLOG_BYTES);
    cur.shadow_log = cur.log;
    cur.shadow_serial = p->serial;
  }
  uint64_t at = KIND_WORDS + cur.nargs; /* words */
  for (unsigned i = 0; i < cur.nargs; i++) {
    struct staged *a = &cur.args[i];
    uint64_t w = a->val;
    if (a->kind == ARG_PM) {
      if (pmkit_pool_of((void *)(uintptr_t)a->val) != p)
        fail("arguments point into two pools", NULL);
      w = pmkit_off(p, (void *)(uintptr_t)a->val);
    } else if (a->kind == ARG_IN || a->kind == ARG_SCRATCH)
      w = a->len;
    kinds[i / 16] |= (uint64_t)a->kind << (4 * (i % 16));
    put_word(v, KIND_WORDS + i, w, &dirty);
    if (a->kind == ARG_IN) {
      const unsigned char *b = (const unsigned char *)(uintptr_t)a->val;
      for (uint64_t o = 0; o < a->len; o += 8, at++) {
        uint64_t x = 0;
        memcpy(&x, b + o, a->len - o < 8 ? a->len - o : 8);
        put_word(v, at, x, &dirty);
      }
    }
  }
  for (unsigned k = 0; k < KIND_WORDS; k++)
    put_word(v, k, kinds[k], &dirty);
  for (; dirty; dirty &= dirty - 1)
    pmk_flush_line(v + 8 * (unsigned)__builtin_ctzll(dirty));
  return at * 8;
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
  uint64_t vlen = 0, args = 0;
  uint64_t *ext = pmkit_ctx_ext(c);
  uint64_t seq = ext[EXT_SEQ];
  if (cur.setting == KIND_CLOBBER) {
    vlen = write_vlog(p, seq);
    args = cur.nargs | vlen << 8;
  }
  uint64_t kind = OWNER_MAGIC | (uint64_t)cur.setting << 32;
  if (ext[EXT_KIND] != kind)
    pmk_store64_line(&ext[EXT_KIND], kind);
  cur.seq = cur.shadow_seq = seq + 1;
  pmk_store64_line(&ext[EXT_SEQ], cur.seq);
  args |= begin_check(kind, cur.seq, args, c->pm->seq + 1, cur.shadow, vlen / 8)
          << 24;
  pmk_store64_line(&ext[EXT_ARGS], args);
  cur.used = 0;
  cur.nwb = 0;
  /* These words share the slot's first line with its tag and state, which
   * pmkit_fase_begin writes back; its fence orders all of the above before
   * ACTIVE, and ACTIVE before the body. */
  if (pmkit_fase_begin(c, cur.fase->id))
    fail("cannot begin", pmkit_errormsg());
  cur.began = 1;
  cur.fences0 = fences0;
  unsigned s = pmkit_ctx_id(c);
  bump(&stats[s].vlog_bytes, vlen);
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

/* Append an entry for [addr, addr+size) if it is in the FASE's pool, and
 * write it back; 1 if it did. */
static int append(const void *addr, uint64_t size) {
  if (!cur.depth || !cur.began || !__pmkit_maybe_pm(addr) || size == 0)
    return 0;
  pmkit_pool *p = cur.pool;
  uintptr_t a = (uintptr_t)addr;
  if (a < p->base || a + size > p->base + p->size)
    return 0; /* another pool, or DRAM inside the bounding box */
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
  pmkit_flush(e, n);
  cur.used += n;
  unsigned s = pmkit_ctx_id(cur.ctx);
  bump(&stats[s].entries, 1);
  bump(&stats[s].log_bytes, n);
  return 1;
}

void __pmkit_clobber_log(const void *addr, uint64_t size) {
  /* One fence for this entry and those the batch calls before it left. */
  if (append(addr, size) | cur.unfenced)
    pmk_fence(); /* the entries persist before the writes they protect */
  cur.unfenced = 0;
}

void __pmkit_clobber_log_batch(const void *addr, uint64_t size) {
  cur.unfenced |= append(addr, size);
}

/* Write back the lines the body wrote (no fence). */
static void wb_flush(void) {
  for (unsigned i = 0; i < cur.nwb; i++)
    pmk_flush_line((const void *)cur.wb[i]);
  cur.nwb = 0;
}

void __pmkit_clobber_wb(const void *addr, uint64_t size) {
  if (!cur.began) {
    pmkit_flush(addr, size);
    return;
  }
  /* A line written again soon after (fields of one object) is kept once:
   * a write-back now would evict it before the next write on CPUs whose
   * clwb does, and each rewrite would miss. */
  if (!cur.wb && !(cur.wb = malloc(WB_MAX * sizeof *cur.wb))) {
    pmkit_flush(addr, size); /* no memory to defer: at once */
    return;
  }
  uintptr_t a = (uintptr_t)addr & ~(uintptr_t)63, end = (uintptr_t)addr + size;
  for (; a < end; a += 64) {
    unsigned k = cur.nwb, lim = k > 16 ? k - 16 : 0;
    while (k > lim && cur.wb[k - 1] != a)
      k--;
    if (k > lim)
      continue;
    if (cur.nwb == WB_MAX)
      wb_flush();
    cur.wb[cur.nwb++] = a;
  }
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
  wb_flush();
  pmk_fence(); /* the body's write-backs complete before the commit */
  if (pmkit_fase_commit(cur.ctx))
    fail("cannot commit", pmkit_errormsg());
  unsigned s = pmkit_ctx_id(cur.ctx);
  bump(&stats[s].fases, 1);
  bump(&stats[s].fences, pmk_sfences - cur.fences0);
  if (replaying)
    bump(&stats[s].replays, 1);
  cur.fase = NULL;
}

int pmkit_clobber_stats_get(pmkit_clobber_stats *out) {
  pmk_clear_err();
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

/* Restore the clobbered inputs of the section in flight, newest first, and
 * retire the entries. */
static int roll_back(pmkit_pool *p, struct log_blk *l, uint64_t seq,
                     unsigned slot) {
  uint64_t cap = 64, n = 0, at = 0;
  uint64_t *pos = malloc(cap * sizeof *pos);
  if (!pos)
    return pmk_err(PMKIT_E_NOMEM, "no memory to roll back slot %u", slot);
  while (at + sizeof(struct ent) <= sizeof l->ents) {
    const struct ent *e = (const struct ent *)(l->ents + at);
    uint64_t len = sizeof *e + (((uint64_t)e->size + 7) & ~(uint64_t)7);
    if (e->check == 0 || at + len > sizeof l->ents || e->off >= p->size ||
        e->size > p->size - e->off ||
        e->check != check_of(seq, e, (const unsigned char *)(e + 1)))
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
  for (uint64_t i = n; i--;) {
    const struct ent *e = (const struct ent *)(l->ents + pos[i]);
    pmk_crash_point();
    memcpy(pmk_at(p, e->off), e + 1, e->size);
    pmkit_flush(pmk_at(p, e->off), e->size);
  }
  pmk_fence();
  /* Then the entries die, last to first, so that a re-execution's own
   * entries (under the same number: the begin check covers it) are never
   * followed by these. A crash in here leaves a shorter chain, whose
   * roll-back, done already, is done again to the same effect. */
  for (uint64_t i = n; i--;) {
    struct ent *e = (struct ent *)(l->ents + pos[i]);
    pmk_crash_point();
    __atomic_store_n(&e->check, 0, __ATOMIC_RELEASE);
    pmk_flush_line(&e->check);
  }
  free(pos);
  pmk_fence();
  bump(&stats[slot].rollbacks, 1);
  return 0;
}

/* Decode the vlog (`ext`: the slot's words) into argument words; buffers
 * become fresh DRAM copies (the FASE may write them; the vlog must survive
 * a crash of recovery), or 0 without `bufs` (a look, not a re-execution). */
static int decode_args(pmkit_pool *p, const uint64_t *ext,
                       const struct log_blk *l, uint64_t *args, void **bufs,
                       unsigned *nbufs) {
  const uint64_t *v = l->vlog;
  uint64_t nargs = ARGS_N(ext[EXT_ARGS]), words = ARGS_BYTES(ext[EXT_ARGS]) / 8;
  *nbufs = 0;
  if (nargs > MAX_ARGS || words > VLOG_BYTES / 8 || words < KIND_WORDS + nargs)
    return pmk_err(PMKIT_E_CORRUPT, "clobber vlog header is malformed");
  uint64_t at = KIND_WORDS + nargs; /* the next buffer's first word */
  for (uint64_t i = 0; i < nargs; i++) {
    uint64_t kind = v[i / 16] >> (4 * (i % 16)) & 15, w = v[KIND_WORDS + i];
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
      uint64_t n = kind == ARG_IN ? (w + 7) / 8 : 0;
      if (n > words - at)
        return pmk_err(PMKIT_E_CORRUPT, "clobber vlog is truncated");
      args[i] = 0;
      if (bufs) {
        void *b = calloc(1, w ? w : 1);
        if (!b)
          return pmk_err(PMKIT_E_NOMEM, "no memory for a FASE argument");
        bufs[(*nbufs)++] = b;
        memcpy(b, v + at, kind == ARG_IN ? w : 0);
        args[i] = (uint64_t)(uintptr_t)b;
      }
      at += n;
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
  uint64_t words = ARGS_BYTES(ext[EXT_ARGS]) / 8;
  if (words > VLOG_BYTES / 8 ||
      ext[EXT_ARGS] >> 24 != begin_check(ext[EXT_KIND], ext[EXT_SEQ],
                                         ext[EXT_ARGS], (*c)->pm->seq,
                                         (*l)->vlog, words)) {
    /* A torn begin: ACTIVE persisted without all its words, so before its
     * fence, and nothing of the FASE can have persisted. (A vlog damaged
     * after a complete begin looks the same: see the test torn_begin.) */
    pmkit_fase_abort(*c);
    pmkit_ctx_release(*c);
    return 0;
  }
  return 1;
}

int pmkit_clobber_inflight_get(pmkit_pool *p, unsigned id,
                               pmkit_clobber_inflight *out) {
  pmk_clear_err();
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
    r = decode_args(p, pmkit_ctx_ext(c), l, out->args, NULL, &nbufs);
    out->nargs = ARGS_N(pmkit_ctx_ext(c)[EXT_ARGS]);
    r = r ? r : 1;
  }
  pmkit_ctx_release(c);
  return r;
}

/* Recovery in two passes over the slots (pmkit_recover): first every
 * interrupted section's clobbered inputs are restored (`reexecute` 0), then
 * each is re-executed (1). One pass doing both per slot let a section
 * re-execute over another's uncommitted writes, which that one's roll-back
 * then overwrote: a waiter for a lock the other held re-executed first, and
 * its completed update was lost. A crash between the passes leaves sections
 * in flight with retired entries: the next recovery restores nothing more
 * and re-executes them. Returns 1 for a section recovered in this pass. */
static int recover_slot(pmkit_pool *p, unsigned id, int reexecute) {
  pmkit_ctx *c;
  struct log_blk *l;
  uint32_t kind;
  if (!adopt_inflight(p, id, &c, &l, &kind))
    return 0;
  uint64_t *ext = pmkit_ctx_ext(c);
  int r = 0;
  /* PMKIT_CLOBBER_RECOVER=rollback: recovery that forgets to re-execute,
   * for showing that a checker notices a FASE that began and never ended. */
  int undo =
      kind == KIND_UNDO || pmk_opt_is(PMK_OPT_CLOBBER_RECOVER, "rollback");
  if (!reexecute) {
    r = roll_back(p, l, ext[EXT_SEQ], id);
    if (!r && undo) { /* the classic baseline: the FASE never ran */
      r = pmkit_fase_abort(c);
      r = r ? r : 1;
    }
    goto out;
  }
  if (undo) { /* (a crash between the passes) */
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
  r = decode_args(p, ext, l, args, bufs, &nbufs);
  if (r == 0 && ARGS_N(ext[EXT_ARGS]) != f->nargs)
    r = pmk_err(PMKIT_E_CORRUPT,
                "slot %u: FASE %s takes %u arguments, vlog "
                "holds %llu",
                id, f->name, f->nargs,
                (unsigned long long)ARGS_N(ext[EXT_ARGS]));
  if (r == 0) {
    if (pmkit_fase_replay(c))
      fail("cannot replay", pmkit_errormsg());
    cur.fase = f;
    cur.setting = KIND_CLOBBER;
    cur.pool = p;
    cur.ctx = c;
    cur.log = l;
    cur.seq = ext[EXT_SEQ];
    cur.used = 0;
    cur.nwb = 0;
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

static int recover(pmkit_pool *p) {
  int n = 0;
  for (int pass = 0; pass < 2; pass++)
    for (unsigned id = 0; id < PMKIT_MAX_THREADS; id++) {
      int r = recover_slot(p, id, pass);
      if (r < 0)
        return r;
      n += r;
    }
  return n;
}

/* After ssapp's (order 0): a slot ssapp mode used may still hold a clobber
 * owner mark from an earlier section, which recover_slot would misread. */
PMK_HIDDEN const struct pmk_mode pmk_clobber_mode = {"clobber", 1, recover};
