// SPDX-License-Identifier: Apache-2.0
// micro.c -- microbenchmarks of the calls WPP mode intercepts, after the
// Zhuque paper's Figure 5 (libc-bench's thread creation; anonymous and file
// mappings in one slab or in chunks), and the time a save and a restart
// take against the size of the program's state. Built with the WPP runtime
// (wppmicro); run without a context it is plain static musl, with one it is
// under WPP, so bench/run.py compares the two on one binary.
//   wppmicro TEST [--dir DIR]    one test, one JSON line; TEST is
//     thread_create  create and join a thread that returns at once (x2000)
//     malloc         malloc+free of 64 B (x1000000)
//     anon_slab      a 16 MiB anonymous mapping, every page written, unmapped
//     anon_chunks    128 anonymous mappings of 128 KiB, each written, unmapped
//     file_slab      a 16 MiB shared mapping of a file in DIR, the same
//     file_chunks    128 mappings of 128 KiB of one 16 MiB file
//     files_chunks   128 mappings of 128 KiB, each of its own file
//   wppmicro restart --mib N --dir DIR   (run natively) starts itself under
//     WPP holding N MiB of heap, power-fails it, resumes it, and reports the
//     save and restart times
//   wppmicro restart-run --mib N --dir DIR   the same through `pmkit wpp run`
//     (build/pmkit-launch, the pmkit command's front end)
//   wppmicro hold --mib N                what restart runs
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLAB (16u << 20)
#define CHUNK (128u << 10)
#define NCHUNK 128
#define PAGE 4096u

static const char *dir = "/dev/shm";

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
  fprintf(stderr, "wppmicro: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void touch(char *p, size_t n) {
  for (size_t i = 0; i < n; i += PAGE)
    p[i] = (char)i;
}

static void *nothing(void *a) { return a; }

static int make_file(const char *name, size_t size) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
    die(path);
  unlink(path);
  return fd;
}

static void map_anon(size_t len) {
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED)
    die("mmap");
  touch(p, len);
  munmap(p, len);
}

static void map_file(int fd, size_t len, off_t off) {
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
  if (p == MAP_FAILED)
    die("mmap file");
  touch(p, len);
  munmap(p, len);
}

static long run_test(const char *t) {
  if (!strcmp(t, "thread_create")) {
    for (int i = 0; i < 2000; i++) {
      pthread_t th;
      if (pthread_create(&th, NULL, nothing, NULL) != 0)
        die("pthread_create");
      pthread_join(th, NULL);
    }
    return 2000;
  }
  if (!strcmp(t, "malloc")) {
    for (int i = 0; i < 1000000; i++) {
      void *volatile p = malloc(64);
      free(p);
    }
    return 1000000;
  }
  if (!strcmp(t, "anon_slab")) {
    for (int i = 0; i < 50; i++)
      map_anon(SLAB);
    return 50;
  }
  if (!strcmp(t, "anon_chunks")) {
    for (int i = 0; i < 50; i++)
      for (int c = 0; c < NCHUNK; c++)
        map_anon(CHUNK);
    return 50;
  }
  if (!strcmp(t, "file_slab") || !strcmp(t, "file_chunks")) {
    int fd = make_file("wppmicro.slab", SLAB);
    for (int i = 0; i < 50; i++) {
      if (t[5] == 's')
        map_file(fd, SLAB, 0);
      else
        for (int c = 0; c < NCHUNK; c++)
          map_file(fd, CHUNK, (off_t)c * CHUNK);
    }
    close(fd);
    return 50;
  }
  if (!strcmp(t, "files_chunks")) {
    int fds[NCHUNK];
    char name[64];
    for (int c = 0; c < NCHUNK; c++) {
      snprintf(name, sizeof(name), "wppmicro.%d", c);
      fds[c] = make_file(name, CHUNK);
    }
    for (int i = 0; i < 50; i++)
      for (int c = 0; c < NCHUNK; c++)
        map_file(fds[c], CHUNK, 0);
    for (int c = 0; c < NCHUNK; c++)
      close(fds[c]);
    return 50;
  }
  fprintf(stderr, "wppmicro: unknown test %s\n", t);
  exit(2);
}

