/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fd.c -- the program's kernel objects across a power failure. At a save,
 * after every thread has stopped, wpp_fd_save reads the descriptor table
 * from /proc/self/fd and fdinfo (which also sees the descriptors libc opens
 * with raw system calls, as fopen does) and records each one: a regular file
 * with its path, offset, flags and the locks taken through it (flock, POSIX
 * and OFD), and a hard link in the context so that it cannot disappear
 * before the restart; both ends of each pipe with the bytes nobody had read
 * yet; listening sockets with their address; epoll sets with their
 * registrations; eventfds with their counter and EFD_SEMAPHORE; timerfds
 * with the time left, the interval and the expirations not yet read;
 * signalfds with their mask. Descriptors that share one open file (dup,
 * dup2, F_DUPFD; found with kcmp) come back sharing one again, with one
 * offset. wpp_kobj_save then records the POSIX timers (/proc/self/timers),
 * the mappings of files (/proc/self/maps) and the signals pending for the
 * process. The restore rebuilds each at the same number, id or address.
 * An AF_UNIX socket whose peer the program also holds (a socketpair, or both
 * ends of a local connection; the peer is asked of sock_diag) comes back as a
 * pair again, with the bytes or messages that were queued to each end.
 * Datagram sockets (UDP, AF_UNIX) come back bound to their address and
 * connected to their peer; the datagrams queued in them are lost, as a
 * network loses those in transit. Other connected sockets cannot come back:
 * they return as a socket whose peer has gone (reads see end of file, writes
 * EPIPE), which a server handles as a client that went away; so does any other
 * descriptor (inotify, fanotify, a memfd), whose creation the program was
 * warned of (wrap.c). 0, 1 and 2 are the new run's own.
 *
 * The master thread runs this while the program's threads are stopped, some
 * perhaps inside malloc or stdio: nothing here allocates or takes a libc lock.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "wpp.h"

/* Temporaries live above every recorded number (set by wpp_fd_restore). */
static int fd_high = 600;
#ifndef TFD_IOC_SET_TICKS
#define TFD_IOC_SET_TICKS _IOW('T', 0, uint64_t)
#endif
#define KCMP_FILE 0

static int read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r <= 0)
      break;
    n += (size_t)r;
    if (n == cap - 1)
      break;
  }
  close(fd);
  buf[n] = 0;
  return (int)n;
}

static const char *field(const char *text, const char *name) {
  const char *p = strstr(text, name);
  return p ? p + strlen(name) : NULL;
}

static void link_name(char *out, size_t cap, const char *dir, int num) {
  snprintf(out, cap, "%s/link.%d", dir, num);
}

/* The whole of a /proc file, however long (an epoll's fdinfo, the maps of a
 * big process), in memory mapped with the raw system call: outside the
 * context, and without the allocator, which a stopped thread may hold. NULL
 * if it cannot be read; free with free_big. */
static char *read_big(const char *path, size_t *cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  size_t n = 0, c = 1 << 16;
  char *b = fd < 0 ? MAP_FAILED
                   : (char *)syscall(SYS_mmap, 0, c, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  for (ssize_t r = 1; b != MAP_FAILED && r > 0;) {
    if (n + 1 == c) {
      char *nb = (char *)syscall(SYS_mremap, b, c, 2 * c, MREMAP_MAYMOVE);
      if (nb == MAP_FAILED)
        break;
      b = nb;
      c *= 2;
    }
    r = read(fd, b + n, c - 1 - n);
    n += r > 0 ? (size_t)r : 0;
  }
  if (fd >= 0)
    close(fd);
  if (b == MAP_FAILED)
    return NULL;
  b[n] = 0;
  *cap = c;
  return b;
}

static void free_big(char *b, size_t cap) {
  if (b)
    syscall(SYS_munmap, b, cap);
}

static void save_epoll(int num, const char *info) {
  struct wpp_hdr *h = wpp_hdr;
  for (const char *p = strstr(info, "tfd:"); p; p = strstr(p + 4, "tfd:")) {
    if (h->nepoll >= WPP_MAX_EPOLL) {
      wpp_warn("more than %d epoll registrations: the rest are lost",
               WPP_MAX_EPOLL);
      return;
    }
    struct wpp_epoll_reg *e = &h->epoll[h->nepoll];
    const char *ev = field(p, "events:"), *da = field(p, "data:");
    if (!ev || !da)
      return;
    e->epfd = num;
    e->fd = (int)strtol(p + 4, NULL, 10);
    e->events = (uint32_t)strtoul(ev, NULL, 16);
    e->data = strtoull(da, NULL, 16);
    h->nepoll++;
  }
}

/* The inode of the socket at the other end of a connected AF_UNIX socket,
 * asked of the kernel's socket diagnostics (sock_diag, as `ss -x` does); 0 if
 * it has none (or it was closed) or the kernel does not say. Also its state
 * (1, TCP_ESTABLISHED: connected) and which halves were shut down. The
 * structures are Linux's (linux/netlink.h, linux/unix_diag.h), which musl does
 * not ship. */
static uint32_t unix_diag(uint32_t ino, int *state, int *shut) {
  struct {
    uint32_t len;
    uint16_t type, flags;
    uint32_t seq, pid;
    uint8_t family, protocol;
    uint16_t pad;
    uint32_t states, ino, show, cookie[2];
  } q = {sizeof(q),
         20 /* SOCK_DIAG_BY_FAMILY */,
         1 /* NLM_F_REQUEST */,
         1,
         0,
         AF_UNIX,
         0,
         0,
         ~0u,
         ino,
         4 /* UDIAG_SHOW_PEER */,
         {~0u, ~0u}};
  int s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, 4 /* SOCK_DIAG */);
  if (s < 0)
    return 0;
  unsigned char r[1024];
  uint32_t peer = 0, len;
  uint16_t type, alen, atype;
  ssize_t n = send(s, &q, sizeof(q), 0) == (ssize_t)sizeof(q)
                  ? recv(s, r, sizeof(r), 0)
                  : -1;
  close(s);
  if (n < 32)
    return 0;
  memcpy(&len, r, 4);
  memcpy(&type, r + 4, 2);
  if (type != 20 || len > (uint32_t)n)
    return 0;
  *state = r[16 + 2]; /* unix_diag_msg.udiag_state: TCP_ESTABLISHED, ... */
  /* netlink header (16 bytes), unix_diag_msg (16), then attributes */
  for (uint32_t off = 32; off + 4 <= len; off += (alen + 3u) & ~3u) {
    memcpy(&alen, r + off, 2);
    memcpy(&atype, r + off + 2, 2);
    if (alen < 4 || off + alen > len)
      break;
    if (atype == 2 /* UNIX_DIAG_PEER */ && alen >= 8)
      memcpy(&peer, r + off + 4, 4);
    if (atype == 6 /* UNIX_DIAG_SHUTDOWN */ && alen >= 5)
      *shut = r[off + 4]; /* RCV_SHUTDOWN 1, SEND_SHUTDOWN 2 */
  }
  return peer;
}

/* A socket pair's queued data, taken out of it into the pipe buffer: a
 * stream's bytes, or each message as its 4-byte length and its bytes. */
