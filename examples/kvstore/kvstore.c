/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvstore.c -- a persistent key-value store on a pmkit pool, written by hand
 * with explicit flushes and fences: a chained hash table whose bucket array
 * lives in the root object. Every update takes effect through one 8-byte
 * pointer store, issued only once everything it publishes is durable, so
 * the store is crash-consistent with volatile caches (ADR) and, with less
 * to go wrong, under eADR. Besides put/get/del/scan it runs a deterministic
 * workload (`run`) and checks a pool after a crash (`--check`) by replaying
 * that workload in DRAM. Built as examples/kvstore/kvstore in the build
 * tree; kvstore-buggy is the same source with -DKV_BUG_PUBLISH_EARLY, which
 * links a new node before writing its value. Try:
 *   kvstore create /dev/shm/kv.pool && kvstore put /dev/shm/kv.pool a 1
 *   PMKIT_CRASH_AT=700 kvstore run /dev/shm/kv.pool --ops 300 --seed 1
 *   kvstore --check /dev/shm/kv.pool
 * crashtest.sh next to this file runs a whole crash campaign under eADR;
 * exploretest.sh explores the crash images of volatile caches (ADR) with
 * kvstore-traced, and kvstore-noflush-traced (-DKV_BUG_NO_FLUSH: a new
 * node is not flushed before it is linked) must fail there.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmkit/pmkit.h"

#define KV_LAYOUT "pmkit-kvstore"
#define KV_NBUCKETS 1024
#define KV_KEY_MAX 255
#define KV_VAL_MAX 4096
#define KV_RUN_VAL_MAX 200     /* workload values are 1..200 bytes */
#define KV_RUN_KEYS_MAX 100000 /* workload keys are "k%05u" */

struct kv_node {
  struct kv_node *next;
  uint32_t klen, vlen;
  char data[]; /* the key, then the value; no terminating NULs */
};

/* The root object. Zeroed memory is an empty store with an unlocked lock. */
struct kv_root {
  pmkit_mutex lock;
  uint64_t count; /* nodes in the table; exact whenever `dirty` is 0 */
  uint64_t dirty; /* 1 while an update that changes `count` is in flight */
  uint64_t run_seed, run_keys;
  uint64_t run_set;  /* run_seed and run_keys describe this pool's workload */
  uint64_t ops_done; /* workload operations completed */
  struct kv_node *bucket[KV_NBUCKETS];
};

struct kv {
  pmkit_pool *pool;
  struct kv_root *root;
};

/*
 * Why a crash leaves the store in the state after ops_done or ops_done+1
 * operations, and nothing else. A crash point is any fence or allocator
 * store; under ADR any store may also reach PM early (a cache eviction), so
 * the argument only uses "store X is issued after store Y is durable".
 *  - Operation i changes the chains with exactly one 8-byte store to a link
 *    (a bucket slot or a `next` field). The node it publishes is written,
 *    flushed and fenced first, so a reachable node is always complete.
 *  - ops_done = i+1 is stored after that link store is durable, and
 *    operation i+1 starts after ops_done = i+1 is durable. So whatever
 *    ops_done a crash leaves, operations before it are all in the chains,
 *    the one at ops_done may be, and none after it is.
 *  - `count` cannot change in the same store as a link, so a put of a new
 *    key or a delete first makes dirty = 1 durable, then commits, then
 *    persists count and only then clears dirty. Opening the pool recounts
 *    if dirty is set (kv_recover): count is exact after every open.
 *  - A replaced or deleted node is freed only after its unlink is durable:
 *    a crash may leak it (pmkit pool gc reclaims it), never leave a freed
 *    block reachable.
 */

/* ---- the table ----------------------------------------------------------- */

static uint32_t kv_hash(const char *key, size_t klen) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < klen; i++)
    h = (h ^ (unsigned char)key[i]) * 16777619u;
  return h % KV_NBUCKETS;
}

/* The link that points at key's node, or NULL if the key is absent. */
static struct kv_node **kv_find(struct kv_root *r, const char *key,
                                size_t klen) {
  struct kv_node **link = &r->bucket[kv_hash(key, klen)];
  for (; *link; link = &(*link)->next)
    if ((*link)->klen == klen && !memcmp((*link)->data, key, klen))
      return link;
  return NULL;
}

