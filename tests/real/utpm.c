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
#ifdef UTPM_PMDK
#include <errno.h>
#include <libpmemobj.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef UTPM_POOL_MB
#define UTPM_POOL_MB                                                           \
  64 // the traced builds take 4: each crash image the explorer checks is a copy
#endif

#ifdef UTPM_PMDK
// glue begin: pmdk (uthash's allocation inside a transaction of libpmemobj)
static PMEMobjpool *pop;

static void *utpm_alloc(size_t size) {
  PMEMoid o = pmemobj_tx_alloc(size, 0);
  return OID_IS_NULL(o) ? NULL : pmemobj_direct(o);
}

#define uthash_malloc(sz) utpm_alloc(sz)
#define uthash_free(ptr, sz) pmemobj_tx_free(pmemobj_oid(ptr))
#define uthash_fatal(msg) abort()
// glue end
#define in_pool(p) (pmemobj_pool_by_ptr(p) == pop)
#else
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
#define in_pool(p) pmkit_in_pool(p)
#endif
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

#ifdef UTPM_PMDK
// Each operation is a transaction of libpmemobj, which rolls back what it
// snapshots: everything the operation may write must be added first, found
// from uthash's layout (the glue a PMDK user writes that clobber mode does
// not ask for). -DUTPM_PMDK_NO_SNAPSHOT adds only the root, the must-fail
// control of `utpm abort`.
// glue begin: pmdk (what each operation writes, snapshot before it)
static void snap(void *p, size_t n) {
  if (p && pmemobj_tx_add_range_direct(p, n))
    abort();
}

static void snap_item(void *elt) {
  if (elt)
    snap(&((struct item *)elt)->hh, sizeof(UT_hash_handle));
}

static void snapshot(struct root *r, enum kind kind, int key) {
  snap(r, sizeof *r); // done; the head (the first add, a delete of the first)
#ifndef UTPM_PMDK_NO_SNAPSHOT
  if (!r->head)
    return; // the first add makes the table: new objects need no snapshot
  UT_hash_table *t = r->head->hh.tbl;
  unsigned hv, b;
  HASH_VALUE(&key, sizeof key, hv);
  HASH_TO_BKT(hv, t->num_buckets, b);
  UT_hash_bucket *bk = &t->buckets[b];
  snap(t, sizeof *t);   // counts, tail, the bucket array's size
  snap(bk, sizeof *bk); // the key's bucket: its count and head
  snap(bk->hh_head, sizeof(UT_hash_handle)); // its hh_prev, on an add
  snap(t->tail, sizeof(UT_hash_handle));     // its next, on an add
  struct item *it;
  HASH_FIND_INT(r->head, &key, it);
  if (it) { // a delete (a replace deletes first) unlinks it from both lists,
            // writing its neighbours (not it)
    snap_item(it->hh.prev);
    snap_item(it->hh.next);
    snap(it->hh.hh_prev, sizeof(UT_hash_handle));
    snap(it->hh.hh_next, sizeof(UT_hash_handle));
  }
  // an add that brings the bucket to the threshold doubles the bucket array,
  // relinking every item's bucket chain
  if (kind != DELETE && !t->noexpand &&
      bk->count + 1 >= (bk->expand_mult + 1U) * HASH_BKT_CAPACITY_THRESH)
    for (struct item *x = r->head; x; x = x->hh.next)
      snap_item(x);
#endif
}
// glue end
#endif

static void apply_op(struct root *r, uint64_t i) {
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
}

