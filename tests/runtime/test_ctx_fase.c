/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ctx_fase.c -- thread context slots and the allocation journal of
 * failure-atomic sections. Slots are claimed per thread and stable across
 * runs; frees inside a section are deferred to commit; abort releases the
 * section's blocks and drops its frees; a full journal or free list is an
 * error, not a crash; gc refuses a pool with a section in flight. The core of
 * the test is a crash at every crash point of a section (three allocations and
 * one free): after each, recovery adopts the slot, replays the section and
 * must get exactly the blocks the crashed run got, in order, and the heap
 * must end with the section's blocks live, the freed block free, no leak.
 * Usage: test_ctx_fase [child POOL]
 */
#include <pthread.h>
#include <sys/wait.h>

#include "pmkit/abi.h"
#include "testutil.h"

struct root {
  uint64_t done;
  void *blk[3];
  uint64_t victim; /* freed by the section; stored XOR VICTIM_KEY so that it
                      does not count as a reference for gc: the section has
                      unpublished it, as a real one would */
};
#define VICTIM_KEY 0x5a5a5a5a5a5a5a5aull
#define VICTIM(r) ((void *)((r)->victim ^ VICTIM_KEY))

static const size_t sizes[3] = {40, 3000, 100000};

/* The section body; replay-safe: it records each block and checks that a
 * replay gets the block a crashed run recorded. */
static void section(pmkit_pool *p, pmkit_ctx *c, struct root *r) {
  for (int i = 0; i < 3; i++) {
    void *b;
    CHECK_OK(pmkit_alloc(p, sizes[i], &b));
    if (r->blk[i] && r->blk[i] != b)
      fprintf(stderr, "replay: block %d is %p, the crashed run got %p\n", i, b,
              r->blk[i]);
    CHECK(!r->blk[i] || r->blk[i] == b);
    r->blk[i] = b;
    pmkit_persist(&r->blk[i], sizeof b);
  }
  CHECK_OK(pmkit_free(p, VICTIM(r)));
  CHECK(pmkit_usable_size(p, VICTIM(r)) > 0); /* deferred to commit */
  r->done = 1;
  pmkit_persist(&r->done, 8);
  CHECK_OK(pmkit_fase_commit(c));
}

static int child(const char *path) {
  pmkit_pool *p;
  struct root *r;
  pmkit_ctx *c;
  CHECK_OK(pmkit_pool_open(path, NULL, &p));
  CHECK_OK(pmkit_root(p, sizeof *r, (void **)&r));
  CHECK_OK(pmkit_ctx_get(p, &c));
  CHECK(pmkit_ctx_id(c) == 0);
  CHECK_OK(pmkit_fase_begin(c, 42));
  section(p, c, r);
  CHECK_OK(pmkit_pool_close(p));
  return 0;
}

/* Fresh pool with a root and the victim block. */
static void setup(const char *path) {
  pmkit_pool *p;
  struct root *r;
  unlink(path);
  CHECK_OK(pmkit_pool_create(path, 8 << 20, NULL, &p));
  CHECK_OK(pmkit_root(p, sizeof *r, (void **)&r));
  void *v;
  CHECK_OK(pmkit_alloc(p, 64, &v));
  r->victim = (uint64_t)(uintptr_t)v ^ VICTIM_KEY;
  pmkit_persist(&r->victim, 8);
  CHECK_OK(pmkit_pool_close(p));
}