/* Insert or overwrite. Caller holds the root lock. 0 or a PMKIT_E_*. */
static int kv_put(struct kv *kv, const char *key, size_t klen, const char *val,
                  size_t vlen) {
  struct kv_root *r = kv->root;
  struct kv_node **link = kv_find(r, key, klen);
  struct kv_node *old = link ? *link : NULL, *n;
  size_t size = sizeof *n + klen + vlen;
  int err = pmkit_alloc(kv->pool, size, (void **)&n);
  if (err)
    return err;
  if (!old) /* a new key goes first in its bucket */
    link = &r->bucket[kv_hash(key, klen)];
  n->next = old ? old->next : *link;
  n->klen = (uint32_t)klen;
  n->vlen = (uint32_t)vlen;
  memcpy(n->data, key, klen);
#ifndef KV_BUG_PUBLISH_EARLY
  memcpy(n->data + klen, val, vlen);
#endif
  if (!old) {
    r->dirty = 1;
    pmkit_flush(&r->dirty, sizeof r->dirty);
  }
#ifndef KV_BUG_NO_FLUSH /* the explorer's must-fail case: node not flushed */
  pmkit_flush(n, size);
#endif
  pmkit_fence(); /* node, its allocation and dirty: durable before the link */
  *link = n;
  pmkit_persist(link, sizeof *link); /* the commit point */
#ifdef KV_BUG_PUBLISH_EARLY
  /* The deliberate bug: a crash before this leaves a reachable node whose
   * value was never written. */
  memcpy(n->data + klen, val, vlen);
  pmkit_persist(n->data + klen, vlen);
#endif
  if (old)
    return pmkit_free(kv->pool, old);
  r->count++;
  pmkit_persist(&r->count, sizeof r->count); /* before dirty says it is exact */
  r->dirty = 0;
  pmkit_persist(&r->dirty, sizeof r->dirty);
  return 0;
}

/* Delete. Caller holds the root lock. 0, 1 if absent, or a PMKIT_E_*. */
static int kv_del(struct kv *kv, const char *key, size_t klen) {
  struct kv_root *r = kv->root;
  struct kv_node **link = kv_find(r, key, klen);
  if (!link)
    return 1;
  struct kv_node *victim = *link;
  r->dirty = 1;
  pmkit_persist(&r->dirty, sizeof r->dirty);
  *link = victim->next;
  pmkit_persist(link, sizeof *link); /* the commit point */
  int err = pmkit_free(kv->pool, victim);
  r->count--;
  pmkit_persist(&r->count, sizeof r->count);
  r->dirty = 0;
  pmkit_persist(&r->dirty, sizeof r->dirty);
  return err;
}

/* Walk every chain without trusting it: each node must be a live block
 * large enough for its lengths, in the bucket its key hashes to, with a key
 * not seen earlier in the chain, and the chain must end. Counts the nodes
 * into *nodes. 0, or -1 with the first problem in `why`. */
static int kv_validate(struct kv *kv, uint64_t *nodes, char *why, size_t wn) {
  *nodes = 0;
  for (uint32_t b = 0; b < KV_NBUCKETS; b++) {
    /* Brent's cycle detection: `mark` moves to the current node whenever
     * the step count reaches a power of two. */
    const struct kv_node *mark = NULL;
    uint64_t steps = 0, power = 1;
    for (const struct kv_node *n = kv->root->bucket[b]; n; n = n->next) {
      size_t usable = pmkit_usable_size(kv->pool, n);
      if (usable < sizeof *n) {
        snprintf(why, wn, "bucket %u: %p is not an allocated node", b,
                 (const void *)n);
        return -1;
      }
      if (n->klen == 0 || n->klen > KV_KEY_MAX || n->vlen > KV_VAL_MAX ||
          sizeof *n + n->klen + n->vlen > usable) {
        snprintf(why, wn,
                 "bucket %u: node with key length %u, value length "
                 "%u in a %zu-byte block",
                 b, n->klen, n->vlen, usable);
        return -1;
      }
      if (kv_hash(n->data, n->klen) != b) {
        snprintf(why, wn, "key \"%.*s\" in bucket %u, not its own", n->klen,
                 n->data, b);
        return -1;
      }
      if (n == mark) {
        snprintf(why, wn, "bucket %u: the chain has a cycle", b);
        return -1;
      }
      for (const struct kv_node *m = kv->root->bucket[b]; m != n; m = m->next)
        if (m->klen == n->klen && !memcmp(m->data, n->data, n->klen)) {
          snprintf(why, wn, "key \"%.*s\" appears twice", n->klen, n->data);
          return -1;
        }
      if (++steps == power) {
        mark = n;
        power *= 2;
        steps = 0;
      }
      ++*nodes;
    }
  }
  return 0;
}

