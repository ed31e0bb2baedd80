/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wpp.h -- internals of the WPP runtime (whole-process persistence), shared by
 * its files. The runtime is linked statically into a program built against
 * musl by `pmkit wpp cc`; it reaches libc's memory, thread and signal calls
 * through the linker's --wrap, never by modifying libc. Everything here is
 * hidden; the program-facing contract is docs/modes/wpp.md.
 *
 * The context is one sparse file, mapped MAP_SHARED at WPP_BASE:
 *
 *   [0, 1 MiB)          struct wpp_hdr: state, identity, tables
 *   [1 MiB, 10 MiB)     page map of the heap: one byte per page (0 = free)
 *   [10 MiB, 16 MiB)    unread bytes of the program's pipes, at a save
 *   [16 MiB, 256 MiB)   the program's writable static segment, mapped again
 *                       at its link address
 *   [256 MiB, end)      the heap: every anonymous mapping of the program
 *
 * Layout facts of musl 1.2.3 that the runtime relies on are in this file
 * only, each checked at start-up (wpp_check_libc).
 */
#ifndef PMKIT_WPP_H
#define PMKIT_WPP_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define WPP_HIDDEN __attribute__((visibility("hidden")))

#define WPP_MAGIC 0x31305050574b4d50ull /* "PMKWPP01" */
#define WPP_VERSION 3u
#define WPP_BASE 0x100000000000ull
#define WPP_SIZE (32ull << 30)
#define WPP_PAGE 4096ull
#define WPP_MAP_OFF (1ull << 20)
#define WPP_PIPEBUF_OFF (10ull << 20)
#define WPP_PIPEBUF_MAX (6ull << 20)
#define WPP_DATA_OFF (16ull << 20)
#define WPP_DATA_MAX (240ull << 20)
#define WPP_HEAP_OFF (256ull << 20)
#define WPP_HEAP_PAGES ((WPP_SIZE - WPP_HEAP_OFF) / WPP_PAGE)

/* musl ships no <linux/futex.h> */
#define FUTEX_WAIT_PRIVATE 128
#define FUTEX_WAKE_PRIVATE 129

/* Where `pmkit wpp` keeps contexts by default (cli/pmkit/wpp.py,
 * CONTEXT_ROOT); running programs are listed in its .running. */
#define WPP_RUN_ROOT "/dev/shm/pmkit-wpp"

/* The signal that stops a thread at a failure: hidden from the program. */
#define WPP_SIGSAVE (SIGRTMAX)
/* Exit status of a process whose state was saved at an emulated failure
 * (the same as PMKIT_CRASH_EXIT in pmkit.h). */
#define WPP_EXIT_SAVED 86

enum wpp_state {
  WPP_INIT = 1,    /* being created: never resumable */
  WPP_RUNNING = 2, /* live, or ended without a save: not resumable */
  WPP_SAVING = 3,  /* the save was interrupted: not resumable */
  WPP_SAVED = 4,   /* every thread saved: the next run resumes */
  WPP_EXITING = 5, /* the program is ending; its files are going */
};

enum wpp_fd_kind {
  WPP_FD_NONE = 0,
  WPP_FD_FILE,     /* a regular file, reopened through a hard link */
  WPP_FD_PIPE_R,   /* read end of a pipe; unread bytes saved */
  WPP_FD_PIPE_W,   /* write end of a pipe */
  WPP_FD_LISTEN,   /* a listening socket, rebuilt */
  WPP_FD_SOCKET,   /* any other socket: comes back dead */
  WPP_FD_EPOLL,    /* an epoll set, rebuilt from its registrations */
  WPP_FD_INHERIT,  /* 0, 1, 2: the next run's own descriptors; and a pipe,
                      socket or terminal that was 0, 1 or 2 at the start
                      (dup_of says which): the next run's, shared */
  WPP_FD_DEAD,     /* cannot be recreated: comes back as a closed socket */
  WPP_FD_DUP,      /* shares the open file of descriptor dup_of (kcmp) */
  WPP_FD_EVENTFD,  /* rebuilt with its counter and EFD_SEMAPHORE */
  WPP_FD_TIMERFD,  /* rebuilt armed: remaining time, interval, unread ticks */
  WPP_FD_SIGNALFD, /* rebuilt with its mask */
  WPP_FD_SOCKPAIR, /* an AF_UNIX socket whose peer the program also holds
                      (socketpair, or both ends of a local connection):
                      rebuilt as a pair, with the bytes or messages queued */
  WPP_FD_BOUND,    /* a datagram socket (UDP, AF_UNIX) otherwise, or a stream
                      socket never connected nor listening: a new one bound
                      to its address (and a datagram one connected to its
                      peer) */
  WPP_FD_KINDS     /* how many kinds there are */
};

