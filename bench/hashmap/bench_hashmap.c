/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_hashmap.c -- a persistent chained hash map under a YCSB-A style
 * workload: K keys are loaded, then T threads run a seeded stream of reads
 * and updates (50:50 by default) on uniformly drawn keys, for D seconds or
 * for a fixed number of operations (--ops, as tracing wants). Values are
 * copy-on-write: an update writes and persists a new value block, swaps the
 * node's value pointer, persists it, then frees the old block. Persistence
 * is written with the PM_FLUSH/PM_FENCE macros below so that later variants
 * can be built from this one source (-DHM_EADR drops every flush and fence).
 * Each thread persists the number of operations it has completed, so
 * `--check POOL` can validate a pool after a crash against the workload
 * replayed in DRAM. Prints one JSON object on stdout; bench/run.py is the
 * harness (bench/trace/meta.json). Built twice: bench_hashmap (libpmkit) and
 * bench_hashmap-traced (the pmkit-trace pass and libpmkit-trace, recording
 * when PMKIT_TRACE=FILE is set). Try:
 *   bench_hashmap --scale 0.01 --ops 100000 --pool /dev/shm/hm.pool
 *   bench_hashmap --check /dev/shm/hm.pool
 * Usage: bench_hashmap --help; bench_hashmap --info; bench_hashmap --check P
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pmkit/pmkit.h"

/* ---- persistence ----------------------------------------------------------
 * The only place this file says how stores become durable. hand-adr: the
 * program writes back what it stored and fences (pmkit_flush/pmkit_fence,
 * which also honour PMKIT_DOMAIN). eADR: caches are persistent, so a fence
 * only has to keep the compiler from reordering stores; no instruction. */
#ifdef HM_EADR
#define PM_FLUSH(p, n) ((void)(p), (void)(n))
#define PM_FENCE() atomic_signal_fence(memory_order_seq_cst)
#define HM_PERSISTENCE "eadr"
#else
#define PM_FLUSH(p, n) pmkit_flush((p), (n))
#define PM_FENCE() pmkit_fence()
#define HM_PERSISTENCE "hand-adr"
#endif
#define PM_PERSIST(p, n) (PM_FLUSH((p), (n)), PM_FENCE())

#ifndef HM_BUILD /* set by CMake: "plain" or "traced" */
#define HM_BUILD "plain"
#endif

#define HM_LAYOUT "pmkit-bench-hashmap"
#define HM_MAGIC 0x31504d4853414855ull /* "UHASHMP1" */
#define HM_MAX_THREADS 64u
#define HM_MAX_KEYS (1ull << 31)
#define HM_VALUE_MIN 32u /* the value header */
#define HM_VALUE_MAX PMKIT_ALLOC_MAX_SMALL
#define HM_STAMP_SHIFT 48 /* stamp = (thread + 1) << 48 | operation index */
#define HM_STAMP_MASK (((uint64_t)1 << HM_STAMP_SHIFT) - 1)

/* ---- persistent layout ------------------------------------------------- */

struct hm_value {
  uint64_t key;
  uint64_t stamp;  /* the write of the workload that made it: 0 = the load */
  uint64_t sum;    /* checksum of the whole value with this field zero */
  uint64_t size;   /* bytes, header included (--value-size) */
  uint64_t data[]; /* (size - 32) / 8 words derived from key and stamp */
};

struct hm_node {
  struct hm_node *next;
  uint64_t key;
  struct hm_value *val;
};

/* One cache line per thread: the counters are persisted after every
 * operation and must not share lines with each other. */
struct hm_slot {
  _Alignas(64) uint64_t ops_done; /* operations of this thread completed */
};

/* The root object; zeroed memory is "not initialised". The parameters are
 * durable before `magic` is set, and nothing else is written before it. */
struct hm_root {
  uint64_t magic;
  uint64_t seed, keys, value_size, read_pct, threads, nbuckets;
  uint64_t loaded; /* keys 0..loaded-1 are inserted (in key order) */
  struct hm_slot slot[HM_MAX_THREADS];
  struct hm_node *bucket[]; /* nbuckets */
};

