/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_test.c -- unit tests of the WPP runtime's core (runtime/wpp/wpp.c,
 * included here so that its static functions are reachable): the checks a
 * restart makes before it resumes anything (header, executable, static
 * data, vDSO, size, table bounds) and the exact refusal each corruption
 * gets; the bookkeeping of a start and a restore (the arguments copied into
 * the heap and compared at a resume, thread-owner rewriting, thread ids);
 * the save itself (every thread stopped with its frame in the heap, the
 * context SAVED, exit status 86) and the exit (state EXITING, links and
 * context removed; an exit during a save waits for it); the program's view
 * of signals (SIGPWR, the save signal, pid 1's default actions) and the
 * calls a power failure interrupts (a sleep, a read, a write cut short) that
 * go on after a restore and only then.
 *
 * What would change this process for good (a save, an exit, signal state,
 * libc's argument pointers) runs in a child (unit_in_child, unit_child);
 * the runtime dies with exit status 2 and "pmkit wpp: error: ..." where it
 * refuses, which the parent reads from the child's standard error.
 *
 * Groups: restart, signals (every case must pass); control (must fail: a
 * context valid in every field given to the refusal check); known (cases
 * that fail today and show a defect; see tests/wpp/unit/CMakeLists.txt).
 */
#include "wpp.c"

#include "unit.h"

#include <sys/ioctl.h>
#include <sys/uio.h>

static char ctx_file[1100];

static void core_setup(void) {
  unit_ctx_create(); /* not mapped: a child maps it, or the case */
  snprintf(ctx_file, sizeof(ctx_file), "%s/wpp.ctx", unit_dir);
}

static void core_teardown(void) { unit_ctx_teardown(); }

/* ---- restart: what a restore refuses ------------------------------------ */

static struct wpp_hdr hd; /* a header written with pwrite */

/* A header that passes every check before the mapping: magic, version,
 * SAVED, this executable, its static data, this vDSO. */
static void valid_header(void) {
  uintptr_t lo, hi;
  memset(&hd, 0, sizeof(hd));
  hd.magic = WPP_MAGIC;
  hd.version = WPP_VERSION;
  hd.state = WPP_SAVED;
  hd.exe_hash = exe_hash();
  rw_segment(&lo, &hi);
  hd.data_addr = lo;
  hd.data_len = hi - lo;
  hd.vdso = getauxval(AT_SYSINFO_EHDR);
}

static void write_header(uint64_t size) {
  CHECK_EQ(ftruncate(wpp_ctxfd, 0), 0);
  CHECK_EQ(pwrite(wpp_ctxfd, &hd, offsetof(struct wpp_hdr, lock), 0),
           offsetof(struct wpp_hdr, lock));
  CHECK_EQ(ftruncate(wpp_ctxfd, (off_t)size), 0);
}

static void restore_child(void *unused) {
  (void)unused;
  char *argv[] = {"core_test", NULL};
  restore(wpp_ctxfd, 0, ctx_file, 1, argv);
}

/* The restore of the header written refuses it: exit status 2 and an error
 * line that holds want. */
static void refused(const char *want, int line) {
  char err[2048];
  int st = unit_child(restore_child, NULL, err, sizeof(err));
  if (unit_code(st) != 2 || !strstr(err, "pmkit wpp: error: ") ||
      !strstr(err, want)) {
    char d[2300];
    snprintf(d, sizeof(d), "exit %d, wanted 2 and \"%s\"; stderr: %.1900s",
             unit_code(st), want, err);
    unit_fail(__FILE__, line, "refused(want)", d);
  }
}
#define REFUSED(want) refused((want), __LINE__)

/* Each field a restore checks before it maps the context, one corrupted at
 * a time, with the refusal it gets; the last has every field right and is
 * refused only for its tables (the thread list is missing). */
static void restart_refuse_header(void) {
  char want[1300];
  valid_header();
  write_header(100);
  REFUSED("too short to be a context (corrupt or half-written)");
  hd.magic ^= 1;
  write_header(WPP_SIZE);
  REFUSED("is not a WPP context");
  valid_header();
  hd.version = 2;
  write_header(WPP_SIZE);
  REFUSED("has layout 2; this runtime reads 3");
  static const struct {
    int state;
    const char *why;
  } states[] = {
      {WPP_INIT, "cannot be resumed: its creation was interrupted"},
      {WPP_RUNNING, "cannot be resumed: the program is running, or ended "
                    "without a save (killed, crashed)"},
      {WPP_SAVING, "cannot be resumed: a save was interrupted"},
      {WPP_EXITING, "cannot be resumed: the program was exiting"},
      {0, "cannot be resumed: its state is unknown (corrupt)"},
      {9, "cannot be resumed: its state is unknown (corrupt)"},
  };
  for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
    valid_header();
    hd.state = states[i].state;
    write_header(WPP_SIZE);
    REFUSED(states[i].why);
  }
  valid_header();
  hd.exe_hash ^= 1;
  write_header(WPP_SIZE);
  REFUSED("was saved by another executable");
  valid_header();
  hd.data_len += WPP_PAGE;
  write_header(WPP_SIZE);
  REFUSED("the static data does not match this executable");
  valid_header();
  hd.vdso += WPP_PAGE;
  write_header(WPP_SIZE);
  REFUSED("the vDSO moved");
  valid_header();
  write_header(WPP_SIZE - WPP_PAGE);
  snprintf(want, sizeof(want), "%s is truncated (corrupt)", ctx_file);
  REFUSED(want);
  valid_header();
  write_header(WPP_SIZE);
  snprintf(want, sizeof(want), "%s: its tables are out of bounds (corrupt)",
           ctx_file);
  REFUSED(want);
}

/* ---- restart: the table check ------------------------------------------ */

/* A context whose tables are all within bounds: a thread list, 0-2, a file,
 * a pipe with saved bytes, an epoll registration, a file mapping. */
static void valid_tables(struct wpp_hdr *h) {
  h->master_prev = h->master_next = WPP_BASE + WPP_HEAP_OFF;
  h->nfd = 5;
  for (int k = 0; k < 3; k++) {
    h->fd[k].num = k;
    h->fd[k].kind = WPP_FD_INHERIT;
    h->fd[k].dup_of = k;
  }
  h->fd[3].num = 3;
  h->fd[3].kind = WPP_FD_FILE;
  strcpy(h->fd[3].path, "/etc/hostname");
  h->fd[3].nlock = WPP_FD_LOCKS;
  h->fd[4].num = 65535;
  h->fd[4].kind = WPP_FD_PIPE_R;
  h->fd[4].pipe_off = WPP_PIPEBUF_MAX - 5;
  h->fd[4].pipe_len = 5;
  h->fd[4].addrlen = sizeof(h->fd[4].addr);
  h->nepoll = 1;
  h->epoll[0].epfd = 3;
  h->epoll[0].fd = 4;
  h->nfmap = 1;
  strcpy(h->fmap[0].path, "/etc/hostname");
  h->nfree = WPP_MAX_FREE;
  h->bump = WPP_HEAP_PAGES;
  h->nptimer = WPP_MAX_PTIMER;
  h->npending = WPP_MAX_PENDING;
}

typedef void (*corruption)(struct wpp_hdr *);
static corruption corrupt_now;

static void check_tables_child(void *unused) {
  (void)unused;
  if (unit_ctx_map() != 0)
    unit_exit(3);
  valid_tables(wpp_hdr);
  if (corrupt_now)
    corrupt_now(wpp_hdr);
  check_tables(ctx_file);
  unit_exit(0); /* accepted */
}

/* check_tables on the valid tables with one corruption: exit status 2 and
 * the refusal (want_refused), or 0 (accepted). */
static void tables(corruption c, int want_refused, int line) {
  char err[2048], want[1300];
  corrupt_now = c;
  int st = unit_child(check_tables_child, NULL, err, sizeof(err));
  snprintf(want, sizeof(want),
           "pmkit wpp: error: %s: its tables are out of bounds (corrupt)\n",
           ctx_file);
  int ok = want_refused ? unit_code(st) == 2 && !strcmp(err, want)
                        : unit_code(st) == 0 && !err[0];
  if (!ok) {
    char d[2300];
    snprintf(d, sizeof(d), "exit %d, wanted %s; stderr: \"%.1900s\"",
             unit_code(st), want_refused ? "2 and the refusal" : "0 (accepted)",
             err);
    unit_fail(__FILE__, line, want_refused ? "refused" : "accepted", d);
  }
}
#define TABLE_CASE(name, body)                                                 \
  static void corrupt_##name(struct wpp_hdr *h) { body; }                      \
  static void restart_tables_##name(void) {                                    \
    tables(corrupt_##name, 1, __LINE__);                                       \
  }

/* The valid tables are accepted (each at its limit). */
static void restart_tables_valid(void) { tables(NULL, 0, __LINE__); }

/* One bound broken at a time, each refused. */
TABLE_CASE(nfd, h->nfd = WPP_MAX_FD + 1)
TABLE_CASE(nepoll, h->nepoll = WPP_MAX_EPOLL + 1)
TABLE_CASE(nptimer, h->nptimer = WPP_MAX_PTIMER + 1)
TABLE_CASE(nfmap, h->nfmap = WPP_MAX_FMAP + 1)
TABLE_CASE(npending, h->npending = WPP_MAX_PENDING + 1)
TABLE_CASE(nfree, h->nfree = WPP_MAX_FREE + 1)
TABLE_CASE(bump, h->bump = WPP_HEAP_PAGES + 1)
TABLE_CASE(master_prev, h->master_prev = 0)
TABLE_CASE(master_next, h->master_next = 0)
TABLE_CASE(fd_negative, h->fd[3].num = -1)
TABLE_CASE(fd_too_high, h->fd[3].num = 65536)
TABLE_CASE(fd_path_unterminated, memset(h->fd[3].path, 'a', 1024))
TABLE_CASE(fd_addrlen, h->fd[4].addrlen = sizeof(h->fd[4].addr) + 1)
TABLE_CASE(pipe_bytes, h->fd[4].pipe_len = 6)
TABLE_CASE(nlock_negative, h->fd[3].nlock = -1)
TABLE_CASE(nlock_too_many, h->fd[3].nlock = WPP_FD_LOCKS + 1)
TABLE_CASE(fmap_path_unterminated, memset(h->fmap[0].path, 'a', 512))
TABLE_CASE(epoll_epfd, h->epoll[0].epfd = -1)
TABLE_CASE(epoll_fd, h->epoll[0].fd = -1)

/* Must-fail control: the valid tables, expected to be refused. */
static void control_valid_tables_refused(void) { tables(NULL, 1, __LINE__); }

/* A kind out of range is refused, and a negative one but a pipe end's or a
 * socket pair's (what a restore cut short leaves: the next restore does it
 * again, see fd_test's fd.restore_after_cut_restore). Once a corrupt kind
 * passed. */
TABLE_CASE(kind_too_high, h->fd[4].kind = WPP_FD_KINDS)
TABLE_CASE(kind_too_low, h->fd[4].kind = -WPP_FD_KINDS)
TABLE_CASE(kind_negative_file, h->fd[4].kind = -WPP_FD_FILE)
static void corrupt_cut_restore_kind(struct wpp_hdr *h) {
  h->fd[4].kind = -WPP_FD_PIPE_R;
}
static void restart_tables_cut_restore_kind(void) {
  tables(corrupt_cut_restore_kind, 0, __LINE__);
}

/* pipe_off + pipe_len is checked without wrapping: an offset near 2^64
 * is refused (once it passed, and a socket pair's refill read a wild
 * address). */
TABLE_CASE(pipe_off_wraps,
           (h->fd[4].pipe_off = ~0ull - 1, h->fd[4].pipe_len = 4))

/* ---- restart: bookkeeping ----------------------------------------------- */

/* The state names a refusal gives. */
static void restart_state_names(void) {
  CHECK_STR(state_name(WPP_INIT),
            "its creation was interrupted (half-written)");
  CHECK_STR(state_name(WPP_RUNNING), "the program is running, or ended "
                                     "without a save (killed, crashed)");
  CHECK_STR(state_name(WPP_SAVING), "a save was interrupted");
  CHECK_STR(state_name(WPP_EXITING), "the program was exiting");
  CHECK_STR(state_name(WPP_SAVED), "its state is unknown (corrupt)");
  CHECK_STR(state_name(-1), "its state is unknown (corrupt)");
}

/* PMKIT_WPP_BREAK: each knob the runtime reads breaks that step and no
 * other (it is matched as a substring: a knob inside another would break
 * both); a list breaks each step named. */
static void restart_break_knobs(void) {
  static const char *knobs[] = {
      "dgrams",  "dups",   "eintr",     "eventfd",   "fpu",     "locks",
      "maps",    "owners", "pipes",     "ptimers",   "reserve", "signalfd",
      "signals", "sleep",  "sockbytes", "sockpairs", "timerfd", "unknown"};
  size_t n = sizeof(knobs) / sizeof(knobs[0]);
  unsetenv("PMKIT_WPP_BREAK");
  for (size_t j = 0; j < n; j++)
    CHECK_EQ(wpp_broken(knobs[j]), 0);
  for (size_t i = 0; i < n; i++) {
    setenv("PMKIT_WPP_BREAK", knobs[i], 1);
    for (size_t j = 0; j < n; j++)
      if (wpp_broken(knobs[j]) != (i == j)) {
        unsetenv("PMKIT_WPP_BREAK");
        CHECK_STR(knobs[j], knobs[i]);
      }
  }
  setenv("PMKIT_WPP_BREAK", "pipes,dups", 1);
  int on = wpp_broken("pipes") + wpp_broken("dups") + wpp_broken("locks");
  unsetenv("PMKIT_WPP_BREAK");
  CHECK_EQ(on, 2);
}

/* The executable's hash is FNV-1a 64 of its bytes. */
static void restart_exe_hash(void) {
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  CHECK(fd >= 0);
  uint64_t h = 0xcbf29ce484222325ull;
  unsigned char b;
  static unsigned char buf[1 << 16];
  ssize_t n;
  off_t at = 0;
  while ((n = pread(fd, buf, sizeof(buf), at)) > 0) {
    for (ssize_t i = 0; i < n; i++) {
      b = buf[i];
      h = (h ^ b) * 0x100000001b3ull;
    }
    at += n;
  }
  close(fd);
  CHECK(at > 0);
  CHECK_EQ(exe_hash(), h);
}

/* A start copies argv, envp and auxv into the heap (libc's pointers moved
 * there) and keeps the arguments as given, NUL-separated. */
static void copy_args_body(void) {
  CHECK_EQ(unit_ctx_map(), 0);
  char a0[] = "/some/dir/prog", a1[] = "-x", a2[] = "";
  char *argv[] = {a0, a1, a2, NULL};
  /* envp, then auxv right after its NULL, as on the initial stack */
  char *env[] = {"K=V",           "EMPTY=", NULL, (char *)(uintptr_t)AT_PAGESZ,
                 (char *)4096ull, NULL,     NULL};
  struct wpp_hdr *h = wpp_hdr;
  copy_args(3, argv, env);
  CHECK_EQ(h->argc, 3);
  char **av = (char **)(uintptr_t)h->argv, **ev = (char **)(uintptr_t)h->envp;
  size_t *ax = (size_t *)(uintptr_t)h->auxv;
  CHECK(wpp_in_heap(av, 1) && wpp_in_heap(ev, 1) && wpp_in_heap(ax, 1));
  CHECK_STR(av[0], "/some/dir/prog");
  CHECK_STR(av[1], "-x");
  CHECK_STR(av[2], "");
  CHECK(av[3] == NULL);
  CHECK(av[0] != a0 && wpp_in_heap(av[2], 1));
  CHECK_STR(ev[0], "K=V");
  CHECK_STR(ev[1], "EMPTY=");
  CHECK(ev[2] == NULL);
  CHECK_EQ(ax[0], AT_PAGESZ);
  CHECK_EQ(ax[1], 4096);
  CHECK_EQ(ax[2], 0);
  CHECK_MEM((const char *)(uintptr_t)h->args_kept, "/some/dir/prog\0-x\0", 19);
  CHECK(__environ == ev);
  CHECK(*(size_t **)(__libc + MUSL_LIBC_AUXV) == ax);
  CHECK(__progname_full == av[0]);
  CHECK_STR(__progname, "prog");
  CHECK_EQ(h->live_pages, 1);
}
static void restart_copy_args(void) {
  CHECK_EQ(unit_code(unit_in_child(copy_args_body)), 0);
}

/* A resume with other arguments than the start's warns (argv[0] may
 * differ); the same ones say nothing. */
static char *new_args[4];
static int new_argc;
static void warn_child(void *unused) {
  (void)unused;
  if (unit_ctx_map() != 0)
    unit_exit(3);
  char *kept = wpp_alloc(64, PROT_READ | PROT_WRITE);
  memcpy(kept, "prog\0a\0bc\0", 10);
  wpp_hdr->argc = 3;
  wpp_hdr->args_kept = (uint64_t)(uintptr_t)kept;
  warn_new_args(new_argc, new_args);
}
static void restart_warn_new_args(void) {
  char err[1024];
  new_argc = 3;
  new_args[0] = "/elsewhere/prog";
  new_args[1] = "a";
  new_args[2] = "bc";
  CHECK_EQ(unit_code(unit_child(warn_child, NULL, err, sizeof(err))), 0);
  CHECK_STR(err, "");
  new_args[2] = "bd";
  CHECK_EQ(unit_code(unit_child(warn_child, NULL, err, sizeof(err))), 0);
  CHECK_STR(err, "pmkit wpp: warning: the program resumes with the arguments "
                 "it started with (2); the 2 given now differ and are ignored "
                 "(start afresh to use them: pmkit wpp run --fresh)\n");
  new_argc = 2;
  CHECK_EQ(unit_code(unit_child(warn_child, NULL, err, sizeof(err))), 0);
  CHECK(strstr(err, "started with (2); the 1 given now differ") != NULL);
}

/* A thread revived under a new id: the owner words that hold its old id
 * (its robust list's mutexes, the pending one, the FILEs it locked) get the
 * new id, flag bits kept; words of another owner stay. */
static void restart_rewrite_owners(void) {
  static _Alignas(16) char t[512], m[4][40], f[2][256];
  const int old = 0x1234567, new = 0x0765432, other = 99999;
  memset(t, 0, sizeof(t));
  char *head = t + MUSL_PT_ROBUST;
  *(char **)head = m[0] + MUSL_MUTEX_NEXT;
  *(char **)(m[0] + MUSL_MUTEX_NEXT) = m[1] + MUSL_MUTEX_NEXT;
  *(char **)(m[1] + MUSL_MUTEX_NEXT) = m[2] + MUSL_MUTEX_NEXT;
  *(char **)(m[2] + MUSL_MUTEX_NEXT) = head;
  *(char **)(head + 16) = m[3] + MUSL_MUTEX_NEXT; /* pending */
  *(int *)(m[0] + MUSL_MUTEX_LOCK) = old;
  *(int *)(m[1] + MUSL_MUTEX_LOCK) = (int)(old | 0xc0000000u);
  *(int *)(m[2] + MUSL_MUTEX_LOCK) = other;
  *(int *)(m[3] + MUSL_MUTEX_LOCK) = old;
  *(char **)(t + MUSL_PT_STDIO_LOCKS) = f[0];
  *(char **)(f[0] + MUSL_FILE_NEXT_LOCKED) = f[1];
  *(char **)(f[1] + MUSL_FILE_NEXT_LOCKED) = NULL;
  *(int *)(f[0] + MUSL_FILE_LOCK) = old | MUSL_FILE_WAITERS;
  *(int *)(f[1] + MUSL_FILE_LOCK) = old;
  int std_before[3];
  FILE *std[] = {stdin, stdout, stderr};
  for (int i = 0; i < 3; i++)
    std_before[i] = *(int *)((char *)std[i] + MUSL_FILE_LOCK);
  rewrite_owners(t, old, new);
  CHECK_EQ(*(int *)(m[0] + MUSL_MUTEX_LOCK), new);
  CHECK_EQ((unsigned)*(int *)(m[1] + MUSL_MUTEX_LOCK), new | 0xc0000000u);
  CHECK_EQ(*(int *)(m[2] + MUSL_MUTEX_LOCK), other);
  CHECK_EQ(*(int *)(m[3] + MUSL_MUTEX_LOCK), new);
  CHECK_EQ(*(int *)(f[0] + MUSL_FILE_LOCK), new | MUSL_FILE_WAITERS);
  CHECK_EQ(*(int *)(f[1] + MUSL_FILE_LOCK), new);
  for (int i = 0; i < 3; i++)
    CHECK_EQ(*(int *)((char *)std[i] + MUSL_FILE_LOCK), std_before[i]);
}

/* Timers that signal a thread follow its id when it changed. */
static void restart_tid_now(void) {
  nmoved_tids = 2;
  moved_tids[0].old = 12;
  moved_tids[0].now = 40012;
  moved_tids[1].old = 13;
  moved_tids[1].now = 40013;
  int a = tid_now(12), b = tid_now(13), c = tid_now(14);
  nmoved_tids = 0;
  CHECK_EQ(a, 40012);
  CHECK_EQ(b, 40013);
  CHECK_EQ(c, 14);
}

/* The save, in a child that stands for the program: two threads waiting in
 * pause(), their stacks and TLS in the heap (the runtime on); save_all
 * stops both (each records its signal frame, on its persistent stack, and
 * the generation it was saved in), records the master's place in the
 * thread list, marks the context SAVED and exits with 86. */
static volatile int started;
static void *waiter(void *unused) {
  (void)unused;
  __atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
  for (;;)
    pause();
  return NULL;
}
static void save_child(void *unused) {
  (void)unused;
  if (unit_ctx_map() != 0)
    unit_exit(3);
  struct wpp_hdr *h = wpp_hdr;
  h->magic = WPP_MAGIC;
  wpp_on = 1;
  install_save_handler();
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    if (pthread_create(&t[i], NULL, waiter, NULL) != 0)
      unit_exit(4);
  while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < 2)
    nap_us(100);
  h->state = WPP_RUNNING;
  save_all();
  unit_exit(5); /* save_all came back: it did not save */
}
static void restart_save_stops_threads(void) {
  char err[2048];
  int st = unit_child(save_child, NULL, err, sizeof(err));
  CHECK_STR(err, "");
  CHECK_EQ(unit_code(st), WPP_EXIT_SAVED);
  CHECK_EQ(unit_ctx_map(), 0);
  struct wpp_hdr *h = wpp_hdr;
  CHECK_EQ(h->state, WPP_SAVED);
  CHECK_EQ(h->threads_saved, 2);
  CHECK_EQ(h->generation, 0);
  CHECK(h->saved_ns > 0);
  char *self = (char *)pthread_self(); /* the child's master, here too */
  CHECK_EQ(h->master_prev != 0, 1);
  int n = 0;
  for (char *t = (char *)(uintptr_t)h->master_next; t != self && n < 8;
       t = wpp_pt_next(t), n++) {
    CHECK(wpp_in_heap(t, 256));
    CHECK_EQ(tls_of(t)->gen, 1);
    CHECK_EQ(tls_of(t)->alive, 0); /* the kernel cleared it at the exit */
    CHECK(wpp_in_heap(tls_of(t)->uc, sizeof(ucontext_t)));
    ucontext_t *uc = tls_of(t)->uc;
    CHECK(wpp_in_heap((void *)uc->uc_mcontext.gregs[REG_RSP], 8));
  }
  CHECK_EQ(n, 2);
  char cwd[4096];
  CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
  CHECK_STR(h->cwd, cwd);
}

