/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wpp.c -- whole-process persistence: start, save at a power failure, and
 * resume. Entry point: wpp_main, which the interception layer (wrap.c) puts in
 * front of the program's main. Without
 * PMKIT_WPP_CONTEXT in the environment the program runs as if we were not
 * there. With it:
 *
 *  - the process re-executes itself without address-space randomisation (so
 *    the vDSO, whose address libc keeps, stays put) and forks a supervisor;
 *    the child runs in its own pid namespace where it can, so that thread
 *    ids can be given back at a restore (clone3 set_tid);
 *  - a clean start maps the context file (mem.c), moves the program's
 *    writable static segment into it, copies argv, envp and auxv into the
 *    persistent heap, and runs main on a new thread whose stack is in the
 *    heap. The first thread stays volatile: the master. It waits for SIGPWR;
 *  - at SIGPWR the master sends WPP_SIGSAVE to each thread on libc's thread
 *    list. Its handler records where its signal frame is (on the thread's
 *    persistent stack, holding every register, the FPU state and the signal
 *    mask), detaches from the kernel's pointers into libc and exits. The
 *    master records the descriptors (fd.c), marks the context SAVED and
 *    exits with WPP_EXIT_SAVED;
 *  - a restart finds SAVED, checks it is the same executable and address
 *    space, maps the file, maps the static segment back, rebuilds the
 *    descriptors, signal dispositions, working directory and umask, and
 *    revives each thread with clone3 at its old thread pointer (and id); the
 *    new thread calls rt_sigreturn on the saved frame. The program's SIGPWR
 *    handler, if it set one, runs first on the thread that runs main.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wpp.h"

/* musl internals (hidden in libc.a, reachable from a static link) */
extern char __libc[];
extern char *__progname, *__progname_full;
extern char **__environ;
extern volatile int __thread_list_lock;
void __tl_lock(void);
void __tl_unlock(void);
int __libc_sigaction(int, const struct sigaction *, struct sigaction *);

struct wpp_hdr *const wpp_hdr = (struct wpp_hdr *)(uintptr_t)WPP_BASE;
int wpp_on;
int wpp_ctxfd = -1;
int wpp_early_maps;
char wpp_dir[4096];
static __thread struct wpp_tls wpp_self;
static __thread int is_master, save_unblocked; /* see wpp_syscall_cp */
static struct {
  void *next;
  long off;
  void *pending;
} empty_robust = {&empty_robust, 0, 0};

/* ---- small helpers ---------------------------------------------------- */

static long sys3(long n, long a, long b, long c) {
  long r;
  __asm__ volatile("syscall"
                   : "=a"(r)
                   : "a"(n), "D"(a), "S"(b), "d"(c)
                   : "rcx", "r11", "memory");
  return r;
}

/* futex without touching errno: app threads and revived threads call it */
static void futex(volatile int *addr, int op, int val) {
  register long r10 __asm__("r10") = 0;
  long r;
  __asm__ volatile("syscall"
                   : "=a"(r)
                   : "a"((long)SYS_futex), "D"(addr), "S"((long)op),
                     "d"((long)val), "r"(r10)
                   : "rcx", "r11", "memory");
  (void)r;
}

static long sys4(long n, long a, long b, long c, long d) {
  register long r10 __asm__("r10") = d;
  long r;
  __asm__ volatile("syscall"
                   : "=a"(r)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                   : "rcx", "r11", "memory");
  return r;
}

static void say(const char *kind, const char *fmt, va_list ap) {
  char buf[1024];
  int n = snprintf(buf, sizeof(buf), "pmkit wpp: %s", kind);
  n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
  if (n > (int)sizeof(buf) - 2)
    n = (int)sizeof(buf) - 2;
  buf[n++] = '\n';
  sys3(SYS_write, 2, (long)buf, n);
}

void wpp_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say("error: ", fmt, ap);
  va_end(ap);
  sys3(SYS_exit_group, 2, 0, 0);
  __builtin_unreachable();
}

void wpp_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say("warning: ", fmt, ap);
  va_end(ap);
}

static void note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  say("", fmt, ap);
  va_end(ap);
}

void wpp_lock(volatile int *l) {
  int c = 0;
  if (__atomic_compare_exchange_n(l, &c, 1, 0, __ATOMIC_ACQUIRE,
                                  __ATOMIC_RELAXED))
    return;
  if (c != 2)
    c = __atomic_exchange_n(l, 2, __ATOMIC_ACQUIRE);
  while (c != 0) {
    futex(l, FUTEX_WAIT_PRIVATE, 2);
    c = __atomic_exchange_n(l, 2, __ATOMIC_ACQUIRE);
  }
}

void wpp_unlock(volatile int *l) {
  if (__atomic_exchange_n(l, 0, __ATOMIC_RELEASE) == 2)
    futex(l, FUTEX_WAKE_PRIVATE, 1);
}

static uint64_t now_ns(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void nap_us(long us) {
  struct timespec t = {us / 1000000, (us % 1000000) * 1000};
  wpp_real.clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL);
}

static uint64_t exe_hash(void) {
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    wpp_die("cannot read /proc/self/exe: %s", strerror(errno));
  uint64_t h = 0xcbf29ce484222325ull;
  unsigned char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0)
    for (ssize_t i = 0; i < n; i++)
      h = (h ^ buf[i]) * 0x100000001b3ull;
  close(fd);
  return h;
}

static long tls_offset(void) {
  return (char *)&wpp_self - (char *)pthread_self();
}

static struct wpp_tls *tls_of(char *t) {
  return (struct wpp_tls *)(t + tls_offset());
}

/* The facts about musl's layout this runtime relies on (wpp.h). */
static void check_libc(char **envp) {
  char *t = (char *)pthread_self();
  char **e = envp;
  while (*e)
    e++;
  if (*(char **)(t + MUSL_PT_SELF) != t ||
      *wpp_pt_tid(t) != (int)syscall(SYS_gettid) ||
      *(void **)(t + MUSL_PT_ROBUST) != t + MUSL_PT_ROBUST ||
      *(size_t **)(__libc + MUSL_LIBC_AUXV) != (size_t *)(e + 1) ||
      *(int *)((char *)stdout + MUSL_FILE_FD) != 1)
    wpp_die("this libc is not the musl 1.2.3 layout the runtime was built "
            "for; rebuild with pmkit wpp cc on this machine");
}