/* A lock held through an open file (fdinfo "lock:"), taken again at a
 * restore. */
enum { WPP_LOCK_FLOCK = 1, WPP_LOCK_POSIX, WPP_LOCK_OFD };
struct wpp_lock {
  int32_t kind, type; /* type: F_RDLCK or F_WRLCK */
  int64_t start, len; /* POSIX and OFD: the range (len 0: to the end) */
};
#define WPP_FD_LOCKS 4

#define WPP_MAX_FD 256
#define WPP_MAX_FREE 8192
#define WPP_MAX_EPOLL 512

struct wpp_fd {
  int32_t num; /* the descriptor number */
  int32_t kind;
  int32_t flags; /* open flags (files), O_NONBLOCK|O_CLOEXEC (others) */
  uint64_t ino;  /* pipes: pairs the two ends */
  int32_t domain, type, proto; /* sockets */
  int32_t backlog;
  int32_t linked;  /* files: a hard link in the context keeps it */
  int64_t offset;  /* file offset at the save */
  char path[1024]; /* files: where it was */
  uint32_t addrlen;
  uint32_t pipe_len; /* saved unread bytes: read ends, socket pairs */
  uint64_t pipe_off; /* where those bytes are, from WPP_PIPEBUF_OFF */
  int32_t pipe_size; /* F_GETPIPE_SZ */
  int32_t sndbuf;    /* socket pairs: SO_SNDBUF */
  uint8_t addr[112]; /* sockets: the bound address */
  int32_t reuse;     /* SO_REUSEADDR */
  int32_t reuseport; /* SO_REUSEPORT */
  int32_t broadcast; /* SO_BROADCAST */
  int32_t v6only;    /* IPV6_V6ONLY */
  int32_t passcred;  /* SO_PASSCRED */
  int32_t shut;      /* AF_UNIX: halves shut down (1 read, 2 write) */
  uint32_t sockmode; /* AF_UNIX bound to a path: the socket file's mode */
  uint32_t peer_addrlen;
  uint8_t peer_addr[112]; /* datagram sockets: the connected peer */
  int32_t dup_of;  /* WPP_FD_DUP: the descriptor whose open file it shares */
  uint64_t dev;    /* with ino: candidates for a shared open file */
  uint64_t count;  /* eventfd: the counter; timerfd: unread expirations */
  int32_t sem;     /* eventfd: EFD_SEMAPHORE */
  int32_t clockid; /* timerfd */
  int32_t tflags;  /* timerfd: TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET */
  int32_t nlock;
  int64_t value_ns, interval_ns; /* timerfd: next expiry (see fd.c), period */
  uint64_t sigmask;              /* signalfd */
  uint64_t peer;                 /* WPP_FD_SOCKPAIR: the other end's inode */
  struct wpp_lock lock[WPP_FD_LOCKS];
};

/* A POSIX timer (timer_create), from /proc/self/timers: recreated at a
 * restore under the same id, armed with what was left. */
struct wpp_ptimer {
  int32_t id, clockid;
  int32_t notify; /* SIGEV_SIGNAL, SIGEV_NONE or SIGEV_THREAD_ID */
  int32_t signo, tid;
  int32_t pad;
  uint64_t sival;
  int64_t value_ns, interval_ns;
};
#define WPP_MAX_PTIMER 64

/* A mapping of a file (outside the context), mapped again at a restore. */
struct wpp_fmap {
  uint64_t start, len, off;
  uint64_t dev, ino;   /* the file, to tell it from another at its path */
  int32_t prot, flags; /* MAP_SHARED or MAP_PRIVATE */
  int32_t linked;      /* a hard link in the context keeps the file */
  int32_t pad;
  char path[512];
};
#define WPP_MAX_FMAP 64
#define WPP_MAX_PENDING 64

struct wpp_epoll_reg {
  int32_t epfd, fd;
  uint32_t events;
  uint32_t pad;
  uint64_t data;
};

/* A signal's disposition as the kernel holds it (rt_sigaction's struct),
 * read at a save: the program's and libc's own (musl's cancellation
 * handler) alike. */
struct wpp_ksig {
  uint64_t handler, flags, restorer, mask;
};

struct wpp_extent {
  uint64_t page, npages;
};

