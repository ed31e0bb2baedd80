/* SPDX-License-Identifier: Apache-2.0 */
/*
 * unit.h -- the case runner and the context fixture of the WPP runtime's unit
 * tests (tests/wpp/unit). Each test program includes one file of
 * runtime/wpp (mem.c, fd.c or wpp.c: its static functions become callable)
 * and links libpmkit-wpp.a with the runtime's --wrap options for the rest,
 * exactly as `pmkit wpp cc` links a program; without PMKIT_WPP_CONTEXT the
 * runtime passes main through, so the test runs as an ordinary process that
 * maps a context file itself and calls the runtime's functions one mechanism
 * at a time.
 *
 * Runner: a failed CHECK prints "FAIL case: file:line: expression: detail"
 * and ends that case (longjmp back to the runner); the next case runs. At the
 * end: "N cases: P passed, F failed", exit status 1 if any failed. A program
 * takes one argument, the group of cases to run (a case's name starts with
 * its group: "mem.", "control.", ...).
 *
 * Fixture: a context file of WPP_SIZE (sparse) in a directory of its own
 * under PMKIT_TEST_DIR (else /tmp; never /dev/shm, which the runtime's real
 * contexts and running benchmarks use), mapped at WPP_BASE by the runtime's
 * own wpp_mem_map, its descriptor at 900 as the runtime's stash_fd would put
 * it, wpp_dir naming the directory.
 */
#ifndef PMKIT_WPP_UNIT_H
#define PMKIT_WPP_UNIT_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wpp.h"

#define UNIT_UNUSED __attribute__((unused))

struct unit_case {
  const char *name;
  void (*run)(void);
};

static jmp_buf unit_out;
static const char *unit_name;
static int unit_is_child; /* in unit_in_child: a failed check exits 1 */

/* A child's end: exit_group itself, not _exit, which reaches the runtime's
 * wpp_exit through the --wrap of _Exit (and waits there for a context that
 * is not RUNNING). */
static UNIT_UNUSED _Noreturn void unit_exit(int code) {
  fflush(stdout);
  for (;;)
    syscall(SYS_exit_group, code);
}

static const char *unit_base(const char *file) {
  const char *b = strrchr(file, '/');
  return b ? b + 1 : file;
}

static UNIT_UNUSED _Noreturn void
unit_fail(const char *file, int line, const char *expr, const char *detail) {
  printf("FAIL %s: %s:%d: %s%s%s\n", unit_name, unit_base(file), line, expr,
         detail[0] ? ": " : "", detail);
  fflush(stdout);
  if (unit_is_child)
    unit_exit(1);
  longjmp(unit_out, 1);
}