/* The writable PT_LOAD of the (static, non-PIE) executable. */
static void rw_segment(uintptr_t *lo, uintptr_t *hi) {
  const Elf64_Phdr *ph = (const Elf64_Phdr *)getauxval(AT_PHDR);
  size_t n = getauxval(AT_PHNUM);
  int found = 0;
  for (size_t i = 0; i < n; i++) {
    if (ph[i].p_type == PT_DYNAMIC || ph[i].p_type == PT_INTERP)
      wpp_die("the program is dynamically linked; build it with pmkit wpp cc");
    if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_W))
      continue;
    if (found++)
      wpp_die("the program has two writable segments; unsupported");
    *lo = ph[i].p_vaddr & ~(uintptr_t)(WPP_PAGE - 1);
    *hi = (ph[i].p_vaddr + ph[i].p_memsz + WPP_PAGE - 1) &
          ~(uintptr_t)(WPP_PAGE - 1);
  }
  if (!found)
    wpp_die("the program has no writable segment");
  if (*hi - *lo > WPP_DATA_MAX)
    wpp_die("static data of %lu bytes exceed the %llu the context holds",
            (unsigned long)(*hi - *lo), WPP_DATA_MAX);
}

/* ---- start-up ----------------------------------------------------------- */

/* Re-execute with ADDR_NO_RANDOMIZE once: libc keeps the vDSO's address in
 * its static data, and a resumed thread may be in the middle of using it. */
static void no_aslr(char **argv, char **envp) {
  int p = personality(0xffffffff);
  if (p == -1 || (p & ADDR_NO_RANDOMIZE))
    return;
  if (personality((unsigned long)p | ADDR_NO_RANDOMIZE) == -1)
    return;
  execve("/proc/self/exe", argv, envp);
  wpp_warn("cannot re-execute without address randomisation: %s",
           strerror(errno));
}

static int write_id_map(const char *file, const char *text) {
  int fd = open(file, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* A pid namespace of our own (as root, or in a user namespace where those
 * are allowed): the program's threads then have small ids that a restart
 * can ask for again. Returns 1 if the next fork lands in one. */
static int new_pid_ns(void) {
  if (getenv("PMKIT_WPP_NO_NS"))
    return 0;
  if (unshare(CLONE_NEWPID) == 0)
    return 1;
  uid_t uid = getuid();
  gid_t gid = getgid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0)
    return 0;
  char m[64];
  snprintf(m, sizeof(m), "%u %u 1", (unsigned)uid, (unsigned)uid);
  write_id_map("/proc/self/setgroups", "deny");
  int ok = write_id_map("/proc/self/uid_map", m) == 0;
  snprintf(m, sizeof(m), "%u %u 1", (unsigned)gid, (unsigned)gid);
  ok &= write_id_map("/proc/self/gid_map", m) == 0;
  return ok;
}

static int is_term_sig(int sig);

/* A page shared with the supervisor, at a fixed address below the context,
 * where as_killed leaves the signal, so that the supervisor dies of it. */
#define KILLED_PAGE ((volatile int *)(uintptr_t)(WPP_BASE - WPP_PAGE))
static int killed_page;

/* The supervisor: the process the user started. It forwards the signals a
 * user sends (SIGPWR above all) to the program and ends as it ends. The
 * signals it waits for were blocked before the fork (a child that ends at
 * once must not find SIGCHLD still at its default, which discards it). */
static const int fwd_sigs[] = {SIGPWR,  SIGTERM, SIGINT, SIGHUP,
                               SIGQUIT, SIGUSR1, SIGUSR2};

static void supervised_set(sigset_t *s) {
  sigemptyset(s);
  for (size_t i = 0; i < sizeof(fwd_sigs) / sizeof(fwd_sigs[0]); i++)
    sigaddset(s, fwd_sigs[i]);
  sigaddset(s, SIGCHLD);
}

static char pidfile[4200], runlink[4400];

/* The pid file `pmkit wpp kill` reads, written whole (renamed into place),
 * and a link CONTEXT_ROOT/.running/PROG@PID to the context, by which
 * `pmkit wpp kill PROG` finds a program started with a context of its own.
 * Only the supervisor that holds the context's lock writes either. */
static void announce(void) {
  char tmp[4300], b[32];
  snprintf(pidfile, sizeof(pidfile), "%s/pid", wpp_dir);
  snprintf(tmp, sizeof(tmp), "%s/pid.%d", wpp_dir, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int n = snprintf(b, sizeof(b), "%d\n", (int)getpid());
  if (fd < 0 || write(fd, b, (size_t)n) != n || rename(tmp, pidfile) != 0)
    wpp_warn("cannot write %s: pmkit wpp kill will not find the program",
             pidfile);
  if (fd >= 0)
    close(fd);
  const char *name = strrchr(__progname_full, '/');
  name = name ? name + 1 : __progname_full;
  mkdir(WPP_RUN_ROOT, 0700);
  mkdir(WPP_RUN_ROOT "/.running", 0700);
  snprintf(runlink, sizeof(runlink), WPP_RUN_ROOT "/.running/%s@%d", name,
           (int)getpid());
  if (wpp_dir[0] != '/' || symlink(wpp_dir, runlink) != 0)
    runlink[0] = 0;
}

static void unannounce(void) {
  unlink(pidfile);
  if (runlink[0])
    unlink(runlink);
}

static _Noreturn void supervise(pid_t child) {
  sigset_t s;
  supervised_set(&s);
  for (;;) {
    int st;
    pid_t r = waitpid(child, &st, WNOHANG);
    if (r != child) {
      siginfo_t si;
      int sig = sigwaitinfo(&s, &si);
      if (sig > 0 && sig != SIGCHLD)
        kill(child, sig);
      continue;
    }
    unannounce();
    if (WIFEXITED(st) && WEXITSTATUS(st) == WPP_EXIT_SAVED &&
        !getenv("PMKIT_WPP_QUIET"))
      note("power failure: the program's state is saved in %s; run the "
           "same command again to resume",
           wpp_dir);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    int dead = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    if (!dead && killed_page && *KILLED_PAGE && code == 128 + *KILLED_PAGE)
      dead = *KILLED_PAGE; /* as_killed: mirror the signal's death */
    if (!dead)
      wpp_real.exit(code);
    signal(dead, SIG_DFL);
    sigdelset(&s, dead);
    wpp_real.sigmask(SIG_SETMASK, &s, NULL);
    raise(dead);
    wpp_real.exit(code);
  }
}

/* One run per context: the supervisor locks the context directory for the
 * run's whole life, before it writes anything, so that a second start is
 * refused without touching the running one's files. */
static int lock_context_dir(void) {
  int d = open(wpp_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0 && flock(d, LOCK_EX | LOCK_NB) == 0)
    return d;
  char b[32] = "", path[4200];
  snprintf(path, sizeof(path), "%s/pid", wpp_dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, b, sizeof(b) - 1) : -1;
  b[n > 0 ? n : 0] = 0;
  b[strcspn(b, "\n")] = 0;
  wpp_die("%s is in use by another process%s%s%s: a program runs in it. To "
          "run a second instance, give it a context of its own (pmkit wpp "
          "run --context DIR, or PMKIT_WPP_CONTEXT=DIR)",
          wpp_dir, b[0] ? " (pid " : "", b, b[0] ? ")" : "");
}

static void copy_args(int argc, char **argv, char **envp) {
  struct wpp_hdr *h = wpp_hdr;
  size_t nenv = 0, naux = 0, bytes = 0;
  for (int i = 0; i < argc; i++)
    bytes += strlen(argv[i]) + 1;
  for (; envp[nenv]; nenv++)
    bytes += strlen(envp[nenv]) + 1;
  size_t *aux = (size_t *)(envp + nenv + 1);
  while (aux[2 * naux])
    naux++;
  size_t ptrs = ((size_t)argc + 1 + nenv + 1) * sizeof(char *);
  size_t auxb = (2 * naux + 2) * sizeof(size_t);
  size_t abytes = 0; /* and the arguments once more, kept as they were */
  for (int i = 0; i < argc; i++)
    abytes += strlen(argv[i]) + 1;
  char *mem = wpp_alloc(ptrs + auxb + bytes + abytes, PROT_READ | PROT_WRITE);
  if (!mem)
    wpp_die("no room in the context for the arguments");
  char **av = (char **)mem, **ev = av + argc + 1;
  size_t *ax = (size_t *)(ev + nenv + 1);
  char *s = (char *)(ax + 2 * naux + 2);
  for (int i = 0; i < argc; i++) {
    av[i] = s;
    s = stpcpy(s, argv[i]) + 1;
  }
  av[argc] = NULL;
  for (size_t i = 0; i < nenv; i++) {
    ev[i] = s;
    s = stpcpy(s, envp[i]) + 1;
  }
  ev[nenv] = NULL;
  h->args_kept = (uint64_t)(uintptr_t)s; /* the program may change its own */
  for (int i = 0; i < argc; i++)
    s = stpcpy(s, argv[i]) + 1;
  memcpy(ax, aux, auxb);
  h->argc = argc;
  h->argv = (uint64_t)(uintptr_t)av;
  h->envp = (uint64_t)(uintptr_t)ev;
  h->auxv = (uint64_t)(uintptr_t)ax;
  /* libc's own pointers into the initial stack, which is not persistent */
  __environ = ev;
  *(size_t **)(__libc + MUSL_LIBC_AUXV) = ax;
  if (argc > 0) {
    __progname_full = av[0];
    char *b = strrchr(av[0], '/');
    __progname = b ? b + 1 : av[0];
  }
}

/* The mask the program starts with. The master blocks every signal before
 * it starts the program's main thread: a signal the program sends itself
 * early must not find the master the only thread that takes it. */
static sigset_t start_mask;

static void *main_thread(void *unused) {
  (void)unused;
  struct wpp_hdr *h = wpp_hdr;
  wpp_real.sigmask(SIG_SETMASK, &start_mask, NULL);
  exit(wpp_real.main(h->argc, (char **)(uintptr_t)h->argv,
                     (char **)(uintptr_t)h->envp));
}

static int ctx_path(char *out, size_t cap) {
  return snprintf(out, cap, "%s/wpp.ctx", wpp_dir) >= (int)cap ? -1 : 0;
}

/* Move the context descriptor out of the program's way. */
static int stash_fd(int fd) {
  struct rlimit rl;
  int at = 1000;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 64 &&
      rl.rlim_cur < 100000)
    at = (int)rl.rlim_cur - 8;
  int h = fcntl(fd, F_DUPFD_CLOEXEC, at);
  if (h >= 0) {
    close(fd);
    return h;
  }
  return fd;
}

static void persist_static_data(int fd) {
  uintptr_t lo, hi;
  rw_segment(&lo, &hi);
  struct wpp_hdr *h = wpp_hdr;
  h->data_addr = lo;
  h->data_len = hi - lo;
  /* the copy and the remap must see the same bytes: nothing writes static
   * data in between (one thread, no signal handler yet) */
  if (pwrite(fd, (void *)lo, hi - lo, (off_t)WPP_DATA_OFF) !=
      (ssize_t)(hi - lo)) {
    int e = errno;
    char path[4200];
    if (!ctx_path(path, sizeof(path)))
      unlink(path);
    wpp_die("cannot copy the static data into the context: %s", strerror(e));
  }
  if (wpp_real.mmap((void *)lo, hi - lo, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_FIXED, fd,
                    (off_t)WPP_DATA_OFF) != (void *)lo)
    wpp_die("cannot map the static data: %s", strerror(errno));
}

/* ---- the save --------------------------------------------------------- */

static void on_save(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)si;
  struct wpp_tls *me = &wpp_self;
  me->uc = uc;
  me->alive = 1;
  /* the kernel must not touch libc's words when this thread goes: no robust
   * list processing, and the exit clears our word, not libc's list lock */
  sys3(SYS_set_robust_list, (long)&empty_robust, 24, 0);
  sys3(SYS_set_tid_address, (long)&me->alive, 0, 0);
  __atomic_store_n(&me->gen, wpp_hdr->generation + 1, __ATOMIC_RELEASE);
  for (;;)
    sys3(SYS_exit, 0, 0, 0);
}