struct wpp_hdr {
  uint64_t magic;
  uint32_t version;
  volatile int32_t state;
  uint64_t exe_hash; /* FNV-1a of the executable */
  uint64_t vdso;     /* AT_SYSINFO_EHDR at the first start */
  uint64_t data_addr, data_len;
  volatile uint32_t generation; /* restores so far */
  int32_t ns;                   /* 1: ran as pid 1 of its own pid namespace */
  uint64_t main_thread;         /* pthread_t of the thread running main */
  uint64_t created_ns, saved_ns;
  uint64_t restore_ns; /* time the last restore took */
  uint64_t live_pages; /* heap pages in use */
  uint64_t threads_saved, threads_restored;
  uint64_t argv, envp, auxv; /* copies in the heap */
  int32_t argc;
  uint32_t umask;
  struct {
    int64_t interval_us, value_us; /* value_us 0: disarmed */
  } itimer[3];                     /* ITIMER_REAL, _VIRTUAL, _PROF (alarm) */
  char cwd[4096];
  /* heap allocator */
  volatile int lock;
  uint32_t nfree;
  uint64_t bump;         /* first never-used heap page */
  uint64_t map_reserved; /* page map entries with file space (mem.c) */
  struct wpp_extent free[WPP_MAX_FREE];
  /* kernel state */
  struct wpp_ksig ksig[65];
  uint64_t master_prev, master_next; /* the thread list around the master */
  struct sigaction onfail;           /* the program's SIGPWR disposition */
  int32_t onfail_set;
  uint32_t nepoll;
  uint32_t nfd;
  uint32_t pad2;
  /* what 0, 1 and 2 were at the start (or the last restore): a descriptor
   * still on one of them after 0-2 were redirected (saved = dup(1)) is given
   * the new run's own */
  uint64_t stdio_dev[3], stdio_ino[3];
  uint64_t args_kept; /* the arguments as given, NUL-separated (the program
                         may change the ones it gets) */
  struct wpp_fd fd[WPP_MAX_FD];
  struct wpp_epoll_reg epoll[WPP_MAX_EPOLL];
  uint32_t nptimer, nfmap;
  uint32_t npending, pad4;
  struct {
    uint8_t info[128];        /* siginfo_t, as sigtimedwait took it */
  } pending[WPP_MAX_PENDING]; /* signals pending for the process */
  struct wpp_ptimer ptimer[WPP_MAX_PTIMER];
  struct wpp_fmap fmap[WPP_MAX_FMAP];
};

_Static_assert(sizeof(struct wpp_hdr) <= WPP_MAP_OFF, "header too large");
/* `pmkit wpp info` (cli/pmkit/wpp.py) reads the fields before argv */
_Static_assert(offsetof(struct wpp_hdr, argv) == 112,
               "wpp.py reads the header");
_Static_assert(WPP_MAP_OFF + WPP_HEAP_PAGES <= WPP_PIPEBUF_OFF, "page map");

/* Per-thread record, in the thread's (persistent) TLS. */
struct wpp_tls {
  void *uc;              /* the ucontext of the save signal */
  volatile int alive;    /* cleared by the kernel when the saved thread exits */
  volatile uint32_t gen; /* generation + 1 it was saved in */
};

/* musl 1.2.3 struct pthread (x86_64), the fields the runtime touches. */
#define MUSL_PT_SELF 0
#define MUSL_PT_PREV 16
#define MUSL_PT_NEXT 24
#define MUSL_PT_CANARY 40
#define MUSL_PT_TID 48
#define MUSL_PT_ROBUST 136
#define MUSL_PT_STDIO_LOCKS 192 /* FILEs this thread holds by flockfile */
#define MUSL_LIBC_AUXV 8        /* offset of auxv in struct __libc */
/* struct _IO_FILE and pthread_mutex_t: the owner words that hold a tid */
#define MUSL_FILE_FD 120
#define MUSL_FILE_LOCK 140
#define MUSL_FILE_NEXT_LOCKED 216
#define MUSL_FILE_WAITERS 0x40000000
#define MUSL_MUTEX_LOCK 4  /* tid | 0x40000000 (owner died) | 0x80000000 */
#define MUSL_MUTEX_NEXT 32 /* where a robust-list entry points */
#define MUSL_MUTEX_TID 0x3fffffff

static inline char *wpp_pt_next(char *t) {
  return *(char **)(t + MUSL_PT_NEXT);
}
static inline int *wpp_pt_tid(char *t) { return (int *)(t + MUSL_PT_TID); }

WPP_HIDDEN extern struct wpp_hdr *const wpp_hdr;
WPP_HIDDEN extern int wpp_on; /* this process runs under WPP */
WPP_HIDDEN extern int wpp_ctxfd;
/* anonymous mappings made before the runtime took over (constructors) */
WPP_HIDDEN extern int wpp_early_maps;

/* mem.c */
WPP_HIDDEN int wpp_mem_map(int fd);
WPP_HIDDEN void wpp_block_brk(void);
WPP_HIDDEN void *wpp_alloc(size_t len, int prot);
WPP_HIDDEN int wpp_in_heap(const void *p, size_t len);
WPP_HIDDEN void *wpp_heap_ptr(uint64_t off);
WPP_HIDDEN uint64_t wpp_heap_off(const void *p);
/* File space for [off, off + len) of the context now (fallocate): 0, or -1
 * with errno (ENOSPC on a full file system). */