/* The only recovery the store needs: chains are always well formed, but
 * count is stale if a crash hit an update that changes it. */
static int kv_recover(struct kv *kv, char *why, size_t wn) {
  struct kv_root *r = kv->root;
  uint64_t nodes;
  if (!r->dirty)
    return 0;
  if (kv_validate(kv, &nodes, why, wn))
    return -1;
  r->count = nodes;
  pmkit_persist(&r->count, sizeof r->count);
  r->dirty = 0;
  pmkit_persist(&r->dirty, sizeof r->dirty);
  return 0;
}

/* Open a pool and recover it. 0, or -1 with the reason in `why`. */
/* Open the pool at path, or attach the image mapped at base (the explorer's
 * in-process check), and recover. */
static int kv_open_at(const char *path, void *base, struct kv *kv, char *why,
                      size_t wn) {
  pmkit_pool_opts opts = {.layout = KV_LAYOUT};
  int err = base ? pmkit_pool_attach(base, &kv->pool)
                 : pmkit_pool_open(path, &opts, &kv->pool);
  if (!err &&
      (err = pmkit_root(kv->pool, sizeof *kv->root, (void **)&kv->root)) != 0)
    pmkit_pool_close(kv->pool);
  if (err) {
    snprintf(why, wn, "%s: %s", pmkit_strerror(err), pmkit_errormsg());
    return -1;
  }
  if (kv_recover(kv, why, wn)) {
    pmkit_pool_close(kv->pool);
    return -1;
  }
  return 0;
}

static int kv_open(const char *path, struct kv *kv, char *why, size_t wn) {
  return kv_open_at(path, NULL, kv, why, wn);
}

/* ---- the workload -------------------------------------------------------- */

enum { OP_PUT, OP_DEL, OP_GET };

struct kv_op {
  int kind;
  unsigned key;  /* index: the key is "k%05u" */
  unsigned vlen; /* put: value length */
  uint64_t h;    /* put: seeds the value's bytes */
};

