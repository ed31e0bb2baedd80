/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fd_test.c -- unit tests of the WPP runtime's descriptor records
 * (runtime/wpp/fd.c, included here). Each case opens a few descriptors of
 * one kind in this process, runs the runtime's save (wpp_fd_save) over a
 * freshly mapped context, and checks the records it wrote field by field:
 * kind, flags, offset, path and hard link, shared open files (dup), pipe and
 * socket bytes taken into the context, counters, timers, masks, locks,
 * epoll registrations. The restore cases then close every descriptor, as
 * the end of the process does, call the runtime's restore (wpp_fd_restore)
 * in the same process, and check that each descriptor is back at its number
 * with its state, and that the records are unchanged (a second failure
 * saves from them again).
 *
 * Groups: fd (every case must pass); control (must fail: a file record's
 * offset corrupted before the restore); known (cases that fail today and
 * show a defect; see tests/wpp/unit/CMakeLists.txt).
 */
#include "fd.c"

#include "unit.h"

#include <sys/un.h>

static struct wpp_fd saved[WPP_MAX_FD];
static uint32_t nsaved;

static void fd_setup(void) {
  unit_ctx_setup();
  wpp_stdio_note();
}

static void fd_teardown(void) {
  char p[64];
  snprintf(p, sizeof(p), "/tmp/wpp-unit-%d-sock", (int)getpid());
  unlink(p); /* (unix_addr's, if the scratch directory was too deep) */
  for (int fd = 3; fd < UNIT_CTX_FD; fd++)
    close(fd);
  unit_ctx_teardown();
}

/* The record of descriptor num (the case fails if there is none). */
static struct wpp_fd *rec_of(int num, int line) {
  for (uint32_t i = 0; i < wpp_hdr->nfd; i++)
    if (wpp_hdr->fd[i].num == num)
      return &wpp_hdr->fd[i];
  char d[64];
  snprintf(d, sizeof(d), "no record of descriptor %d", num);
  unit_fail(__FILE__, line, "rec(num)", d);
}
#define rec(num) rec_of((num), __LINE__)

static void path_in(char *out, size_t cap, const char *name) {
  snprintf(out, cap, "%s/%s", unit_dir, name);
}

static int make_file(const char *name, const char *text, int flags) {
  char p[1100];
  path_in(p, sizeof(p), name);
  int fd = open(p, flags | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0);
  CHECK_EQ(write(fd, text, strlen(text)), strlen(text));
  return fd;
}

static uint64_t ino_of(int fd) {
  struct stat st;
  CHECK_EQ(fstat(fd, &st), 0);
  return st.st_ino;
}

static const char *pipebuf(uint64_t off) {
  return (const char *)(uintptr_t)(WPP_BASE + WPP_PIPEBUF_OFF + off);
}

/* The save, then the end of the process: every descriptor above 2 closed
 * (the records kept to compare after the restore). */
static void save_and_close(void) {
  wpp_fd_save();
  nsaved = wpp_hdr->nfd;
  memcpy(saved, wpp_hdr->fd, sizeof(saved[0]) * nsaved);
  for (int fd = 3; fd < UNIT_CTX_FD; fd++)
    close(fd);
}

static void restore_and_compare(void) {
  CHECK_EQ(wpp_fd_restore(unit_dir), 0);
  CHECK_EQ(wpp_hdr->nfd, nsaved);
  for (uint32_t i = 0; i < nsaved; i++) {
    CHECK_EQ(wpp_hdr->fd[i].num, saved[i].num);
    CHECK_EQ(wpp_hdr->fd[i].kind, saved[i].kind);
    CHECK_MEM(&wpp_hdr->fd[i], &saved[i], sizeof(saved[i]));
  }
}

/* ---- records ------------------------------------------------------------ */

/* A regular file: its path, offset, open flags (O_CLOEXEC included) and a
 * hard link in the context; descriptors sharing its open file (dup, F_DUPFD)
 * are WPP_FD_DUP of the lowest; a second open of the same file is a file of
 * its own. 0-2 are the next run's; the context's own descriptor is not
 * recorded. */
