/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wrap.c -- the interception layer of the static build: the program and
 * musl are linked with `ld --wrap=SYM` for each symbol of wraps.txt, so every
 * reference to SYM, libc's internal ones included (musl's malloc calls
 * __mmap, pthread_create __mmap and __mprotect, exit _Exit), reaches
 * __wrap_SYM here, and __real_SYM is the libc function. Each wrapper hands
 * the call to the runtime's core (wpp.c, mem.c), which knows the real
 * functions only through the typed table wpp_real. The core therefore does
 * not depend on how calls are intercepted: an LD_PRELOAD layer for prebuilt
 * dynamic programs would define the public names instead and fill the same
 * table with dlsym(RTLD_NEXT).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "wpp.h"

int __real_main(int, char **, char **);
void *__real___mmap(void *, size_t, int, int, int, off_t);
int __real___munmap(void *, size_t);
void *__real___mremap(void *, size_t, size_t, int, ...);
int __real___mprotect(void *, size_t, int);
int __real___madvise(void *, size_t, int);
int __real___sigaction(int, const struct sigaction *, struct sigaction *);
int __real_pthread_sigmask(int, const sigset_t *, sigset_t *);
int __real___clock_nanosleep(clockid_t, int, const struct timespec *,
                             struct timespec *);
_Noreturn void __real__Exit(int);
long __real___syscall_cp(long, long, long, long, long, long, long);
pid_t __real_fork(void);
int __real_execve(const char *, char *const[], char *const[]);
int __real_posix_spawn(pid_t *, const char *,
                       const posix_spawn_file_actions_t *,
                       const posix_spawnattr_t *, char *const[], char *const[]);
int __real_inotify_init(void);
int __real_inotify_init1(int);
int __real_fanotify_init(unsigned, unsigned);
int __real_memfd_create(const char *, unsigned);
int __real_shmget(key_t, size_t, int);
int __real_semget(key_t, int, int);
int __real_msgget(key_t, int);
int __real_posix_spawnp(pid_t *, const char *,
                        const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[],
                        char *const[]);

const struct wpp_libc wpp_real = {
    .main = __real_main,
    .mmap = (void *(*)(void *, size_t, int, int, int, long))__real___mmap,
    .munmap = __real___munmap,
    .mremap = __real___mremap,
    .mprotect = __real___mprotect,
    .madvise = __real___madvise,
    .sigaction = __real___sigaction,
    .sigmask = __real_pthread_sigmask,
    .clock_nanosleep = (int (*)(int, int, const struct timespec *,
                                struct timespec *))__real___clock_nanosleep,
    .syscall_cp = __real___syscall_cp,
    .exit = __real__Exit,
};

int __wrap_main(int argc, char **argv, char **envp) {
  return wpp_main(argc, argv, envp);
}

/* memory: libc's internal names and the program's public ones */
void *__wrap___mmap(void *addr, size_t len, int prot, int flags, int fd,
                    off_t off) {
  return wpp_mmap(addr, len, prot, flags, fd, (long)off);
}
void *__wrap_mmap(void *, size_t, int, int, int, off_t)
    __attribute__((alias("__wrap___mmap")));

int __wrap___munmap(void *addr, size_t len) { return wpp_munmap(addr, len); }
int __wrap_munmap(void *, size_t) __attribute__((alias("__wrap___munmap")));

void *__wrap___mremap(void *old, size_t oldlen, size_t newlen, int flags, ...) {
  void *naddr = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    naddr = va_arg(ap, void *);
    va_end(ap);
  }
  return wpp_mremap(old, oldlen, newlen, flags, naddr);
}
void *__wrap_mremap(void *, size_t, size_t, int, ...)
    __attribute__((alias("__wrap___mremap")));

int __wrap___mprotect(void *addr, size_t len, int prot) {
  return wpp_mprotect(addr, len, prot);
}
int __wrap_mprotect(void *, size_t, int)
    __attribute__((alias("__wrap___mprotect")));

int __wrap___madvise(void *addr, size_t len, int advice) {
  return wpp_madvise(addr, len, advice);
}
int __wrap_madvise(void *, size_t, int)
    __attribute__((alias("__wrap___madvise")));

/* signals (sigaction and signal both reach __sigaction), sleeps, exit */
int __wrap___sigaction(int sig, const struct sigaction *sa,
                       struct sigaction *old) {
  return wpp_sigaction(sig, sa, old);
}
int __wrap_sigaction(int, const struct sigaction *, struct sigaction *)
    __attribute__((alias("__wrap___sigaction")));

int __wrap_pthread_sigmask(int how, const sigset_t *set, sigset_t *old) {
  return wpp_sigmask(how, set, old);
}

int __wrap___clock_nanosleep(clockid_t clk, int flags,
                             const struct timespec *req, struct timespec *rem) {
  return wpp_clock_nanosleep((int)clk, flags, req, rem);
}
int __wrap_clock_nanosleep(clockid_t, int, const struct timespec *,
                           struct timespec *)
    __attribute__((alias("__wrap___clock_nanosleep")));

_Noreturn void __wrap__Exit(int code) { wpp_exit(code); }