static void save_queued(struct wpp_fd *f, int num, uint64_t *used) {
  char *base = (char *)(uintptr_t)(WPP_BASE + WPP_PIPEBUF_OFF);
  int stream = f->type == SOCK_STREAM, said = 0;
  uint64_t start = *used;
  for (long msgs = 0;; msgs++) {
    int avail = 0; /* a stream: every byte queued; else the next message */
    if (msgs == 1 << 20) { /* never spin here, whatever the socket says */
      wpp_warn("socket %d: more than %ld queued messages: the rest are lost",
               num, msgs);
      break;
    }
    if (ioctl(num, FIONREAD, &avail) != 0 || avail < 0 || (stream && !avail))
      break;
    uint64_t need = (uint64_t)avail + (stream ? 0 : 4);
    if (*used + need > WPP_PIPEBUF_MAX ||
        wpp_reserve(WPP_PIPEBUF_OFF + *used, need ? need : 1)) {
      wpp_warn("socket pair %d: %d queued bytes do not fit the context%s; "
               "dropped",
               num, avail,
               *used + need > WPP_PIPEBUF_MAX ? "" : " (file system full)");
      break;
    }
    struct iovec iov = {base + *used + (stream ? 0 : 4), (size_t)avail};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t got = recvmsg(num, &m, MSG_DONTWAIT);
    /* 0 is the end of a stream, or of a message socket shut down for reading
     * (an empty message otherwise) */
    if (got < 0 || (got == 0 && (stream || (f->shut & 1))))
      break;
    if ((m.msg_flags & MSG_CTRUNC) && !said++)
      wpp_warn("socket pair %d: descriptors or credentials sent with its "
               "queued data are lost",
               num);
    if (!stream) {
      uint32_t l = (uint32_t)got;
      memcpy(base + *used, &l, 4);
      *used += 4;
    }
    *used += (uint64_t)got;
  }
  f->pipe_off = start;
  f->pipe_len = (uint32_t)(*used - start);
}

#define UNIX_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) + 1)

/* The file system path an AF_UNIX socket is bound to, into out
 * (UNIX_PATH_MAX bytes); 0 if it is not bound to one (unnamed, abstract). */
static int unix_path(const struct wpp_fd *f, char *out) {
  size_t off = offsetof(struct sockaddr_un, sun_path);
  if (f->domain != AF_UNIX || f->addrlen <= off + 1 || f->addr[off] == 0)
    return 0;
  memcpy(out, f->addr + off, f->addrlen - off);
  out[f->addrlen - off] = 0;
  return 1;
}

static void save_socket(struct wpp_fd *f, int num, uint64_t *used) {
  socklen_t l = sizeof(int);
  int acc = 0;
  getsockopt(num, SOL_SOCKET, SO_DOMAIN, &f->domain, &l);
  l = sizeof(int);
  getsockopt(num, SOL_SOCKET, SO_TYPE, &f->type, &l);
  l = sizeof(int);
  getsockopt(num, SOL_SOCKET, SO_PROTOCOL, &f->proto, &l);
  l = sizeof(int);
  getsockopt(num, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l);
  l = sizeof(int);
  getsockopt(num, SOL_SOCKET, SO_REUSEADDR, &f->reuse, &l);
  l = sizeof(int);
  getsockopt(num, SOL_SOCKET, SO_REUSEPORT, &f->reuseport, &l);
  l = sizeof(int);
  getsockopt(num, SOL_SOCKET, SO_BROADCAST, &f->broadcast, &l);
  socklen_t al = sizeof(f->addr), pl = sizeof(f->peer_addr);
  if (getsockname(num, (struct sockaddr *)f->addr, &al) == 0 &&
      al <= sizeof(f->addr))
    f->addrlen = al;
  if (getpeername(num, (struct sockaddr *)f->peer_addr, &pl) == 0 &&
      pl <= sizeof(f->peer_addr))
    f->peer_addrlen = pl;
  int state = 0;
  size_t off = offsetof(struct sockaddr_un, sun_path);
  struct stat st;
  if (f->domain == AF_UNIX) {
    f->peer = unix_diag((uint32_t)f->ino, &state, &f->shut);
    l = sizeof(int);
    getsockopt(num, SOL_SOCKET, SO_PASSCRED, &f->passcred, &l);
    char path[UNIX_PATH_MAX];
    if (unix_path(f, path) && lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
      f->sockmode = st.st_mode & 07777;
  } else if (f->domain == AF_INET6) {
    l = sizeof(int);
    getsockopt(num, IPPROTO_IPV6, IPV6_V6ONLY, &f->v6only, &l);
  }
  /* a connected stream: AF_UNIX says so even when its peer has closed */
  int ip = f->domain == AF_INET || f->domain == AF_INET6;
  int connected = f->type != SOCK_DGRAM &&
                  (f->domain == AF_UNIX ? state == 1 : ip && f->peer_addrlen);
  if (acc && f->addrlen) {
    f->kind = WPP_FD_LISTEN;
    f->backlog = SOMAXCONN;
  } else if (connected || (f->type == SOCK_DGRAM && f->peer) ||
             (f->type == SOCK_DGRAM && f->domain == AF_UNIX &&
              f->peer_addrlen && f->addrlen <= off)) {
    /* (the last: an unnamed datagram end whose peer has closed) */
    /* rebuilt as a pair if the peer is among ours; otherwise a socket whose
     * peer has gone, still holding what was queued to it (restore) */
    f->kind = WPP_FD_SOCKPAIR;
    l = sizeof(int);
    getsockopt(num, SOL_SOCKET, SO_SNDBUF, &f->sndbuf, &l);
    save_queued(f, num, used);
  } else if (f->domain == AF_UNIX || ip) {
    /* a datagram socket (what was queued in it is lost, as in transit), or
       a stream one not yet connected nor listening */
    f->kind = WPP_FD_BOUND;
  } else {
    f->kind = WPP_FD_SOCKET;
  }
}

static void save_pipe(struct wpp_fd *f, int num, uint64_t *used) {
  int avail = 0;
  if ((f->flags & O_ACCMODE) != O_RDONLY) {
    f->kind = WPP_FD_PIPE_W;
    return;
  }
  f->kind = WPP_FD_PIPE_R;
  f->pipe_size = fcntl(num, F_GETPIPE_SZ);
  if (ioctl(num, FIONREAD, &avail) != 0 || avail <= 0)
    return;
  if (*used + (uint64_t)avail > WPP_PIPEBUF_MAX ||
      wpp_reserve(WPP_PIPEBUF_OFF + *used, (uint64_t)avail)) {
    wpp_warn("pipe %d: %d unread bytes do not fit the context%s; dropped", num,
             avail,
             *used + (uint64_t)avail > WPP_PIPEBUF_MAX ? ""
                                                       : " (file system full)");
    return;
  }
  char *buf = (char *)(uintptr_t)(WPP_BASE + WPP_PIPEBUF_OFF + *used);
  int got = 0;
  while (got < avail) {
    ssize_t r = read(num, buf + got, (size_t)(avail - got));
    if (r <= 0)
      break;
    got += (int)r;
  }
  f->pipe_off = *used;
  f->pipe_len = (uint32_t)got;
  *used += (uint64_t)got;
}

/* Hex or decimal numbers after a field name of fdinfo. */
static uint64_t field_u64(const char *info, const char *name, int base) {
  const char *p = field(info, name);
  return p ? strtoull(p, NULL, base) : 0;
}

/* "lock:\t1: FLOCK  ADVISORY  WRITE 16068 fe:00:9978167 0 EOF" */
static void save_locks(struct wpp_fd *f, const char *info) {
  for (const char *p = strstr(info, "lock:\t"); p;
       p = strstr(p + 5, "lock:\t")) {
    char kind[16], adv[16], rw[16], end[32];
    long long start = 0;
    if (sscanf(p + 6, "%*d: %15s %15s %15s %*d %*s %lld %31s", kind, adv, rw,
               &start, end) != 5 ||
        !strcmp(kind, "->"))
      continue; /* a waiter, not a holder */
    struct wpp_lock l = {0, strcmp(rw, "READ") ? F_WRLCK : F_RDLCK, start, 0};
    if (!strcmp(kind, "FLOCK"))
      l.kind = WPP_LOCK_FLOCK;
    else if (!strcmp(kind, "POSIX"))
      l.kind = WPP_LOCK_POSIX;
    else if (!strcmp(kind, "OFDLCK"))
      l.kind = WPP_LOCK_OFD;
    else {
      wpp_warn("descriptor %d: a %s lock cannot be taken again", f->num, kind);
      continue;
    }
    if (strcmp(end, "EOF"))
      l.len = strtoll(end, NULL, 10) - start + 1;
    if (f->nlock == WPP_FD_LOCKS) {
      wpp_warn("descriptor %d: more than %d locks; the rest are not taken "
               "again",
               f->num, WPP_FD_LOCKS);
      return;
    }
    f->lock[f->nlock++] = l;
  }
}

static int64_t ts_ns(struct timespec t) {
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static struct timespec ns_ts(int64_t ns) {
  return (struct timespec){ns / 1000000000, ns % 1000000000};
}

static void save_timerfd(struct wpp_fd *f, int num, const char *info) {
  struct itimerspec its;
  memset(&its, 0, sizeof(its));
  f->kind = WPP_FD_TIMERFD;
  f->clockid = (int32_t)field_u64(info, "clockid:", 10);
  f->count = field_u64(info, "ticks:", 10);
  f->tflags = (int32_t)field_u64(info, "settime flags:", 8);
  timerfd_gettime(num, &its);
  f->value_ns = ts_ns(its.it_value);
  f->interval_ns = ts_ns(its.it_interval);
  /* an absolute wall-clock expiry stays absolute; otherwise the time left
   * is what comes back (the program did not run while it was down) */
  if (f->value_ns && (f->tflags & TFD_TIMER_ABSTIME) &&
      f->clockid == CLOCK_REALTIME) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    f->value_ns += ts_ns(now);
  } else {
    f->tflags &= ~TFD_TIMER_ABSTIME;
  }
}

/* The first recorded descriptor that shares num's open file, or -1. */
static int shared_with(const struct wpp_fd *f, int num) {
  static int no_kcmp;
  struct wpp_hdr *h = wpp_hdr;
  for (uint32_t j = 0; j < h->nfd && !no_kcmp; j++) {
    const struct wpp_fd *g = &h->fd[j];
    if (g->kind == WPP_FD_DUP || g->ino != f->ino || g->dev != f->dev)
      continue;
    long r = syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, num, g->num);
    if (r == 0)
      return g->num;
    if (r < 0) {
      no_kcmp = 1;
      wpp_warn("kcmp: %s: descriptors that share an open file (dup) will "
               "come back as separate files",
               strerror(errno));
    }
  }
  return -1;
}