static void save_all(void) {
  struct wpp_hdr *h = wpp_hdr;
  int s = WPP_RUNNING;
  if (!__atomic_compare_exchange_n(&h->state, &s, WPP_SAVING, 0,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return; /* the program is exiting: nothing to save */
  wpp_kobj_prepare();
  uint32_t want = h->generation + 1;
  char *self = (char *)pthread_self();
  pid_t pid = getpid();
  uint64_t t0 = now_ns(CLOCK_MONOTONIC);
  enum { MAXT = 4096 };
  static struct {
    char *t;
    int tid;
  } sent[MAXT];
  int nsent = 0;
  for (;;) {
    int pending = 0, total = 0;
    /* libc's list lock is never held by a thread that can take a signal
     * (musl blocks them around it), so taking it here cannot deadlock */
    __tl_lock();
    for (char *t = wpp_pt_next(self); t != self; t = wpp_pt_next(t)) {
      total++;
      if (tls_of(t)->gen == want)
        continue;
      pending++;
      int seen = 0;
      /* by address and id: a new thread may reuse a joined one's memory */
      for (int i = 0; i < nsent && !seen; i++)
        seen = sent[i].t == t && sent[i].tid == *wpp_pt_tid(t);
      if (!seen && nsent < MAXT) {
        sent[nsent].t = t;
        sent[nsent++].tid = *wpp_pt_tid(t);
        sys3(SYS_tgkill, pid, *wpp_pt_tid(t), WPP_SIGSAVE);
      }
    }
    __tl_unlock();
    if (!pending) {
      h->threads_saved = (uint64_t)total;
      /* the master's own struct may not be in static data (a program with
       * much TLS): keep its place in the list */
      h->master_prev = (uint64_t)(uintptr_t) * (char **)(self + MUSL_PT_PREV);
      h->master_next = (uint64_t)(uintptr_t)wpp_pt_next(self);
      break;
    }
    if (now_ns(CLOCK_MONOTONIC) - t0 > 10000000000ull)
      wpp_die("%d thread(s) did not stop within 10 s; the context stays "
              "unsaved",
              pending);
    nap_us(50);
  }
  wpp_fd_save();
  wpp_kobj_save();
  /* every disposition as the kernel has it, libc's own included */
  for (int sig = 1; sig < 65; sig++)
    if (sys4(SYS_rt_sigaction, sig, 0, (long)&h->ksig[sig], 8) != 0)
      memset(&h->ksig[sig], 0, sizeof(h->ksig[sig]));
  if (!getcwd(h->cwd, sizeof(h->cwd)))
    h->cwd[0] = 0;
  mode_t m = umask(0);
  umask(m);
  h->umask = m;
  /* interval timers (alarm is one) are per process: what is left of each */
  for (int i = 0; i < 3; i++) {
    struct itimerval v;
    memset(&v, 0, sizeof(v));
    getitimer(i, &v);
    h->itimer[i].interval_us =
        (int64_t)v.it_interval.tv_sec * 1000000 + v.it_interval.tv_usec;
    h->itimer[i].value_us =
        (int64_t)v.it_value.tv_sec * 1000000 + v.it_value.tv_usec;
  }
  h->saved_ns = now_ns(CLOCK_REALTIME);
  __atomic_store_n(&h->state, WPP_SAVED, __ATOMIC_RELEASE);
  sys3(SYS_exit_group, WPP_EXIT_SAVED, 0, 0);
}

static _Noreturn void master_loop(void) {
  is_master = 1;
  sigset_t all, pwr;
  sigfillset(&all);
  wpp_real.sigmask(SIG_SETMASK, &all, NULL);
  sigemptyset(&pwr);
  sigaddset(&pwr, SIGPWR);
  char *self = (char *)pthread_self();
  struct timespec tick = {0, 100000000};
  for (;;) {
    int sig = sigtimedwait(&pwr, NULL, &tick);
    if (sig == SIGPWR)
      save_all();
    /* every thread of the program has ended (pthread_exit from main and
     * the rest): musl would exit(0) in the last one, but the master is
     * still on its list */
    if (wpp_pt_next(self) == self)
      exit(0);
  }
}

static void install_save_handler(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_save;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigfillset(&sa.sa_mask);
  if (__libc_sigaction(WPP_SIGSAVE, &sa, NULL) != 0)
    wpp_die("cannot install the save handler: %s", strerror(errno));
}

/* ---- the restore ---------------------------------------------------- */

struct revive {
  char *t;
  void *uc;
  volatile int *go;
  int handler; /* this thread runs the program's failure handler */
};

/* PMKIT_WPP_BREAK=fpu|pipes|sleep: a deliberately broken restore, for the
 * tests that must fail (tests/cli/test_wpp.py). Never set in normal use. */
WPP_HIDDEN int wpp_broken(const char *what) {
  const char *b = getenv("PMKIT_WPP_BREAK");
  return b && strstr(b, what) != NULL;
}

static _Noreturn void jump_to(void *uc) {
  __asm__ volatile("mov %0, %%rsp\n\t"
                   "mov $15, %%eax\n\t" /* SYS_rt_sigreturn */
                   "syscall\n\t"
                   "hlt" ::"r"(uc)
                   : "memory");
  __builtin_unreachable();
}

static void run_failure_handler(ucontext_t *uc) {
  struct sigaction *sa = &wpp_hdr->onfail;
  if (sa->sa_handler == SIG_DFL || sa->sa_handler == SIG_IGN)
    return;
  sigset_t m = uc->uc_sigmask;
  for (int s = 1; s < 65; s++)
    if (sigismember(&sa->sa_mask, s))
      sigaddset(&m, s);
  sigaddset(&m, SIGPWR);
  sigaddset(&m, WPP_SIGSAVE); /* no save while the others wait for it */
  wpp_real.sigmask(SIG_SETMASK, &m, NULL);
  if (sa->sa_flags & SA_SIGINFO) {
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    si.si_signo = SIGPWR;
    si.si_code = SI_KERNEL;
    sa->sa_sigaction(SIGPWR, &si, uc);
  } else {
    sa->sa_handler(SIGPWR);
  }
}

static int revive_entry(void *arg) {
  struct revive *r = arg;
  char *t = r->t;
  while (__atomic_load_n(r->go, __ATOMIC_ACQUIRE) < (r->handler ? 1 : 2))
    futex(r->go, FUTEX_WAIT_PRIVATE, __atomic_load_n(r->go, __ATOMIC_ACQUIRE));
  sys3(SYS_set_robust_list, (long)(t + MUSL_PT_ROBUST), 24, 0);
  if (r->handler) {
    run_failure_handler(r->uc);
    __atomic_store_n(r->go, 2, __ATOMIC_RELEASE);
    futex(r->go, FUTEX_WAKE_PRIVATE, 1 << 30);
  }
  jump_to(r->uc);
}

/* A revived thread whose old id could not be given back (no capability over
 * its pid namespace, or the id taken) gets a new one. musl records the
 * owner's id in the locks that can be taken again by their owner: mutexes
 * that are not of the normal type (all on the owner's robust list) and
 * FILEs held with flockfile (on its stdio_locks list); the std streams are
 * checked too. Rewrite those of each thread from its old id to its new. It
 * is a best effort: a thread stopped inside a lock routine holds its old id
 * in a register and may take the lock under it after the restore. */
static void own(volatile int *w, int old, int new, int mask) {
  int v = *w;
  if ((v & mask) == old)
    *w = (v & ~mask) | new;
}

static void rewrite_owners(char *t, int old, int new) {
  char *head = t + MUSL_PT_ROBUST;
  int n = 0;
  for (char *e = *(char **)head; e && e != head && n < 1000000;
       e = *(char **)e, n++)
    own((volatile int *)(e - MUSL_MUTEX_NEXT + MUSL_MUTEX_LOCK), old, new,
        MUSL_MUTEX_TID);
  char *pending = *(char **)(head + 16);
  if (pending)
    own((volatile int *)(pending - MUSL_MUTEX_NEXT + MUSL_MUTEX_LOCK), old, new,
        MUSL_MUTEX_TID);
  n = 0;
  for (char *f = *(char **)(t + MUSL_PT_STDIO_LOCKS); f && n < 100000;
       f = *(char **)(f + MUSL_FILE_NEXT_LOCKED), n++)
    own((volatile int *)(f + MUSL_FILE_LOCK), old, new, ~MUSL_FILE_WAITERS);
  FILE *std[] = {stdin, stdout, stderr};
  for (int i = 0; i < 3; i++)
    own((volatile int *)((char *)std[i] + MUSL_FILE_LOCK), old, new,
        ~MUSL_FILE_WAITERS);
}

struct clone3_args {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size,
      tls, set_tid, set_tid_size, cgroup;
};

static volatile int revive_go; /* 1: the handler may run; 2: everyone */

/* Thread ids that changed at this restore, for the timers that signal a
 * thread. */
static struct {
  int old, now;
} moved_tids[256];
static int nmoved_tids;

static int tid_now(int old) {
  for (int i = 0; i < nmoved_tids; i++)
    if (moved_tids[i].old == old)
      return moved_tids[i].now;
  return old;
}

static int revive_threads(int *handler) {
  char *self = (char *)pthread_self();
  struct wpp_hdr *h = wpp_hdr;
  revive_go = 0;
  *handler = 0;
  int break_fpu = wpp_broken("fpu"), break_owners = wpp_broken("owners");
  int n = 0, moved = 0;
  char *runner = NULL;
  int count = 0;
  for (char *t = wpp_pt_next(self); t != self; t = wpp_pt_next(t)) {
    int in_data = (uintptr_t)t >= h->data_addr &&
                  (uintptr_t)t < h->data_addr + h->data_len;
    if ((!in_data && !wpp_in_heap(t, 256)) || ++count > 100000 ||
        !wpp_in_heap(tls_of(t)->uc, sizeof(ucontext_t)))
      wpp_die("the saved thread list is damaged (corrupt context)");
    if (tls_of(t)->gen != h->generation + 1)
      wpp_die("thread %p was not saved; the context cannot be resumed",
              (void *)t);
    if (!runner || t == (char *)(uintptr_t)h->main_thread)
      runner = t;
  }
  for (char *t = wpp_pt_next(self); t != self; t = wpp_pt_next(t)) {
    size_t ss = t == runner ? (1u << 20) : (64u << 10);
    char *stk = wpp_real.mmap(NULL, ss, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct revive *r = (struct revive *)(stk + ss) - 1;
    if (stk == MAP_FAILED)
      wpp_die("no memory for a thread's start-up stack");
    r->t = t;
    r->uc = tls_of(t)->uc;
    if (break_fpu) {
      /* forget the vector registers: the program's floating point breaks */
      ucontext_t *u = r->uc;
      if (u->uc_mcontext.fpregs)
        memset(u->uc_mcontext.fpregs->_xmm, 0,
               sizeof(u->uc_mcontext.fpregs->_xmm));
    }
    r->go = &revive_go;
    r->handler = t == runner && h->onfail_set;
    *handler |= r->handler;
    pid_t old = *wpp_pt_tid(t);
    struct clone3_args ca;
    memset(&ca, 0, sizeof(ca));
    ca.flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
               CLONE_THREAD | CLONE_SYSVSEM | CLONE_SETTLS |
               CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
    ca.child_tid = (uint64_t)(uintptr_t)&__thread_list_lock;
    ca.parent_tid = (uint64_t)(uintptr_t)wpp_pt_tid(t);
    ca.stack = (uint64_t)(uintptr_t)stk;
    ca.stack_size = (uint64_t)((char *)r - stk) & ~(uint64_t)15;
    ca.tls = (uint64_t)(uintptr_t)t;
    /* the old id, in the namespace or not: allowed with CAP_CHECKPOINT_RESTORE
     * over the pid namespace (ours, or root's), and when the id is free */
    if (!break_owners) {
      ca.set_tid = (uint64_t)(uintptr_t)&old;
      ca.set_tid_size = 1;
    }
    long tid = wpp_clone3(&ca, sizeof(ca), revive_entry, r);
    if (tid < 0 && ca.set_tid_size) {
      ca.set_tid = 0;
      ca.set_tid_size = 0;
      tid = wpp_clone3(&ca, sizeof(ca), revive_entry, r);
    }
    if (tid < 0)
      wpp_die("cannot recreate a thread: %s", strerror((int)-tid));
    if (tid != old) {
      moved++;
      if (nmoved_tids < (int)(sizeof(moved_tids) / sizeof(moved_tids[0])))
        moved_tids[nmoved_tids].old = old,
        moved_tids[nmoved_tids++].now = (int)tid;
      if (!break_owners)
        rewrite_owners(t, old, (int)tid);
    }
    n++;
  }
  if (moved && !getenv("PMKIT_WPP_QUIET"))
    wpp_warn("%d thread id(s) could not be kept at the restore; the owners of "
             "held mutexes and FILE locks were rewritten (best effort: a "
             "thread stopped inside a lock routine may still use its old id)",
             moved);
  h->threads_restored = (uint64_t)n;
  return n;
}

/* Pid 1 of a namespace ignores every signal whose action is the default,
 * so a SIGTERM or a ^C would not end the program. Where the program keeps
 * the default, a handler does what the default would: end the process (the
 * context stays unsaved, as after any kill); the supervisor then dies of
 * the same signal. The program never sees this handler. */
static const int term_sigs[] = {
    SIGHUP,  SIGINT,    SIGQUIT, SIGABRT, SIGUSR1,   SIGUSR2, SIGPIPE, SIGALRM,
    SIGTERM, SIGSTKFLT, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO,   35,
    36,      37,        38,      39,      40,        41,      42,      43,
    44,      45,        46,      47,      48,        49,      50,      51,
    52,      53,        54,      55,      56,        57,      58,      59,
    60,      61,        62,      63}; /* real-time signals: from 35 (musl keeps
                                         32-34) to SIGSAVE */

static int is_term_sig(int sig) {
  for (size_t i = 0; i < sizeof(term_sigs) / sizeof(term_sigs[0]); i++)
    if (term_sigs[i] == sig)
      return 1;
  return 0;
}

static void as_killed(int sig) {
  if (killed_page)
    *KILLED_PAGE = sig;
  sys3(SYS_exit_group, 128 + sig, 0, 0);
}

static void term_defaults(void) {
  if (!wpp_hdr->ns)
    return;
  struct sigaction sa, cur;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = as_killed;
  for (size_t i = 0; i < sizeof(term_sigs) / sizeof(term_sigs[0]); i++)
    if (__libc_sigaction(term_sigs[i], NULL, &cur) == 0 &&
        cur.sa_handler == SIG_DFL)
      __libc_sigaction(term_sigs[i], &sa, NULL);
}

static void reinstall_signals(void) {
  struct wpp_hdr *h = wpp_hdr;
  for (int s = 1; s < 65; s++)
    if (s != SIGKILL && s != SIGSTOP && s != WPP_SIGSAVE && s != SIGPWR &&
        h->ksig[s].handler)
      sys4(SYS_rt_sigaction, s, (long)&h->ksig[s], 0, 8);
}

static const char *state_name(int s) {
  switch (s) {
  case WPP_INIT:
    return "its creation was interrupted (half-written)";
  case WPP_RUNNING:
    return "the program is running, or ended without a save (killed, "
           "crashed)";
  case WPP_SAVING:
    return "a save was interrupted";
  case WPP_EXITING:
    return "the program was exiting";
  default:
    return "its state is unknown (corrupt)";
  }
}

/* The tables a restore reads, within their bounds (a corrupt context must
 * fail here, not index out of them). */
static void check_tables(const char *path) {
  struct wpp_hdr *h = wpp_hdr;
  int bad = h->nfd > WPP_MAX_FD || h->nepoll > WPP_MAX_EPOLL ||
            h->nptimer > WPP_MAX_PTIMER || h->nfmap > WPP_MAX_FMAP ||
            h->npending > WPP_MAX_PENDING || h->nfree > WPP_MAX_FREE ||
            h->bump > WPP_HEAP_PAGES || !h->master_prev || !h->master_next;
  for (uint32_t i = 0; !bad && i < h->nfd; i++) {
    struct wpp_fd *f = &h->fd[i];
    /* (a kind a restore cut short left negative is restored again) */
    bad = f->num < 0 || f->num >= 65536 || f->kind >= WPP_FD_KINDS ||
          (f->kind < 0 && f->kind != -WPP_FD_PIPE_R &&
           f->kind != -WPP_FD_PIPE_W && f->kind != -WPP_FD_SOCKPAIR) ||
          memchr(f->path, 0, sizeof(f->path)) == NULL ||
          f->addrlen > sizeof(f->addr) || f->pipe_len > WPP_PIPEBUF_MAX ||
          f->pipe_off > WPP_PIPEBUF_MAX - f->pipe_len || f->nlock < 0 ||
          f->nlock > WPP_FD_LOCKS;
  }
  for (uint32_t i = 0; !bad && i < h->nfmap; i++)
    bad = memchr(h->fmap[i].path, 0, sizeof(h->fmap[i].path)) == NULL;
  for (uint32_t i = 0; !bad && i < h->nepoll; i++)
    bad = h->epoll[i].epfd < 0 || h->epoll[i].fd < 0;
  if (bad)
    wpp_die("%s: its tables are out of bounds (corrupt)", path);
}

/* A resumed program goes on with the arguments it started with: say so if
 * the command that resumes it gives others (before the restore proper:
 * nothing of the program's runs yet). */
static void warn_new_args(int argc, char **argv) {
  struct wpp_hdr *h = wpp_hdr;
  const char *old = (const char *)(uintptr_t)h->args_kept;
  int same = h->argc == argc && wpp_in_heap(old, 1);
  for (int i = 0; same && i < argc; i++) { /* argv[0] included: skipped */
    same = wpp_in_heap(old, strlen(argv[i]) + 1) &&
           (i == 0 || !strcmp(old, argv[i]));
    old += strlen(old) + 1;
  }
  if (!same)
    wpp_warn("the program resumes with the arguments it started with (%d); "
             "the %d given now differ and are ignored (start afresh to use "
             "them: pmkit wpp run --fresh)",
             h->argc - 1, argc - 1);
}

static _Noreturn void restore(int fd, int ns, const char *path, int argc,
                              char **argv) {
  struct wpp_hdr hd;
  uint64_t t0 = now_ns(CLOCK_MONOTONIC);
  if (pread(fd, &hd, offsetof(struct wpp_hdr, lock), 0) !=
      (ssize_t)offsetof(struct wpp_hdr, lock))
    wpp_die("%s: too short to be a context (corrupt or half-written)", path);
  if (hd.magic != WPP_MAGIC)
    wpp_die("%s is not a WPP context", path);
  if (hd.version != WPP_VERSION)
    wpp_die("%s has layout %u; this runtime reads %u", path, hd.version,
            WPP_VERSION);
  if (hd.state != WPP_SAVED)
    wpp_die("%s cannot be resumed: %s; start afresh with pmkit wpp run "
            "--fresh, or remove %s",
            path, state_name(hd.state), wpp_dir);
  if (hd.exe_hash != exe_hash())
    wpp_die("%s was saved by another executable; run that one, or remove "
            "the context to start afresh",
            path);
  uintptr_t lo, hi;
  rw_segment(&lo, &hi);
  if (hd.data_addr != lo || hd.data_len != hi - lo)
    wpp_die("%s: the static data does not match this executable", path);
  if (hd.vdso != getauxval(AT_SYSINFO_EHDR))
    wpp_die("the vDSO moved (%#llx, was %#llx): address randomisation is on "
            "and cannot be turned off here",
            (unsigned long long)getauxval(AT_SYSINFO_EHDR),
            (unsigned long long)hd.vdso);
  if (hd.ns && !ns)
    wpp_warn("no pid namespace this time: thread ids will change");
  if (!getenv("PMKIT_WPP_QUIET"))
    note("resuming from %s (restore %u)", wpp_dir, hd.generation + 1);
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != WPP_SIZE)
    wpp_die("%s is truncated (corrupt)", path);
  int r = wpp_mem_map(fd);
  if (r)
    wpp_die("cannot map the context at %#llx: %s", WPP_BASE, strerror(-r));
  check_tables(path);
  warn_new_args(argc, argv);
  wpp_block_brk();
  /* every signal blocked, libc's own too (musl's sigfillset leaves out 32
   * to 34, SIGTIMER among them): the revived threads inherit this mask
   * until their own is back, and a timer's SIGTIMER reaching one of them
   * unblocked would kill the program (or, as pid 1, be dropped and stop
   * the timer for good) */
  uint64_t all = ~0ull;
  sys4(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, 0, 8);
  char *self = (char *)pthread_self();
  int mytid = (int)syscall(SYS_gettid);
  /* From here libc's static data is the saved program's: its locks may be
   * held by threads that are not running yet. Only system calls and code
   * that takes no lock until the threads are back. */
  if (wpp_real.mmap((void *)lo, hi - lo, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_FIXED, fd,
                    (off_t)WPP_DATA_OFF) != (void *)lo)
    wpp_die("cannot map the static data back: %s", strerror(errno));
  *wpp_pt_tid(self) = mytid;
  wpp_fmap_restore(wpp_dir);
  /* put the master (perhaps at another address) back into the list */
  char *mp = (char *)(uintptr_t)wpp_hdr->master_prev,
       *mn = (char *)(uintptr_t)wpp_hdr->master_next;
  if (!mp || !mn)
    wpp_die("%s: the thread list is missing (corrupt)", path);
  *(char **)(self + MUSL_PT_PREV) = mp;
  *(char **)(self + MUSL_PT_NEXT) = mn;
  *(char **)(mp + MUSL_PT_NEXT) = self;
  *(char **)(mn + MUSL_PT_PREV) = self;
  wpp_ctxfd = fd;
  struct wpp_hdr *h = wpp_hdr;
  if (h->cwd[0] && chdir(h->cwd) != 0)
    wpp_warn("cannot return to %s: %s", h->cwd, strerror(errno));
  umask(h->umask);
  for (int i = 0; i < 3; i++) {
    if (!h->itimer[i].value_us)
      continue;
    struct itimerval v = {
        {h->itimer[i].interval_us / 1000000,
         h->itimer[i].interval_us % 1000000},
        {h->itimer[i].value_us / 1000000, h->itimer[i].value_us % 1000000}};
    setitimer(i, &v, NULL);
  }
  h->ns = ns;
  reinstall_signals();
  term_defaults();
  install_save_handler();
  wpp_fd_restore(wpp_dir);
  wpp_stdio_note();
  int handler;
  revive_threads(&handler);
  /* the threads wait for revive_go, with every signal blocked until their
   * saved masks are back: what the timers and the pending signals send
   * now waits for them (the timers are armed later: wpp_ptimer_arm) */
  wpp_ptimer_restore(tid_now);
  wpp_signals_restore();
  h->restore_ns = now_ns(CLOCK_MONOTONIC) - t0;
  h->generation++;
  __atomic_store_n(&h->state, WPP_RUNNING, __ATOMIC_RELEASE);
  /* the failure handler first, alone; then everyone */
  __atomic_store_n(&revive_go, handler ? 1 : 2, __ATOMIC_RELEASE);
  futex(&revive_go, FUTEX_WAKE_PRIVATE, 1 << 30);
  /* a power failure during the failure handler waits until it is done */
  while (__atomic_load_n(&revive_go, __ATOMIC_ACQUIRE) != 2)
    futex(&revive_go, FUTEX_WAIT_PRIVATE, 1);
  wpp_ptimer_arm();
  /* the links kept the files alive until the restore could not fail */
  wpp_fd_cleanup(wpp_dir);
  master_loop();
}

int wpp_main(int argc, char **argv, char **envp) {
  const char *dir = getenv("PMKIT_WPP_CONTEXT");
  if (!dir || !*dir)
    return wpp_real.main(argc, argv, envp);
  if (strlen(dir) >= sizeof(wpp_dir) - 64)
    wpp_die("context path too long");
  strcpy(wpp_dir, dir);
  /* a power failure from now on is the runtime's, in every process it
   * becomes (the mask survives the exec and the fork below) */
  sigset_t pwr;
  sigemptyset(&pwr);
  sigaddset(&pwr, SIGPWR);
  wpp_real.sigmask(SIG_BLOCK, &pwr, NULL);
  no_aslr(argv, envp);
  if (argc > 0) { /* re-executed through /proc/self/exe: "exe" otherwise */
    const char *b = strrchr(argv[0], '/');
    prctl(PR_SET_NAME, b ? b + 1 : argv[0]);
  }
  check_libc(envp);
  if (mkdir(wpp_dir, 0700) != 0 && errno != EEXIST)
    wpp_die("cannot create the context directory %s: %s", wpp_dir,
            strerror(errno));
  /* a context decides where every thread jumps: only the user's own */
  struct stat ds;
  if (lstat(wpp_dir, &ds) != 0 || !S_ISDIR(ds.st_mode) ||
      ds.st_uid != geteuid() || (ds.st_mode & 022))
    wpp_die("%s is not a directory of yours that only you can write; "
            "refusing to use it as a context",
            wpp_dir);
  killed_page =
      wpp_real.mmap((void *)KILLED_PAGE, WPP_PAGE, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
                    0) == (void *)KILLED_PAGE;
  int dirfd = lock_context_dir();
  announce();
  sigset_t sup, before;
  supervised_set(&sup);
  sigdelset(&sup, SIGPWR); /* blocked above, and stays blocked in the child */
  wpp_real.sigmask(SIG_BLOCK, &sup, &before);
  int ns = new_pid_ns();
  pid_t c = fork();
  if (c < 0) {
    unannounce();
    wpp_die("fork: %s", strerror(errno));
  }
  if (c > 0)
    supervise(c);
  close(dirfd);
  wpp_real.sigmask(SIG_SETMASK, &before, NULL);
  /* Memory a constructor allocated before main is outside the context and
   * would not survive; refuse rather than resume without it. (Without
   * address randomisation the break starts right after static data.) */
  uintptr_t lo0, hi0;
  rw_segment(&lo0, &hi0);
  if (wpp_early_maps || (uintptr_t)syscall(SYS_brk, 0) > hi0 + WPP_PAGE)
    wpp_die("memory was allocated before main (by a constructor?); WPP "
            "cannot make it persistent");
  /* the program's process; pid 1 of its namespace when ns */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  char path[4200];
  if (ctx_path(path, sizeof(path)))
    wpp_die("context path too long");
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd >= 0) {
    fd = stash_fd(fd);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0)
      wpp_die("%s is in use by another process", path);
    restore(fd, ns, path, argc, argv);
  }
  if (errno != ENOENT)
    wpp_die("cannot open %s: %s", path, strerror(errno));
  fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    wpp_die("cannot create %s: %s", path, strerror(errno));
  fd = stash_fd(fd);
  flock(fd, LOCK_EX | LOCK_NB);
  wpp_ctxfd = fd;
  /* the header and the static data get their file space now: a full file
   * system is refused here, not met later by a store (SIGBUS) */
  uintptr_t lo1, hi1;
  rw_segment(&lo1, &hi1);
  if (ftruncate(fd, (off_t)WPP_SIZE) != 0 || wpp_reserve(0, WPP_MAP_OFF) ||
      wpp_reserve(WPP_DATA_OFF, hi1 - lo1)) {
    int e = errno;
    unlink(path);
    wpp_die("cannot make the context %s: %s", path, strerror(e));
  }
  int r = wpp_mem_map(fd);
  if (r)
    wpp_die("cannot map the context at %#llx: %s", WPP_BASE, strerror(-r));
  struct wpp_hdr *h = wpp_hdr;
  h->magic = WPP_MAGIC;
  h->version = WPP_VERSION;
  h->state = WPP_INIT;
  h->exe_hash = exe_hash();
  h->vdso = getauxval(AT_SYSINFO_EHDR);
  h->ns = ns;
  h->created_ns = now_ns(CLOCK_REALTIME);
  wpp_block_brk();
  persist_static_data(fd);
  wpp_on = 1;
  copy_args(argc, argv, envp);
  wpp_stdio_note();
  /* the program's threads never take SIGPWR (blocked above, inherited):
   * the master waits for it */
  install_save_handler();
  term_defaults();
  __atomic_store_n(&h->state, WPP_RUNNING, __ATOMIC_RELEASE);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setstacksize(&at, 8u << 20);
  pthread_t mt;
  sigset_t all;
  sigfillset(&all);
  wpp_real.sigmask(SIG_SETMASK, &all, &start_mask);
  if (pthread_create(&mt, &at, main_thread, NULL) != 0)
    wpp_die("cannot start the program's main thread");
  h->main_thread = (uint64_t)(uintptr_t)mt;
  master_loop();
}