/* Recover as a FASE runtime would, finish the work, check the heap. */
static int recover_and_check(const char *path) {
  pmkit_pool *p;
  struct root *r;
  pmkit_ctx *c;
  pmkit_ctx_state s;
  int replayed = 0;
  CHECK_OK(pmkit_pool_open(path, NULL, &p));
  CHECK_OK(pmkit_root(p, sizeof *r, (void **)&r));
  CHECK_OK(pmkit_ctx_peek(p, 0, &s));
  if (s == PMKIT_CTX_ACTIVE) {
    CHECK_RC(pmkit_pool_gc(p, 0, NULL), PMKIT_E_STATE); /* recover first */
    CHECK_OK(pmkit_ctx_adopt(p, 0, &c));
    CHECK(pmkit_fase_tag(c) == 42);
    CHECK_OK(pmkit_fase_replay(c));
    section(p, c, r);
    CHECK_OK(pmkit_ctx_release(c));
    replayed = 1;
  } else if (!r->done) {
    CHECK_OK(pmkit_ctx_get(p, &c));
    CHECK_OK(pmkit_fase_begin(c, 42));
    section(p, c, r);
  }
  CHECK_OK(pmkit_pool_check(p));
  pmkit_pool_info info;
  CHECK_OK(pmkit_pool_stat(p, &info));
  CHECK(info.threads_busy == 0);
  /* Root + the section's three, plus what the crashed run had reserved in
   * its thread cache and not handed out (two small classes, < 64 each),
   * plus the victim if the crash hit while commit applied the deferred free
   * (a lost free leaks); gc reclaims exactly those. */
  CHECK(info.blocks_used >= 4 && info.blocks_used - 4 < 2 * 64);
  CHECK_OK(pmkit_pool_gc(p, 0, NULL));
  CHECK_OK(pmkit_pool_stat(p, &info));
  if (info.blocks_used != 4)
    fprintf(stderr, "after gc: %llu blocks live (replayed %d)\n",
            (unsigned long long)info.blocks_used, replayed);
  CHECK(info.blocks_used == 4);
  CHECK(pmkit_usable_size(p, VICTIM(r)) == 0);
  for (int i = 0; i < 3; i++)
    CHECK(pmkit_usable_size(p, r->blk[i]) >= sizes[i]);
  CHECK_OK(pmkit_pool_close(p));
  return replayed;
}

static void *other_thread(void *arg) {
  pmkit_ctx *c;
  CHECK_OK(pmkit_ctx_get(arg, &c));
  return (void *)(uintptr_t)pmkit_ctx_id(c);
}

static const char *path;
static pmkit_pool *p;
static pmkit_ctx *c;
static unsigned long long points; /* crash points of the section */
static unsigned replays;          /* crashes recovered by replay */

/* Slots: one per thread, stable, adopt refuses a held one. */
static void slots(void) {
  pmkit_ctx *c2;
  path = test_pool_path("ctx-fase");
  setup(path);
  CHECK_OK(pmkit_pool_open(path, NULL, &p));
  CHECK_OK(pmkit_ctx_get(p, &c));
  CHECK_OK(pmkit_ctx_get(p, &c2));
  CHECK(c == c2 && pmkit_ctx_id(c) == 0);
  pthread_t th;
  void *id;
  CHECK(pthread_create(&th, NULL, other_thread, p) == 0);
  pthread_join(th, &id);
  CHECK((uintptr_t)id == 1);
  CHECK_RC(pmkit_ctx_adopt(p, 0, &c2), PMKIT_E_BUSY);
  CHECK_OK(pmkit_ctx_adopt(p, 1, &c2)); /* released at that thread's exit */
  CHECK_OK(pmkit_ctx_release(c2));
  pmkit_ctx_ext(c)[PMKIT_EXT_USER] = 0xfeed;
  pmkit_persist(pmkit_ctx_ext(c), 8 * PMKIT_CTX_EXT_WORDS);
}

/* Commit needs a section, begin refuses a second; abort releases the
 * section's blocks. */
static void abort_releases(void) {
  void *b;
  CHECK_RC(pmkit_fase_commit(c), PMKIT_E_STATE);
  CHECK_OK(pmkit_fase_begin(c, 1));
  CHECK_RC(pmkit_fase_begin(c, 1), PMKIT_E_STATE);
  CHECK_OK(pmkit_alloc(p, 100, &b));
  CHECK_OK(pmkit_fase_abort(c));
  CHECK(pmkit_usable_size(p, b) == 0);
}