static uint64_t mix64(uint64_t z) { /* the splitmix64 finaliser */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Operation i of the workload (seed, keys): a pure function, so the
 * checker can replay exactly what a crashed run did. */
static struct kv_op op_at(uint64_t seed, unsigned keys, uint64_t i) {
  uint64_t h = mix64(mix64(seed) + i);
  unsigned pct = (unsigned)(h % 100);
  struct kv_op op = {.kind = pct < 50   ? OP_PUT
                             : pct < 80 ? OP_DEL
                                        : OP_GET,
                     .key = (unsigned)((h >> 20) % keys),
                     .vlen = 1 + (unsigned)(mix64(h) % KV_RUN_VAL_MAX),
                     .h = h};
  return op;
}

static void op_value(const struct kv_op *op, char *buf) {
  static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  for (unsigned i = 0; i < op->vlen; i++)
    buf[i] = abc[mix64(op->h + i + 1) % (sizeof abc - 1)];
}

/* 1 if node n holds the value that operation i of the workload puts. */
static int holds_value_of(const struct kv_node *n, uint64_t seed, unsigned keys,
                          uint64_t i) {
  struct kv_op op = op_at(seed, keys, i);
  char val[KV_RUN_VAL_MAX];
  op_value(&op, val);
  return op.kind == OP_PUT && n->vlen == op.vlen &&
         !memcmp(n->data + n->klen, val, op.vlen);
}

/* Compare the store with the workload replayed in DRAM: it must equal the
 * state after ops_done operations, except that operation ops_done (the one
 * a crash may have interrupted) may have taken effect. */
static int check_content(struct kv *kv, char *why, size_t wn) {
  struct kv_root *r = kv->root;
  uint64_t seed = r->run_seed, done = r->ops_done;
  if (r->run_keys == 0 || r->run_keys > KV_RUN_KEYS_MAX) {
    snprintf(why, wn, "recorded key count %" PRIu64 " out of range",
             r->run_keys);
    return -1;
  }
  unsigned keys = (unsigned)r->run_keys;
  int64_t *writer = malloc(keys * sizeof *writer); /* op that put it, or -1 */
  unsigned char *seen = calloc(keys, 1);
  int bad = -1;
  if (!writer || !seen) {
    snprintf(why, wn, "out of memory");
    goto out;
  }
  for (unsigned k = 0; k < keys; k++)
    writer[k] = -1;
  for (uint64_t i = 0; i < done; i++) {
    struct kv_op op = op_at(seed, keys, i);
    if (op.kind != OP_GET)
      writer[op.key] = op.kind == OP_PUT ? (int64_t)i : -1;
  }
  struct kv_op next = op_at(seed, keys, done);
  for (uint32_t b = 0; b < KV_NBUCKETS; b++)
    for (const struct kv_node *n = r->bucket[b]; n; n = n->next) {
      unsigned k = 0;
      int ok = n->klen == 6 && n->data[0] == 'k';
      for (int d = 1; ok && d < 6; d++) {
        ok = n->data[d] >= '0' && n->data[d] <= '9';
        k = k * 10 + (unsigned)(n->data[d] - '0');
      }
      if (!ok || k >= keys) {
        snprintf(why, wn, "key \"%.*s\" is not one of the workload's", n->klen,
                 n->data);
        goto out;
      }
      seen[k] = 1;
      if (writer[k] >= 0 && holds_value_of(n, seed, keys, (uint64_t)writer[k]))
        continue;
      if (k == next.key && holds_value_of(n, seed, keys, done))
        continue; /* operation ops_done took effect */
      snprintf(why, wn,
               "key k%05u: value fits neither %" PRIu64 " nor %" PRIu64
               " operations",
               k, done, done + 1);
      goto out;
    }
  for (unsigned k = 0; k < keys; k++)
    if (writer[k] >= 0 && !seen[k] && !(k == next.key && next.kind == OP_DEL)) {
      snprintf(why, wn, "key k%05u is missing after %" PRIu64 " operations", k,
               done);
      goto out;
    }
  bad = 0;
out:
  free(writer);
  free(seen);
  return bad;
}

/* ---- commands --------------------------------------------------------------
 */

static int fail(const char *what) {
  fprintf(stderr, "kvstore: %s\n", what);
  return 2;
}

static int fail_pm(const char *what, int err) {
  fprintf(stderr, "kvstore: %s: %s: %s\n", what, pmkit_strerror(err),
          pmkit_errormsg());
  return 2;
}

static int cmd_create(const char *path, uint64_t mib) {
  pmkit_pool_opts opts = {.layout = KV_LAYOUT};
  pmkit_pool *pool;
  void *root;
  int err = pmkit_pool_create(path, (size_t)mib << 20, &opts, &pool);
  if (err)
    return fail_pm(path, err);
  err = pmkit_root(pool, sizeof(struct kv_root), &root);
  pmkit_pool_close(pool);
  return err ? fail_pm("root object", err) : 0;
}

/* put, get, del: one command on one key. */
static int cmd_key(const char *cmd, const char *path, const char *key,
                   const char *val) {
  struct kv kv;
  char why[256];
  size_t klen = strlen(key), vlen = val ? strlen(val) : 0;
  if (klen == 0 || klen > KV_KEY_MAX || vlen > KV_VAL_MAX)
    return fail("key must be 1..255 bytes, value at most 4096");
  if (kv_open(path, &kv, why, sizeof why))
    return fail(why);
  int rc = 0;
  pmkit_mutex_lock(&kv.root->lock);
  if (!strcmp(cmd, "put")) {
    int err = kv_put(&kv, key, klen, val, vlen);
    if (err)
      rc = fail_pm("put", err);
  } else if (!strcmp(cmd, "del")) {
    rc = kv_del(&kv, key, klen);
    if (rc < 0)
      rc = fail_pm("del", rc);
  } else {
    struct kv_node **link = kv_find(kv.root, key, klen);
    if (link) {
      fwrite((*link)->data + klen, 1, (*link)->vlen, stdout);
      putchar('\n');
    }
    rc = !link;
  }
  pmkit_mutex_unlock(&kv.root->lock);
  pmkit_pool_close(kv.pool);
  return rc;
}

static int by_key(const void *a, const void *b) {
  const struct kv_node *x = *(struct kv_node *const *)a;
  const struct kv_node *y = *(struct kv_node *const *)b;
  int c = memcmp(x->data, y->data, x->klen < y->klen ? x->klen : y->klen);
  return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

static int cmd_scan(const char *path, const char *prefix) {
  struct kv kv;
  char why[256];
  size_t plen = prefix ? strlen(prefix) : 0, n = 0;
  if (kv_open(path, &kv, why, sizeof why))
    return fail(why);
  pmkit_mutex_lock(&kv.root->lock);
  struct kv_node **all = malloc((kv.root->count + 1) * sizeof *all);
  for (uint32_t b = 0; all && b < KV_NBUCKETS; b++)
    for (struct kv_node *p = kv.root->bucket[b]; p && n < kv.root->count;
         p = p->next)
      if (p->klen >= plen && !memcmp(p->data, prefix, plen))
        all[n++] = p;
  if (all) {
    qsort(all, n, sizeof *all, by_key);
    for (size_t i = 0; i < n; i++)
      printf("%.*s=%.*s\n", all[i]->klen, all[i]->data, all[i]->vlen,
             all[i]->data + all[i]->klen);
  }
  pmkit_mutex_unlock(&kv.root->lock);
  free(all);
  pmkit_pool_close(kv.pool);
  return all ? 0 : fail("out of memory");
}

static int cmd_run(const char *path, uint64_t ops, uint64_t seed, uint64_t keys,
                   int quiet) {
  struct kv kv;
  char why[256], key[16], val[KV_RUN_VAL_MAX];
  if (kv_open(path, &kv, why, sizeof why))
    return fail(why);
  struct kv_root *r = kv.root;
  pmkit_mutex_lock(&r->lock);
  int rc = 0;
  if (r->run_set && (r->run_seed != seed || r->run_keys != keys)) {
    snprintf(why, sizeof why,
             "%s holds a run with --seed %" PRIu64 " --keys %" PRIu64
             "; use a fresh pool",
             path, r->run_seed, r->run_keys);
    rc = fail(why);
  } else if (!r->run_set && r->count) {
    rc = fail("the store is not empty; run a workload on a fresh pool");
  } else if (!r->run_set) {
    r->run_seed = seed;
    r->run_keys = keys;
    pmkit_flush(&r->run_seed, sizeof r->run_seed);
    pmkit_flush(&r->run_keys, sizeof r->run_keys);
    pmkit_fence(); /* the workload's parameters before the flag */
    r->run_set = 1;
    pmkit_persist(&r->run_set, sizeof r->run_set);
  }
  pmkit_mutex_unlock(&r->lock);
  uint64_t start = r->ops_done;
  for (uint64_t i = start; rc == 0 && i < ops; i++) {
    struct kv_op op = op_at(seed, (unsigned)keys, i);
    snprintf(key, sizeof key, "k%05u", op.key);
    pmkit_mutex_lock(&r->lock);
    int err = 0;
    if (op.kind == OP_PUT) {
      op_value(&op, val);
      pmkit_mark_begin("put"); /* names crash points in `pmkit explore` */
      err = kv_put(&kv, key, 6, val, op.vlen);
      pmkit_mark_end("put");
    } else if (op.kind == OP_DEL) {
      pmkit_mark_begin("del");
      err = kv_del(&kv, key, 6);
      pmkit_mark_end("del");
    } else {
      kv_find(r, key, 6);
    }
    if (err < 0) {
      rc = fail_pm("run", err);
    } else {
      r->ops_done = i + 1; /* only once operation i is durable */
      pmkit_persist(&r->ops_done, sizeof r->ops_done);
    }
    pmkit_mutex_unlock(&r->lock);
  }
  if (rc == 0 && !quiet)
    printf("ran %" PRIu64 " ops, ops_done=%" PRIu64 "\n", r->ops_done - start,
           r->ops_done);
  pmkit_pool_close(kv.pool);
  return rc;
}

static int inconsistent(const char *why) {
  printf("INCONSISTENT: %s\n", why);
  return 1;
}

static int check_store(const char *path, void *base) {
  struct kv kv;
  char why[256];
  uint64_t nodes;
  if (kv_open_at(path, base, &kv, why, sizeof why)) /* opening recovers */
    return inconsistent(why);
  int err = pmkit_pool_check(kv.pool), rc = 1;
  if (err)
    snprintf(why, sizeof why, "pool metadata: %s", pmkit_errormsg());
  else if (kv_validate(&kv, &nodes, why, sizeof why))
    ;
  else if (kv.root->count != nodes)
    snprintf(why, sizeof why,
             "count is %" PRIu64 ", the chains hold %" PRIu64 " nodes",
             kv.root->count, nodes);
  else if (kv.root->run_set && check_content(&kv, why, sizeof why))
    ;
  else
    rc = 0;
  if (rc)
    inconsistent(why);
  else
    printf("consistent: ops_done=%" PRIu64 " keys=%" PRIu64 "\n",
           kv.root->ops_done, nodes);
  pmkit_pool_close(kv.pool);
  return rc;
}

/* kvstore-check.so (-DKV_CHECK_LIB): the same check for `pmkit explore
 * --check-lib`, run on an image mapped at its base address. */
#ifdef KV_CHECK_LIB
__attribute__((visibility("default"))) int pmkit_check(void *pool_base) {
  return check_store(NULL, pool_base);
}
#else
static int cmd_check(const char *path) { return check_store(path, NULL); }

/* ---- command line ----------------------------------------------------------
 */

static const char usage[] =
    "usage: kvstore create POOL [--size MiB]\n"
    "       kvstore put POOL KEY VALUE | get POOL KEY | del POOL KEY\n"
    "       kvstore scan POOL [PREFIX]\n"
    "       kvstore run POOL --ops N --seed S [--keys K] [--quiet]\n"
    "       kvstore --check POOL\n";

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
  char *end;
  if (!s || *s < '0' || *s > '9')
    return -1;
  unsigned long long v = strtoull(s, &end, 10);
  if (*end || v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

int main(int argc, char **argv) {
  const char *cmd = argc > 1 ? argv[1] : "", *path = argc > 2 ? argv[2] : NULL;
  if (!path) {
    fputs(usage, stderr);
    return 2;
  }
  if (!strcmp(cmd, "--check") && argc == 3)
    return cmd_check(path);
  if (!strcmp(cmd, "create")) {
    uint64_t mib = 32;
    if (argc == 3 || (argc == 5 && !strcmp(argv[3], "--size") &&
                      !parse_u64(argv[4], 2, 1u << 20, &mib)))
      return cmd_create(path, mib);
  }
  if (!strcmp(cmd, "put") && argc == 5)
    return cmd_key(cmd, path, argv[3], argv[4]);
  if ((!strcmp(cmd, "get") || !strcmp(cmd, "del")) && argc == 4)
    return cmd_key(cmd, path, argv[3], NULL);
  if (!strcmp(cmd, "scan") && argc <= 4)
    return cmd_scan(path, argc == 4 ? argv[3] : "");
  if (!strcmp(cmd, "run")) {
    uint64_t ops = 0, seed = 0, keys = 1000;
    int quiet = 0, have_ops = 0, have_seed = 0, ok = 1;
    for (int i = 3; ok && i < argc; i++) {
      const char *v = i + 1 < argc ? argv[i + 1] : NULL;
      if (!strcmp(argv[i], "--quiet")) {
        quiet = 1;
        continue;
      }
      if (!strcmp(argv[i], "--ops"))
        ok = have_ops = !parse_u64(v, 0, UINT64_MAX - 1, &ops);
      else if (!strcmp(argv[i], "--seed"))
        ok = have_seed = !parse_u64(v, 0, UINT64_MAX, &seed);
      else if (!strcmp(argv[i], "--keys"))
        ok = !parse_u64(v, 1, KV_RUN_KEYS_MAX, &keys);
      else
        ok = 0;
      i++; /* the option's value */
    }
    if (ok && have_ops && have_seed)
      return cmd_run(path, ops, seed, keys, quiet);
  }
  fputs(usage, stderr);
  return 2;
}
#endif /* KV_CHECK_LIB */