/* ---- the program's view of signals, sleeps and exit ------------------ */

int wpp_sigaction(int sig, const struct sigaction *sa, struct sigaction *old) {
  if (!wpp_on)
    return wpp_real.sigaction(sig, sa, old);
  if (sig == WPP_SIGSAVE) {
    errno = EINVAL; /* reserved for the runtime */
    return -1;
  }
  struct wpp_hdr *h = wpp_hdr;
  if (sig == SIGPWR) {
    /* the failure handler: called at a restore, never installed */
    if (old)
      *old = h->onfail;
    if (sa) {
      h->onfail = *sa;
      h->onfail_set = 1;
    }
    return 0;
  }
  struct sigaction mine;
  const struct sigaction *use = sa;
  if (sa) {
    /* the save signal must reach a thread running any handler */
    mine = *sa;
    sigdelset(&mine.sa_mask, WPP_SIGSAVE);
    if (h->ns && is_term_sig(sig) && sa->sa_handler == SIG_DFL) {
      mine.sa_handler = as_killed;
      mine.sa_flags &= ~SA_SIGINFO;
    }
    use = &mine;
  }
  int r = wpp_real.sigaction(sig, use, old);
  if (r == 0 && old && old->sa_handler == as_killed)
    old->sa_handler = SIG_DFL;
  return r;
}