/* An exit: the context goes EXITING, then its links and file are removed,
 * and the process ends with the program's status. */
static void exit_child(void *unused) {
  (void)unused;
  if (unit_ctx_map() != 0)
    unit_exit(3);
  char lname[1200];
  snprintf(lname, sizeof(lname), "%s/link.3", unit_dir);
  close(open(lname, O_WRONLY | O_CREAT, 0600));
  snprintf(lname, sizeof(lname), "%s/map.0", unit_dir);
  close(open(lname, O_WRONLY | O_CREAT, 0600));
  wpp_hdr->nfd = 1;
  wpp_hdr->fd[0].num = 3;
  wpp_hdr->fd[0].linked = 1;
  wpp_hdr->nfmap = 1;
  wpp_hdr->fmap[0].linked = 1;
  wpp_hdr->state = WPP_RUNNING;
  wpp_on = 1;
  wpp_exit(5);
}
static void restart_exit_cleans_up(void) {
  char err[1024], lname[1200];
  int st = unit_child(exit_child, NULL, err, sizeof(err));
  CHECK_EQ(unit_code(st), 5);
  CHECK_STR(err, "");
  int32_t state = 0;
  CHECK_EQ(pread(wpp_ctxfd, &state, 4, offsetof(struct wpp_hdr, state)), 4);
  CHECK_EQ(state, WPP_EXITING);
  CHECK_EQ(access(ctx_file, F_OK), -1);
  snprintf(lname, sizeof(lname), "%s/link.3", unit_dir);
  CHECK_EQ(access(lname, F_OK), -1);
  snprintf(lname, sizeof(lname), "%s/map.0", unit_dir);
  CHECK_EQ(access(lname, F_OK), -1);
}