static void fd_file_records(void) {
  struct wpp_hdr *h = wpp_hdr;
  char p[1100], real[4096], lname[1200];
  int a = make_file("data", "0123456789", O_RDWR | O_CLOEXEC);
  CHECK_EQ(a, 3);
  CHECK_EQ(lseek(a, 4, SEEK_SET), 4);
  int b = dup(a);
  int c = fcntl(a, F_DUPFD, 20);
  path_in(p, sizeof(p), "data");
  int d = open(p, O_RDONLY);
  CHECK_EQ(lseek(d, 7, SEEK_SET), 7);
  CHECK(realpath(p, real) != NULL);
  wpp_fd_save();
  CHECK_EQ(h->nfd, 3 + 4);
  for (uint32_t i = 0; i < h->nfd; i++)
    CHECK(h->fd[i].num != UNIT_CTX_FD);
  for (int k = 0; k < 3; k++) /* (dup_of: known.stdio_one_device) */
    CHECK_EQ(rec(k)->kind, WPP_FD_INHERIT);
  struct wpp_fd *r = rec(a);
  CHECK_EQ(r->kind, WPP_FD_FILE);
  CHECK_EQ(r->offset, 4);
  CHECK_EQ(r->flags, O_RDWR | O_CLOEXEC | O_LARGEFILE);
  CHECK_STR(r->path, real);
  CHECK_EQ(r->ino, ino_of(a));
  CHECK_EQ(r->dup_of, -1);
  CHECK_EQ(r->nlock, 0);
  CHECK_EQ(r->linked, 1);
  link_name(lname, sizeof(lname), unit_dir, a);
  struct stat st;
  CHECK_EQ(stat(lname, &st), 0);
  CHECK_EQ(st.st_ino, ino_of(a));
  CHECK_EQ(rec(b)->kind, WPP_FD_DUP);
  CHECK_EQ(rec(b)->dup_of, a);
  CHECK_EQ(rec(b)->flags, O_RDWR | O_LARGEFILE); /* dup clears O_CLOEXEC */
  CHECK_EQ(rec(b)->linked, 0);
  CHECK_EQ(rec(c)->kind, WPP_FD_DUP);
  CHECK_EQ(rec(c)->dup_of, a);
  r = rec(d);
  CHECK_EQ(r->kind, WPP_FD_FILE);
  CHECK_EQ(r->offset, 7);
  CHECK_EQ(r->flags, O_RDONLY | O_LARGEFILE);
  CHECK_EQ(r->linked, 1);
  CHECK_EQ(r->dup_of, -1);
}

/* Pipes: both ends, paired by inode; the unread bytes of each read end move
 * into the context's pipe buffer, one after the other (the live pipe is
 * empty after the save); the pipe's size. */
static void fd_pipe_records(void) {
  int p[2], q[2], e[2];
  CHECK_EQ(pipe2(p, O_CLOEXEC), 0);
  CHECK_EQ(pipe(q), 0);
  CHECK_EQ(pipe(e), 0);
  CHECK_EQ(write(p[1], "hello", 5), 5);
  CHECK_EQ(write(q[1], "world!", 6), 6);
  CHECK_EQ(fcntl(q[0], F_SETFL, O_NONBLOCK), 0);
  CHECK_EQ(fcntl(e[1], F_SETPIPE_SZ, 8192), 8192);
  wpp_fd_save();
  struct wpp_fd *r = rec(p[0]);
  CHECK_EQ(r->kind, WPP_FD_PIPE_R);
  CHECK_EQ(r->flags, O_RDONLY | O_CLOEXEC);
  CHECK_EQ(r->ino, ino_of(p[0]));
  CHECK_EQ(r->pipe_off, 0);
  CHECK_EQ(r->pipe_len, 5);
  CHECK_EQ(r->pipe_size, 65536);
  CHECK_MEM(pipebuf(r->pipe_off), "hello", 5);
  r = rec(p[1]);
  CHECK_EQ(r->kind, WPP_FD_PIPE_W);
  CHECK_EQ(r->flags, O_WRONLY | O_CLOEXEC);
  CHECK_EQ(r->ino, ino_of(p[0]));
  CHECK_EQ(r->pipe_len, 0);
  r = rec(q[0]);
  CHECK_EQ(r->kind, WPP_FD_PIPE_R);
  CHECK_EQ(r->flags, O_RDONLY | O_NONBLOCK);
  CHECK_EQ(r->pipe_off, 5);
  CHECK_EQ(r->pipe_len, 6);
  CHECK_MEM(pipebuf(r->pipe_off), "world!", 6);
  r = rec(e[0]);
  CHECK_EQ(r->pipe_len, 0);
  CHECK_EQ(r->pipe_size, 8192);
  int avail = -1;
  CHECK_EQ(ioctl(p[0], FIONREAD, &avail), 0);
  CHECK_EQ(avail, 0);
}

/* eventfd: counter and EFD_SEMAPHORE; timerfd: clock, interval, time left
 * (an absolute wall-clock expiry kept absolute), expirations not yet read;
 * signalfd: its mask. */