int wpp_sigmask(int how, const sigset_t *set, sigset_t *old) {
  if (!wpp_on)
    return wpp_real.sigmask(how, set, old);
  if (!set) { /* a query: the runtime's SIGPWR block is not the program's */
    int r = wpp_real.sigmask(how, NULL, old);
    if (r == 0 && old)
      sigdelset(old, SIGPWR);
    return r;
  }
  sigset_t s = *set;
  if (how == SIG_BLOCK || how == SIG_SETMASK)
    sigdelset(&s, WPP_SIGSAVE);
  if (how == SIG_UNBLOCK)
    sigdelset(&s, SIGPWR);
  if (how == SIG_SETMASK)
    sigaddset(&s, SIGPWR);
  int r = wpp_real.sigmask(how, &s, old);
  if (r == 0 && old)
    sigdelset(old, SIGPWR);
  return r;
}

/* A sleep cut short by a power failure finishes after the restore. */
int wpp_clock_nanosleep(int clk, int flags, const struct timespec *req,
                        struct timespec *rem) {
  if (!wpp_on)
    return wpp_real.clock_nanosleep(clk, flags, req, rem);
  struct timespec left = *req, r;
  for (;;) {
    uint32_t g = wpp_hdr->generation;
    int e = wpp_real.clock_nanosleep(clk, flags, &left, &r);
    if (e == EINTR && wpp_hdr->generation != g && !wpp_broken("sleep")) {
      if (!(flags & TIMER_ABSTIME))
        left = r;
      continue;
    }
    if (e == EINTR && rem && !(flags & TIMER_ABSTIME))
      *rem = r; /* (an absolute sleep leaves rem alone, as the kernel does) */
    return e;
  }
}