/* An exit while a save is under way waits: the save stops the thread, and
 * after the restore (state RUNNING again) the exit goes on. */
static void exit_during_save_child(void) {
  CHECK_EQ(unit_ctx_map(), 0);
  wpp_hdr->state = WPP_SAVING;
  wpp_on = 1;
  wpp_exit(6);
}
static void restart_exit_waits_for_save(void) {
  fflush(stdout);
  pid_t c = fork();
  if (c == 0) {
    unit_is_child = 1;
    exit_during_save_child();
  }
  int st = 0;
  struct timespec ms = {0, 1000000};
  for (int i = 0; i < 100; i++)
    nanosleep(&ms, NULL);
  pid_t r = waitpid(c, &st, WNOHANG);
  int32_t running = WPP_RUNNING;
  CHECK_EQ(pwrite(wpp_ctxfd, &running, 4, offsetof(struct wpp_hdr, state)), 4);
  if (r != 0)
    CHECK_EQ(r, 0); /* it ended during the save */
  int waited = 0;
  while ((r = waitpid(c, &st, WNOHANG)) == 0 && waited++ < 5000)
    nanosleep(&ms, NULL);
  if (r == 0)
    kill(c, SIGKILL);
  CHECK_EQ(r, c);
  CHECK_EQ(unit_code(st), 6);
}