#define CHECK(e)                                                               \
  do {                                                                         \
    if (!(e))                                                                  \
      unit_fail(__FILE__, __LINE__, "CHECK(" #e ")", "");                      \
  } while (0)

/* Integers (and pointers) compared exactly; both printed signed, and in hex
 * when that reads better. */
#define CHECK_EQ(a, b)                                                         \
  do {                                                                         \
    unsigned long long a_ = (unsigned long long)(a),                           \
                       b_ = (unsigned long long)(b);                           \
    if (a_ != b_) {                                                            \
      char d_[128];                                                            \
      snprintf(d_, sizeof(d_), "%lld != %lld (%#llx != %#llx)", (long long)a_, \
               (long long)b_, a_, b_);                                         \
      unit_fail(__FILE__, __LINE__, "CHECK_EQ(" #a ", " #b ")", d_);           \
    }                                                                          \
  } while (0)

#define CHECK_STR(a, b)                                                        \
  do {                                                                         \
    const char *a_ = (a), *b_ = (b);                                           \
    if (strcmp(a_, b_)) {                                                      \
      char d_[512];                                                            \
      snprintf(d_, sizeof(d_), "\"%.200s\" != \"%.200s\"", a_, b_);            \
      unit_fail(__FILE__, __LINE__, "CHECK_STR(" #a ", " #b ")", d_);          \
    }                                                                          \
  } while (0)

/* a and b: n bytes each */
#define CHECK_MEM(a, b, n)                                                     \
  do {                                                                         \
    if (memcmp((a), (b), (n)))                                                 \
      unit_fail(__FILE__, __LINE__, "CHECK_MEM(" #a ", " #b ", " #n ")",       \
                "the bytes differ");                                           \
  } while (0)

/* ---- the context fixture ----------------------------------------------- */

#define UNIT_CTX_FD 900
static char unit_dir[1024];
static int unit_mapped;

/* The scratch directory of this process (created), into unit_dir. */
static UNIT_UNUSED void unit_mkdir(void) {
  const char *base = getenv("PMKIT_TEST_DIR");
  if (!base || !*base)
    base = "/tmp";
  mkdir(base, 0700);
  snprintf(unit_dir, sizeof(unit_dir), "%s/wpp-unit-%d", base, (int)getpid());
  mkdir(unit_dir, 0700);
  strcpy(wpp_dir, unit_dir);
}

/* Everything in unit_dir, then the directory. */
static UNIT_UNUSED void unit_rmdir(void) {
  DIR *d = unit_dir[0] ? opendir(unit_dir) : NULL;
  if (!d)
    return;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      unlinkat(dirfd(d), e->d_name, 0);
  closedir(d);
  rmdir(unit_dir);
}

/* A fresh context file (zeros, WPP_SIZE) at unit_dir/wpp.ctx, its descriptor
 * at UNIT_CTX_FD and in wpp_ctxfd; not mapped. */
static UNIT_UNUSED void unit_ctx_create(void) {
  char path[1100];
  unit_mkdir();
  snprintf(path, sizeof(path), "%s/wpp.ctx", unit_dir);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)WPP_SIZE) != 0 ||
      dup3(fd, UNIT_CTX_FD, O_CLOEXEC) != UNIT_CTX_FD) {
    printf("cannot make the context %s: %s\n", path, strerror(errno));
    exit(2);
  }
  close(fd);
  wpp_ctxfd = UNIT_CTX_FD;
}

/* Map the context as a start or a restore does (wpp_mem_map). */
static UNIT_UNUSED int unit_ctx_map(void) {
  int r = wpp_mem_map(wpp_ctxfd);
  unit_mapped = r == 0;
  return r;
}

static UNIT_UNUSED void unit_ctx_unmap(void) {
  if (unit_mapped)
    wpp_real.munmap((void *)(uintptr_t)WPP_BASE, WPP_SIZE);
  unit_mapped = 0;
}

/* The fixture most cases use: a fresh context, mapped, the runtime off. */
static UNIT_UNUSED void unit_ctx_setup(void) {
  unit_ctx_create();
  int r = unit_ctx_map();
  if (r) {
    printf("cannot map the context at %#llx: %s\n", WPP_BASE, strerror(-r));
    exit(2);
  }
}

static UNIT_UNUSED void unit_ctx_teardown(void) {
  wpp_on = 0;
  unit_ctx_unmap();
  if (wpp_ctxfd >= 0)
    close(wpp_ctxfd);
  wpp_ctxfd = -1;
  unit_rmdir();
}

/* ---- helpers ------------------------------------------------------------ */

/* The permissions ("rw-s") of the mapping holding addr, from
 * /proc/self/maps; "none" if nothing is mapped there. */
static UNIT_UNUSED const char *unit_prot_at(const void *addr) {
  static char text[1 << 16], out[8];
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  size_t n = 0;
  for (ssize_t r = 1; fd >= 0 && r > 0 && n < sizeof(text) - 1; n += (size_t)r)
    if ((r = read(fd, text + n, sizeof(text) - 1 - n)) < 0)
      r = 0;
  if (fd >= 0)
    close(fd);
  text[n] = 0;
  strcpy(out, "none");
  for (char *l = text; *l;) {
    unsigned long long lo, hi;
    char perms[8];
    if (sscanf(l, "%llx-%llx %7s", &lo, &hi, perms) == 3 &&
        (uintptr_t)addr >= lo && (uintptr_t)addr < hi)
      snprintf(out, sizeof(out), "%s", perms);
    char *nl = strchr(l, '\n');
    l = nl ? nl + 1 : l + strlen(l);
  }
  return out;
}

/* Bytes of [off, off + len) of the context file that have file space
 * (FIEMAP: reserved or written extents); -1 if the file system cannot say. */