WPP_HIDDEN int wpp_reserve(uint64_t off, uint64_t len);

/* fd.c: descriptors, and the kernel objects read the same way (POSIX
 * timers, file mappings, pending signals) */
WPP_HIDDEN void wpp_fd_save(void);
WPP_HIDDEN void wpp_stdio_note(void);
WPP_HIDDEN int wpp_fd_restore(const char *dir);
WPP_HIDDEN void wpp_fd_cleanup(const char *dir);
/* before the threads are stopped: which thread ids /proc shows stand for
 * which ids of the program's own pid namespace */
WPP_HIDDEN void wpp_kobj_prepare(void);
WPP_HIDDEN void wpp_kobj_save(void);
WPP_HIDDEN void wpp_fmap_restore(const char *dir);
/* after the threads are back (a timer may signal one of them); tid_of maps
 * a saved thread id to its id now */
WPP_HIDDEN void wpp_ptimer_restore(int (*tid_of)(int old));
WPP_HIDDEN void wpp_ptimer_arm(void); /* once the threads run */
WPP_HIDDEN void wpp_signals_restore(void);
/* wrap.c: a call whose result cannot come back after a failure: a warning,
 * once per kind */
WPP_HIDDEN void wpp_lost_at_failure(const char *what);

/* wpp.c */
WPP_HIDDEN void wpp_die(const char *fmt, ...) __attribute__((noreturn));
WPP_HIDDEN void wpp_warn(const char *fmt, ...);
WPP_HIDDEN void wpp_lock(volatile int *l);
WPP_HIDDEN void wpp_unlock(volatile int *l);
WPP_HIDDEN extern char wpp_dir[4096];
WPP_HIDDEN int wpp_broken(const char *what);

/* The libc functions the core calls when it does not stand in front of a
 * call: filled by the interception layer (wrap.c for the static --wrap
 * build; an LD_PRELOAD layer would fill it with dlsym(RTLD_NEXT)). */
struct wpp_libc {
  int (*main)(int, char **, char **);
  void *(*mmap)(void *, size_t, int, int, int, long);
  int (*munmap)(void *, size_t);
  void *(*mremap)(void *, size_t, size_t, int, ...);
  int (*mprotect)(void *, size_t, int);
  int (*madvise)(void *, size_t, int);
  int (*sigaction)(int, const struct sigaction *, struct sigaction *);
  int (*sigmask)(int, const sigset_t *, sigset_t *);
  int (*clock_nanosleep)(int, int, const struct timespec *, struct timespec *);
  long (*syscall_cp)(long, long, long, long, long, long, long);
  void (*exit)(int) __attribute__((noreturn)); /* _Exit */
};
WPP_HIDDEN extern const struct wpp_libc wpp_real;

/* The core's entry points, one per intercepted call (same arguments and
 * result as the call; each passes through when wpp_on is 0). */
WPP_HIDDEN int wpp_main(int argc, char **argv, char **envp);
WPP_HIDDEN void *wpp_mmap(void *addr, size_t len, int prot, int flags, int fd,
                          long off);
WPP_HIDDEN int wpp_munmap(void *addr, size_t len);
WPP_HIDDEN void *wpp_mremap(void *old, size_t oldlen, size_t newlen, int flags,
                            void *newaddr);
WPP_HIDDEN int wpp_mprotect(void *addr, size_t len, int prot);
WPP_HIDDEN int wpp_madvise(void *addr, size_t len, int advice);
WPP_HIDDEN int wpp_sigaction(int sig, const struct sigaction *sa,
                             struct sigaction *old);
WPP_HIDDEN int wpp_sigmask(int how, const sigset_t *set, sigset_t *old);
WPP_HIDDEN int wpp_clock_nanosleep(int clk, int flags,
                                   const struct timespec *req,
                                   struct timespec *rem);
WPP_HIDDEN _Noreturn void wpp_exit(int code);
/* musl's cancellable system calls (read, poll, epoll_wait, sigtimedwait...) */
WPP_HIDDEN long wpp_syscall_cp(long nr, long a, long b, long c, long d, long e,
                               long f);
/* A call WPP cannot honour (fork, exec): says so once; -1 with ENOTSUP. */
WPP_HIDDEN int wpp_unsupported(const char *what);

/* clone3.S: start fn(arg) on a new thread with the given clone_args. */
WPP_HIDDEN long wpp_clone3(void *args, size_t size, int (*fn)(void *),
                           void *arg);

#endif