/* ---- signals ------------------------------------------------------------ */

struct ksa {
  uint64_t handler, flags, restorer, mask;
};
static struct ksa kact(int sig) {
  struct ksa k;
  memset(&k, 0, sizeof(k));
  syscall(SYS_rt_sigaction, sig, NULL, &k, 8);
  return k;
}
static uint64_t kmask(void) {
  uint64_t m = 0;
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &m, 8);
  return m;
}
#define BIT(sig) (1ull << ((sig)-1))

static void on_signal(int sig) { (void)sig; }

/* The program's SIGPWR handler is recorded in the context, to run at a
 * restore, and never installed: the kernel keeps the default. */
static void sigaction_pwr_body(void) {
  CHECK_EQ(unit_ctx_map(), 0);
  wpp_on = 1;
  struct sigaction sa, old;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  CHECK_EQ(sigaction(SIGPWR, &sa, &old), 0);
  CHECK(old.sa_handler == SIG_DFL);
  CHECK_EQ(wpp_hdr->onfail_set, 1);
  CHECK(wpp_hdr->onfail.sa_handler == on_signal);
  CHECK_EQ(kact(SIGPWR).handler, (uint64_t)(uintptr_t)SIG_DFL);
  CHECK_EQ(sigaction(SIGPWR, NULL, &old), 0);
  CHECK(old.sa_handler == on_signal);
  CHECK_EQ(old.sa_flags, SA_RESTART);
  CHECK(signal(SIGPWR, SIG_IGN) == on_signal);
  CHECK(wpp_hdr->onfail.sa_handler == SIG_IGN);
}
static void signals_sigaction_pwr(void) {
  CHECK_EQ(unit_code(unit_in_child(sigaction_pwr_body)), 0);
}

