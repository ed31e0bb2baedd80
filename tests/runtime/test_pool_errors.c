/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_pool_errors.c -- every way a pool can be bad or unavailable gets its
 * own error code and a message, never a crash: missing, existing, too small,
 * truncated, corrupt header, foreign file, other layout, wrong version,
 * already open, address in use; plus several pools open at once and
 * pmkit_in_pool on each.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#include "testutil.h"

static void poke(const char *path, off_t off, const void *data, size_t n) {
  int fd = open(path, O_RDWR);
  CHECK(fd >= 0);
  CHECK(pwrite(fd, data, n, off) == (ssize_t)n);
  close(fd);
}

static void *use_and_close(void *path) {
  pmkit_pool *p;
  void *x;
  unlink(path);
  CHECK_OK(pmkit_pool_create(path, 4 << 20, NULL, &p));
  CHECK_OK(pmkit_alloc(p, 32, &x));
  CHECK_OK(pmkit_pool_close(p));
  unlink(path);
  return NULL;
}

static void copy_file(const char *from, const char *to) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
  CHECK(system(cmd) == 0);
}

static void expect_open(const char *path, const pmkit_pool_opts *o, int want,
                        const char *words) {
  pmkit_pool *p = (pmkit_pool *)1;
  CHECK_RC(pmkit_pool_open(path, o, &p), want);
  CHECK(p == NULL);
  CHECK(strstr(pmkit_errormsg(), words) != NULL);
  printf("  %-18s %s\n", pmkit_strerror(want), pmkit_errormsg());
}

static const char *a, *b, *c; /* pool paths */
static pmkit_pool_opts lay = {.layout = "kv-v1"};
static uintptr_t base; /* where pool a was mapped */

/* Missing, too small (nothing left behind), a base that is not aligned. */
static void missing_and_too_small(void) {
  pmkit_pool *p;
  expect_open(a, NULL, PMKIT_E_NOENT, "No such file");
  CHECK_RC(pmkit_pool_create(a, 4096, NULL, &p), PMKIT_E_TOOSMALL);
  CHECK(access(a, F_OK) != 0); /* nothing left behind */
  CHECK_RC(pmkit_pool_create(a, 1 << 30, &(pmkit_pool_opts){.base = 12345}, &p),
           PMKIT_E_INVAL);
}

/* Existing, already open; pmkit_in_pool and pmkit_pool_of on it. Then
 * address in use: a pool created at the same fixed address as `a`. */
static void existing_and_open(void) {
  pmkit_pool *p, *q;
  CHECK_OK(pmkit_pool_create(a, 4 << 20, &lay, &p));
  CHECK_RC(pmkit_pool_create(a, 4 << 20, NULL, &q), PMKIT_E_EXIST);
  expect_open(a, NULL, PMKIT_E_BUSY, "already open");
  void *root;
  CHECK_OK(pmkit_root(p, 64, &root));
  strcpy(root, "hello");
  pmkit_persist(root, 6);
  base = (uintptr_t)pmkit_pool_base(p);
  CHECK(pmkit_in_pool(root) && pmkit_in_pool((void *)base));
  CHECK(!pmkit_in_pool((void *)(base + pmkit_pool_size(p))));
  CHECK(!pmkit_in_pool(&p));
  CHECK(pmkit_pool_of(root) == p);

  CHECK_RC(pmkit_pool_create(b, 4 << 20, &(pmkit_pool_opts){.base = base}, &q),
           PMKIT_E_ADDRINUSE);
  CHECK(access(b, F_OK) != 0);
  CHECK_OK(pmkit_pool_close(p));
}