/* A deleted file (a temporary, as sqlite3 makes them) on another file system
 * than the context cannot be linked into it: its contents are copied there
 * instead, and the restore opens the copy. Up to 256 MiB; 1 if copied. */
static int copy_deleted(int num, const char *lname, const struct stat *st) {
  off_t off = 0;
  if (st->st_size > (256 << 20)) {
    wpp_warn("descriptor %d: a deleted file of %lld bytes is too big to keep: "
             "it cannot come back",
             num, (long long)st->st_size);
    return 0;
  }
  int out = open(lname, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  while (out >= 0 && off < st->st_size &&
         sendfile(out, num, &off, (size_t)(st->st_size - off)) > 0)
    ;
  if (out < 0 || off < st->st_size) {
    wpp_warn("descriptor %d: a deleted file cannot be kept in the context "
             "(%s): it cannot come back",
             num, out < 0 ? strerror(errno) : "copy cut short");
    if (out >= 0) {
      close(out);
      unlink(lname);
    }
    return 0;
  }
  close(out);
  return 1;
}

void wpp_stdio_note(void) {
  struct stat st;
  for (int k = 0; k < 3; k++) {
    int ok = fstat(k, &st) == 0;
    wpp_hdr->stdio_dev[k] = ok ? st.st_dev : 0;
    wpp_hdr->stdio_ino[k] = ok ? st.st_ino : 0;
  }
}

void wpp_fd_save(void) {
  struct wpp_hdr *h = wpp_hdr;
  char dents[4096], path[64], info[8192], target[1024], lname[4200];
  uint64_t pipebuf = 0;
  h->nfd = 0;
  h->nepoll = 0;
  int d = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0) {
    wpp_warn("cannot read /proc/self/fd: descriptors will not come back");
    return;
  }
  for (;;) {
    long n = syscall(SYS_getdents64, d, dents, sizeof(dents));
    if (n <= 0)
      break;
    for (long off = 0; off < n;) {
      struct dirent *de = (struct dirent *)(dents + off);
      off += de->d_reclen;
      if (de->d_name[0] < '0' || de->d_name[0] > '9')
        continue;
      int num = atoi(de->d_name);
      if (num == d || num == wpp_ctxfd || num < 0)
        continue;
      if (h->nfd >= WPP_MAX_FD) {
        wpp_warn("more than %d descriptors: %d and later are lost", WPP_MAX_FD,
                 num);
        break;
      }
      struct wpp_fd *f = &h->fd[h->nfd];
      memset(f, 0, sizeof(*f));
      f->num = num;
      struct stat st;
      if (fstat(num, &st) != 0)
        continue;
      f->ino = st.st_ino;
      f->dev = st.st_dev;
      /* the new run's 0, 1 or 2 stands in for what was one of them at the
       * start, wherever it is now (saved = dup(1)); a 0-2 the program
       * pointed elsewhere (dup2(pipe, 1)) is rebuilt like any descriptor */
      f->dup_of = -1;
      /* 0-2 still on what they were at the start are the new run's own,
       * even where two of them were one device (a terminal, 2>&1): once 1
       * and 2 came back as copies of the new run's 0. */
      if (num <= 2 && st.st_ino == h->stdio_ino[num] &&
          st.st_dev == h->stdio_dev[num])
        f->dup_of = num;
      /* Beyond 2, a pipe, socket or terminal; not a device any open
       * reaches (/dev/null): that is reopened by its path, with its own
       * access mode (once it came back as a copy of the new run's 0). */
      int stdio_like = num <= 2 || S_ISFIFO(st.st_mode) ||
                       S_ISSOCK(st.st_mode) ||
                       (S_ISCHR(st.st_mode) && isatty(num));
      /* Which of 0-2 stands in for it: the one it is a dup of, else the
       * first on its device. A terminal that was 0-2 at once is one open
       * file, so kcmp cannot tell fd 5 = dup(1) from dup(0): one it can
       * write to takes the new run's 1 (or 2) first, not its 0, which may
       * be /dev/null read-only (once every write to it failed, EBADF). */
      static const int rd_order[3] = {0, 1, 2}, wr_order[3] = {1, 2, 0};
      const int *order =
          num > 2 && (fcntl(num, F_GETFL) & O_ACCMODE) != O_RDONLY ? wr_order
                                                                   : rd_order;
      for (int o = 0; o < 3 && f->dup_of < 0 && num > 2 && stdio_like; o++) {
        int k = order[o];
        if (st.st_ino == h->stdio_ino[k] && st.st_dev == h->stdio_dev[k] &&
            syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, num, k) == 0)
          f->dup_of = k;
      }
      for (int o = 0; o < 3 && f->dup_of < 0 && stdio_like; o++) {
        int k = order[o];
        if (st.st_ino == h->stdio_ino[k] && st.st_dev == h->stdio_dev[k])
          f->dup_of = k;
      }
      if (f->dup_of >= 0) {
        f->kind = WPP_FD_INHERIT;
        h->nfd++;
        continue;
      }
      snprintf(path, sizeof(path), "/proc/self/fd/%d", num);
      ssize_t tl = readlink(path, target, sizeof(target) - 1);
      if (tl < 0)
        continue;
      target[tl] = 0;
      snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", num);
      read_small(path, info, sizeof(info));
      const char *p = field(info, "pos:"), *fl = field(info, "flags:");
      f->offset = p ? strtoll(p, NULL, 10) : 0;
      f->flags = fl ? (int)strtol(fl, NULL, 8) : O_RDWR;
      if ((f->dup_of = shared_with(f, num)) >= 0) {
        f->kind = WPP_FD_DUP; /* its own O_CLOEXEC; the rest is shared */
        h->nfd++;
        continue;
      }
      if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISCHR(st.st_mode)) {
        f->kind = WPP_FD_FILE;
        if ((size_t)tl >= sizeof(f->path))
          f->kind = WPP_FD_DEAD;
        else
          memcpy(f->path, target, (size_t)tl + 1);
        if (S_ISREG(st.st_mode)) {
          link_name(lname, sizeof(lname), wpp_dir, num);
          unlink(lname);
          snprintf(path, sizeof(path), "/proc/self/fd/%d", num);
          f->linked =
              linkat(AT_FDCWD, path, AT_FDCWD, lname, AT_SYMLINK_FOLLOW) == 0;
          if (!f->linked && st.st_nlink == 0) /* deleted, on another fs */
            f->linked = copy_deleted(num, lname, &st);
        }
        save_locks(f, info);
      } else if (S_ISFIFO(st.st_mode) && !strncmp(target, "pipe:", 5)) {
        save_pipe(f, num, &pipebuf);
      } else if (S_ISSOCK(st.st_mode)) {
        save_socket(f, num, &pipebuf);
      } else if (strstr(target, "[eventpoll]")) {
        size_t cap = 0;
        char *all = read_big(path, &cap); /* every registration, not 8 KiB */
        f->kind = WPP_FD_EPOLL;
        save_epoll(num, all ? all : info);
        free_big(all, cap);
      } else if (!strcmp(target, "anon_inode:[eventfd]")) {
        static int said;
        f->kind = WPP_FD_EVENTFD;
        f->count = field_u64(info, "eventfd-count:", 16);
        f->sem = (int32_t)field_u64(info, "eventfd-semaphore:", 10);
        if (!field(info, "eventfd-semaphore:") && !said++)
          wpp_warn("this kernel does not report EFD_SEMAPHORE: eventfds come "
                   "back as plain counters");
      } else if (!strcmp(target, "anon_inode:[timerfd]")) {
        save_timerfd(f, num, info);
      } else if (!strcmp(target, "anon_inode:[signalfd]")) {
        f->kind = WPP_FD_SIGNALFD;
        f->sigmask = field_u64(info, "sigmask:", 16);
      } else {
        f->kind = WPP_FD_DEAD;
      }
      if (f->kind == WPP_FD_DEAD ||
          (f->kind == WPP_FD_SOCKET && f->domain != AF_INET &&
           f->domain != AF_INET6 && f->domain != AF_UNIX))
        wpp_warn("descriptor %d (%s%s) cannot come back: after the restore "
                 "it is a socket whose peer has gone",
                 num, target,
                 f->kind == WPP_FD_SOCKET ? ", not IP or Unix" : "");
      h->nfd++;
    }
  }
  close(d);
}