/* The save signal is the runtime's: the program cannot take it (EINVAL), and
 * a handler's mask never blocks it. */
static void sigaction_save_body(void) {
  CHECK_EQ(unit_ctx_map(), 0);
  wpp_on = 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  errno = 0;
  CHECK_EQ(sigaction(WPP_SIGSAVE, &sa, NULL), -1);
  CHECK_EQ(errno, EINVAL);
  sigfillset(&sa.sa_mask);
  CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
  struct ksa k = kact(SIGUSR1);
  CHECK_EQ(k.handler, (uint64_t)(uintptr_t)on_signal);
  /* musl's full set leaves out 32-34; the kernel SIGKILL and SIGSTOP */
  uint64_t want =
      0xfffffffc7fffffffull & ~BIT(WPP_SIGSAVE) & ~BIT(SIGKILL) & ~BIT(SIGSTOP);
  CHECK_EQ(k.mask, want);
}
static void signals_sigaction_save(void) {
  CHECK_EQ(unit_code(unit_in_child(sigaction_save_body)), 0);
}

/* As pid 1 of a namespace (h->ns) a terminating signal left at its default
 * gets the runtime's as_killed (pid 1 ignores default actions); the program
 * is told SIG_DFL. Without a namespace the default stays. */
static void sigaction_ns_body(void) {
  CHECK_EQ(unit_ctx_map(), 0);
  wpp_on = 1;
  struct sigaction sa, old;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = SIG_DFL;
  wpp_hdr->ns = 1;
  CHECK_EQ(sigaction(SIGTERM, &sa, NULL), 0);
  CHECK_EQ(kact(SIGTERM).handler, (uint64_t)(uintptr_t)as_killed);
  CHECK_EQ(sigaction(SIGTERM, NULL, &old), 0);
  CHECK(old.sa_handler == SIG_DFL);
  CHECK_EQ(sigaction(SIGCHLD, &sa, NULL), 0); /* not a terminating one */
  CHECK_EQ(kact(SIGCHLD).handler, (uint64_t)(uintptr_t)SIG_DFL);
  wpp_hdr->ns = 0;
  CHECK_EQ(sigaction(SIGTERM, &sa, NULL), 0);
  CHECK_EQ(kact(SIGTERM).handler, (uint64_t)(uintptr_t)SIG_DFL);
}
static void signals_sigaction_ns(void) {
  CHECK_EQ(unit_code(unit_in_child(sigaction_ns_body)), 0);
}

