/* SPDX-License-Identifier: Apache-2.0 */
/*
 * launch.c -- the `pmkit` command's front end (build/pmkit-launch, which
 * .venv/bin/pmkit is). `pmkit wpp run` and `pmkit wpp kill` are done here, in
 * C, because they sit on a program's restart path: the Python command would
 * add its start-up (about 36 ms) to every restart. Everything else is handed
 * to the Python command (python -m pmkit), which also hands `wpp run` and
 * `wpp kill` here when it is run directly: this file is their only
 * implementation.
 *
 *   pmkit wpp run [--context DIR] [--fresh] [--] PROG [ARGS]
 *       run PROG with its context in DIR (default /dev/shm/pmkit-wpp/PROG);
 *       --fresh discards a saved context first. Execs PROG: nothing of this
 *       process stays.
 *   pmkit wpp kill [--context DIR] [--wait S] [PROG | DIR]
 *       send SIGPWR (a power failure) to the program running in the context
 *       and wait up to S seconds (default 5) for its save; the context is
 *       DIR, PROG's default one, or the one of the only program named PROG
 *       running with a context of its own (listed by its supervisor in
 *       /dev/shm/pmkit-wpp/.running, see runtime/wpp/wpp.c).
 *
 * Errors: one line, "pmkit wpp: error: ...", exit 2.
 *
 * Built twice: build/pmkit-launch runs the checkout's .venv python on the
 * package in cli/ (python -m pmkit); the installed copy
 * (pmkit-launch-installed, PMKIT_PYTHON_DIR set) runs the system's python3 on
 * the package installed beside it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef PMKIT_PYTHON
#error "PMKIT_PYTHON: the Python that runs the pmkit package (set by CMake)"
#endif
#define ROOT "/dev/shm/pmkit-wpp"       /* WPP_RUN_ROOT in runtime/wpp/wpp.h */
#define CONTEXT_VAR "PMKIT_WPP_CONTEXT" /* what the WPP runtime reads */