/* Same address again, while an ordinary mapping sits there. */
static void address_mapped(void) {
  void *m = mmap((void *)base, 4096, PROT_READ,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  CHECK(m == (void *)base);
  expect_open(a, NULL, PMKIT_E_ADDRINUSE, "already mapped");
  munmap(m, 4096);
}

/* Several pools at once, each found by address. */
static void several_pools(void) {
  pmkit_pool *p, *q;
  void *root;
  CHECK_OK(pmkit_pool_open(a, &lay, &p));
  CHECK_OK(pmkit_root(p, 64, &root));
  CHECK(strcmp(root, "hello") == 0);
  CHECK_OK(pmkit_pool_create(b, 4 << 20, NULL, &q));
  void *x;
  CHECK_OK(pmkit_alloc(q, 100, &x));
  CHECK(pmkit_pool_of(x) == q && pmkit_pool_of(root) == p);
  CHECK_OK(pmkit_pool_close(q));
  CHECK(!pmkit_in_pool(x) && pmkit_in_pool(root));
  CHECK_OK(pmkit_pool_close(p));
}

/* Another layout. */
static void other_layout(void) {
  expect_open(a, &(pmkit_pool_opts){.layout = "other"}, PMKIT_E_FOREIGN,
              "layout");
}

/* Wrong version: bump the version field (offset 8). */
static void wrong_version(void) {
  copy_file(a, c);
  uint32_t v = 99;
  poke(c, 8, &v, sizeof v);
  expect_open(c, NULL, PMKIT_E_VERSION, "layout version 99");
  unlink(c);
}

/* Corrupt header: flip a byte inside the layout name. */
static void corrupt_header(void) {
  copy_file(a, c);
  poke(c, 48, "X", 1);
  expect_open(c, NULL, PMKIT_E_CORRUPT, "checksum");
  unlink(c);
}

/* Truncated: shorter than the header says, and shorter than a header. */
static void truncated(void) {
  copy_file(a, c);
  CHECK(truncate(c, 1 << 20) == 0);
  expect_open(c, NULL, PMKIT_E_TRUNCATED, "truncated");
  CHECK(truncate(c, 100) == 0);
  expect_open(c, NULL, PMKIT_E_TRUNCATED, "truncated");
  unlink(c);
}

/* Foreign: some other file, an empty one, a directory. */
static void foreign_files(void) {
  FILE *f = fopen(c, "w");
  CHECK(f);
  fputs("#!/bin/sh\necho not a pool\n", f);
  fclose(f);
  expect_open(c, NULL, PMKIT_E_FOREIGN, "not a pmkit pool");
  f = fopen(c, "w");
  fclose(f);
  expect_open(c, NULL, PMKIT_E_TRUNCATED, "truncated");
  unlink(c);
  expect_open("/", NULL, PMKIT_E_IO, "/");
}

/* A pool size whose chunk table crosses a 64 KiB step (this one made the
 * geometry computation loop forever once); a size that cannot be. */
static void geometry(void) {
  pmkit_pool *q;
  CHECK_OK(pmkit_pool_create(c, 939720704, NULL, &q));
  pmkit_pool_info qi;
  CHECK_OK(pmkit_pool_stat(q, &qi));
  CHECK(qi.heap_off + qi.nchunks * qi.chunk_size <= qi.size);
  CHECK_OK(pmkit_pool_close(q));
  unlink(c);
  CHECK_RC(pmkit_pool_create(c, (size_t)-1, NULL, &q), PMKIT_E_INVAL);
}

/* A thread that opens, uses and closes a pool, then exits: its exit
 * handler must not touch the freed pool (ASan checks this). */
static void thread_exit(void) {
  pthread_t th;
  CHECK(pthread_create(&th, NULL, use_and_close, (void *)b) == 0);
  pthread_join(th, NULL);
}

/* Inspection mode does not bump the generation or lock exclusively. */
static void inspection(void) {
  pmkit_pool *p;
  void *x, *root;
  CHECK_OK(
      pmkit_pool_open(a, &(pmkit_pool_opts){.flags = PMKIT_POOL_INSPECT}, &p));
  uint64_t g = pmkit_pool_generation(p);
  CHECK_RC(pmkit_alloc(p, 8, &x), PMKIT_E_STATE);
  CHECK_OK(pmkit_root(p, 8, &root));
  CHECK_RC(pmkit_free(p, root), PMKIT_E_STATE); /* read-only mapping */
  CHECK_OK(pmkit_pool_check(p));
  CHECK_OK(pmkit_pool_close(p));
  CHECK_OK(pmkit_pool_open(a, NULL, &p));
  CHECK(pmkit_pool_generation(p) == g + 1);
  CHECK_OK(pmkit_pool_close(p));
}

/* The error space: codes of their own range, far from -errno (-1 to
 * -4095), each with a name and an errno. */
static void error_space(void) {
  static const int codes[] = {
      PMKIT_E_INVAL,   PMKIT_E_NOENT,     PMKIT_E_EXIST,   PMKIT_E_TRUNCATED,
      PMKIT_E_CORRUPT, PMKIT_E_FOREIGN,   PMKIT_E_VERSION, PMKIT_E_TOOSMALL,
      PMKIT_E_BUSY,    PMKIT_E_ADDRINUSE, PMKIT_E_IO,      PMKIT_E_NOMEM,
      PMKIT_E_NOSPC,   PMKIT_E_STATE};
  for (unsigned i = 0; i < sizeof codes / sizeof *codes; i++) {
    CHECK(codes[i] < -4095);
    CHECK(strcmp(pmkit_strerror(codes[i]), "PMKIT_E_UNKNOWN") != 0);
    CHECK(pmkit_errno(codes[i]) > 0);
  }
  CHECK(pmkit_errno(PMKIT_E_BUSY) == EBUSY);
  CHECK(pmkit_errno(PMKIT_E_NOENT) == ENOENT);
  CHECK(pmkit_errno(PMKIT_E_CORRUPT) == EUCLEAN);
  CHECK(pmkit_errno(PMKIT_OK) == 0 && pmkit_errno(7) == 0);
  CHECK(pmkit_errno(-EBADF) == EINVAL); /* no pmkit code */
  CHECK(strcmp(pmkit_strerror(-EBADF), "PMKIT_E_UNKNOWN") == 0);
}

/* A call that can fail clears the message on entry; a release keeps an
 * earlier failure's message unless it fails itself. */
static void error_message(void) {
  pmkit_pool *p;
  void *x;
  CHECK_OK(pmkit_pool_open(a, NULL, &p));
  CHECK_RC(pmkit_alloc(p, 8, NULL), PMKIT_E_INVAL);
  CHECK(*pmkit_errormsg());
  CHECK_OK(pmkit_alloc(p, 8, &x));
  CHECK(*pmkit_errormsg() == 0);
  CHECK_RC(pmkit_alloc(p, 8, NULL), PMKIT_E_INVAL);
  char was[512];
  snprintf(was, sizeof was, "%s", pmkit_errormsg());
  CHECK_OK(pmkit_free(p, x));
  CHECK_OK(pmkit_pool_close(p));
  CHECK(strcmp(pmkit_errormsg(), was) == 0);
}

int main(void) {
  a = test_pool_path("errors-a");
  b = test_pool_path("errors-b");
  c = test_pool_path("errors-c");
  TEST_CASE(missing_and_too_small);
  TEST_CASE(existing_and_open);
  TEST_CASE(address_mapped);
  TEST_CASE(several_pools);
  TEST_CASE(other_layout);
  TEST_CASE(wrong_version);
  TEST_CASE(corrupt_header);
  TEST_CASE(truncated);
  TEST_CASE(foreign_files);
  TEST_CASE(geometry);
  TEST_CASE(thread_exit);
  TEST_CASE(inspection);
  TEST_CASE(error_space);
  TEST_CASE(error_message);
  unlink(a);
  unlink(b);
  return test_summary();
}