/* ---- save and restart against state size ---- */

static void resumed(int sig) {
  (void)sig;
  if (write(1, "resumed\n", 8) != 8)
    _exit(1);
}

static int hold(long mib) {
  signal(SIGPWR, resumed); /* the failure handler: runs after a restore */
  for (long i = 0; i < mib; i++) {
    char *p = malloc(1u << 20);
    if (!p)
      die("malloc");
    touch(p, 1u << 20);
  }
  if (write(1, "ready\n", 6) != 6)
    return 1;
  for (;;)
    pause();
}

/* through `pmkit wpp run` (its front end, build/pmkit-launch) rather than
 * by running the program with PMKIT_WPP_CONTEXT set */
static int via_pmkit;

static pid_t spawn(char *self, long mib, const char *ctx, int *out) {
  int p[2];
  if (pipe(p) != 0)
    die("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    char m[32];
    snprintf(m, sizeof(m), "%ld", mib);
    dup2(p[1], 1);
    setenv("PMKIT_WPP_QUIET", "1", 1);
    if (via_pmkit) {
      char dir_of[4096], launch[4200];
      snprintf(dir_of, sizeof(dir_of), "%s", self);
      snprintf(launch, sizeof(launch), "%s/../../pmkit-launch",
               dirname(dir_of));
      execl(launch, "pmkit", "wpp", "run", "--context", ctx, "--", self, "hold",
            "--mib", m, (char *)NULL);
    }
    setenv("PMKIT_WPP_CONTEXT", ctx, 1);
    execl(self, self, "hold", "--mib", m, (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  *out = p[0];
  return pid;
}

static void expect(int fd, const char *word) {
  char buf[64];
  size_t n = 0;
  while (n < strlen(word)) {
    ssize_t r = read(fd, buf + n, strlen(word) - n);
    if (r <= 0) {
      fprintf(stderr, "wppmicro: no '%s' from the held program\n", word);
      exit(1);
    }
    n += (size_t)r;
  }
}

static int restart(char *self, long mib) {
  char ctx[512], cmd[600];
  snprintf(ctx, sizeof(ctx), "%s/ctx", dir);
  int out, st;
  pid_t pid = spawn(self, mib, ctx, &out);
  expect(out, "ready\n");
  double t0 = now();
  kill(pid, SIGPWR);
  waitpid(pid, &st, 0);
  double save = now() - t0;
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 86) {
    fprintf(stderr, "wppmicro: the save ended with status %d\n", st);
    return 1;
  }
  close(out);
  t0 = now();
  pid = spawn(self, mib, ctx, &out);
  expect(out, "resumed\n");
  double rs = now() - t0;
  /* the runtime's own measure, from the context header (restore_ns) */
  uint64_t hdr[12] = {0};
  snprintf(cmd, sizeof(cmd), "%s/wpp.ctx", ctx);
  int fd = open(cmd, O_RDONLY);
  if (fd < 0 || pread(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))
    die(cmd);
  close(fd);
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ctx);
  if (system(cmd) != 0)
    return 1;
  printf("{\"test\": \"restart\", \"mib\": %ld, \"save_ms\": %.3f, "
         "\"restart_ms\": %.3f, \"restore_ms\": %.3f, \"heap_mib\": %.1f}\n",
         mib, save * 1e3, rs * 1e3, (double)hdr[10] * 1e-6,
         (double)hdr[11] * PAGE / (1 << 20));
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  long mib = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
    else if (!strcmp(argv[i], "--mib"))
      mib = atol(argv[i + 1]);
  }
  if (!strcmp(argv[1], "hold"))
    return hold(mib);
  if (!strcmp(argv[1], "restart") || !strcmp(argv[1], "restart-run")) {
    via_pmkit = argv[1][7] == '-';
    return restart(argv[0], mib);
  }
  double t0 = now();
  long iters = run_test(argv[1]);
  double s = now() - t0;
  printf("{\"test\": \"%s\", \"iterations\": %ld, \"seconds\": %.6f, "
         "\"us_per_iter\": %.3f}\n",
         argv[1], iters, s, s * 1e6 / (double)iters);
  return 0;
}