static void fd_counter_records(void) {
  int ev = eventfd(7, EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC);
  int plain = eventfd(0, 0);
  CHECK_EQ(write(plain, &(uint64_t){41}, 8), 8);
  int tm = timerfd_create(CLOCK_MONOTONIC, 0);
  struct itimerspec its = {{2, 0}, {30, 0}};
  CHECK_EQ(timerfd_settime(tm, 0, &its, NULL), 0);
  int ta = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct itimerspec abs = {{0, 0}, {now.tv_sec + 60, now.tv_nsec}};
  CHECK_EQ(timerfd_settime(ta, TFD_TIMER_ABSTIME, &abs, NULL), 0);
  int tx = timerfd_create(CLOCK_MONOTONIC, 0);
  struct itimerspec once = {{0, 0}, {0, 1000000}};
  CHECK_EQ(timerfd_settime(tx, 0, &once, NULL), 0);
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, SIGUSR1);
  sigaddset(&m, SIGUSR2);
  int sf = signalfd(-1, &m, SFD_CLOEXEC);
  struct timespec ms20 = {0, 20000000};
  nanosleep(&ms20, NULL); /* tx expires once */
  wpp_fd_save();
  struct wpp_fd *r = rec(ev);
  CHECK_EQ(r->kind, WPP_FD_EVENTFD);
  CHECK_EQ(r->count, 7);
  CHECK_EQ(r->sem, 1);
  CHECK_EQ(r->flags, O_RDWR | O_NONBLOCK | O_CLOEXEC);
  CHECK_EQ(rec(plain)->count, 41);
  CHECK_EQ(rec(plain)->sem, 0);
  r = rec(tm);
  CHECK_EQ(r->kind, WPP_FD_TIMERFD);
  CHECK_EQ(r->clockid, CLOCK_MONOTONIC);
  CHECK_EQ(r->tflags, 0);
  CHECK_EQ(r->interval_ns, 2000000000);
  CHECK(r->value_ns > 25000000000 && r->value_ns <= 30000000000);
  CHECK_EQ(r->count, 0);
  r = rec(ta);
  CHECK_EQ(r->clockid, CLOCK_REALTIME);
  CHECK_EQ(r->tflags, TFD_TIMER_ABSTIME);
  CHECK_EQ(r->flags, O_RDWR | O_NONBLOCK);
  int64_t want = ts_ns(abs.it_value), off = r->value_ns - want;
  CHECK(off > -1000000000 && off < 1000000000); /* when, not left */
  r = rec(tx);
  CHECK_EQ(r->count, 1);
  CHECK_EQ(r->value_ns, 0);
  r = rec(sf);
  CHECK_EQ(r->kind, WPP_FD_SIGNALFD);
  CHECK_EQ(r->sigmask, (1ull << (SIGUSR1 - 1)) | (1ull << (SIGUSR2 - 1)));
  CHECK_EQ(r->flags, O_RDWR | O_CLOEXEC);
}

/* Locks held through a file: flock, a POSIX range, an OFD range to the end
 * of the file, each on the descriptor that took it. */
static void fd_lock_records(void) {
  char p[1100];
  int a = make_file("locked", "0123456789", O_RDWR);
  path_in(p, sizeof(p), "locked");
  int b = open(p, O_RDONLY), c = open(p, O_RDWR);
  CHECK_EQ(flock(a, LOCK_EX), 0);
  struct flock pl = {
      .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 10, .l_len = 10};
  CHECK_EQ(fcntl(b, F_SETLK, &pl), 0);
  struct flock ol = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 100};
  CHECK_EQ(fcntl(c, F_OFD_SETLK, &ol), 0);
  wpp_fd_save();
  struct wpp_fd *r = rec(a);
  CHECK_EQ(r->nlock, 1);
  CHECK_EQ(r->lock[0].kind, WPP_LOCK_FLOCK);
  CHECK_EQ(r->lock[0].type, F_WRLCK);
  r = rec(b);
  CHECK_EQ(r->nlock, 1);
  CHECK_EQ(r->lock[0].kind, WPP_LOCK_POSIX);
  CHECK_EQ(r->lock[0].type, F_RDLCK);
  CHECK_EQ(r->lock[0].start, 10);
  CHECK_EQ(r->lock[0].len, 10);
  r = rec(c);
  CHECK_EQ(r->nlock, 1);
  CHECK_EQ(r->lock[0].kind, WPP_LOCK_OFD);
  CHECK_EQ(r->lock[0].type, F_WRLCK);
  CHECK_EQ(r->lock[0].start, 100);
  CHECK_EQ(r->lock[0].len, 0);
}

static struct wpp_epoll_reg *reg_of(int epfd, int fd) {
  for (uint32_t i = 0; i < wpp_hdr->nepoll; i++)
    if (wpp_hdr->epoll[i].epfd == epfd && wpp_hdr->epoll[i].fd == fd)
      return &wpp_hdr->epoll[i];
  return NULL;
}

/* An epoll set: one record per registration, with its events (the kernel
 * adds EPOLLERR and EPOLLHUP) and data. */
static void fd_epoll_records(void) {
  int p[2];
  CHECK_EQ(pipe(p), 0);
  int ev = eventfd(0, 0);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event e1 = {.events = EPOLLIN,
                           .data.u64 = 0x1122334455667788ull};
  struct epoll_event e2 = {.events = EPOLLIN | EPOLLET, .data.u64 = 7};
  CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &e1), 0);
  CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e2), 0);
  wpp_fd_save();
  CHECK_EQ(rec(ep)->kind, WPP_FD_EPOLL);
  CHECK_EQ(wpp_hdr->nepoll, 2);
  struct wpp_epoll_reg *r = reg_of(ep, p[0]);
  CHECK(r != NULL);
  CHECK_EQ(r->events, EPOLLIN | EPOLLERR | EPOLLHUP);
  CHECK_EQ(r->data, 0x1122334455667788ull);
  r = reg_of(ep, ev);
  CHECK(r != NULL);
  CHECK_EQ(r->events, EPOLLIN | EPOLLET | EPOLLERR | EPOLLHUP);
  CHECK_EQ(r->data, 7);
}

