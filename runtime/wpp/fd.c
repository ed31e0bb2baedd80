/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fd.c -- the program's open descriptors across a power failure. At a save,
 * after every thread has stopped, wpp_fd_save reads the descriptor table
 * from /proc/self/fd and fdinfo (which also sees the descriptors libc opens
 * with raw system calls, as fopen does) and records each one: a regular file
 * with its path, offset and flags, and a hard link in the context so that it
 * cannot disappear before the restart; both ends of each pipe with the bytes
 * nobody had read yet; listening sockets with their address; epoll sets with
 * their registrations. wpp_fd_restore rebuilds them at the same numbers.
 * Connected sockets cannot come back: they return as a socket whose peer has
 * gone (reads see end of file, writes EPIPE), which a server handles as a
 * client that went away. 0, 1 and 2 are the new run's own.
 *
 * The master thread runs this while the program's threads are stopped, some
 * perhaps inside malloc or stdio: nothing here allocates or takes a libc lock.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "wpp.h"

#define FD_HIGH 600 /* temporaries live above every recorded number */

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

static void save_socket(struct wpp_fd *f, int num) {
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
  socklen_t al = sizeof(f->addr);
  if (acc && getsockname(num, (struct sockaddr *)f->addr, &al) == 0 &&
      al <= sizeof(f->addr)) {
    f->kind = WPP_FD_LISTEN;
    f->addrlen = al;
    f->backlog = SOMAXCONN;
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
  if (*used + (uint64_t)avail > WPP_PIPEBUF_MAX) {
    wpp_warn("pipe %d: %d unread bytes do not fit the context; dropped", num,
             avail);
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
      if (num <= 2) {
        f->kind = WPP_FD_INHERIT;
        h->nfd++;
        continue;
      }
      struct stat st;
      snprintf(path, sizeof(path), "/proc/self/fd/%d", num);
      ssize_t tl = readlink(path, target, sizeof(target) - 1);
      if (fstat(num, &st) != 0 || tl < 0)
        continue;
      target[tl] = 0;
      snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", num);
      read_small(path, info, sizeof(info));
      const char *p = field(info, "pos:"), *fl = field(info, "flags:");
      f->offset = p ? strtoll(p, NULL, 10) : 0;
      f->flags = fl ? (int)strtol(fl, NULL, 8) : O_RDWR;
      f->ino = st.st_ino;
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
        }
      } else if (S_ISFIFO(st.st_mode) && !strncmp(target, "pipe:", 5)) {
        save_pipe(f, num, &pipebuf);
      } else if (S_ISSOCK(st.st_mode)) {
        save_socket(f, num);
      } else if (strstr(target, "[eventpoll]")) {
        f->kind = WPP_FD_EPOLL;
        save_epoll(num, info);
      } else {
        f->kind = WPP_FD_DEAD;
      }
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
  int h = fcntl(fd, F_DUPFD_CLOEXEC, FD_HIGH);
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

static int reopen_file(const struct wpp_fd *f, const char *dir) {
  char lname[4200];
  int flags = f->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY);
  int fd = -1;
  if (f->linked) {
    link_name(lname, sizeof(lname), dir, f->num);
    fd = open(lname, flags);
  }
  if (fd < 0)
    fd = open(f->path, flags);
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

static int rebuild_listener(const struct wpp_fd *f) {
  int fd = socket(f->domain, f->type | SOCK_CLOEXEC, f->proto);
  int one = 1;
  if (fd < 0)
    return -1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, (const struct sockaddr *)f->addr, f->addrlen) != 0 ||
      listen(fd, f->backlog) != 0) {
    wpp_warn("listening socket %d cannot be rebuilt: %s", f->num,
             strerror(errno));
    close(fd);
    return dead_socket();
  }
  if (f->flags & O_NONBLOCK)
    fcntl(fd, F_SETFL, O_NONBLOCK);
  return high(fd);
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
  /* as big as it was (F_SETPIPE_SZ), or the saved bytes would not fit */
  int size = f->pipe_size > (int)f->pipe_len ? f->pipe_size : (int)f->pipe_len;
  if (size > 0 && fcntl(p[1], F_SETPIPE_SZ, size) < 0 && f->pipe_len)
    wpp_warn("pipe %d: cannot make it %d bytes again: %s", f->num, size,
             strerror(errno));
  fcntl(p[1], F_SETFL, O_NONBLOCK); /* never block the restore */
  if (f->kind == WPP_FD_PIPE_R && f->pipe_len && !wpp_broken("pipes")) {
    const char *buf =
        (const char *)(uintptr_t)(WPP_BASE + WPP_PIPEBUF_OFF + f->pipe_off);
    if (write(p[1], buf, f->pipe_len) != (ssize_t)f->pipe_len)
      wpp_warn("pipe %d: saved bytes do not fit back", f->num);
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

int wpp_fd_restore(const char *dir) {
  struct wpp_hdr *h = wpp_hdr;
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
  for (uint32_t i = 0; i < h->nfd; i++)
    if (h->fd[i].kind < 0)
      h->fd[i].kind = -h->fd[i].kind;
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
}