static UNIT_UNUSED long long unit_file_space(uint64_t off, uint64_t len) {
  struct {
    uint64_t start, length;
    uint32_t flags, mapped, count, reserved;
    struct {
      uint64_t logical, physical, length, r1[2];
      uint32_t flags, r2[3];
    } ext[32];
  } fm;
  long long got = 0;
  uint64_t at = off, end = off + len;
  while (at < end) {
    memset(&fm, 0, sizeof(fm));
    fm.start = at;
    fm.length = end - at;
    fm.flags = 1; /* FIEMAP_FLAG_SYNC */
    fm.count = 32;
    if (ioctl(wpp_ctxfd, 0xC020660B /* FS_IOC_FIEMAP */, &fm) != 0) {
      static int said;
      if (!said++)
        printf("note: FIEMAP: %s: the file space checks are skipped\n",
               strerror(errno));
      return -1;
    }
    if (!fm.mapped)
      break;
    for (uint32_t i = 0; i < fm.mapped; i++) {
      uint64_t lo = fm.ext[i].logical, hi = lo + fm.ext[i].length;
      lo = lo < at ? at : lo;
      hi = hi > end ? end : hi;
      if (hi > lo)
        got += (long long)(hi - lo);
      at = fm.ext[i].logical + fm.ext[i].length;
    }
    if (fm.ext[fm.mapped - 1].flags & 1) /* FIEMAP_EXTENT_LAST */
      break;
  }
  return got;
}

/* Run fn in a child with its standard error into err (NUL-terminated);
 * the child's wait status. */
static UNIT_UNUSED int unit_child(void (*fn)(void *), void *arg, char *err,
                                  size_t cap) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0)
    return -1;
  fflush(stdout);
  pid_t c = fork();
  if (c == 0) {
    dup2(p[1], 2);
    setenv("PMKIT_WPP_QUIET", "1", 1);
    fn(arg);
    unit_exit(0);
  }
  close(p[1]);
  size_t n = 0;
  for (ssize_t r; n < cap - 1 && (r = read(p[0], err + n, cap - 1 - n)) > 0;)
    n += (size_t)r;
  err[n] = 0;
  close(p[0]);
  int st = -1;
  waitpid(c, &st, 0);
  return st;
}

/* Run a case's body in a child (for what would change this process for
 * good: its standard input, its signal state); a failed check there prints
 * its line and the child exits 1. The child's wait status. */
static UNIT_UNUSED int unit_in_child(void (*body)(void)) {
  fflush(stdout);
  pid_t c = fork();
  if (c == 0) {
    unit_is_child = 1;
    body();
    unit_exit(0);
  }
  int st = -1;
  waitpid(c, &st, 0);
  return st;
}

/* Exit code of a wait status, or 128 + the signal. */
static UNIT_UNUSED int unit_code(int st) {
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- the runner ----------------------------------------------------------
 */

/* One case: 1 if it ran to its end, 0 if a check failed. */
static int unit_one(void (*run)(void)) {
  if (setjmp(unit_out))
    return 0;
  run();
  return 1;
}

/* Every case whose name starts with group; setup and teardown around each
 * (teardown also after a failed check). */
static UNIT_UNUSED int unit_run(const struct unit_case *cases, size_t n,
                                const char *group, void (*setup)(void),
                                void (*teardown)(void)) {
  int total = 0, passed = 0;
  for (size_t i = 0; i < n; i++) {
    if (strncmp(cases[i].name, group, strlen(group)))
      continue;
    unit_name = cases[i].name;
    total++;
    if (setup)
      setup();
    if (unit_one(cases[i].run)) {
      passed++;
      printf("ok   %s\n", unit_name);
    }
    if (teardown)
      teardown();
    fflush(stdout);
  }
  printf("%d cases: %d passed, %d failed\n", total, passed, total - passed);
  return total && passed == total ? 0 : 1;
}

/* Close every descriptor above 2 the test inherited (so that the tables the
 * runtime records hold only what a case opened). */
static UNIT_UNUSED void unit_close_inherited(void) {
  for (int fd = 3; fd < 1024; fd++)
    close(fd);
}

#endif