static socklen_t unix_addr(struct sockaddr_un *a, const char *name) {
  char p[1100];
  path_in(p, sizeof(p), name);
  if (strlen(p) >= sizeof(a->sun_path)) /* a deep build tree: /tmp */
    snprintf(p, sizeof(p), "/tmp/wpp-unit-%d-%s", (int)getpid(), name);
  memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  memcpy(a->sun_path, p, strlen(p) + 1);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                     strlen(a->sun_path) + 1);
}

/* Sockets: the two ends of a socket pair name each other (sock_diag) and
 * hold what was queued to each; a listening AF_UNIX socket its address,
 * backlog and file mode; an AF_UNIX datagram socket never bound is
 * WPP_FD_BOUND without a name. */
static void fd_socket_records(void) {
  int s[2];
  CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
  CHECK_EQ(send(s[1], "abc", 3, 0), 3);
  CHECK_EQ(send(s[0], "xy", 2, 0), 2);
  struct sockaddr_un a;
  socklen_t al = unix_addr(&a, "sock");
  int l = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
  CHECK_EQ(bind(l, (struct sockaddr *)&a, al), 0);
  CHECK_EQ(chmod(a.sun_path, 0640), 0);
  CHECK_EQ(listen(l, 5), 0);
  int dg = socket(AF_UNIX, SOCK_DGRAM, 0);
  wpp_fd_save();
  struct wpp_fd *r = rec(s[0]);
  CHECK_EQ(r->kind, WPP_FD_SOCKPAIR);
  CHECK_EQ(r->domain, AF_UNIX);
  CHECK_EQ(r->type, SOCK_STREAM);
  CHECK_EQ(r->peer, ino_of(s[1]));
  CHECK_EQ(r->pipe_len, 3);
  CHECK_MEM(pipebuf(r->pipe_off), "abc", 3);
  r = rec(s[1]);
  CHECK_EQ(r->kind, WPP_FD_SOCKPAIR);
  CHECK_EQ(r->peer, ino_of(s[0]));
  CHECK_EQ(r->pipe_off, 3);
  CHECK_EQ(r->pipe_len, 2);
  CHECK_MEM(pipebuf(r->pipe_off), "xy", 2);
  r = rec(l);
  CHECK_EQ(r->kind, WPP_FD_LISTEN);
  CHECK_EQ(r->addrlen, al);
  CHECK_MEM(r->addr, &a, al);
  CHECK_EQ(r->backlog, SOMAXCONN);
  CHECK_EQ(r->sockmode, 0640);
  CHECK_EQ(r->flags, O_RDWR | O_NONBLOCK);
  r = rec(dg);
  CHECK_EQ(r->kind, WPP_FD_BOUND);
  CHECK_EQ(r->type, SOCK_DGRAM);
  CHECK_EQ(r->addrlen, sizeof(sa_family_t));
  CHECK_EQ(r->peer_addrlen, 0);
}

/* A descriptor on what 0-2 were at the start (saved = dup(2)): the next
 * run's, when it is a pipe, socket or terminal; otherwise a dup of 2's
 * record. */
static void fd_stdio_records(void) {
  int x = dup(2);
  struct stat st;
  CHECK_EQ(fstat(2, &st), 0);
  int k = 0;
  while (k < 2 && !(wpp_hdr->stdio_ino[k] == st.st_ino &&
                    wpp_hdr->stdio_dev[k] == st.st_dev))
    k++;
  wpp_fd_save();
  struct wpp_fd *r = rec(x);
  if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISCHR(st.st_mode)) {
    CHECK_EQ(r->kind, WPP_FD_INHERIT);
    CHECK_EQ(r->dup_of, k);
  } else {
    CHECK_EQ(r->kind, WPP_FD_DUP);
    CHECK_EQ(r->dup_of, 2);
  }
}

/* ---- restores ----------------------------------------------------------- */

static ssize_t read_all(int fd, char *buf, size_t cap) {
  ssize_t n = read(fd, buf, cap - 1);
  buf[n > 0 ? n : 0] = 0;
  return n;
}

static void posix_probe(void *path) {
  int fd = open(path, O_RDWR);
  struct flock q = {
      .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 2};
  if (fd < 0 || fcntl(fd, F_GETLK, &q) != 0)
    unit_exit(99);
  /* the type of the lock in the way, and whether it is the parent's */
  unit_exit(q.l_type == F_RDLCK && q.l_pid == getppid() ? 7 : q.l_type);
}

/* Files after a restore: each at its number, offset and flags, from the
 * file saved even when another file took its path since, and a deleted one
 * from the copy in the context; a dup shares the offset, a second open does
 * not; the locks are held again. With corrupt (the must-fail control), the
 * first file's recorded offset is changed to 9 before the restore. */
