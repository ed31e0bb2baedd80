// SPDX-License-Identifier: Apache-2.0
// A uthash table (Debian's uthash-dev, unmodified) kept in a pmkit pool: the
// glue a user writes to put a volatile library's structure in persistent
// memory, and the checks the real-program tier (tests/real/realtier.py) runs on
// it in robust and clobber mode.
//
// uthash allocates through the macros uthash_malloc and uthash_free, so the
// glue sends them to the pool. Items are inserted (HASH_ADD_INT), replaced by a
// new version (HASH_REPLACE_INT, the old one freed) and deleted (HASH_DEL), in
// a sequence fixed by the seed; the root counts the operations done. No flush
// or fence is written anywhere.
//
// Robust mode orders the stores (strict persistency) but does not make an
// operation atomic, so this program's recovery (`recover_robust`) does what a
// user of robust mode writes: the application-order list (hh.next), which
// uthash links last-before-the-index on insert and unlinks first on delete, is
// the truth; the buckets are rebuilt from it; the operation that was in flight
// is rolled forward if the list shows it done. Clobber mode (-DUTPM_FASE) makes
// each operation a FASE, and pmkit_recover completes the interrupted one: the
// check then requires the table, index included, to be exactly the replay of
// `done` operations.
//
//   utpm run POOL NOPS NKEYS SEED     create POOL or resume it, run to NOPS
//   operations utpm check POOL NOPS NKEYS SEED   recover, then verify against a
//   replay (exit 1 if not) utpm bench POOL NOPS NKEYS SEED   NOPS operations on
//   a new pool, timed: one JSON line
//
// The lines between "glue begin: MODE" and "glue end" are what a user adds to
// uthash's own code for MODE (realtier.py counts them for the results); the
// rest is the application.
//
// -DUTPM_MARKS (traced builds) marks each operation "op", for `pmkit explore
// --mark op`. -DUTPM_FEW_BUCKETS hashes keys so that uthash doubles its bucket
// array after a few tens of items (its start size, 32, is fixed): the short
// runs the explorer records then include the expansion, uthash's largest
// multi-store step.
#include "realprog.h"
#include <pmkit/pmkit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef UTPM_POOL_MB
#define UTPM_POOL_MB                                                           \
  64 // the traced builds take 4: each crash image the explorer checks is a copy
#endif

// glue begin: robust clobber (uthash's allocation sent to the pool)
static pmkit_pool *pool;

static void *utpm_alloc(size_t size) {
  void *p;
  return pmkit_alloc(pool, size, &p) ? NULL : p;
}

#define uthash_malloc(sz) utpm_alloc(sz)
#define uthash_free(ptr, sz) pmkit_free(pool, ptr)
#define uthash_fatal(msg) abort()
// glue end
#ifdef UTPM_FEW_BUCKETS
#define HASH_FUNCTION(keyptr, keylen, hashv)                                   \
  ((hashv) = (unsigned)(*(const int *)(keyptr)) * 16u)
#endif
#include <uthash.h>

// -DUTPM_FASE: each operation a FASE (clobber or ssapp mode), recovered by
// pmkit_recover. -DUTPM_FASE_REMOVED: the same program with the FASE
// annotations taken out, the must-fail control of the failure-atomic modes (its
// recovery still trusts pmkit_recover).
#ifdef UTPM_FASE
// glue begin: clobber (each operation a FASE)
#define OP PMKIT_FASE
// glue end
#else
#define OP __attribute__((noinline))
#endif
#if defined(UTPM_FASE) || defined(UTPM_FASE_REMOVED)
#define UTPM_ATOMIC_OPS 1
#else
#define UTPM_ATOMIC_OPS 0
#endif

struct item {
  int key;
  uint64_t ver; // the operation that wrote it
  uint64_t val; // value(key, ver): a torn or unwritten item does not match
  UT_hash_handle hh;
};

struct root {
  uint64_t done; // operations completed
  struct item *head;
};

static uint64_t value(int key, uint64_t ver) {
  uint64_t x = ((uint64_t)key << 32) ^ (ver * 0x9E3779B97F4A7C15ull);
  x ^= x >> 29;
  return x * 0xBF58476D1CE4E5B9ull | 1;
}

static struct item *new_item(int key, uint64_t ver) {
  struct item *it = uthash_malloc(sizeof *it);
  if (!it)
    abort();
  it->key = key;
  it->ver = ver;
  it->val = value(key, ver);
  return it;
}

OP void op_insert(struct root *r, int key, uint64_t ver) {
  struct item *it = new_item(key, ver);
  HASH_ADD_INT(r->head, key, it);
  r->done = ver + 1;
}

OP void op_replace(struct root *r, int key, uint64_t ver) {
  struct item *it = new_item(key, ver), *old;
  HASH_REPLACE_INT(r->head, key, it, old);
  if (old)
    uthash_free(old, sizeof *old);
  r->done = ver + 1;
}