static _Noreturn void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("pmkit wpp: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

static const char *base_name(const char *p) {
  const char *b = strrchr(p, '/');
  return b ? b + 1 : p;
}

static void default_context(char *out, size_t cap, const char *prog) {
  if ((size_t)snprintf(out, cap, ROOT "/%s", base_name(prog)) >= cap)
    fail("%s: name too long", prog);
}

static int exists(const char *dir, const char *name) {
  char p[PATH_MAX + 64];
  snprintf(p, sizeof(p), "%s/%s", dir, name);
  return access(p, F_OK) == 0;
}

/* PROG as execvp would find it; fails as the Python command did. */
static void resolve(const char *prog, char *out, size_t cap) {
  if (strchr(prog, '/')) {
    if ((size_t)snprintf(out, cap, "%s", prog) >= cap)
      fail("%s: name too long", prog);
  } else {
    const char *path = getenv("PATH");
    out[0] = 0;
    for (const char *p = path ? path : ""; *p && !out[0];) {
      size_t n = strcspn(p, ":");
      if ((size_t)snprintf(out, cap, "%.*s/%s", (int)n, p, prog) < cap &&
          access(out, X_OK) == 0)
        break;
      out[0] = 0;
      p += n + (p[n] == ':');
    }
  }
  struct stat st;
  if (!out[0] || stat(out, &st) != 0 || !S_ISREG(st.st_mode) ||
      access(out, X_OK) != 0)
    fail("%s: no such executable", prog);
}

/* Remove the saved state and the links a save made (--fresh), under the lock
 * a running program holds on its context directory: a context in use is
 * refused and left as it is. */
static void discard(const char *ctx) {
  char p[PATH_MAX + 300];
  int d0 = open(ctx, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d0 < 0 && errno == ENOENT)
    return;
  if (d0 < 0 || flock(d0, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = "";
    snprintf(p, sizeof(p), "%s/pid", ctx);
    FILE *f = fopen(p, "r");
    if (f && fgets(pid, sizeof(pid), f))
      pid[strcspn(pid, "\n")] = 0;
    if (f)
      fclose(f);
    fail("%s is in use%s%s: --fresh changes nothing while a program runs "
         "in it",
         ctx, pid[0] ? " by pid " : "", pid);
  }
  snprintf(p, sizeof(p), "%s/wpp.ctx", ctx);
  if (unlink(p) != 0 && errno != ENOENT)
    fail("cannot remove %s: %s", p, strerror(errno));
  DIR *d = opendir(ctx);
  for (struct dirent *e; d && (e = readdir(d));)
    if (!strncmp(e->d_name, "link.", 5) || !strncmp(e->d_name, "map.", 4)) {
      snprintf(p, sizeof(p), "%s/%s", ctx, e->d_name);
      unlink(p);
    }
  if (d)
    closedir(d);
  close(d0); /* and the lock with it */
}

/* Whether exe has the WPP runtime linked in: it reads the context's path from
 * this variable (runtime/wpp/wpp.c), and a program that does not runs with no
 * persistence at all while `pmkit wpp run` looks as if it worked. */
static int has_wpp_runtime(const char *exe) {
  static const char mark[] = CONTEXT_VAR;
  int fd = open(exe, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 1; /* execv names the problem */
  struct stat st;
  int found = 0;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
      found = memmem(m, (size_t)st.st_size, mark, sizeof(mark) - 1) != NULL;
      munmap(m, (size_t)st.st_size);
    } else {
      found = 1; /* cannot tell: let it run */
    }
  }
  close(fd);
  return found;
}

static int cmd_run(int argc, char **argv) {
  const char *context = NULL;
  int fresh = 0, i = 0;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (!strcmp(argv[i], "--")) {
      i++;
      break;
    } else if (!strcmp(argv[i], "--fresh")) {
      fresh = 1;
    } else if (!strcmp(argv[i], "--context") && i + 1 < argc) {
      context = argv[++i];
    } else if (!strncmp(argv[i], "--context=", 10)) {
      context = argv[i] + 10;
    } else {
      fail("wpp run: unknown option %s", argv[i]);
    }
  }
  if (i >= argc)
    fail("wpp run needs a program: pmkit wpp run [--context DIR] -- PROG "
         "[ARGS]");
  char exe[PATH_MAX], ctx[PATH_MAX], abs[PATH_MAX];
  resolve(argv[i], exe, sizeof(exe));
  if (context) {
    if ((size_t)snprintf(ctx, sizeof(ctx), "%s", context) >= sizeof(ctx))
      fail("%s: name too long", context);
  } else {
    default_context(ctx, sizeof(ctx), argv[i]);
    if (mkdir(ROOT, 0700) != 0 && errno != EEXIST)
      fail("cannot create %s: %s", ROOT, strerror(errno));
  }
  if (fresh)
    discard(ctx);
  if (ctx[0] == '/') {
    snprintf(abs, sizeof(abs), "%s", ctx);
  } else {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd)) ||
        (size_t)snprintf(abs, sizeof(abs), "%s/%s", cwd, ctx) >= sizeof(abs))
      fail("%s: cannot make the path absolute", ctx);
  }
  /* A first start only: a saved context means the program did run under WPP
   * (and the restart path stays as short as it was). */
  if (!exists(abs, "wpp.ctx") && !has_wpp_runtime(exe))
    fail("%s has no WPP runtime (build it with pmkit wpp cc): it would run "
         "with nothing persistent",
         argv[i]);
  setenv(CONTEXT_VAR, abs, 1);
  fflush(stdout);
  execv(exe, argv + i);
  fail("cannot run %s: %s", exe, strerror(errno));
}