static void apply(struct root *r, uint64_t i) {
#ifdef UTPM_MARKS
  pmkit_mark_begin("op");
#endif
#ifdef UTPM_PMDK
  // glue begin: pmdk (each operation a transaction)
  TX_BEGIN(pop) {
    snapshot(r, ops[i].kind, ops[i].key);
    apply_op(r, i);
  }
  TX_ONABORT { abort(); }
  TX_END
  // glue end
#else
  apply_op(r, i);
#endif
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
// nkeys + 2 of them, and (back) each one's back link its predecessor: not in
// robust mode's recovery, which takes the forward links alone for the truth and
// rebuilds the rest. Fills ver[k] with each key's version (-1 absent). Returns
// the number of items or -1.
static long long walk(struct root *r, int nkeys, long long *ver, int back) {
  long long n = 0;
  for (int k = 0; k < nkeys; k++)
    ver[k] = -1;
  struct item *prev = NULL;
  for (struct item *it = r->head; it; prev = it, it = it->hh.next) {
    if (++n > nkeys + 2 || !in_pool(it))
      return fail("the list runs away or leaves the pool", r->done, -1), -1;
    if (back && it->hh.prev != prev)
      return fail("an item's back link is not its predecessor", r->done,
                  it->key),
             -1;
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
  if (!in_pool(t) || t->num_items != (unsigned)n)
    return fail("the table's item count differs from the list", r->done, -1);
  if (!in_pool(t->buckets) || !t->num_buckets ||
      t->num_buckets & (t->num_buckets - 1))
    return fail("the bucket array is not one", r->done, -1);
  unsigned chained = 0;
  for (unsigned b = 0; b < t->num_buckets; b++) {
    unsigned len = 0; // walked, bounded: a damaged chain may be a cycle
    UT_hash_handle *back = NULL;
    for (UT_hash_handle *h = t->buckets[b].hh_head; h; back = h, h = h->hh_next)
      if (++len > t->num_items || !in_pool(h) || h->hh_prev != back ||
          h->tbl != t)
        return fail("a bucket's chain runs away, leaves the pool or has a "
                    "wrong back link",
                    r->done, -1);
    if (len != t->buckets[b].count)
      return fail("a bucket's count differs from its chain", r->done, -1);
    chained += len;
  }
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
  long long n = walk(r, nkeys, ver, 0);
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

#ifdef UTPM_PMDK
// The PMDK variant has two commands. `bench` is the throughput comparison.
// `abort` runs each operation as a transaction aborted at its end, checks that
// the table is then exactly the replay of the operations before it, and runs
// the operation again, committed: what libpmemobj's recovery makes of a crash
// inside any operation, since it rolls back the same undo log. A word an
// operation writes without a snapshot stays changed, and the check sees it.
static int open_pool(const char *path, int create, struct root **r) {
  (void)create;
  remove(path);
  pop = pmemobj_create(path, "utpm", (size_t)UTPM_POOL_MB << 20, 0600);
  if (!pop) {
    fprintf(stderr, "utpm: cannot create %s: %s\n", path, pmemobj_errormsg());
    return 2;
  }
  *r = pmemobj_direct(pmemobj_root(pop, sizeof **r));
  return 0;
}

// The table is exactly the replay of the first i operations (n: its items).
static int replayed(struct root *r, uint64_t i, uint64_t nops, int nkeys,
                    uint64_t seed, long long *ver, long long *n) {
  plan(nops, nkeys, seed, i);
  if (r->done != i)
    return fail("the count of operations done is not the replay's", i, -1);
  if ((*n = walk(r, nkeys, ver, 1)) < 0)
    return 1;
  if (!same(ver, model, nkeys))
    return fail("the table is not the replay of the operations done", i, -1);
  return check_index(r, nkeys, ver, *n);
}

static int abort_check(const char *path, uint64_t nops, int nkeys,
                       uint64_t seed) {
  struct root *r;
  if (open_pool(path, 1, &r))
    return 2;
  long long *ver = malloc((size_t)nkeys * sizeof *ver), n = 0;
  for (uint64_t i = 0; i < nops; i++) {
    int aborted = 0;
    TX_BEGIN(pop) {
      snapshot(r, ops[i].kind, ops[i].key);
      apply_op(r, i);
      pmemobj_tx_abort(ECANCELED);
    }
    TX_ONABORT { aborted = 1; }
    TX_END
    if (!aborted)
      return fail("the transaction did not abort", i, -1);
    if (replayed(r, i, nops, nkeys, seed, ver, &n)) {
      printf("  (after operation %llu, %s of key %d, was aborted)\n",
             (unsigned long long)i,
             (const char *[]){"insert", "replace", "delete"}[ops[i].kind],
             ops[i].key);
      return 1;
    }
    apply(r, i);
  }
  if (replayed(r, nops, nops, nkeys, seed, ver, &n))
    return 1;
  printf("ok: %llu operations, each aborted once and rolled back exactly, then "
         "committed; %lld items\n",
         (unsigned long long)nops, n);
  pmemobj_close(pop);
  return 0;
}
#else
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
  long long n = walk(r, nkeys, ver, 1);
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
#endif

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
#ifdef UTPM_PMDK
  if (!strcmp(argv[1], "abort"))
    return abort_check(argv[2], nops, nkeys, seed);
  if (strcmp(argv[1], "bench")) {
    fprintf(stderr, "utpm: the PMDK build has only abort and bench\n");
    return 2;
  }
#else
  if (!strcmp(argv[1], "check"))
    return check(argv[2], nops, nkeys, seed);
#endif
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
#ifndef UTPM_PMDK
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
#endif // !UTPM_PMDK
  double t0 = real_now();
  for (uint64_t i = r->done; i < nops; i++)
    apply(r, i);
  double t = real_now() - t0;
  if (bench)
    printf("{\"ops\": %llu, \"seconds\": %.6f, \"ops_per_sec\": %.1f}\n",
           (unsigned long long)nops, t, (double)nops / t);
#ifdef UTPM_PMDK
  pmemobj_close(pop);
#else
  pmkit_pool_close(pool);
#endif
  return 0;
}