/* Move a fresh descriptor to its recorded number. */
static int place(int tmp, const struct wpp_fd *f) {
  if (tmp < 0)
    return -1;
  int cloexec = (f->flags & O_CLOEXEC) ? O_CLOEXEC : 0;
  if (tmp == f->num) {
    return 0;
  }
  int r = dup3(tmp, f->num, cloexec);
  close(tmp);
  return r < 0 ? -1 : 0;
}

static int high(int fd) {
  if (fd < 0)
    return fd;
  int h = fcntl(fd, F_DUPFD_CLOEXEC, fd_high);
  close(fd);
  return h;
}

static int dead_socket(void) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return -1;
  close(sv[1]);
  return high(sv[0]);
}

/* Open the file at path if it is still the one saved (so that the program
 * sees it under its own name), else through the link the save made. */
static int open_saved(const char *path, const char *link, uint64_t dev,
                      uint64_t ino, int flags) {
  struct stat st;
  if (stat(path, &st) == 0 && st.st_ino == ino && st.st_dev == dev) {
    int fd = open(path, flags);
    if (fd >= 0)
      return fd;
  }
  int fd = link ? open(link, flags) : -1;
  return fd >= 0 ? fd : open(path, flags);
}

static int reopen_file(const struct wpp_fd *f, const char *dir) {
  char lname[4200];
  int flags = f->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY);
  link_name(lname, sizeof(lname), dir, f->num);
  int fd = open_saved(f->path, f->linked ? lname : NULL, f->dev, f->ino, flags);
  if (fd < 0) {
    wpp_warn("descriptor %d (%s) cannot be reopened: %s", f->num, f->path,
             strerror(errno));
    return dead_socket();
  }
  if (f->offset && lseek(fd, f->offset, SEEK_SET) < 0 && errno != ESPIPE)
    wpp_warn("descriptor %d: cannot restore offset %lld", f->num,
             (long long)f->offset);
  return high(fd);
}

/* Bind to the saved address again. A socket file the dead process left at an
 * AF_UNIX path is removed first, if nothing answers at it. */
static int bind_again(int fd, const struct wpp_fd *f) {
  const struct sockaddr *a = (const struct sockaddr *)f->addr;
  if (bind(fd, a, f->addrlen) == 0)
    return 0;
  char path[UNIX_PATH_MAX];
  struct stat st;
  if (errno != EADDRINUSE || !unix_path(f, path) || lstat(path, &st) != 0 ||
      !S_ISSOCK(st.st_mode))
    return -1;
  /* stale only if a connection is refused: a live listener (even one with
   * a full backlog: the probe does not wait) or a socket of another type
   * belongs to someone else */
  int probe = socket(AF_UNIX, f->type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int stale =
      probe >= 0 && connect(probe, a, f->addrlen) != 0 && errno == ECONNREFUSED;
  if (probe >= 0)
    close(probe);
  if (!stale || unlink(path) != 0) {
    errno = EADDRINUSE;
    return -1;
  }
  return bind(fd, a, f->addrlen);
}

/* The options a socket had that the restore keeps (before it binds). */
static void apply_opts(int fd, const struct wpp_fd *f) {
  int on = 1;
  if (f->reuse)
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  if (f->reuseport)
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on));
  if (f->broadcast)
    setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &on, sizeof(on));
  if (f->passcred)
    setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on));
  if (f->domain == AF_INET6)
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &f->v6only, sizeof(int));
}

/* Bind to the saved address, and give a socket file its mode back. */
static int bind_saved(int fd, const struct wpp_fd *f) {
  char path[UNIX_PATH_MAX];
  if (bind_again(fd, f) != 0)
    return -1;
  if (f->sockmode && unix_path(f, path))
    chmod(path, f->sockmode);
  return 0;
}

/* A rebuilt socket, moved high with its O_NONBLOCK; or, where the step `why`
 * failed, a dead one in its place. */
static int socket_done(int fd, const struct wpp_fd *f, const char *why) {
  if (why) {
    wpp_warn("socket %d cannot %s again: %s", f->num, why, strerror(errno));
    close(fd);
    return dead_socket();
  }
  if (f->flags & O_NONBLOCK)
    fcntl(fd, F_SETFL, O_NONBLOCK);
  return high(fd);
}

/* A datagram socket: bound where it was (unless it never was), connected to
 * the peer it had, with its options. */