static void restore_files(int corrupt) {
  char p[1100], old[1100], buf[64], lname[1200];
  int a = make_file("data", "0123456789", O_RDWR | O_CLOEXEC);
  CHECK_EQ(lseek(a, 4, SEEK_SET), 4);
  int b = dup(a);
  path_in(p, sizeof(p), "data");
  int d = open(p, O_RDONLY);
  CHECK_EQ(lseek(d, 7, SEEK_SET), 7);
  int e = open(p, O_RDWR);
  int g = make_file("gone", "zz", O_RDWR);
  char gone[1100];
  path_in(gone, sizeof(gone), "gone");
  CHECK_EQ(unlink(gone), 0);
  CHECK_EQ(lseek(g, 0, SEEK_SET), 0);
  CHECK_EQ(flock(a, LOCK_EX), 0);
  struct flock pl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_len = 2};
  CHECK_EQ(fcntl(d, F_SETLK, &pl), 0);
  struct flock ol = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 100};
  CHECK_EQ(fcntl(e, F_OFD_SETLK, &ol), 0);
  uint64_t ino = ino_of(a);
  CHECK_EQ(a, 3);
  CHECK_EQ(b, 4);
  CHECK_EQ(d, 5);
  CHECK_EQ(e, 6);
  CHECK_EQ(g, 7);
  save_and_close();
  if (corrupt) { /* in the record and in the copy restore_and_compare uses */
    rec(3)->offset = 9;
    saved[rec(3) - wpp_hdr->fd].offset = 9;
  }
  /* another file takes the path */
  path_in(old, sizeof(old), "data.old");
  CHECK_EQ(rename(p, old), 0);
  close(make_file("data", "NEW", O_RDWR));
  restore_and_compare();
  CHECK_EQ(ino_of(3), ino);
  CHECK_EQ(lseek(3, 0, SEEK_CUR), 4);
  CHECK_EQ(read_all(3, buf, sizeof(buf)), 6);
  CHECK_STR(buf, "456789");
  CHECK_EQ(lseek(4, 0, SEEK_CUR), 10); /* shared with 3 */
  CHECK_EQ(fcntl(3, F_GETFD), FD_CLOEXEC);
  CHECK_EQ(fcntl(4, F_GETFD), 0);
  CHECK_EQ(fcntl(3, F_GETFL) & O_ACCMODE, O_RDWR);
  CHECK_EQ(ino_of(5), ino);
  CHECK_EQ(lseek(5, 0, SEEK_CUR), 7); /* its own */
  CHECK_EQ(fcntl(5, F_GETFL) & O_ACCMODE, O_RDONLY);
  CHECK_EQ(read_all(7, buf, sizeof(buf)), 2);
  CHECK_STR(buf, "zz");
  /* the POSIX lock first: any close of the file in this process drops it */
  char err[256];
  CHECK_EQ(unit_code(unit_child(posix_probe, old, err, sizeof(err))), 7);
  int probe = open(old, O_RDWR);
  CHECK_EQ(flock(probe, LOCK_EX | LOCK_NB), -1);
  CHECK_EQ(errno, EWOULDBLOCK);
  struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 200};
  CHECK_EQ(fcntl(probe, F_OFD_GETLK, &q), 0);
  CHECK_EQ(q.l_type, F_WRLCK);
  CHECK_EQ(q.l_start, 100);
  close(probe);
  wpp_fd_cleanup(unit_dir);
  for (int k = 3; k <= 7; k++) {
    link_name(lname, sizeof(lname), unit_dir, k);
    CHECK_EQ(access(lname, F_OK), -1);
  }
}

static void fd_restore_files(void) { restore_files(0); }
static void control_restore_corrupt_offset(void) { restore_files(1); }

/* Pipes (with their saved bytes, a dup of a read end sharing its open
 * file), eventfd, timerfd, signalfd and an epoll set after a restore. */