static int alive(long pid) {
  return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* The context of the only program named prog that runs with a context of
 * its own (ROOT/.running/PROG@PID -> DIR), or "" if none. */
static void running(const char *prog, char *out, size_t cap) {
  char found[PATH_MAX] = "", link[PATH_MAX], list[4096] = "";
  int n = 0;
  size_t plen = strlen(prog);
  DIR *d = opendir(ROOT "/.running");
  for (struct dirent *e; d && (e = readdir(d));) {
    const char *at = strrchr(e->d_name, '@');
    long pid = at ? strtol(at + 1, NULL, 10) : 0;
    char p[PATH_MAX + 300];
    snprintf(p, sizeof(p), ROOT "/.running/%s", e->d_name);
    if (pid > 0 && !alive(pid)) {
      unlink(p); /* left by a program killed with its supervisor */
      continue;
    }
    if (strncmp(e->d_name, prog, plen) || e->d_name[plen] != '@')
      continue;
    ssize_t l = readlink(p, link, sizeof(link) - 1);
    if (pid <= 0 || l <= 0)
      continue;
    link[l] = 0;
    snprintf(found, sizeof(found), "%s", link);
    size_t used = strlen(list);
    snprintf(list + used, sizeof(list) - used, "%spid %ld in %s", n ? ", " : "",
             pid, link);
    n++;
  }
  if (d)
    closedir(d);
  if (n > 1)
    fail("%d programs named %s run (%s): give --context", n, prog, list);
  snprintf(out, cap, "%s", found);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void nap(void) {
  struct timespec t = {0, 5000000};
  nanosleep(&t, NULL);
}

static int cmd_kill(int argc, char **argv) {
  const char *context = NULL, *target = NULL;
  double wait = 5.0;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--context") && i + 1 < argc)
      context = argv[++i];
    else if (!strncmp(argv[i], "--context=", 10))
      context = argv[i] + 10;
    else if (!strcmp(argv[i], "--wait") && i + 1 < argc)
      wait = atof(argv[++i]);
    else if (argv[i][0] == '-')
      fail("wpp kill: unknown option %s", argv[i]);
    else if (!target)
      target = argv[i];
    else
      fail("wpp kill: one program or context, not %s too", argv[i]);
  }
  char ctx[PATH_MAX];
  if (context) {
    snprintf(ctx, sizeof(ctx), "%s", context);
  } else if (!target) {
    fail("name the program or give --context DIR");
  } else if (strchr(target, '/') || exists(target, "wpp.ctx") ||
             exists(target, "pid")) {
    /* a path names the folder itself, context or not: the message about it
     * must name it, not a default folder of its last component */
    snprintf(ctx, sizeof(ctx), "%s", target);
  } else {
    default_context(ctx, sizeof(ctx), target);
    if (!exists(ctx, "pid")) {
      char other[PATH_MAX];
      running(base_name(target), other, sizeof(other));
      if (other[0])
        snprintf(ctx, sizeof(ctx), "%s", other);
    }
  }
  /* a program being started (or resumed) writes its pid file within
   * milliseconds of its start */
  char pidfile[PATH_MAX + 8], b[32] = "";
  snprintf(pidfile, sizeof(pidfile), "%s/pid", ctx);
  for (double end = now() + 1.0; access(pidfile, F_OK) != 0 && now() < end;)
    nap();
  FILE *f = fopen(pidfile, "r");
  long pid = f && fgets(b, sizeof(b), f) ? strtol(b, NULL, 10) : 0;
  if (f)
    fclose(f);
  if (pid <= 0)
    fail("no program is running in %s", ctx);
  if (kill((pid_t)pid, SIGPWR) != 0)
    fail("no program is running in %s (pid %ld is gone)", ctx, pid);
  for (double end = now() + wait; access(pidfile, F_OK) == 0 && now() < end;)
    nap();
  printf("power failure sent to pid %ld (%s)\n", pid, ctx);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 2 && !strcmp(argv[1], "wpp")) {
    int help = 0;
    for (int i = 3; i < argc && strcmp(argv[i], "--"); i++)
      help |= !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help");
    if (!help && !strcmp(argv[2], "run"))
      return cmd_run(argc - 3, argv + 3);
    if (!help && !strcmp(argv[2], "kill"))
      return cmd_kill(argc - 3, argv + 3);
  }
  /* the rest is the Python command's */
  char **args = calloc((size_t)argc + 4, sizeof(char *));
  if (!args)
    return 2;
  args[0] = (char *)PMKIT_PYTHON; /* python finds its venv from argv[0] */
#ifdef PMKIT_PYTHON_DIR
  /* an installed copy: the package is at PMKIT_PYTHON_DIR from this program
     (its real path), given to python as an argument, not in PYTHONPATH, which
     the programs the command runs would inherit */
  static char pkg[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", pkg, sizeof pkg - 1);
  if (n <= 0)
    fail("cannot find this program (/proc/self/exe): %s", strerror(errno));
  pkg[n] = 0;
  *strrchr(pkg, '/') = 0;
  if (strlen(pkg) + sizeof "/" PMKIT_PYTHON_DIR > sizeof pkg)
    fail("the install path is too long");
  strcat(pkg, "/" PMKIT_PYTHON_DIR);
  args[1] = (char *)"-c";
  args[2] = (char *)"import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
                    "runpy.run_module('pmkit', run_name='__main__', "
                    "alter_sys=True)";
  args[3] = pkg;
  memcpy(args + 4, argv + 1, (size_t)(argc - 1) * sizeof(char *));
#else
  args[1] = (char *)"-m";
  args[2] = (char *)"pmkit";
  memcpy(args + 3, argv + 1, (size_t)(argc - 1) * sizeof(char *));
#endif
  execv(PMKIT_PYTHON, args);
  fprintf(stderr, "pmkit: cannot run %s: %s\n", PMKIT_PYTHON, strerror(errno));
  return 2;
}