static int rebuild_bound(const struct wpp_fd *f) {
  int fd = socket(f->domain, f->type | SOCK_CLOEXEC, f->proto);
  if (fd < 0)
    return -1;
  size_t off = offsetof(struct sockaddr_un, sun_path);
  int bound = 1;
  apply_opts(fd, f);
  if (f->domain == AF_UNIX) /* unnamed: nothing to bind */
    bound = f->addrlen > off;
  else if (f->domain == AF_INET)
    bound = ((const struct sockaddr_in *)(const void *)f->addr)->sin_port != 0;
  else if (f->domain == AF_INET6)
    bound =
        ((const struct sockaddr_in6 *)(const void *)f->addr)->sin6_port != 0;
  if (bound && f->addrlen && bind_saved(fd, f) != 0)
    return socket_done(fd, f, "be bound to its address");
  /* (an AF_UNIX peer without a name, a closed one, cannot be called again) */
  if (f->peer_addrlen && (f->domain != AF_UNIX || f->peer_addrlen > off) &&
      connect(fd, (const struct sockaddr *)f->peer_addr, f->peer_addrlen) != 0)
    return socket_done(fd, f, "be connected to its peer");
  return socket_done(fd, f, NULL);
}

static int rebuild_listener(const struct wpp_fd *f) {
  int fd = socket(f->domain, f->type | SOCK_CLOEXEC, f->proto);
  int one = 1;
  if (fd < 0)
    return -1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  apply_opts(fd, f);
  if (bind_saved(fd, f) != 0 || listen(fd, f->backlog) != 0)
    return socket_done(fd, f, "listen at its address");
  return socket_done(fd, f, NULL);
}

static void rebuild_pipe(struct wpp_fd *f, int i) {
  struct wpp_hdr *h = wpp_hdr;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    wpp_warn("pipe %d cannot be rebuilt: %s", f->num, strerror(errno));
    return;
  }
  p[0] = high(p[0]);
  p[1] = high(p[1]);
  /* The saved bytes are in a read end's record, which need not be f: the
   * write end may have the lower number (dup2(p[0], 10)). Once only f's
   * were written back, and such a pipe came back empty without a word. */
  const struct wpp_fd *rd = f;
  for (uint32_t j = (uint32_t)i; j < h->nfd; j++)
    if (h->fd[j].ino == f->ino && h->fd[j].kind == WPP_FD_PIPE_R &&
        h->fd[j].pipe_len) {
      rd = &h->fd[j];
      break;
    }
  /* as big as it was (F_SETPIPE_SZ), or the saved bytes would not fit */
  int size =
      f->pipe_size > (int)rd->pipe_len ? f->pipe_size : (int)rd->pipe_len;
  if (size > 0 && fcntl(p[1], F_SETPIPE_SZ, size) < 0 && rd->pipe_len)
    wpp_warn("pipe %d: cannot make it %d bytes again: %s", f->num, size,
             strerror(errno));
  fcntl(p[1], F_SETFL, O_NONBLOCK); /* never block the restore */
  if (rd->kind == WPP_FD_PIPE_R && rd->pipe_len && !wpp_broken("pipes")) {
    const char *buf =
        (const char *)(uintptr_t)(WPP_BASE + WPP_PIPEBUF_OFF + rd->pipe_off);
    if (write(p[1], buf, rd->pipe_len) != (ssize_t)rd->pipe_len)
      wpp_warn("pipe %d: saved bytes do not fit back", rd->num);
  }
  fcntl(p[1], F_SETFL, 0); /* the status flags are the pipe's, shared */
  /* every descriptor of this pipe (both ends, and their dups) is placed
   * now and marked done so that the loop does not build a second pipe */
  for (uint32_t j = (uint32_t)i; j < h->nfd; j++) {
    struct wpp_fd *g = &h->fd[j];
    if (g->ino != f->ino ||
        (g->kind != WPP_FD_PIPE_R && g->kind != WPP_FD_PIPE_W))
      continue;
    int src = g->kind == WPP_FD_PIPE_R ? p[0] : p[1];
    int cloexec = (g->flags & O_CLOEXEC) ? O_CLOEXEC : 0;
    if (dup3(src, g->num, cloexec) < 0)
      wpp_warn("pipe %d cannot be placed: %s", g->num, strerror(errno));
    if (g->flags & O_NONBLOCK)
      fcntl(g->num, F_SETFL, O_NONBLOCK);
    g->kind = -g->kind; /* done; flipped back below */
  }
  close(p[0]);
  close(p[1]);
}

/* Queue a socket pair end's saved bytes or messages into the other end, to
 * arrive where they were waiting. The sending end's buffer is made as big as
 * they need for the time being (a message costs about a kilobyte of it beyond
 * its bytes), then given back the size it had. */
static void refill(int to, const struct wpp_fd *to_end,
                   const struct wpp_fd *f) {
  const char *p = (const char *)(uintptr_t)(WPP_BASE + WPP_PIPEBUF_OFF +
                                            f->pipe_off),
             *end = p + f->pipe_len;
  if (!f->pipe_len || wpp_broken("sockbytes"))
    return;
  uint64_t need = 2ull * f->pipe_len + (1u << 16);
  for (const char *q = p; f->type != SOCK_STREAM && q + 4 <= end;) {
    uint32_t l;
    memcpy(&l, q, 4);
    q += 4 + l;
    need += 1024;
  }
  int half = need / 2 > INT32_MAX ? INT32_MAX : (int)(need / 2);
  if (setsockopt(to, SOL_SOCKET, SO_SNDBUFFORCE, &half, sizeof(half)) != 0)
    setsockopt(to, SOL_SOCKET, SO_SNDBUF, &half, sizeof(half));
  while (p < end) {
    uint32_t l = (uint32_t)(end - p);
    if (f->type != SOCK_STREAM) {
      memcpy(&l, p, 4);
      p += 4;
      if (p > end || l > (uint64_t)(end - p)) {
        wpp_warn("socket pair %d: its saved messages are corrupt", f->num);
        break;
      }
    }
    if (send(to, p, l, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)l) {
      wpp_warn("socket pair %d: %ld queued bytes do not fit back: %s", f->num,
               (long)(end - p), strerror(errno));
      break;
    }
    p += l;
  }
  half = to_end->sndbuf / 2; /* Linux doubles what it is given */
  if (half > 0)
    setsockopt(to, SOL_SOCKET, SO_SNDBUFFORCE, &half, sizeof(half));
}

/* Both ends of a socket pair the program held, with what was queued to each;
 * an end whose peer is elsewhere (another process, or closed) comes back as
 * a socket whose peer has gone. */
static void rebuild_sockpair(struct wpp_fd *f) {
  struct wpp_hdr *h = wpp_hdr;
  struct wpp_fd *g = NULL;
  size_t off = offsetof(struct sockaddr_un, sun_path);
  int sv[2] = {-1, -1}, broken = wpp_broken("sockpairs");
  for (uint32_t j = 0; j < h->nfd && !broken; j++)
    if (h->fd[j].kind == WPP_FD_SOCKPAIR && h->fd[j].ino == f->peer &&
        h->fd[j].peer == f->ino && &h->fd[j] != f)
      g = &h->fd[j];
  if (!g && f->type == SOCK_DGRAM && !broken &&
      (f->addrlen > off || f->peer_addrlen > off))
    return; /* bound or connected by name: rebuilt with the bound ones */
  if (broken || socketpair(AF_UNIX, f->type | SOCK_CLOEXEC, 0, sv) != 0) {
    if (!broken)
      wpp_warn("socket pair %d cannot be rebuilt: %s", f->num, strerror(errno));
    if (place(dead_socket(), f) != 0)
      wpp_warn("descriptor %d cannot be recreated", f->num);
    f->kind = -f->kind;
    return;
  }
  sv[0] = high(sv[0]);
  sv[1] = high(sv[1]);
  refill(sv[1], g ? g : f, f); /* what waited to be read at f */
  if (g)
    refill(sv[0], f, g);
  else /* its peer is gone (closed, or another process's, or TCP): f reads
          what was queued to it, then the end of the stream */
    close(sv[1]);
  struct wpp_fd *ends[2] = {f, g};
  for (int k = 0; k < (g ? 2 : 1); k++) {
    struct wpp_fd *e = ends[k];
    int on = 1;
    if (place(sv[k], e) != 0) {
      wpp_warn("socket pair %d cannot be placed: %s", e->num, strerror(errno));
    } else {
      if (e->flags & O_NONBLOCK)
        fcntl(e->num, F_SETFL, O_NONBLOCK);
      if (e->passcred)
        setsockopt(e->num, SOL_SOCKET, SO_PASSCRED, &on, sizeof(on));
      if (g && (e->shut & 2)) /* shut down for writing, or reading */
        shutdown(e->num, SHUT_WR);
      if (g && (e->shut & 1))
        shutdown(e->num, SHUT_RD);
    }
    e->kind = -e->kind; /* done; flipped back below */
  }
}