/*
 * Why a crash leaves a checkable state (a crash point is any fence or
 * allocator store; under ADR any store may also reach PM early):
 *  - A value or node is written, flushed and fenced before the 8-byte
 *    store that publishes it (node->val, a bucket head), so every reachable
 *    block is complete and allocated.
 *  - An update changes the map with exactly one store (node->val); the old
 *    block is freed only once that store is durable, so a crash may leak a
 *    block (pmkit pool gc reclaims it) but never leave a freed one reachable.
 *  - Thread t's ops_done = i+1 is stored after operation i is durable, and
 *    operation i+1 starts after that. So with ops_done = n, operations
 *    0..n-1 of thread t took effect, n may have, and none after it did.
 *  - The load inserts keys in order and persists `loaded` after each link;
 *    operations start only once loaded == keys.
 */

/* ---- options and state --------------------------------------------------- */

static struct {
  unsigned threads, read_pct;
  uint64_t keys, ops, seed, value_size, pool_mib;
  double scale, seconds, warmup;
  const char *pool, *pool_dir;
  int keep;
} opt = {1, 50, 1000000, 0, 1, 256, 0, 1.0, 1.0, 0.2, NULL, "/dev/shm", 0};

static pmkit_pool *pool;
static struct hm_root *root;
static pmkit_mutex *locks; /* DRAM, one per bucket: see README.md */
static uint64_t bucket_mask;
static char pool_path[4096];
static int remove_pool;

static atomic_int start_flag, stop_flag;

struct worker {
  _Alignas(64) _Atomic uint64_t ops; /* sampled by the main thread */
  unsigned id;
  uint64_t target; /* --ops mode: stop at this operation index */
  uint64_t reads, updates;
  uint64_t *buf; /* a value's bytes in DRAM */
  int failed;
  pthread_t tid;
  _Alignas(64) char pad[1];
};
static struct worker workers[HM_MAX_THREADS];

static _Noreturn void die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static _Noreturn void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("bench_hashmap: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  if (remove_pool)
    unlink(pool_path);
  exit(1);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) && errno == EINTR)
    ;
}

/* ---- the workload: pure functions of (seed, thread, index) --------------- */

#define GOLDEN 0x9e3779b97f4a7c15ull