static void fd_restore_pipes_counters(void) {
  int p[2], q[2];
  CHECK_EQ(pipe2(p, O_CLOEXEC), 0); /* 3, 4 */
  CHECK_EQ(pipe(q), 0);             /* 5, 6 */
  CHECK_EQ(write(p[1], "hello", 5), 5);
  CHECK_EQ(fcntl(q[0], F_SETFL, O_NONBLOCK), 0);
  int pd = dup(p[0]);                                /* 7 */
  int ev = eventfd(3, EFD_SEMAPHORE | EFD_NONBLOCK); /* 8 */
  int tm = timerfd_create(CLOCK_MONOTONIC, 0);       /* 9 */
  struct itimerspec its = {{2, 0}, {30, 0}};
  CHECK_EQ(timerfd_settime(tm, 0, &its, NULL), 0);
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, SIGUSR1);
  sigaddset(&m, SIGUSR2);
  int sf = signalfd(-1, &m, 0); /* 10 */
  int ep = epoll_create1(0);    /* 11 */
  struct epoll_event e1 = {.events = EPOLLIN, .data.u64 = 0x55};
  struct epoll_event e2 = {.events = EPOLLIN, .data.u64 = 0x66};
  CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &e1), 0);
  CHECK_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e2), 0);
  CHECK_EQ(pd, 7);
  CHECK_EQ(ep, 11);
  save_and_close();
  int64_t left = rec(tm)->value_ns;
  restore_and_compare();
  int avail = -1;
  CHECK_EQ(ioctl(3, FIONREAD, &avail), 0);
  CHECK_EQ(avail, 5);
  CHECK_EQ(syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, 3, 7), 0);
  CHECK_EQ(fcntl(3, F_GETFD), FD_CLOEXEC);
  CHECK_EQ(fcntl(4, F_GETFL) & O_ACCMODE, O_WRONLY);
  CHECK_EQ(fcntl(5, F_GETFL) & O_NONBLOCK, O_NONBLOCK);
  CHECK_EQ(write(4, "!", 1), 1); /* the same pipe's write end */
  char buf[16];
  CHECK_EQ(read_all(7, buf, sizeof(buf)), 6);
  CHECK_STR(buf, "hello!");
  uint64_t v = 0;
  for (int i = 0; i < 3; i++) {
    CHECK_EQ(read(8, &v, 8), 8);
    CHECK_EQ(v, 1); /* EFD_SEMAPHORE: one at a time */
  }
  CHECK_EQ(read(8, &v, 8), -1);
  CHECK_EQ(errno, EAGAIN);
  struct itimerspec now;
  CHECK_EQ(timerfd_gettime(9, &now), 0);
  CHECK_EQ(ts_ns(now.it_interval), 2000000000);
  CHECK(ts_ns(now.it_value) <= left && ts_ns(now.it_value) > left - 5000000000);
  char info[512], ipath[64];
  snprintf(ipath, sizeof(ipath), "/proc/self/fdinfo/%d", sf);
  CHECK(read_small(ipath, info, sizeof(info)) > 0);
  CHECK(strstr(info, "sigmask:\t0000000000000a00") != NULL);
  CHECK_EQ(write(4, "x", 1), 1);
  CHECK_EQ(write(8, &(uint64_t){1}, 8), 8);
  struct epoll_event out[4];
  CHECK_EQ(epoll_wait(11, out, 4, 0), 2);
  CHECK_EQ(out[0].data.u64 + out[1].data.u64, 0x55 + 0x66);
}

/* A socket pair comes back as a pair with what was queued to each end; a
 * listener at an AF_UNIX path, whose stale socket file the dead process
 * left, listens there again. */
static void fd_restore_sockets(void) {
  int s[2];
  CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0); /* 3, 4 */
  CHECK_EQ(send(s[1], "abc", 3, 0), 3);
  CHECK_EQ(send(s[0], "xy", 2, 0), 2);
  struct sockaddr_un a;
  socklen_t al = unix_addr(&a, "sock");
  int l = socket(AF_UNIX, SOCK_STREAM, 0); /* 5 */
  CHECK_EQ(bind(l, (struct sockaddr *)&a, al), 0);
  CHECK_EQ(listen(l, 5), 0);
  CHECK_EQ(l, 5);
  save_and_close();
  restore_and_compare();
  char buf[16];
  CHECK_EQ(recv(3, buf, sizeof(buf), MSG_DONTWAIT), 3);
  CHECK_MEM(buf, "abc", 3);
  CHECK_EQ(recv(4, buf, sizeof(buf), MSG_DONTWAIT), 2);
  CHECK_MEM(buf, "xy", 2);
  CHECK_EQ(send(3, "q", 1, 0), 1);
  CHECK_EQ(recv(4, buf, sizeof(buf), MSG_DONTWAIT), 1);
  struct sockaddr_un got;
  socklen_t gl = sizeof(got);
  CHECK_EQ(getsockname(5, (struct sockaddr *)&got, &gl), 0);
  CHECK_EQ(gl, al);
  CHECK_MEM(&got, &a, al);
  int c = socket(AF_UNIX, SOCK_STREAM, 0);
  CHECK_EQ(connect(c, (struct sockaddr *)&a, al), 0);
  int acc = accept(5, NULL, NULL);
  CHECK(acc >= 0);
}

/* A descriptor on what 0 was at the start is, after the restore, a dup of
 * the next run's 0 (in a child: it changes its standard input). */
static void restore_inherit(void) {
  int a[2], b[2];
  CHECK_EQ(pipe(a), 0);
  CHECK_EQ(dup2(a[0], 0), 0); /* the first run's 0 */
  close(a[0]);
  close(a[1]);
  wpp_stdio_note();
  int x = fcntl(0, F_DUPFD, 20);
  wpp_fd_save();
  CHECK_EQ(rec(x)->kind, WPP_FD_INHERIT);
  CHECK_EQ(rec(x)->dup_of, 0);
  close(x);
  CHECK_EQ(pipe(b), 0);
  CHECK_EQ(dup2(b[0], 0), 0); /* the next run's */
  close(b[0]);
  close(b[1]);
  uint64_t want = ino_of(0);
  CHECK_EQ(wpp_fd_restore(unit_dir), 0);
  CHECK_EQ(ino_of(x), want);
}

static void fd_restore_inherit(void) {
  CHECK_EQ(unit_code(unit_in_child(restore_inherit)), 0);
}