/* The entry of the descriptor a WPP_FD_DUP shares (itself if none). */
static uint32_t dup_index(const struct wpp_fd *f) {
  struct wpp_hdr *h = wpp_hdr;
  for (uint32_t j = 0; j < h->nfd; j++)
    if (h->fd[j].num == f->dup_of && h->fd[j].kind != WPP_FD_DUP)
      return j;
  return (uint32_t)(f - h->fd);
}

/* PMKIT_WPP_BREAK=dups: a dup of a file reopened on its own (a test). */
static int broken_dup(const struct wpp_fd *f) {
  return wpp_broken("dups") && wpp_hdr->fd[dup_index(f)].kind == WPP_FD_FILE;
}

static int rebuild_eventfd(const struct wpp_fd *f) {
  int fd = eventfd(0, EFD_CLOEXEC | (f->flags & O_NONBLOCK ? EFD_NONBLOCK : 0) |
                          (f->sem ? EFD_SEMAPHORE : 0));
  uint64_t n = f->count;
  if (fd >= 0 && n && !wpp_broken("eventfd") &&
      write(fd, &n, sizeof(n)) != (ssize_t)sizeof(n))
    wpp_warn("eventfd %d: cannot set its counter back: %s", f->num,
             strerror(errno));
  return high(fd);
}

static int rebuild_timerfd(const struct wpp_fd *f) {
  int fd = timerfd_create(
      f->clockid, TFD_CLOEXEC | (f->flags & O_NONBLOCK ? TFD_NONBLOCK : 0));
  if (fd < 0 || wpp_broken("timerfd"))
    return high(fd);
  uint64_t n = f->count;
  if (n && ioctl(fd, TFD_IOC_SET_TICKS, &n) != 0)
    wpp_warn("timerfd %d: %llu expirations not yet read are lost: %s", f->num,
             (unsigned long long)n, strerror(errno));
  struct itimerspec its = {ns_ts(f->interval_ns), ns_ts(f->value_ns)};
  if (f->value_ns && timerfd_settime(fd, f->tflags, &its, NULL) != 0)
    wpp_warn("timerfd %d cannot be armed again: %s", f->num, strerror(errno));
  return high(fd);
}

static int rebuild_signalfd(const struct wpp_fd *f) {
  sigset_t m;
  sigemptyset(&m);
  for (int sig = 1; sig <= 64 && !wpp_broken("signalfd"); sig++)
    if (f->sigmask & (1ull << (sig - 1)))
      sigaddset(&m, sig);
  return high(signalfd(
      -1, &m, SFD_CLOEXEC | (f->flags & O_NONBLOCK ? SFD_NONBLOCK : 0)));
}

/* Take a lock again; another process may have taken it while the program
 * was down: wait for it (a program that held a lock must not run without
 * it), saying so after a second. */
static void relock(const struct wpp_fd *f, const struct wpp_lock *l) {
  struct flock fl = {.l_type = (short)l->type,
                     .l_whence = SEEK_SET,
                     .l_start = l->start,
                     .l_len = l->len};
  int r = -1;
  for (int tries = 0;; tries++) {
    if (l->kind == WPP_LOCK_FLOCK)
      r = flock(f->num, (l->type == F_RDLCK ? LOCK_SH : LOCK_EX) | LOCK_NB);
    else
      r = fcntl(f->num, l->kind == WPP_LOCK_OFD ? F_OFD_SETLK : F_SETLK, &fl);
    if (r == 0 || (errno != EAGAIN && errno != EACCES && errno != EWOULDBLOCK &&
                   errno != EINTR))
      break;
    if (tries == 100)
      wpp_warn("descriptor %d (%s): waiting for a lock another process took "
               "while the program was down",
               f->num, f->path);
    struct timespec ms = {0, 10000000};
    nanosleep(&ms, NULL);
  }
  if (r != 0)
    wpp_warn("descriptor %d (%s): its lock cannot be taken again: %s", f->num,
             f->path, strerror(errno));
}