/* Commit applies the deferred frees. */
static void commit_applies_frees(void) {
  void *keep;
  CHECK_OK(pmkit_alloc(p, 100, &keep));
  CHECK_OK(pmkit_fase_begin(c, 2));
  CHECK_OK(pmkit_free(p, keep));
  CHECK(pmkit_usable_size(p, keep) > 0);
  CHECK_OK(pmkit_fase_commit(c));
  CHECK(pmkit_usable_size(p, keep) == 0);
}

/* A full journal is an error, not a crash. */
static void journal_bounded(void) {
  void *b;
  CHECK_OK(pmkit_fase_begin(c, 3));
  int r = 0;
  for (unsigned i = 0; i <= PMKIT_JOURNAL_MAX && r == 0; i++)
    r = pmkit_alloc(p, 16, &b);
  CHECK_RC(r, PMKIT_E_NOSPC);
  CHECK_OK(pmkit_fase_abort(c));
}

/* So is a full free list; abort drops the frees. */
static void frees_bounded(void) {
  void *many[PMKIT_FASE_FREES_MAX + 1];
  for (unsigned i = 0; i <= PMKIT_FASE_FREES_MAX; i++)
    CHECK_OK(pmkit_alloc(p, 16, &many[i]));
  CHECK_OK(pmkit_fase_begin(c, 4));
  for (unsigned i = 0; i < PMKIT_FASE_FREES_MAX; i++)
    CHECK_OK(pmkit_free(p, many[i]));
  CHECK_RC(pmkit_free(p, many[PMKIT_FASE_FREES_MAX]), PMKIT_E_NOSPC);
  CHECK_OK(pmkit_fase_abort(c)); /* drops the frees */
  for (unsigned i = 0; i <= PMKIT_FASE_FREES_MAX; i++) {
    CHECK(pmkit_usable_size(p, many[i]) > 0);
    CHECK_OK(pmkit_free(p, many[i]));
  }
  CHECK_OK(pmkit_pool_close(p));
}

/* After a reopen: the same slot with its extension word, nothing leaked. */
static void reopen(void) {
  CHECK_OK(pmkit_pool_open(path, NULL, &p));
  CHECK_OK(pmkit_ctx_get(p, &c));
  CHECK(pmkit_ctx_id(c) == 0 && pmkit_ctx_ext(c)[PMKIT_EXT_USER] == 0xfeed);
  pmkit_pool_info info;
  CHECK_OK(pmkit_pool_stat(p, &info));
  CHECK(info.blocks_used == 2); /* root + victim: nothing leaked */
  CHECK_OK(pmkit_pool_close(p));
}

/* How many crash points does the section have? */
static void count_crash_points(void) {
  char report[1100];
  snprintf(report, sizeof report, "%s.report", path);
  setup(path);
  int st = test_run_self("PMKIT_CRASH_REPORT", report,
                         (const char *[]){"child", path, NULL});
  CHECK(WIFEXITED(st) && !WEXITSTATUS(st));
  FILE *f = fopen(report, "r");
  CHECK(f && fscanf(f, "%llu", &points) == 1);
  fclose(f);
  unlink(report);
  CHECK(recover_and_check(path) == 0);
}

/* Crash at each of them, recover, check. */
static void crash_at_every_point(void) {
  for (unsigned long long at = 1; at <= points; at++) {
    setup(path);
    char v[32];
    snprintf(v, sizeof v, "%llu", at);
    int st = test_run_self("PMKIT_CRASH_AT", v,
                           (const char *[]){"child", path, NULL});
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == PMKIT_CRASH_EXIT);
    replays += (unsigned)recover_and_check(path);
  }
  CHECK(replays > 0);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "child"))
    return child(argv[2]);
  TEST_CASE(slots);
  TEST_CASE(abort_releases);
  TEST_CASE(commit_applies_frees);
  TEST_CASE(journal_bounded);
  TEST_CASE(frees_bounded);
  TEST_CASE(reopen);
  TEST_CASE(count_crash_points);
  TEST_CASE(crash_at_every_point);
  unlink(path);
  printf("ctx_fase: %llu crash points in a section, %u recovered by replay\n",
         points, replays);
  return test_summary();
}