/* ---- once defects ------------------------------------------------------- */

/* A descriptor the program opened itself on the character device that was
 * its standard input (/dev/null: `< /dev/null`, a service manager's stdin)
 * is reopened by its path, with its own access mode. Once it was taken by
 * inode alone for WPP_FD_INHERIT: after the restore a dup of the next run's
 * 0, read-only, and the program's writes to it failed (EBADF). */
static void devnull_opened_by_program(void) {
  int z = open("/dev/null", O_RDONLY);
  CHECK_EQ(dup2(z, 0), 0);
  close(z);
  wpp_stdio_note();
  int w = open("/dev/null", O_WRONLY); /* the program's own */
  CHECK_EQ(write(w, "x", 1), 1);
  save_and_close();
  int again = open("/dev/null", O_RDONLY); /* the next run's 0 */
  CHECK_EQ(dup2(again, 0), 0);
  close(again);
  CHECK_EQ(wpp_fd_restore(unit_dir), 0);
  CHECK_EQ(fcntl(w, F_GETFL) & O_ACCMODE, O_WRONLY);
  CHECK_EQ(write(w, "x", 1), 1);
}

static void fd_devnull_opened_by_program(void) {
  CHECK_EQ(unit_code(unit_in_child(devnull_opened_by_program)), 0);
}

/* 0, 1 and 2 are the next run's own (wpp.h). Once the save recorded each
 * as WPP_FD_INHERIT of the first of 0-2 on the same inode at the start, and
 * the restore made it a dup of that one: started on a terminal (0-2 one
 * device), the program came back with 1 and 2 as dups of the next run's 0
 * (after `2>&1`, 2 as a dup of the next run's 1). Resumed as
 * `prog </dev/null >out 2>err`, its output went to /dev/null opened
 * read-only: every write to 1 failed (EBADF). Run in a child (it
 * changes 0-2), which reports what it saw through a shared page; the parent
 * checks. */