int wpp_fd_restore(const char *dir) {
  struct wpp_hdr *h = wpp_hdr;
  /* A restore marks what it has placed by negating the kind and flips the
   * marks back at its end; one cut short (killed, out of memory) left some
   * negative, and skipping them would resume the program without those
   * pipes and socket pairs. Nothing it placed outlived it: do it all again. */
  for (uint32_t i = 0; i < h->nfd; i++)
    if (h->fd[i].kind < 0)
      h->fd[i].kind = -h->fd[i].kind;
  /* temporaries above the highest number to rebuild, the soft limit raised
   * (within the hard one) if the numbers and the temporaries need it */
  int top = 2;
  for (uint32_t i = 0; i < h->nfd; i++)
    top = h->fd[i].num > top ? h->fd[i].num : top;
  fd_high = top + 1;
  struct rlimit rl;
  rlim_t need = (rlim_t)fd_high + 2 * h->nfd + 64;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
    rl.rlim_cur = need < rl.rlim_max ? need : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < need)
      wpp_warn("the limit on open descriptors (%llu) is too low to rebuild "
               "descriptor %d and the others",
               (unsigned long long)rl.rlim_cur, top);
  }
  /* the new run's 0-2, kept before anything is placed over them */
  int stdio[3];
  for (int k = 0; k < 3; k++)
    stdio[k] = high(fcntl(k, F_DUPFD_CLOEXEC, 3));
  for (uint32_t i = 0; i < h->nfd; i++) {
    struct wpp_fd *f = &h->fd[i];
    int fd = -2;
    switch (f->kind) {
    case WPP_FD_FILE:
      fd = reopen_file(f, dir);
      break;
    case WPP_FD_PIPE_R:
    case WPP_FD_PIPE_W:
      rebuild_pipe(f, (int)i);
      break;
    case WPP_FD_LISTEN:
      fd = rebuild_listener(f);
      break;
    case WPP_FD_EPOLL:
      fd = high(epoll_create1(EPOLL_CLOEXEC));
      break;
    /* PMKIT_WPP_BREAK=unknown: the old behaviour, these come back as dead
       sockets (a test) */
    case WPP_FD_EVENTFD:
      fd = wpp_broken("unknown") ? dead_socket() : rebuild_eventfd(f);
      break;
    case WPP_FD_TIMERFD:
      fd = wpp_broken("unknown") ? dead_socket() : rebuild_timerfd(f);
      break;
    case WPP_FD_SIGNALFD:
      fd = wpp_broken("unknown") ? dead_socket() : rebuild_signalfd(f);
      break;
    case WPP_FD_SOCKPAIR:
      rebuild_sockpair(f);
      break;
    case WPP_FD_INHERIT: /* was 0, 1 or 2 at the start: the new run's */
      if (f->dup_of >= 0 && f->dup_of <= 2 && f->dup_of != f->num)
        fd = high(fcntl(stdio[f->dup_of], F_DUPFD_CLOEXEC, 3));
      break;
    case WPP_FD_BOUND: /* below, once every socket is bound */
      break;
    case WPP_FD_DUP:
      if (broken_dup(f)) /* the old behaviour: a separate file */
        fd = reopen_file(&h->fd[dup_index(f)], dir);
      break;
    case WPP_FD_SOCKET:
    case WPP_FD_DEAD:
      fd = dead_socket();
      break;
    default:
      break;
    }
    if (fd != -2 && place(fd, f) != 0)
      wpp_warn("descriptor %d cannot be recreated: %s", f->num,
               strerror(errno));
  }
  /* datagram sockets, the bound ones before those connected to them */
  for (int pass = 0; pass < 2; pass++)
    for (uint32_t i = 0; i < h->nfd; i++) {
      struct wpp_fd *f = &h->fd[i];
      if ((f->kind != WPP_FD_BOUND && f->kind != WPP_FD_SOCKPAIR) ||
          (f->peer_addrlen != 0) != pass)
        continue;
      int fd = wpp_broken("dgrams") ? dead_socket() : rebuild_bound(f);
      if (place(fd, f) != 0)
        wpp_warn("descriptor %d cannot be recreated: %s", f->num,
                 strerror(errno));
    }
  for (int k = 0; k < 3; k++)
    close(stdio[k]);
  for (uint32_t i = 0; i < h->nfd; i++)
    if (h->fd[i].kind < 0)
      h->fd[i].kind = -h->fd[i].kind;
  /* then what shares an open file with what is there now */
  for (uint32_t i = 0; i < h->nfd; i++) {
    const struct wpp_fd *f = &h->fd[i];
    if (f->kind == WPP_FD_DUP && !broken_dup(f) &&
        dup3(f->dup_of, f->num, f->flags & O_CLOEXEC) < 0)
      wpp_warn("descriptor %d cannot share descriptor %d's file again: %s",
               f->num, f->dup_of, strerror(errno));
  }
  for (uint32_t i = 0; i < h->nfd && !wpp_broken("locks"); i++)
    for (int32_t k = 0; k < h->fd[i].nlock && h->fd[i].kind == WPP_FD_FILE; k++)
      relock(&h->fd[i], &h->fd[i].lock[k]);
  for (uint32_t i = 0; i < h->nepoll; i++) {
    struct wpp_epoll_reg *e = &h->epoll[i];
    struct epoll_event ev = {.events = e->events, .data.u64 = e->data};
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->fd, &ev) != 0)
      wpp_warn("epoll %d: descriptor %d cannot be registered again: %s",
               e->epfd, e->fd, strerror(errno));
  }
  return 0;
}

/* Remove the hard links the saves made (the program has ended). */
void wpp_fd_cleanup(const char *dir) {
  char lname[4200];
  for (uint32_t i = 0; i < wpp_hdr->nfd; i++)
    if (wpp_hdr->fd[i].linked) {
      link_name(lname, sizeof(lname), dir, wpp_hdr->fd[i].num);
      unlink(lname);
    }
  for (uint32_t i = 0; i < wpp_hdr->nfmap; i++)
    if (wpp_hdr->fmap[i].linked) {
      snprintf(lname, sizeof(lname), "%s/map.%u", dir, i);
      unlink(lname);
    }
}

/* ---- POSIX timers, file mappings, pending signals ----------------------- */

/* Kernel's struct sigevent for timer_create (SIGEV_THREAD_ID needs the tid,
 * which libc's struct names differently). */
struct ksigevent {
  uint64_t value;
  int32_t signo, notify, tid;
  int32_t pad[11];
};

/* /proc/self/timers: "ID: 0\nsignal: 12/0000000000000000\n
 * notify: signal/pid.42\nClockID: 1\n" per timer. */
static void save_ptimers(void) {
  static char text[32768];
  struct wpp_hdr *h = wpp_hdr;
  h->nptimer = 0;
  if (read_small("/proc/self/timers", text, sizeof(text)) < 0)
    return;
  for (const char *p = strstr(text, "ID: "); p; p = strstr(p + 4, "ID: ")) {
    struct wpp_ptimer t;
    char how[16], whom[8];
    memset(&t, 0, sizeof(t));
    unsigned long long val = 0;
    if (sscanf(p,
               "ID: %d signal: %d/%llx notify: %15[^/]/%7[^.].%d ClockID: %d",
               &t.id, &t.signo, &val, how, whom, &t.tid, &t.clockid) != 7)
      continue;
    t.sival = val;
    t.notify = !strcmp(how, "none") ? SIGEV_NONE : SIGEV_SIGNAL;
    if (!strcmp(whom, "tid"))
      t.notify |= SIGEV_THREAD_ID;
    struct itimerspec its;
    memset(&its, 0, sizeof(its));
    syscall(SYS_timer_gettime, t.id, &its);
    t.value_ns = ts_ns(its.it_value);
    t.interval_ns = ts_ns(its.it_interval);
    /* a periodic timer whose signal was not delivered yet waits for that
     * delivery to arm itself again, and reads as disarmed */
    if (!t.value_ns && t.interval_ns)
      t.value_ns = t.interval_ns;
    if (h->nptimer == WPP_MAX_PTIMER) {
      wpp_warn("more than %d POSIX timers: timer %d and later are lost",
               WPP_MAX_PTIMER, t.id);
      return;
    }
    /* in id order (the file lists the newest first): the restore makes
     * them in that order */
    uint32_t k = h->nptimer++;
    for (; k > 0 && h->ptimer[k - 1].id > t.id; k--)
      h->ptimer[k] = h->ptimer[k - 1];
    h->ptimer[k] = t;
  }
}

/* The mappings of files other than the executable, outside the context. */
static void save_fmaps(void) {
  size_t cap = 0;
  char lname[4200], src[80], *text = NULL;
  struct wpp_hdr *h = wpp_hdr;
  struct stat xs, cs;
  h->nfmap = 0;
  if (stat("/proc/self/exe", &xs) != 0 || fstat(wpp_ctxfd, &cs) != 0 ||
      !(text = read_big("/proc/self/maps", &cap))) {
    wpp_warn("cannot read /proc/self/maps: mappings of files will not come "
             "back");
    return;
  }
  for (char *line = text; *line;) {
    char *nl = strchr(line, '\n');
    if (nl)
      *nl = 0;
    unsigned long long lo, hi, off, ino;
    unsigned maj, min;
    char perms[8];
    int at = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &lo, &hi, perms, &off,
               &maj, &min, &ino, &at) == 7 &&
        ino && at && line[at] == '/' &&
        (lo >= WPP_BASE + WPP_SIZE || hi <= WPP_BASE)) {
      char *path = line + at, *del = strstr(path, " (deleted)");
      uint64_t dev = makedev(maj, min);
      /* the executable (mapped by exec), the context (the static data),
       * and shared anonymous memory, which is not a file */
      int skip = (ino == xs.st_ino && dev == xs.st_dev) ||
                 (ino == cs.st_ino && dev == cs.st_dev) ||
                 !strncmp(path, "/dev/zero", 9) || !strncmp(path, "/SYSV", 5);
      if (del)
        *del = 0;
      if (skip) {
        /* not the program's mapping of a file */
      } else if (h->nfmap == WPP_MAX_FMAP ||
                 strlen(path) >= sizeof(h->fmap[0].path)) {
        wpp_warn("mapping of %s at %#llx cannot be recorded: it will be "
                 "missing after the restore",
                 path, lo);
      } else {
        struct wpp_fmap *m = &h->fmap[h->nfmap];
        memset(m, 0, sizeof(*m));
        m->start = lo;
        m->len = hi - lo;
        m->off = off;
        m->prot = (perms[0] == 'r' ? PROT_READ : 0) |
                  (perms[1] == 'w' ? PROT_WRITE : 0) |
                  (perms[2] == 'x' ? PROT_EXEC : 0);
        m->flags = perms[3] == 's' ? MAP_SHARED : MAP_PRIVATE;
        m->dev = dev;
        m->ino = ino;
        strcpy(m->path, path);
        snprintf(lname, sizeof(lname), "%s/map.%u", wpp_dir, h->nfmap);
        snprintf(src, sizeof(src), "/proc/self/map_files/%llx-%llx", lo, hi);
        unlink(lname);
        m->linked =
            linkat(AT_FDCWD, src, AT_FDCWD, lname, AT_SYMLINK_FOLLOW) == 0;
        h->nfmap++;
      }
    }
    line = nl ? nl + 1 : line + strlen(line);
  }
  free_big(text, cap);
}