static inline uint64_t mix64(uint64_t z) { /* the splitmix64 finaliser */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct hm_op {
  int update;
  uint64_t key;
};

/* Operation i of thread t: output i of a splitmix64 stream per thread, so
 * the checker can jump to any operation without replaying the ones before. */
static inline struct hm_op op_at(uint64_t seed, uint64_t keys, unsigned pct,
                                 unsigned t, uint64_t i) {
  uint64_t base = mix64(seed ^ (0x6a09e667f3bcc909ull * (t + 1)));
  uint64_t h = mix64(base + (i + 1) * GOLDEN);
  struct hm_op op = {(unsigned)((uint32_t)h % 100) >= pct,
                     (uint64_t)(((unsigned __int128)(h >> 32) * keys) >> 32)};
  return op;
}

static inline uint64_t stamp_of(unsigned t, uint64_t i) {
  return (uint64_t)(t + 1) << HM_STAMP_SHIFT | i;
}

static inline uint64_t bucket_of(uint64_t key) {
  return mix64(key ^ 0x243f6a8885a308d3ull) & bucket_mask;
}

static uint64_t value_sum(const struct hm_value *v) {
  const uint64_t *w = (const uint64_t *)v;
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over 8-byte words */
  for (uint64_t i = 0; i < v->size / 8; i++) {
    h ^= i == 2 ? 0 : w[i]; /* word 2 is `sum` itself */
    h *= 0x100000001b3ull;
  }
  return mix64(h);
}

/* The bytes of the value that write `stamp` stores for `key`. */
static void make_value(uint64_t *buf, uint64_t seed, uint64_t key,
                       uint64_t stamp, uint64_t size) {
  struct hm_value *v = (struct hm_value *)buf;
  uint64_t x = mix64(seed ^ mix64(key) ^ stamp * 0xd1b54a32d192ed03ull);
  v->key = key;
  v->stamp = stamp;
  v->sum = 0;
  v->size = size;
  for (uint64_t j = 0; j < (size - HM_VALUE_MIN) / 8; j++)
    v->data[j] = x ^ (j * GOLDEN);
  v->sum = value_sum(v);
}

/* ---- the map --------------------------------------------------------------
 */

static struct hm_node *find(uint64_t b, uint64_t key) {
  struct hm_node *n = root->bucket[b];
  while (n && n->key != key)
    n = n->next;
  return n;
}

/* Load phase: insert key `key` (single-threaded, so no locks). */
static int insert(uint64_t *buf, uint64_t key) {
  uint64_t b = bucket_of(key), size = root->value_size;
  struct hm_value *v;
  struct hm_node *n;
  int err;
  make_value(buf, root->seed, key, 0, size);
  if ((err = pmkit_alloc(pool, size, (void **)&v)) != 0)
    return err;
  memcpy(v, buf, size);
  PM_FLUSH(v, size);
  if ((err = pmkit_alloc(pool, sizeof *n, (void **)&n)) != 0)
    return err;
  n->next = root->bucket[b];
  n->key = key;
  n->val = v;
  PM_FLUSH(n, sizeof *n);
  PM_FENCE(); /* value, node and their allocations before the link */
  root->bucket[b] = n;
  PM_PERSIST(&root->bucket[b], sizeof root->bucket[b]);
  return 0;
}

static int load(void) {
  uint64_t *buf = malloc(root->value_size);
  if (!buf)
    die("out of memory");
  uint64_t k = root->loaded;
  /* A crash after the link and before `loaded` left key k inserted. */
  if (k < root->keys && find(bucket_of(k), k)) {
    root->loaded = ++k;
    PM_PERSIST(&root->loaded, sizeof root->loaded);
  }
  for (; k < root->keys; k++) {
    pmkit_mark_begin("insert");
    int err = insert(buf, k);
    if (err) {
      free(buf);
      return err;
    }
    root->loaded = k + 1;
    PM_PERSIST(&root->loaded, sizeof root->loaded);
    pmkit_mark_end("insert");
  }
  free(buf);
  return 0;
}

static int op_get(struct worker *w, uint64_t key) {
  uint64_t b = bucket_of(key);
  pmkit_mutex_lock(&locks[b]);
  struct hm_node *n = find(b, key);
  if (n)
    memcpy(w->buf, n->val, root->value_size);
  pmkit_mutex_unlock(&locks[b]);
  if (!n)
    return PMKIT_E_STATE;
  w->reads++;
  return 0;
}

/* Copy-on-write update: the new value is complete and durable before the
 * one store that publishes it; the old block is freed once that store is. */
static int op_put(struct worker *w, uint64_t key, uint64_t stamp) {
  uint64_t b = bucket_of(key), size = root->value_size;
  struct hm_value *v, *old = NULL;
  make_value(w->buf, root->seed, key, stamp, size);
  int err = pmkit_alloc(pool, size, (void **)&v);
  if (err)
    return err;
  memcpy(v, w->buf, size);
  PM_FLUSH(v, size);
  PM_FENCE(); /* the value and its allocation before it is published */
  pmkit_mutex_lock(&locks[b]);
  struct hm_node *n = find(b, key);
  if (n) {
    old = n->val;
    n->val = v;
    PM_PERSIST(&n->val, sizeof n->val); /* the commit point */
  }
  pmkit_mutex_unlock(&locks[b]);
  if (!n) {
    pmkit_free(pool, v);
    return PMKIT_E_STATE;
  }
  w->updates++;
  /* Readers copy under the bucket lock, so none can still hold `old`. */
  return pmkit_free(pool, old);
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct hm_slot *slot = &root->slot[w->id];
  uint64_t seed = root->seed, keys = root->keys;
  unsigned pct = (unsigned)root->read_pct;
  while (!atomic_load_explicit(&start_flag, memory_order_acquire))
    ;
  for (uint64_t i = slot->ops_done;
       !atomic_load_explicit(&stop_flag, memory_order_relaxed) &&
       (!opt.ops || i < w->target);
       i++) {
    struct hm_op op = op_at(seed, keys, pct, w->id, i);
    const char *name = op.update ? "put" : "get";
    pmkit_mark_begin(name);
    int err =
        op.update ? op_put(w, op.key, stamp_of(w->id, i)) : op_get(w, op.key);
    if (err) {
      fprintf(stderr, "bench_hashmap: thread %u, operation %" PRIu64 ": %s\n",
              w->id, i,
              err == PMKIT_E_STATE ? "key missing" : pmkit_errormsg());
      w->failed = 1;
      atomic_store(&stop_flag, 1);
      break;
    }
    slot->ops_done = i + 1; /* only once operation i is durable */
    PM_PERSIST(&slot->ops_done, sizeof slot->ops_done);
    pmkit_mark_end(name);
    atomic_store_explicit(&w->ops, w->ops + 1, memory_order_relaxed);
  }
  return NULL;
}

/* ---- the checker ------------------------------------------------------- */

static int inconsistent(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static int inconsistent(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("INCONSISTENT: ", stdout);
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
  return 1;
}

/* The last update of each key among operations [0, done) of thread t, as
 * index + 1 (0: none). `last` has `keys` entries, cleared by the caller. */
static void replay(uint64_t *last, unsigned t, uint64_t done) {
  for (uint64_t i = 0; i < done; i++) {
    struct hm_op op =
        op_at(root->seed, root->keys, (unsigned)root->read_pct, t, i);
    if (op.update)
      last[op.key] = i + 1;
  }
}

/* "the load" or "thread T operation I": who wrote a value. */
static const char *stamp_str(uint64_t s, char buf[64]) {
  if (!s)
    return "the load";
  snprintf(buf, 64, "thread %u operation %" PRIu64,
           (unsigned)(s >> HM_STAMP_SHIFT) - 1, s & HM_STAMP_MASK);
  return buf;
}

/* Structural invariants of every chain and value; fills stamp[key]. A
 * repeated key is caught by `present`, which also ends any cycle. */
static int check_chains(uint64_t *stamp, uint8_t *present, uint64_t *buf,
                        uint64_t *nodes) {
  struct hm_root *r = root;
  char sa[64];
  *nodes = 0;
  for (uint64_t b = 0; b < r->nbuckets; b++) {
    for (const struct hm_node *n = r->bucket[b]; n; n = n->next) {
      if (pmkit_usable_size(pool, n) < sizeof *n)
        return inconsistent("bucket %" PRIu64 ": %p is not an allocated node",
                            b, (const void *)n);
      uint64_t k = n->key;
      if (k >= r->keys)
        return inconsistent("bucket %" PRIu64 ": key %" PRIu64
                            " is not one of the %" PRIu64 " keys",
                            b, k, r->keys);
      if (bucket_of(k) != b)
        return inconsistent("key %" PRIu64 " in bucket %" PRIu64
                            ", not its own (%" PRIu64 ")",
                            k, b, bucket_of(k));
      if (present[k])
        return inconsistent("key %" PRIu64 " appears twice (or its chain "
                            "has a cycle)",
                            k);
      present[k] = 1;
      ++*nodes;
      const struct hm_value *v = n->val;
      if (pmkit_usable_size(pool, v) < r->value_size)
        return inconsistent("key %" PRIu64 ": value %p is not an allocated "
                            "block of %" PRIu64 " bytes",
                            k, (const void *)v, r->value_size);
      if (v->size != r->value_size || v->key != k)
        return inconsistent("key %" PRIu64 ": its value says key %" PRIu64
                            ", %" PRIu64 " bytes",
                            k, v->key, v->size);
      if (v->sum != value_sum(v))
        return inconsistent("key %" PRIu64 ": value checksum does not match "
                            "(a value published before it was written?)",
                            k);
      make_value(buf, r->seed, k, v->stamp, r->value_size);
      if (memcmp(v, buf, r->value_size))
        return inconsistent("key %" PRIu64 ": value bytes differ from what "
                            "%s stores",
                            k, stamp_str(v->stamp, sa));
      stamp[k] = v->stamp;
    }
  }
  return 0;
}

/* Content against the workload: see the comment on the layout above. With
 * one thread the state is exact up to the in-flight operation; with more,
 * each key's value must be a write of the stream that no completed later
 * write of the same thread replaced, and not the loaded value once any
 * thread completed an update of the key. */
static int check_content(const uint64_t *stamp, const uint8_t *present) {
  struct hm_root *r = root;
  unsigned nt = (unsigned)r->threads, pct = (unsigned)r->read_pct;
  char sa[64], sb[64];
  if (r->loaded < r->keys) {
    for (unsigned t = 0; t < nt; t++)
      if (r->slot[t].ops_done)
        return inconsistent("thread %u ran operations before the load "
                            "finished",
                            t);
    for (uint64_t k = 0; k < r->keys; k++) {
      int want = k < r->loaded;
      if (present[k] != want && !(k == r->loaded && present[k]))
        return inconsistent("load: key %" PRIu64 " %s with loaded=%" PRIu64, k,
                            present[k] ? "present" : "missing", r->loaded);
      if (present[k] && stamp[k])
        return inconsistent("load: key %" PRIu64 " has an updated value", k);
    }
    return 0;
  }
  for (uint64_t k = 0; k < r->keys; k++)
    if (!present[k])
      return inconsistent("key %" PRIu64 " is missing", k);
  uint64_t *last = calloc(r->keys, sizeof *last);
  uint8_t *updated = calloc(r->keys, 1);
  if (!last || !updated)
    die("out of memory");
  int bad = 0;
  for (unsigned t = 0; t < nt && !bad; t++) {
    uint64_t done = r->slot[t].ops_done;
    struct hm_op next = op_at(r->seed, r->keys, pct, t, done);
    memset(last, 0, r->keys * sizeof *last);
    replay(last, t, done);
    for (uint64_t k = 0; k < r->keys && !bad; k++) {
      updated[k] |= last[k] != 0;
      uint64_t s = stamp[k];
      unsigned owner = (unsigned)(s >> HM_STAMP_SHIFT);
      uint64_t i = s & HM_STAMP_MASK;
      int in_flight = next.update && next.key == k && i == done;
      if (nt == 1 && s != (last[k] ? stamp_of(t, last[k] - 1) : 0) &&
          !(owner == t + 1 && in_flight))
        bad = inconsistent(
            "key %" PRIu64 ": value written by %s, expected %s after %" PRIu64
            " operations%s",
            k, stamp_str(s, sa),
            stamp_str(last[k] ? stamp_of(t, last[k] - 1) : 0, sb), done,
            next.update && next.key == k ? " (or the in-flight one)" : "");
      if (bad || owner != t + 1)
        continue;
      if (in_flight || last[k] == i + 1)
        continue;
      struct hm_op w = op_at(r->seed, r->keys, pct, t, i);
      bad = inconsistent("key %" PRIu64 ": value written by thread %u at "
                         "operation %" PRIu64 ", which %s",
                         k, t, i,
                         i > done                    ? "it has not reached"
                         : !(w.update && w.key == k) ? "is not an update of "
                                                       "this key"
                                                     : "a later completed "
                                                       "update replaced");
    }
  }
  for (uint64_t k = 0; k < r->keys && !bad; k++)
    if (stamp[k] && ((stamp[k] >> HM_STAMP_SHIFT) > nt ||
                     (stamp[k] >> HM_STAMP_SHIFT) == 0))
      bad = inconsistent("key %" PRIu64 ": value stamp %#" PRIx64
                         " names no thread of the run",
                         k, stamp[k]);
    else if (!stamp[k] && updated[k])
      bad = inconsistent("key %" PRIu64 ": still the loaded value after a "
                         "completed update",
                         k);
  free(last);
  free(updated);
  return bad;
}

static int cmd_check(const char *path) {
  pmkit_pool_opts po = {.layout = HM_LAYOUT};
  pmkit_pool_info info;
  int err = pmkit_pool_open(path, &po, &pool); /* opening is the recovery */
  if (err == PMKIT_E_NOENT || err == PMKIT_E_BUSY || err == PMKIT_E_IO ||
      err == PMKIT_E_ADDRINUSE || err == PMKIT_E_FOREIGN) {
    fprintf(stderr, "bench_hashmap: %s: %s\n", pmkit_strerror(err),
            pmkit_errormsg());
    return 2; /* not a verdict on the pool's content */
  }
  if (err)
    return inconsistent("%s: %s", pmkit_strerror(err), pmkit_errormsg());
  int rc = 1;
  uint64_t *stamp = NULL, *buf = NULL, nodes = 0;
  uint8_t *present = NULL;
  if (pmkit_pool_check(pool)) {
    inconsistent("pool metadata: %s", pmkit_errormsg());
    goto out;
  }
  if (pmkit_pool_stat(pool, &info)) {
    inconsistent("pmkit_pool_stat: %s", pmkit_errormsg());
    goto out;
  }
  if (!info.root_off) { /* a crash before the root object was made */
    printf("consistent: empty (no root object yet)\n");
    rc = 0;
    goto out;
  }
  if (info.root_size < sizeof *root ||
      pmkit_root(pool, sizeof *root, (void **)&root)) {
    inconsistent("the root object is not a hash map's");
    goto out;
  }
  struct hm_root *r = root;
  if (r->magic != HM_MAGIC) {
    /* Before the magic only the parameters may have been written. */
    const char *rest = (const char *)r->slot;
    size_t n = info.root_size - offsetof(struct hm_root, slot);
    if (r->magic || r->loaded || rest[0] || memcmp(rest, rest + 1, n - 1)) {
      inconsistent("bad root magic, or data without it");
      goto out;
    }
    printf("consistent: empty (the map was not set up yet)\n");
    rc = 0;
    goto out;
  }
  if (!r->keys || r->keys > HM_MAX_KEYS || !r->threads ||
      r->threads > HM_MAX_THREADS || r->value_size < HM_VALUE_MIN ||
      r->value_size > HM_VALUE_MAX || r->value_size % 8 || r->read_pct > 100 ||
      !r->nbuckets || (r->nbuckets & (r->nbuckets - 1)) ||
      info.root_size < sizeof *r + r->nbuckets * sizeof r->bucket[0] ||
      r->loaded > r->keys) {
    inconsistent("root parameters out of range");
    goto out;
  }
  bucket_mask = r->nbuckets - 1;
  stamp = calloc(r->keys, sizeof *stamp);
  present = calloc(r->keys, 1);
  buf = malloc(r->value_size);
  if (!stamp || !present || !buf)
    die("out of memory");
  if (check_chains(stamp, present, buf, &nodes) ||
      check_content(stamp, present))
    goto out;
  printf("consistent: keys=%" PRIu64 " loaded=%" PRIu64 " threads=%" PRIu64
         " ops_done=",
         nodes, r->loaded, r->threads);
  for (unsigned t = 0; t < r->threads; t++)
    printf("%s%" PRIu64, t ? "," : "", r->slot[t].ops_done);
  putchar('\n');
  rc = 0;
out:
  free(stamp);
  free(present);
  free(buf);
  pmkit_pool_close(pool);
  return rc;
}

/* ---- set-up ----------------------------------------------------------------
 */

static uint64_t pow2_at_least(uint64_t n) {
  uint64_t p = 1;
  while (p < n)
    p <<= 1;
  return p;
}

/* Nodes and values with allocator rounding and slack, the root, and room
 * for thread caches and the blocks updates hold briefly. */
static uint64_t auto_pool_mib(uint64_t keys, uint64_t nbuckets) {
  uint64_t v = opt.value_size,
           vb = v <= 1024 ? (v + 15) & ~15ull : (v + 127) & ~127ull;
  double bytes = (double)keys * (double)(32 + vb) * 1.5 +
                 (double)(sizeof(struct hm_root) + nbuckets * 8) +
                 (double)opt.threads * 4 * 65536;
  return (uint64_t)(bytes / (1 << 20)) + 16;
}

static void setup_root(uint64_t keys) {
  uint64_t nbuckets = pow2_at_least(keys);
  pmkit_pool_info info;
  if (pmkit_pool_stat(pool, &info))
    die("pmkit_pool_stat: %s", pmkit_errormsg());
  size_t want = sizeof *root + nbuckets * sizeof root->bucket[0];
  /* Only large blocks are 64-byte aligned, as hm_slot's _Alignas assumes. */
  if (want <= PMKIT_ALLOC_MAX_SMALL)
    want = PMKIT_ALLOC_MAX_SMALL + 1;
  if (info.root_off && info.root_size < want)
    die("%s holds a map of another size; use a fresh pool", pool_path);
  if (pmkit_root(pool, want, (void **)&root))
    die("pmkit_root: %s", pmkit_errormsg());
  struct hm_root *r = root;
  if (r->magic == HM_MAGIC) {
    if (r->seed != opt.seed || r->keys != keys ||
        r->value_size != opt.value_size || r->read_pct != opt.read_pct ||
        r->threads != opt.threads || r->nbuckets != nbuckets)
      die("%s holds a run with other parameters (seed %" PRIu64 ", %" PRIu64
          " keys, %" PRIu64 " B values, %" PRIu64 "%% reads, %" PRIu64
          " threads); use a fresh pool",
          pool_path, r->seed, r->keys, r->value_size, r->read_pct, r->threads);
  } else {
    r->seed = opt.seed;
    r->keys = keys;
    r->value_size = opt.value_size;
    r->read_pct = opt.read_pct;
    r->threads = opt.threads;
    r->nbuckets = nbuckets;
    PM_FLUSH(r, sizeof *r);
    PM_FENCE(); /* the parameters before the magic that vouches for them */
    r->magic = HM_MAGIC;
    PM_PERSIST(&r->magic, sizeof r->magic);
  }
  bucket_mask = nbuckets - 1;
}

static void open_pool(uint64_t keys) {
  pmkit_pool_opts po = {.layout = HM_LAYOUT};
  struct stat st;
  if (opt.pool) {
    snprintf(pool_path, sizeof pool_path, "%s", opt.pool);
  } else {
    snprintf(pool_path, sizeof pool_path, "%s/bench_hashmap.%ld.pool",
             opt.pool_dir, (long)getpid());
    unlink(pool_path); /* a stale file of a killed run with our pid */
    remove_pool = !opt.keep;
  }
  int err;
  if (opt.pool && stat(pool_path, &st) == 0) {
    err = pmkit_pool_open(pool_path, &po, &pool);
  } else {
    uint64_t mib =
        opt.pool_mib ? opt.pool_mib : auto_pool_mib(keys, pow2_at_least(keys));
    err = pmkit_pool_create(pool_path, (size_t)mib << 20, &po, &pool);
  }
  if (err)
    die("%s: %s: %s", pool_path, pmkit_strerror(err), pmkit_errormsg());
}

/* ---- command line ------------------------------------------------------- */

static const char usage_text[] =
    "usage: bench_hashmap [--threads T] [--keys N] [--scale F]\n"
    "         [--value-size B] [--read-pct P] [--seed S]\n"
    "         [--seconds D [--warmup W] | --ops N]\n"
    "         [--pool PATH | --pool-dir DIR [--keep]] [--pool-mib M]\n"
    "       bench_hashmap --check POOL\n"
    "       bench_hashmap --info\n"
    "--keys (default 1000000) and --ops are multiplied by --scale (default\n"
    "1). Without --ops, runs --seconds (default 1) after a --warmup (0.2).\n"
    "--pool PATH creates the pool or continues the run it holds and keeps\n"
    "it; --pool-dir DIR (default /dev/shm) makes a fresh one there, removed\n"
    "at exit unless --keep. --pool-mib defaults to a size fitted to the\n"
    "keys. --check validates a pool (exit 0 consistent, 1 not, 2 if it\n"
    "cannot be opened).\n";

static _Noreturn void usage(int code) {
  fputs(usage_text, code ? stderr : stdout);
  exit(code);
}

static uint64_t parse_u64(const char *name, const char *v, uint64_t lo,
                          uint64_t hi) {
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || *end || *v < '0' || *v > '9' || x < lo || x > hi) {
    fprintf(stderr,
            "bench_hashmap: %s %s: expected an integer in [%" PRIu64
            ", %" PRIu64 "]\n",
            name, v, lo, hi);
    exit(2);
  }
  return x;
}

static double parse_d(const char *name, const char *v, double lo, double hi) {
  char *end;
  double x = strtod(v, &end);
  if (*end || !*v || !(x >= lo && x <= hi)) {
    fprintf(stderr, "bench_hashmap: %s %s: expected a number in [%g, %g]\n",
            name, v, lo, hi);
    exit(2);
  }
  return x;
}

static void print_info(void) {
  printf("{\"pmkit_domain\": \"%s\", \"pmkit_flush\": \"%s\", "
         "\"persistence\": \"%s\", \"build\": \"%s\", \"tracing\": %d}\n",
         pmkit_domain() == PMKIT_DOMAIN_EADR ? "eadr" : "adr",
         pmkit_flush_name(pmkit_flush_kind()), HM_PERSISTENCE, HM_BUILD,
         pmkit_tracing());
  exit(0);
}

static void parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help"))
      usage(0);
    if (!strcmp(a, "--info") && argc == 2)
      print_info();
    if (!strcmp(a, "--keep")) {
      opt.keep = 1;
      continue;
    }
    if (i + 1 >= argc)
      usage(2);
    const char *v = argv[++i];
    if (!strcmp(a, "--check") && argc == 3)
      exit(cmd_check(v));
    else if (!strcmp(a, "--threads"))
      opt.threads = (unsigned)parse_u64(a, v, 1, HM_MAX_THREADS);
    else if (!strcmp(a, "--keys"))
      opt.keys = parse_u64(a, v, 1, HM_MAX_KEYS);
    else if (!strcmp(a, "--ops"))
      opt.ops = parse_u64(a, v, 1, 1ull << 40);
    else if (!strcmp(a, "--scale"))
      opt.scale = parse_d(a, v, 1e-9, 1e6);
    else if (!strcmp(a, "--value-size"))
      opt.value_size = parse_u64(a, v, HM_VALUE_MIN, HM_VALUE_MAX);
    else if (!strcmp(a, "--read-pct"))
      opt.read_pct = (unsigned)parse_u64(a, v, 0, 100);
    else if (!strcmp(a, "--seed"))
      opt.seed = parse_u64(a, v, 0, UINT64_MAX);
    else if (!strcmp(a, "--seconds"))
      opt.seconds = parse_d(a, v, 0, 3600);
    else if (!strcmp(a, "--warmup"))
      opt.warmup = parse_d(a, v, 0, 3600);
    else if (!strcmp(a, "--pool"))
      opt.pool = v;
    else if (!strcmp(a, "--pool-dir"))
      opt.pool_dir = v;
    else if (!strcmp(a, "--pool-mib"))
      opt.pool_mib = parse_u64(a, v, 8, 1ull << 20);
    else
      usage(2);
  }
  if (opt.value_size % 8) {
    fprintf(stderr, "bench_hashmap: --value-size must be a multiple of 8\n");
    exit(2);
  }
}