OP void op_delete(struct root *r, int key, uint64_t ver) {
  struct item *it;
  HASH_FIND_INT(r->head, &key, it);
  if (it) {
    HASH_DEL(r->head, it);
    uthash_free(it, sizeof *it);
  }
  r->done = ver + 1;
}

// ---- the operation sequence and its replay (DRAM)
// -------------------------------------------

enum kind { INSERT, REPLACE, DELETE };

struct op {
  enum kind kind;
  int key;
};

static uint64_t rng_next(uint64_t *s) {
  *s += 0x9E3779B97F4A7C15ull;
  uint64_t z = *s;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// model[k] = the version of key k, or -1 if absent
static long long *model;
static struct op *ops;

// The sequence: a key at random; absent keys are inserted, present ones
// replaced or deleted. Replays it into model up to (not including) `upto`, and
// fills ops[0..nops).
static void plan(uint64_t nops, int nkeys, uint64_t seed, uint64_t upto) {
  long long *cur = malloc((size_t)nkeys * sizeof *cur);
  uint64_t s = seed;
  for (int k = 0; k < nkeys; k++)
    model[k] = cur[k] = -1;
  for (uint64_t i = 0; i < nops; i++) {
    uint64_t x = rng_next(&s);
    int key = (int)(x % (uint64_t)nkeys);
    enum kind kind = cur[key] < 0 ? INSERT : (x >> 40) % 3 ? REPLACE : DELETE;
    ops[i] = (struct op){kind, key};
    cur[key] = kind == DELETE ? -1 : (long long)i;
    if (i < upto)
      model[key] = cur[key];
  }
  free(cur);
}

static void apply(struct root *r, uint64_t i) {
#ifdef UTPM_MARKS
  pmkit_mark_begin("op");
#endif
  switch (ops[i].kind) {
  case INSERT:
    op_insert(r, ops[i].key, i);
    break;
  case REPLACE:
    op_replace(r, ops[i].key, i);
    break;
  case DELETE:
    op_delete(r, ops[i].key, i);
    break;
  }
#ifdef UTPM_MARKS
  pmkit_mark_end("op");
#endif
}

// ---- checks
// ---------------------------------------------------------------------------------

static int fail(const char *what, uint64_t done, int key) {
  printf("inconsistent after %llu operations: %s (key %d)\n",
         (unsigned long long)done, what, key);
  return 1;
}

// Walk the application-order list: every item complete and unique, at most
// nkeys + 2 of them. Fills ver[k] with each key's version (-1 absent). Returns
// the number of items or -1.
static long long walk(struct root *r, int nkeys, long long *ver) {
  long long n = 0;
  for (int k = 0; k < nkeys; k++)
    ver[k] = -1;
  for (struct item *it = r->head; it; it = it->hh.next) {
    if (++n > nkeys + 2 || !pmkit_in_pool(it))
      return fail("the list runs away or leaves the pool", r->done, -1), -1;
    if (it->key < 0 || it->key >= nkeys || it->val != value(it->key, it->ver) ||
        it->ver >= r->done + 1)
      return fail("an item in the list was not written whole", r->done,
                  it->key),
             -1;
    if (ver[it->key] >= 0)
      return fail("a key is in the list twice", r->done, it->key), -1;
    ver[it->key] = (long long)it->ver;
  }
  return n;
}

static int same(const long long *a, const long long *b, int nkeys) {
  return !memcmp(a, b, (size_t)nkeys * sizeof *a);
}

// The index agrees with the list: every item found under its key, the counts
// add up.
static int check_index(struct root *r, int nkeys, const long long *ver,
                       long long n) {
  if (!r->head)
    return n ? fail("the table has no head but items", r->done, -1) : 0;
  UT_hash_table *t = r->head->hh.tbl;
  if (!pmkit_in_pool(t) || t->num_items != (unsigned)n)
    return fail("the table's item count differs from the list", r->done, -1);
  unsigned chained = 0;
  for (unsigned b = 0; b < t->num_buckets; b++)
    chained += t->buckets[b].count;
  if (chained != t->num_items)
    return fail("the buckets' counts do not add up", r->done, -1);
  for (int k = 0; k < nkeys; k++) {
    struct item *it;
    HASH_FIND_INT(r->head, &k, it);
    if ((ver[k] < 0) != !it || (it && (long long)it->ver != ver[k]))
      return fail("the index does not find what the list holds", r->done, k);
  }
  return 0;
}

// Robust mode's recovery: take the list as the truth, rebuild the buckets from
// it (the old bucket array and table are left for `pmkit pool gc`: a crash
// inside HASH_DEL of the last item frees them before the head is cleared), then
// finish the operation in flight: counted done if the list shows its effect,
// else applied again (an insert of an absent key, a delete of a present one and
// a replace are each right to repeat from the list's state; a replace cut
// between its delete and its add inserts anew). glue begin: robust (the
// recovery of a structure whose stores persist in order)
static int recover_robust(struct root *r, int nkeys, uint64_t nops,
                          long long *ver) {
  long long n = walk(r, nkeys, ver);
  if (n < 0)
    return 1;
  struct item **items = malloc((size_t)(n + 1) * sizeof *items), *it;
  long long m = 0;
  for (it = r->head; it; it = it->hh.next)
    items[m++] = it;
  r->head = NULL;
  for (long long i = 0; i < m; i++)
    HASH_ADD_INT(r->head, key, items[i]);
  free(items);
  uint64_t k = r->done;
  if (k < nops) {
    struct op o = ops[k];
    if (o.kind == DELETE ? ver[o.key] < 0 : ver[o.key] == (long long)k)
      r->done = k + 1;
    else
      apply(r, k);
  }
  return 0;
}
// glue end

static int open_pool(const char *path, int create, struct root **r) {
  int err =
      create ? pmkit_pool_create(path, (size_t)UTPM_POOL_MB << 20, NULL, &pool)
             : pmkit_pool_open(path, NULL, &pool);
  if (err || pmkit_root(pool, sizeof **r, (void **)r)) {
    fprintf(stderr, "utpm: cannot %s %s\n", create ? "create" : "open", path);
    return 2;
  }
  return 0;
}

static int check(const char *path, uint64_t nops, int nkeys, uint64_t seed) {
  struct root *r;
  if (open_pool(path, 0, &r))
    return 2;
  long long *ver = malloc((size_t)nkeys * sizeof *ver);
  int recovered = 0;
#if UTPM_ATOMIC_OPS
  if ((recovered = pmkit_recover(pool)) < 0) {
    printf("pmkit_recover failed: %s\n", pmkit_errormsg());
    return 1;
  }
#else
  if (recover_robust(r, nkeys, nops, ver))
    return 1;
#endif
  uint64_t done = r->done;
  if (done > nops)
    return fail("more operations done than run", done, -1);
  plan(nops, nkeys, seed, done);
  long long n = walk(r, nkeys, ver);
  if (n < 0)
    return 1;
  if (!same(ver, model, nkeys))
    return fail("the table is not the replay of the operations done", done, -1);
  if (check_index(r, nkeys, ver, n))
    return 1;
  printf("ok: %llu operations, %lld items, %d recovered\n",
         (unsigned long long)done, n, recovered);
  pmkit_pool_close(pool);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: utpm run|check|bench POOL NOPS NKEYS SEED\n");
    return 2;
  }
  uint64_t nops = strtoull(argv[3], NULL, 10),
           seed = strtoull(argv[5], NULL, 10);
  int nkeys = atoi(argv[4]);
  if (nkeys < 1 || nops < 1)
    return 2;
  model = malloc((size_t)nkeys * sizeof *model);
  ops = malloc(nops * sizeof *ops);
  plan(nops, nkeys, seed, 0);
  if (!strcmp(argv[1], "check"))
    return check(argv[2], nops, nkeys, seed);
  int bench = !strcmp(argv[1], "bench");
  if (!bench && strcmp(argv[1], "run"))
    return 2;
  struct root *r;
  FILE *f = fopen(argv[2], "r");
  int create = bench || !f;
  if (f)
    fclose(f);
  if (bench)
    remove(argv[2]);
  if (open_pool(argv[2], create, &r))
    return 2;
  if (!create) {
#if UTPM_ATOMIC_OPS
    if (pmkit_recover(pool) < 0) {
      fprintf(stderr, "utpm: pmkit_recover failed: %s\n", pmkit_errormsg());
      return 2;
    }
#else
    long long *ver = malloc((size_t)nkeys * sizeof *ver);
    if (recover_robust(r, nkeys, nops, ver))
      return 1;
    free(ver);
#endif
  }
#ifdef UTPM_MARKS
  // The allocator sets a chunk up for a block size the first time it is asked
  // for one: some hundred runtime writes before one fence, more images than the
  // explorer can enumerate. Asking once for each size the operations will ask
  // for, before the first, keeps that out of the operations. The blocks are
  // kept: pmkit_free leaves its write to the chunk's bitmap to be written back
  // later (a crash loses the free, a leak), and each such write doubles the
  // images of every crash point until it is.
  if (create) {
    size_t sizes[] = {
        sizeof(struct item),          sizeof(UT_hash_table),
        32 * sizeof(UT_hash_bucket),  64 * sizeof(UT_hash_bucket),
        128 * sizeof(UT_hash_bucket), 256 * sizeof(UT_hash_bucket)};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
      utpm_alloc(sizes[i]);
  }
#endif
  double t0 = real_now();
  for (uint64_t i = r->done; i < nops; i++)
    apply(r, i);
  double t = real_now() - t0;
  if (bench)
    printf("{\"ops\": %llu, \"seconds\": %.6f, \"ops_per_sec\": %.1f}\n",
           (unsigned long long)nops, t, (double)nops / t);
  pmkit_pool_close(pool);
  return 0;
}