/* Thread ids as /proc shows them (the namespace /proc was mounted in) and
 * as the program's threads know them (NSpid: the last). */
static struct {
  int outer, inner;
} tids[4096];
static int ntids;

void wpp_kobj_prepare(void) {
  char dents[4096], path[64], text[2048];
  ntids = 0;
  int d = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0)
    return;
  long n;
  while ((n = syscall(SYS_getdents64, d, dents, sizeof(dents))) > 0)
    for (long off = 0; off < n;) {
      struct dirent *de = (struct dirent *)(dents + off);
      off += de->d_reclen;
      int t = atoi(de->d_name);
      snprintf(path, sizeof(path), "/proc/self/task/%d/status", t);
      const char *ns = NULL;
      if (t <= 0 || ntids == (int)(sizeof(tids) / sizeof(tids[0])) ||
          read_small(path, text, sizeof(text)) <= 0 ||
          !(ns = field(text, "NSpid:")))
        continue;
      char *end;
      int last = t;
      for (long v = strtol(ns, &end, 10); end != ns && *ns != '\n';
           v = strtol(ns = end, &end, 10))
        last = (int)v;
      tids[ntids].outer = t;
      tids[ntids++].inner = last;
    }
  close(d);
}

static int inner_tid(int outer) {
  for (int i = 0; i < ntids; i++)
    if (tids[i].outer == outer)
      return tids[i].inner;
  return outer;
}

void wpp_kobj_save(void) {
  static char text[4096];
  struct wpp_hdr *h = wpp_hdr;
  save_ptimers();
  for (uint32_t i = 0; i < h->nptimer; i++)
    if (h->ptimer[i].notify & SIGEV_THREAD_ID)
      h->ptimer[i].tid = inner_tid(h->ptimer[i].tid);
  save_fmaps();
  /* signals pending for the process (not for one thread), taken with their
   * siginfo to be queued again at the restore. SIGPWR was the failure; the
   * save signal is the runtime's. */
  h->npending = 0;
  uint64_t pend = 0;
  if (read_small("/proc/self/status", text, sizeof(text)) > 0)
    pend = field_u64(text, "ShdPnd:", 16) & ~(1ull << (SIGPWR - 1)) &
           ~(1ull << (WPP_SIGSAVE - 1));
  sigset_t set;
  sigemptyset(&set);
  for (int sig = 1; sig <= 64; sig++)
    if (pend & (1ull << (sig - 1)))
      sigaddset(&set, sig);
  struct timespec zero = {0, 0};
  while (pend && h->npending < WPP_MAX_PENDING) {
    siginfo_t si;
    if (sigtimedwait(&set, &si, &zero) <= 0)
      break;
    memcpy(h->pending[h->npending++].info, &si, sizeof(h->pending[0].info));
  }
}

void wpp_fmap_restore(const char *dir) {
  char lname[4200];
  struct wpp_hdr *h = wpp_hdr;
  for (uint32_t i = 0; i < h->nfmap && !wpp_broken("maps"); i++) {
    struct wpp_fmap *m = &h->fmap[i];
    int acc =
        (m->flags & MAP_SHARED) && (m->prot & PROT_WRITE) ? O_RDWR : O_RDONLY;
    snprintf(lname, sizeof(lname), "%s/map.%u", dir, i);
    int fd = open_saved(m->path, m->linked ? lname : NULL, m->dev, m->ino,
                        acc | O_CLOEXEC);
    void *a = fd < 0 ? MAP_FAILED
                     : wpp_real.mmap((void *)(uintptr_t)m->start, m->len,
                                     m->prot, m->flags | MAP_FIXED_NOREPLACE,
                                     fd, (long)m->off);
    if (a != (void *)(uintptr_t)m->start)
      wpp_warn("the mapping of %s at %#llx cannot be made again: %s", m->path,
               (unsigned long long)m->start, strerror(errno));
    if (fd >= 0)
      close(fd);
  }
}

void wpp_ptimer_restore(int (*tid_of)(int old)) {
  struct wpp_hdr *h = wpp_hdr;
  int filler[256], nfill = 0;
  for (uint32_t i = 0; i < h->nptimer && !wpp_broken("ptimers"); i++) {
    const struct wpp_ptimer *t = &h->ptimer[i];
    struct ksigevent ev;
    memset(&ev, 0, sizeof(ev));
    ev.value = t->sival;
    ev.signo = t->signo;
    ev.notify = t->notify;
    ev.tid = (t->notify & SIGEV_THREAD_ID) ? tid_of(t->tid) : 0;
    /* ids are handed out in order from 0 in a new process: make (and
     * later delete) fillers until the saved id comes up */
    int id = -1;
    for (;;) {
      if (syscall(SYS_timer_create, t->clockid, &ev, &id) != 0) {
        wpp_warn("POSIX timer %d cannot be made again: %s", t->id,
                 strerror(errno));
        id = -1;
        break;
      }
      if (id >= t->id)
        break;
      if (nfill == (int)(sizeof(filler) / sizeof(filler[0]))) {
        syscall(SYS_timer_delete, id);
        id = -1;
        break;
      }
      filler[nfill++] = id;
    }
    if (id != t->id) {
      if (id >= 0) {
        syscall(SYS_timer_delete, id);
        wpp_warn("POSIX timer %d cannot have its id again (got %d)", t->id, id);
      }
      continue;
    }
  }
  while (nfill)
    syscall(SYS_timer_delete, filler[--nfill]);
}

/* Armed once the threads run on their own masks: a timer's first signal
 * must not wait on a thread that is still being revived. */
void wpp_ptimer_arm(void) {
  struct wpp_hdr *h = wpp_hdr;
  for (uint32_t i = 0; i < h->nptimer && !wpp_broken("ptimers"); i++) {
    const struct wpp_ptimer *t = &h->ptimer[i];
    struct itimerspec its = {ns_ts(t->interval_ns), ns_ts(t->value_ns)};
    if (t->value_ns && syscall(SYS_timer_settime, t->id, 0, &its, NULL) != 0 &&
        errno != EINVAL)
      wpp_warn("POSIX timer %d cannot be armed again: %s", t->id,
               strerror(errno));
  }
}

void wpp_signals_restore(void) {
  for (uint32_t i = 0; i < wpp_hdr->npending && !wpp_broken("signals"); i++) {
    const siginfo_t *si = (const siginfo_t *)wpp_hdr->pending[i].info;
    /* to the process itself: any si_code is allowed */
    if (syscall(SYS_rt_sigqueueinfo, getpid(), si->si_signo, si) != 0)
      wpp_warn("signal %d pending at the failure is lost: %s", si->si_signo,
               strerror(errno));
  }
}