/* A blocking call the save interrupted returns EINTR after the restore,
 * even a poll or epoll_wait (which SA_RESTART does not restart) in a
 * program that has no signal handler and never sees EINTR natively: make
 * it again, as if nothing had happened (with its whole timeout). And a
 * thread waiting in sigtimedwait may have blocked every signal, the save
 * signal too (musl's SIGEV_THREAD timer thread does, with a raw system
 * call): unblock that one first, or the thread could never be saved. */
long wpp_syscall_cp(long nr, long a, long b, long c, long d, long e, long f) {
  if (!wpp_on || is_master)
    return wpp_real.syscall_cp(nr, a, b, c, d, e, f);
  if (nr == SYS_rt_sigtimedwait && !save_unblocked) {
    uint64_t m = 1ull << (WPP_SIGSAVE - 1);
    sys4(SYS_rt_sigprocmask, SIG_UNBLOCK, (long)&m, 0, 8);
    save_unblocked = 1;
  }
  long done = 0;
  for (;;) {
    uint32_t g = wpp_hdr->generation;
    long r = wpp_real.syscall_cp(nr, a, b, c, d, e, f);
    /* sleeps go on with the time left: wpp_clock_nanosleep */
    if (r == -EINTR && wpp_hdr->generation != g && nr != SYS_clock_nanosleep &&
        nr != SYS_nanosleep && !wpp_broken("eintr"))
      continue;
    /* a blocking write or send the save cut short (the kernel returns what
     * it had sent when a signal comes) sends the rest: natively it would not
     * have returned before it was all sent */
    int cut = r > 0 && wpp_hdr->generation != g && !wpp_broken("eintr");
    if (cut && (nr == SYS_write || nr == SYS_sendto || nr == SYS_pwrite64) &&
        r < c && !(fcntl((int)a, F_GETFL) & O_NONBLOCK)) {
      done += r;
      b += r;
      c -= r;
      if (nr == SYS_pwrite64)
        d += r; /* its offset */
      continue;
    }
    /* a vector write: the rest of its vector, by write (each finished the
     * same way); the program's vector is not changed */
    if (cut && nr == SYS_writev && !(fcntl((int)a, F_GETFL) & O_NONBLOCK)) {
      const struct iovec *v = (const struct iovec *)b;
      long skip = r, more = 0;
      for (long i = 0; i < c; i++) {
        if (skip >= (long)v[i].iov_len) {
          skip -= (long)v[i].iov_len;
          continue;
        }
        long w = wpp_syscall_cp(SYS_write, a, (long)v[i].iov_base + skip,
                                (long)v[i].iov_len - skip, 0, 0, 0);
        if (w < 0)
          break;
        more += w;
        if (w < (long)v[i].iov_len - skip)
          break; /* (a short write not made by a save) */
        skip = 0;
      }
      return r + done + more;
    }
    return done && r < 0 ? done : r + done;
  }
}

_Noreturn void wpp_exit(int code) {
  if (wpp_on) {
    struct wpp_hdr *h = wpp_hdr;
    for (;;) {
      int s = WPP_RUNNING;
      if (__atomic_compare_exchange_n(&h->state, &s, WPP_EXITING, 0,
                                      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        break;
      /* a save is under way and will stop this thread; after the restore
       * the state is RUNNING again and the exit goes on */
      nap_us(1000);
    }
    char path[4200];
    wpp_fd_cleanup(wpp_dir);
    if (!ctx_path(path, sizeof(path)))
      unlink(path);
  }
  wpp_real.exit(code);
}

/* ---- calls WPP cannot honour ------------------------------------------ */

/* A second process would share nothing of the context, and exec would throw
 * the persistent process away: both fail, loudly, and the program goes on. */
int wpp_unsupported(const char *what) {
  wpp_warn("%s is not supported under whole-process persistence; it fails "
           "with ENOTSUP",
           what);
  errno = ENOTSUP;
  return -1;
}