static uint64_t scaled(uint64_t n, uint64_t hi) {
  double x = round((double)n * opt.scale);
  return x < 1 ? 1 : x > (double)hi ? hi : (uint64_t)x;
}

static uint64_t total_ops(void) {
  uint64_t n = 0;
  for (unsigned t = 0; t < opt.threads; t++)
    n += atomic_load_explicit(&workers[t].ops, memory_order_relaxed);
  return n;
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  uint64_t keys = scaled(opt.keys, HM_MAX_KEYS);
  uint64_t ops = opt.ops ? scaled(opt.ops, 1ull << 40) : 0;
  opt.ops = ops;
  open_pool(keys);
  setup_root(keys);
  locks = calloc(root->nbuckets, sizeof *locks);
  if (!locks)
    die("out of memory for %" PRIu64 " bucket locks", root->nbuckets);

  double l0 = now();
  int err = load();
  if (err)
    die("load: %s", pmkit_errormsg());
  double load_s = now() - l0;

  for (unsigned t = 0; t < opt.threads; t++) {
    struct worker *w = &workers[t];
    w->id = t;
    /* --ops: thread t's share of the total, counted from operation 0 of
     * its stream, so a continued run stops where an uninterrupted one
     * would. */
    w->target = ops / opt.threads + (t < ops % opt.threads);
    w->buf = malloc(opt.value_size);
    if (!w->buf)
      die("out of memory");
    if (pthread_create(&w->tid, NULL, worker_main, w))
      die("pthread_create failed");
  }
  double t0 = now(), t1 = t0;
  uint64_t n0 = 0, n1 = 0;
  atomic_store_explicit(&start_flag, 1, memory_order_release);
  if (!ops) {
    sleep_s(opt.warmup);
    n0 = total_ops();
    t0 = now();
    sleep_s(opt.seconds);
    n1 = total_ops();
    t1 = now();
    atomic_store(&stop_flag, 1);
  }
  int failed = 0;
  uint64_t reads = 0, updates = 0;
  for (unsigned t = 0; t < opt.threads; t++) {
    pthread_join(workers[t].tid, NULL);
    failed |= workers[t].failed;
    reads += workers[t].reads;
    updates += workers[t].updates;
    free(workers[t].buf);
  }
  if (ops) {
    t1 = now();
    n1 = total_ops();
  }
  uint64_t done = 0;
  for (unsigned t = 0; t < opt.threads; t++)
    done += root->slot[t].ops_done;
  pmkit_pool_close(pool);
  free(locks);
  if (remove_pool)
    unlink(pool_path);
  else if (!opt.pool)
    fprintf(stderr, "bench_hashmap: kept the pool %s\n", pool_path);
  if (failed)
    return 1;

  double secs = t1 - t0;
  printf("{\"benchmark\": \"hashmap\", \"persistence\": \"%s\", "
         "\"build\": \"%s\", \"tracing\": %d, \"threads\": %u, "
         "\"keys\": %" PRIu64 ", \"value_size\": %" PRIu64
         ", \"read_pct\": %u, \"seed\": %" PRIu64 ", \"mode\": \"%s\", "
         "\"ops\": %" PRIu64 ", \"seconds\": %.6f, \"ops_per_sec\": %.1f, "
         "\"reads\": %" PRIu64 ", \"updates\": %" PRIu64
         ", \"ops_done\": %" PRIu64 ", \"load_seconds\": %.3f, "
         "\"domain\": \"%s\", \"flush\": \"%s\"}\n",
         HM_PERSISTENCE, HM_BUILD, pmkit_tracing(), opt.threads, keys,
         opt.value_size, opt.read_pct, opt.seed, ops ? "ops" : "timed", n1 - n0,
         secs, secs > 0 ? (double)(n1 - n0) / secs : 0.0, reads, updates, done,
         load_s, pmkit_domain() == PMKIT_DOMAIN_EADR ? "eadr" : "adr",
         pmkit_flush_name(pmkit_flush_kind()));
  return 0;
}