/* every blocking call of libc: read, write, poll, epoll_wait, accept,
 * sigtimedwait (and sigwaitinfo, sigwait), ... */
long __wrap___syscall_cp(long nr, long a, long b, long c, long d, long e,
                         long f) {
  return wpp_syscall_cp(nr, a, b, c, d, e, f);
}

/* calls WPP cannot honour */
pid_t __wrap_fork(void) {
  return wpp_on ? wpp_unsupported("fork") : __real_fork();
}

pid_t __wrap_vfork(void) {
  /* a vfork child would run on the wrapper's frame: fork instead */
  return wpp_on ? wpp_unsupported("vfork") : __real_fork();
}

int __wrap_execve(const char *path, char *const argv[], char *const envp[]) {
  return wpp_on ? wpp_unsupported("exec") : __real_execve(path, argv, envp);
}

int __wrap_posix_spawn(pid_t *pid, const char *path,
                       const posix_spawn_file_actions_t *fa,
                       const posix_spawnattr_t *at, char *const argv[],
                       char *const envp[]) {
  if (wpp_on)
    return wpp_unsupported("posix_spawn (and system, popen)"), ENOTSUP;
  return __real_posix_spawn(pid, path, fa, at, argv, envp);
}

int __wrap_posix_spawnp(pid_t *pid, const char *file,
                        const posix_spawn_file_actions_t *fa,
                        const posix_spawnattr_t *at, char *const argv[],
                        char *const envp[]) {
  if (wpp_on)
    return wpp_unsupported("posix_spawnp"), ENOTSUP;
  return __real_posix_spawnp(pid, file, fa, at, argv, envp);
}

/* Calls whose result cannot come back after a failure: they work, and the
 * program is told once per kind, when it makes one, not after a restore. */
void wpp_lost_at_failure(const char *what) {
  static const char *said[16];
  for (unsigned i = 0; i < 16; i++) {
    if (said[i] == what)
      return;
    if (!said[i]) {
      said[i] = what;
      break;
    }
  }
  wpp_warn("%s cannot come back after a power failure (docs/modes/wpp.md, "
           "What comes back)",
           what);
}

/* syscall(): kernel objects made only through it (musl has no wrappers for
 * them) are said at creation like the others; a raw fork or clone fails as
 * fork does. */
long __real_syscall(long, ...);
long __wrap_syscall(long nr, ...) {
  va_list ap;
  va_start(ap, nr);
  long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long),
       d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
  va_end(ap);
  if (wpp_on) {
    switch (nr) {
    case SYS_fork:
    case SYS_vfork:
    case SYS_clone:
    case SYS_clone3: /* a process or a thread the runtime would not know */
      return wpp_unsupported("a raw fork or clone (syscall)");
    case SYS_io_uring_setup:
      wpp_lost_at_failure("an io_uring instance (io_uring_setup)");
      break;
    case SYS_pidfd_open:
      wpp_lost_at_failure("a pidfd (pidfd_open)");
      break;
    case SYS_userfaultfd:
      wpp_lost_at_failure("a userfaultfd (userfaultfd)");
      break;
    case SYS_perf_event_open:
      wpp_lost_at_failure("a perf event descriptor (perf_event_open)");
      break;
    case SYS_bpf:
      wpp_lost_at_failure("a BPF object descriptor (bpf)");
      break;
    case SYS_memfd_create:
      wpp_lost_at_failure("a memfd (memfd_create) and its contents");
      break;
    case SYS_inotify_init:
    case SYS_inotify_init1:
      wpp_lost_at_failure("an inotify descriptor (inotify_init)");
      break;
    case SYS_fanotify_init:
      wpp_lost_at_failure("a fanotify descriptor (fanotify_init)");
      break;
    default:
      break;
    }
  }
  return __real_syscall(nr, a, b, c, d, e, f);
}

int __wrap_inotify_init(void) {
  if (wpp_on)
    wpp_lost_at_failure("an inotify descriptor (inotify_init)");
  return __real_inotify_init();
}

int __wrap_inotify_init1(int flags) {
  if (wpp_on)
    wpp_lost_at_failure("an inotify descriptor (inotify_init)");
  return __real_inotify_init1(flags);
}

int __wrap_fanotify_init(unsigned flags, unsigned evflags) {
  if (wpp_on)
    wpp_lost_at_failure("a fanotify descriptor (fanotify_init)");
  return __real_fanotify_init(flags, evflags);
}

int __wrap_memfd_create(const char *name, unsigned flags) {
  if (wpp_on)
    wpp_lost_at_failure("a memfd (memfd_create) and its contents");
  return __real_memfd_create(name, flags);
}

int __wrap_shmget(key_t key, size_t size, int flags) {
  if (wpp_on)
    wpp_lost_at_failure("System V shared memory (shmget)");
  return __real_shmget(key, size, flags);
}

int __wrap_semget(key_t key, int n, int flags) {
  if (wpp_on)
    wpp_lost_at_failure("a System V semaphore set (semget)");
  return __real_semget(key, n, flags);
}

int __wrap_msgget(key_t key, int flags) {
  if (wpp_on)
    wpp_lost_at_failure("a System V message queue (msgget)");
  return __real_msgget(key, flags);
}