/* The signal mask: the save signal is never blocked, SIGPWR always is
 * (the master takes it) and the program never sees it blocked. */
static void sigmask_body(void) {
  CHECK_EQ(unit_ctx_map(), 0);
  wpp_on = 1;
  sigset_t s, old;
  sigemptyset(&s);
  CHECK_EQ(sigprocmask(SIG_SETMASK, &s, NULL), 0);
  CHECK_EQ(kmask(), BIT(SIGPWR));
  sigaddset(&s, SIGUSR1);
  sigaddset(&s, WPP_SIGSAVE);
  sigaddset(&s, SIGPWR);
  CHECK_EQ(sigprocmask(SIG_BLOCK, &s, &old), 0);
  CHECK_EQ(kmask(), BIT(SIGPWR) | BIT(SIGUSR1));
  CHECK_EQ(sigismember(&old, SIGPWR), 0);
  CHECK_EQ(sigprocmask(SIG_SETMASK, NULL, &old), 0);
  CHECK_EQ(sigismember(&old, SIGPWR), 0);
  CHECK_EQ(sigismember(&old, SIGUSR1), 1);
  sigemptyset(&s);
  sigaddset(&s, SIGPWR);
  sigaddset(&s, SIGUSR1);
  CHECK_EQ(sigprocmask(SIG_UNBLOCK, &s, NULL), 0);
  CHECK_EQ(kmask(), BIT(SIGPWR));
  sigfillset(&s);
  CHECK_EQ(pthread_sigmask(SIG_SETMASK, &s, NULL), 0);
  CHECK_EQ(kmask(), 0xfffffffc7fffffffull & ~BIT(WPP_SIGSAVE) & ~BIT(SIGKILL) &
                        ~BIT(SIGSTOP));
}
static void signals_sigmask(void) {
  CHECK_EQ(unit_code(unit_in_child(sigmask_body)), 0);
}

/* A restore while a call waits: a signal handler that moves the generation
 * on stands for it (the EINTR the save leaves behind, seen after the
 * restore). */
static volatile int bumps, hits;
static void bump(int sig) {
  (void)sig;
  hits++;
  if (bumps)
    wpp_hdr->generation++;
}
static void install_bump(int sig) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = bump; /* no SA_RESTART: the kernel's EINTR */
  CHECK_EQ(sigaction(sig, &sa, NULL), 0);
}
static void alarm_in(long us, long interval_us) {
  struct itimerval v = {{interval_us / 1000000, interval_us % 1000000},
                        {us / 1000000, us % 1000000}};
  CHECK_EQ(setitimer(ITIMER_REAL, &v, NULL), 0);
}

/* A sleep that restores interrupted (a timer every 50 ms: most of them
 * while it sleeps) sleeps the rest each time; one a plain signal interrupted
 * returns EINTR with the time left. The timers repeat so that one that
 * fires before the call (a slow machine) leaves another for the call. */