struct stdio_seen {
  uint64_t want1, got1, want2, got2;
  long write1;
  int dup_of1, dup_of2;
};
static struct stdio_seen *seen;
static void stdio_one_device(void *unused) {
  (void)unused;
  int t = open("/dev/null", O_RDWR); /* one device on 0-2, as a terminal */
  for (int k = 0; k < 3; k++)
    dup2(t, k);
  close(t);
  wpp_stdio_note();
  wpp_fd_save();
  for (uint32_t i = 0; i < wpp_hdr->nfd; i++) {
    if (wpp_hdr->fd[i].num == 1)
      seen->dup_of1 = wpp_hdr->fd[i].dup_of;
    if (wpp_hdr->fd[i].num == 2)
      seen->dup_of2 = wpp_hdr->fd[i].dup_of;
  }
  int in = open("/dev/null", O_RDONLY), out[2], err[2];
  if (in < 0 || pipe(out) || pipe(err))
    unit_exit(3);
  dup2(in, 0); /* the next run: prog </dev/null >out 2>err */
  dup2(out[1], 1);
  dup2(err[1], 2);
  struct stat st;
  fstat(out[1], &st);
  seen->want1 = st.st_ino;
  fstat(err[1], &st);
  seen->want2 = st.st_ino;
  wpp_fd_restore(unit_dir);
  fstat(1, &st);
  seen->got1 = st.st_ino;
  fstat(2, &st);
  seen->got2 = st.st_ino;
  seen->write1 = syscall(SYS_write, 1, "x", 1);
}
static void fd_stdio_one_device(void) {
  char err[1024];
  seen = mmap(NULL, sizeof(*seen), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(seen != MAP_FAILED);
  memset(seen, 0xff, sizeof(*seen));
  int st = unit_child(stdio_one_device, NULL, err, sizeof(err));
  struct stdio_seen o = *seen;
  munmap(seen, sizeof(*seen));
  CHECK_EQ(unit_code(st), 0);
  CHECK_EQ(o.got1, o.want1);
  CHECK_EQ(o.got2, o.want2);
  CHECK_EQ(o.write1, 1);
  CHECK_EQ(o.dup_of1, 1);
  CHECK_EQ(o.dup_of2, 2);
}

/* A restore marks the pipe and socket pair records it has rebuilt by
 * negating their kind, and flips them back at its end, while the context
 * still says SAVED. A restore that dies in between (SIGKILL, the OOM killer,
 * a crash; an emulated power failure waits for the restore's end) leaves
 * negative kinds: the next restore does those records again. (Once it
 * skipped them without a word and resumed the program without its pipe.) */
static void fd_restore_after_cut_restore(void) {
  int p[2];
  CHECK_EQ(pipe(p), 0);
  CHECK_EQ(write(p[1], "hello", 5), 5);
  save_and_close();
  rec(p[0])->kind = -WPP_FD_PIPE_R; /* as rebuild_pipe leaves them */
  rec(p[1])->kind = -WPP_FD_PIPE_W;
  CHECK_EQ(wpp_fd_restore(unit_dir), 0);
  CHECK(fcntl(p[0], F_GETFD) >= 0);
  char b[8] = {0};
  CHECK_EQ(read(p[0], b, sizeof b), 5);
  CHECK_STR(b, "hello");
  CHECK_EQ(rec(p[0])->kind, WPP_FD_PIPE_R);
}

/* A pipe whose write end has the lower number (dup2(p[0], 10)): its
 * unread bytes, saved in the read end's record, come back. Once only the
 * first end's record was written back, and such a pipe came back empty. */
static void fd_pipe_write_end_first(void) {
  int p[2];
  CHECK_EQ(pipe(p), 0); /* 3, 4 */
  CHECK_EQ(write(p[1], "hello", 5), 5);
  CHECK_EQ(dup2(p[0], 10), 10);
  CHECK_EQ(close(p[0]), 0); /* the write end (4) now comes first */
  save_and_close();
  CHECK_EQ(rec(10)->pipe_len, 5);
  restore_and_compare();
  char b[8] = {0};
  CHECK_EQ(fcntl(10, F_SETFL, O_NONBLOCK), 0);
  CHECK_EQ(read(10, b, sizeof b), 5);
  CHECK_STR(b, "hello");
}

/* On a terminal that was 0, 1 and 2 at once, the program's fd 5 = dup(1)
 * comes back as a copy of the next run's 1, not of its 0. Run in a child
 * (it changes 0-2) on a pseudo-terminal, which reports what it saw through
 * a shared page (its 0-2 are not the test's); the parent checks. */
struct tty_seen {
  int step, kind, dup_of, restored, same_as_1;
  long wrote;
};
static struct tty_seen *tseen;
static void tty_dup_body(void *unused) {
  (void)unused;
  int m = posix_openpt(O_RDWR | O_NOCTTY);
  if (m < 0 || grantpt(m) || unlockpt(m))
    unit_exit(3);
  int t = open(ptsname(m), O_RDWR | O_NOCTTY);
  if (t < 0)
    unit_exit(4);
  for (int k = 0; k < 3; k++)
    dup2(t, k);
  close(t);
  tseen->step = 1;
  wpp_stdio_note();
  int d = fcntl(1, F_DUPFD, 5);
  wpp_fd_save();
  tseen->step = 2;
  for (uint32_t i = 0; i < wpp_hdr->nfd; i++)
    if (wpp_hdr->fd[i].num == d) {
      tseen->kind = wpp_hdr->fd[i].kind;
      tseen->dup_of = wpp_hdr->fd[i].dup_of;
    }
  int in = open("/dev/null", O_RDONLY), out[2];
  if (in < 0 || pipe(out))
    unit_exit(5);
  dup2(in, 0); /* the next run: prog </dev/null | ... */
  dup2(out[1], 1);
  close(d);
  tseen->restored = wpp_fd_restore(unit_dir);
  tseen->step = 3;
  tseen->same_as_1 =
      (int)syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, d, 1);
  tseen->wrote = syscall(SYS_write, d, "x", 1);
  close(m);
}
static void fd_tty_dup_above_2(void) {
  char err[1024];
  tseen = mmap(NULL, sizeof(*tseen), PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(tseen != MAP_FAILED);
  memset(tseen, 0xff, sizeof(*tseen));
  tseen->step = 0;
  int st = unit_child(tty_dup_body, NULL, err, sizeof(err));
  struct tty_seen o = *tseen;
  munmap(tseen, sizeof(*tseen));
  CHECK_EQ(unit_code(st), 0);
  CHECK_EQ(o.step, 3);
  CHECK_EQ(o.kind, WPP_FD_INHERIT);
  CHECK_EQ(o.dup_of, 1);
  CHECK_EQ(o.restored, 0);
  CHECK_EQ(o.same_as_1, 0);
  CHECK_EQ(o.wrote, 1);
}

static const struct unit_case cases[] = {
    {"fd.file_records", fd_file_records},
    {"fd.pipe_records", fd_pipe_records},
    {"fd.counter_records", fd_counter_records},
    {"fd.lock_records", fd_lock_records},
    {"fd.epoll_records", fd_epoll_records},
    {"fd.socket_records", fd_socket_records},
    {"fd.stdio_records", fd_stdio_records},
    {"fd.restore_files", fd_restore_files},
    {"fd.restore_pipes_counters", fd_restore_pipes_counters},
    {"fd.restore_sockets", fd_restore_sockets},
    {"fd.restore_inherit", fd_restore_inherit},
    {"fd.restore_after_cut_restore", fd_restore_after_cut_restore},
    {"fd.devnull_opened_by_program", fd_devnull_opened_by_program},
    {"fd.stdio_one_device", fd_stdio_one_device},
    {"fd.pipe_write_end_first", fd_pipe_write_end_first},
    {"fd.tty_dup_above_2", fd_tty_dup_above_2},
    {"control.restore_corrupt_offset", control_restore_corrupt_offset},
};

int main(int argc, char **argv) {
  unit_close_inherited();
  return unit_run(cases, sizeof(cases) / sizeof(cases[0]),
                  argc > 1 ? argv[1] : "fd.", fd_setup, fd_teardown);
}