static void sleep_body(void) {
  CHECK_EQ(unit_ctx_map(), 0);
  wpp_on = 1;
  install_bump(SIGALRM);
  struct timespec req = {0, 400000000}, rem = {0, 0};
  uint64_t t0 = now_ns(CLOCK_MONOTONIC);
  bumps = 1;
  alarm_in(50000, 50000);
  CHECK_EQ(clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &rem), 0);
  uint64_t took = now_ns(CLOCK_MONOTONIC) - t0;
  alarm_in(0, 0);
  int n = hits;
  CHECK(n >= 2); /* (at most one before the call) */
  CHECK(took >= 400000000);
  CHECK_EQ(wpp_hdr->generation, n);
  bumps = 0;
  req.tv_sec = 3;
  req.tv_nsec = 0;
  t0 = now_ns(CLOCK_MONOTONIC);
  alarm_in(20000, 20000);
  CHECK_EQ(clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &rem), EINTR);
  took = now_ns(CLOCK_MONOTONIC) - t0;
  alarm_in(0, 0);
  CHECK(hits > n);
  CHECK(took < 3000000000ull);
  CHECK(rem.tv_sec < 3 && (rem.tv_sec > 0 || rem.tv_nsec > 0));
  CHECK_EQ(wpp_hdr->generation, n);
}
static void signals_sleep_after_restore(void) {
  CHECK_EQ(unit_code(unit_in_child(sleep_body)), 0);
}

/* A blocking read that a restore interrupted is made again (it returns the
 * byte the second timer signal writes); one a plain signal interrupted
 * returns EINTR. */
static int rpipe[2];
static volatile int hit_writes;
static void bump_then_write(int sig) {
  bump(sig);
  if (hits == 2 && hit_writes)
    syscall(SYS_write, rpipe[1], "x", 1);
}
static void read_body(void) {
  CHECK_EQ(unit_ctx_map(), 0);
  wpp_on = 1;
  CHECK_EQ(pipe(rpipe), 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = bump_then_write;
  CHECK_EQ(sigaction(SIGALRM, &sa, NULL), 0);
  char c = 0;
  bumps = 1;
  hit_writes = 1;
  alarm_in(20000, 20000); /* a restore, then a restore and the byte */
  CHECK_EQ(read(rpipe[0], &c, 1), 1);
  alarm_in(0, 0);
  CHECK_EQ(c, 'x');
  CHECK(hits >= 2);
  bumps = 0;
  hit_writes = 0;
  alarm_in(20000, 20000);
  errno = 0;
  CHECK_EQ(read(rpipe[0], &c, 1), -1);
  CHECK_EQ(errno, EINTR);
  alarm_in(0, 0);
}
static void signals_read_after_restore(void) {
  CHECK_EQ(unit_code(unit_in_child(read_body)), 0);
}

/* A blocking write that a restore cut short (the kernel returns what it
 * wrote when a signal comes) writes the rest; one a plain signal cut short
 * returns the part. A reader thread signals the writer once the pipe (one
 * page) is full, waits for the handler, then takes everything. */
#define WBYTES 12288
static int wpipe[2];
static pid_t writer_tid;
static volatile int read_total;
static void *drain(void *want) {
  int avail = 0;
  while (ioctl(wpipe[0], FIONREAD, &avail) == 0 && avail < 4096)
    nap_us(200);
  int before = hits;
  syscall(SYS_tgkill, getpid(), writer_tid, SIGUSR1);
  /* not a byte read before the handler ran: the kernel's write has
   * returned its part by then (else it would go on into the room made) */
  while (hits == before)
    nap_us(200);
  static char buf[WBYTES];
  int got = 0;
  while (got < (int)(intptr_t)want) {
    ssize_t r = read(wpipe[0], buf + got, sizeof(buf) - (size_t)got);
    if (r <= 0)
      break;
    got += (int)r;
  }
  for (int i = 0; i < got; i++)
    if (buf[i] != (char)i)
      got = -i;
  read_total = got;
  return NULL;
}
static int use_writev;
static ssize_t write_cut(int restore, int want_read) {
  static char data[WBYTES];
  for (int i = 0; i < WBYTES; i++)
    data[i] = (char)i;
  CHECK_EQ(pipe(wpipe), 0);
  CHECK_EQ(fcntl(wpipe[1], F_SETPIPE_SZ, 4096), 4096);
  writer_tid = (pid_t)syscall(SYS_gettid);
  bumps = restore;
  wpp_on = 0; /* the reader's stack outside the context */
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, drain, (void *)(intptr_t)want_read), 0);
  wpp_on = 1;
  struct iovec iov = {data, WBYTES};
  ssize_t n =
      use_writev ? writev(wpipe[1], &iov, 1) : write(wpipe[1], data, WBYTES);
  close(wpipe[1]); /* the reader sees the end, whatever was written */
  pthread_join(t, NULL);
  close(wpipe[0]);
  return n;
}
static void write_body(void) {
  CHECK_EQ(unit_ctx_map(), 0);
  wpp_on = 1;
  install_bump(SIGUSR1);
  CHECK_EQ(write_cut(1, WBYTES), WBYTES);
  CHECK_EQ(read_total, WBYTES);
  CHECK_EQ(hits, 1);
  CHECK_EQ(write_cut(0, 4096), 4096);
  CHECK_EQ(read_total, 4096);
}
static void signals_write_after_restore(void) {
  CHECK_EQ(unit_code(unit_in_child(write_body)), 0);
}

/* A blocking writev a restore cut short writes the rest of its vector, as
 * natively, with no handler of the program's, it would have. (Once only
 * write and sendto were finished; pwrite is now too, sendmsg is not.) */
static void writev_body(void) {
  CHECK_EQ(unit_ctx_map(), 0);
  wpp_on = 1;
  install_bump(SIGUSR1);
  use_writev = 1;
  CHECK_EQ(write_cut(1, WBYTES), WBYTES);
}
static void signals_writev_after_restore(void) {
  CHECK_EQ(unit_code(unit_in_child(writev_body)), 0);
}

/* An absolute sleep (TIMER_ABSTIME) a signal interrupts: the kernel leaves
 * rem alone (POSIX: unused), and so does the runtime (once it copied its own
 * uninitialised timespec into it). */
static void abs_sleep_body(void) {
  CHECK_EQ(unit_ctx_map(), 0);
  wpp_on = 1;
  install_bump(SIGALRM);
  struct timespec req, rem = {7, 7};
  clock_gettime(CLOCK_MONOTONIC, &req);
  req.tv_sec += 3;
  alarm_in(20000, 20000);
  int e = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &req, &rem);
  alarm_in(0, 0);
  CHECK_EQ(e, EINTR);
  CHECK_EQ(rem.tv_sec, 7);
  CHECK_EQ(rem.tv_nsec, 7);
}
static void signals_abs_sleep_rem(void) {
  CHECK_EQ(unit_code(unit_in_child(abs_sleep_body)), 0);
}

/* sigtimedwait with every signal blocked (musl's timer thread): the save
 * signal is unblocked first, once, or the thread could never be saved. */
static void sigtimedwait_body(void) {
  CHECK_EQ(unit_ctx_map(), 0);
  wpp_on = 1;
  uint64_t all = ~0ull;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, 8);
  CHECK_EQ(save_unblocked, 0);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR2);
  struct timespec zero = {0, 1000};
  errno = 0;
  CHECK_EQ(sigtimedwait(&s, NULL, &zero), -1);
  CHECK_EQ(errno, EAGAIN);
  CHECK_EQ(save_unblocked, 1);
  CHECK_EQ(kmask(), ~0ull & ~BIT(WPP_SIGSAVE) & ~BIT(SIGKILL) & ~BIT(SIGSTOP));
}
static void signals_sigtimedwait_unblocks_save(void) {
  CHECK_EQ(unit_code(unit_in_child(sigtimedwait_body)), 0);
}

static const struct unit_case cases[] = {
    {"restart.refuse_header", restart_refuse_header},
    {"restart.tables_valid", restart_tables_valid},
    {"restart.tables_nfd", restart_tables_nfd},
    {"restart.tables_nepoll", restart_tables_nepoll},
    {"restart.tables_nptimer", restart_tables_nptimer},
    {"restart.tables_nfmap", restart_tables_nfmap},
    {"restart.tables_npending", restart_tables_npending},
    {"restart.tables_nfree", restart_tables_nfree},
    {"restart.tables_bump", restart_tables_bump},
    {"restart.tables_master_prev", restart_tables_master_prev},
    {"restart.tables_master_next", restart_tables_master_next},
    {"restart.tables_fd_negative", restart_tables_fd_negative},
    {"restart.tables_fd_too_high", restart_tables_fd_too_high},
    {"restart.tables_fd_path_unterminated",
     restart_tables_fd_path_unterminated},
    {"restart.tables_fd_addrlen", restart_tables_fd_addrlen},
    {"restart.tables_pipe_bytes", restart_tables_pipe_bytes},
    {"restart.tables_nlock_negative", restart_tables_nlock_negative},
    {"restart.tables_nlock_too_many", restart_tables_nlock_too_many},
    {"restart.tables_fmap_path_unterminated",
     restart_tables_fmap_path_unterminated},
    {"restart.tables_epoll_epfd", restart_tables_epoll_epfd},
    {"restart.tables_epoll_fd", restart_tables_epoll_fd},
    {"restart.tables_kind_too_high", restart_tables_kind_too_high},
    {"restart.tables_kind_too_low", restart_tables_kind_too_low},
    {"restart.tables_kind_negative_file", restart_tables_kind_negative_file},
    {"restart.tables_cut_restore_kind", restart_tables_cut_restore_kind},
    {"restart.tables_pipe_off_wraps", restart_tables_pipe_off_wraps},
    {"restart.state_names", restart_state_names},
    {"restart.break_knobs", restart_break_knobs},
    {"restart.exe_hash", restart_exe_hash},
    {"restart.copy_args", restart_copy_args},
    {"restart.warn_new_args", restart_warn_new_args},
    {"restart.rewrite_owners", restart_rewrite_owners},
    {"restart.tid_now", restart_tid_now},
    {"restart.save_stops_threads", restart_save_stops_threads},
    {"restart.exit_cleans_up", restart_exit_cleans_up},
    {"restart.exit_waits_for_save", restart_exit_waits_for_save},
    {"signals.sigaction_pwr", signals_sigaction_pwr},
    {"signals.sigaction_save", signals_sigaction_save},
    {"signals.sigaction_ns", signals_sigaction_ns},
    {"signals.sigmask", signals_sigmask},
    {"signals.sleep_after_restore", signals_sleep_after_restore},
    {"signals.read_after_restore", signals_read_after_restore},
    {"signals.write_after_restore", signals_write_after_restore},
    {"signals.sigtimedwait_unblocks_save", signals_sigtimedwait_unblocks_save},
    {"signals.writev_after_restore", signals_writev_after_restore},
    {"signals.abs_sleep_rem", signals_abs_sleep_rem},
    {"control.valid_tables_refused", control_valid_tables_refused},
};

int main(int argc, char **argv) {
  unit_close_inherited();
  return unit_run(cases, sizeof(cases) / sizeof(cases[0]),
                  argc > 1 ? argv[1] : "restart.", core_setup, core_teardown);
}
