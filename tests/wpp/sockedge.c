// SPDX-License-Identifier: Apache-2.0
// sockedge.c -- WPP tests of socket and descriptor states an independent
// review found lost; each mode sets a state up, waits 0.8 s (the test's
// power failure comes then), and prints one line that must match the native
// run:
//   closed     a stream pair whose writer closed with 5 messages unread
//   dgram      the same with a datagram pair
//   shut       1000 bytes then shutdown(SHUT_WR): the reader must see them,
//              then end of file
//   seqshut    a seqpacket pair shut down for writing with 3 messages queued,
//              and 100 bytes in a pipe (a save once spun on the first and
//              dropped the second)
//   unbound    a TCP socket bound but not yet listening, a Unix one made but
//              not yet bound: both listen afterwards
//   epoll      200 eventfds in one epoll set, all ready
//   highfd     a pipe at descriptors 700 and 701 with 10 bytes in it
//   dual       TCP listeners on one port of 127.0.0.1 and of ::1 (V6ONLY)
//   mode       a Unix listener whose socket file was made 0666
//   redir      stdout pointed into a pipe a logger thread drains, the real
//              one kept as a dup: both must be where they were
//   bigsend    a blocking send of 300,000 bytes to a pair nobody reads yet:
//              cut short by the save, it must still send them all
//   tmpfile    a deleted temporary file in /var/tmp (another file system
//              than the context's, as sqlite3 makes them), read back after
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static void nap(void) {
  for (int i = 0; i < 8; i++)
    usleep(100000);
}

/* Everything readable now, as "a;b;c;" (one per read), then how it ended. */
static void drain(const char *mode, int fd) {
  char buf[4096], out[8192] = "";
  size_t n = 0;
  const char *end = "blocks";
  for (;;) {
    ssize_t r = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
    if (r < 0) {
      end = errno == EAGAIN ? "would block" : strerror(errno);
      break;
    }
    if (r == 0) { /* a stream's end, or a message socket's shut down */
      end = "end of file";
      break;
    }
    buf[r] = 0;
    n += (size_t)snprintf(out + n, sizeof(out) - n, "%s;", buf);
  }
  printf("%s: '%s' then %s\n", mode, out, end);
}

static int listener(int family, const char *addr, int port) {
  int s = socket(family, SOCK_STREAM, 0), one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (family == AF_INET6) {
    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    inet_pton(AF_INET6, addr, &a.sin6_addr);
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) != 0)
      return -1;
  } else {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, addr, &a.sin_addr);
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) != 0)
      return -1;
  }
  return listen(s, 16) == 0 ? s : -1;
}

static int port_of(int s) {
  struct sockaddr_storage a;
  socklen_t l = sizeof(a);
  getsockname(s, (struct sockaddr *)&a, &l);
  return ntohs(((struct sockaddr_in *)&a)->sin_port);
}

static int dial(int family, const char *addr, int port) {
  int s = socket(family, SOCK_STREAM, 0), r;
  if (family == AF_INET6) {
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    inet_pton(AF_INET6, addr, &a.sin6_addr);
    r = connect(s, (struct sockaddr *)&a, sizeof(a));
  } else {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, addr, &a.sin_addr);
    r = connect(s, (struct sockaddr *)&a, sizeof(a));
  }
  close(s);
  return r == 0;
}

static int logpipe[2], logged, bigpair[2];
static long bigread;

static void *late_reader(void *a) {
  (void)a;
  char b[65536];
  ssize_t r;
  nap();
  while ((r = read(bigpair[1], b, sizeof(b))) > 0)
    bigread += r;
  return NULL;
}

static void *logger(void *a) {
  (void)a;
  char b[256];
  ssize_t r;
  while ((r = read(logpipe[0], b, sizeof(b))) > 0)
    for (ssize_t i = 0; i < r; i++)
      logged += b[i] == '\n';
  return NULL;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "closed";
  int sv[2];
  if (!strcmp(mode, "closed") || !strcmp(mode, "dgram")) {
    int dg = !strcmp(mode, "dgram");
    socketpair(AF_UNIX, dg ? SOCK_DGRAM : SOCK_STREAM, 0, sv);
    for (int i = 0; i < 5; i++) {
      char m[16];
      int n = snprintf(m, sizeof(m), "msg%d", i);
      send(sv[1], m, (size_t)n, 0);
    }
    close(sv[1]);
    nap();
    drain(mode, sv[0]);
  } else if (!strcmp(mode, "shut")) {
    char b[1000];
    memset(b, 'x', sizeof(b));
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    send(sv[1], b, sizeof(b), 0);
    shutdown(sv[1], SHUT_WR);
    nap();
    size_t got = 0;
    ssize_t r;
    while ((r = recv(sv[0], b, sizeof(b), MSG_DONTWAIT)) > 0)
      got += (size_t)r;
    printf("shut: %zu bytes then %s\n", got,
           r == 0 ? "end of file" : "no end of file");
  } else if (!strcmp(mode, "seqshut")) {
    int p[2];
    char b[100];
    memset(b, 'p', sizeof(b));
    socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv);
    send(sv[1], "one", 3, 0);
    send(sv[1], "two", 3, 0);
    send(sv[1], "three", 5, 0);
    shutdown(sv[1], SHUT_WR);
    if (pipe(p) != 0 || write(p[1], b, sizeof(b)) != (ssize_t)sizeof(b))
      return 1;
    nap();
    drain(mode, sv[0]);
    printf("pipe: %zd bytes\n", read(p[0], b, sizeof(b)));
  } else if (!strcmp(mode, "unbound")) {
    int t = socket(AF_INET, SOCK_STREAM, 0),
        u = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(t, (struct sockaddr *)&a, sizeof(a)) != 0)
      return 1;
    int port = port_of(t);
    nap();
    int ok = listen(t, 4) == 0 && port_of(t) == port &&
             dial(AF_INET, "127.0.0.1", port);
    sa_family_t fam = AF_UNIX; /* an abstract name of the kernel's */
    int uok =
        bind(u, (struct sockaddr *)&fam, sizeof(fam)) == 0 && listen(u, 4) == 0;
    printf("unbound: tcp listens at its port %d, unix listens %d\n", ok, uok);
  } else if (!strcmp(mode, "epoll")) {
    int ep = epoll_create1(0), n = 0;
    for (int i = 0; i < 200; i++) {
      int e = eventfd(1, 0);
      struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
      epoll_ctl(ep, EPOLL_CTL_ADD, e, &ev);
    }
    nap();
    struct epoll_event evs[256];
    n = epoll_wait(ep, evs, 256, 1000);
    printf("epoll: %d of 200 ready\n", n);
  } else if (!strcmp(mode, "highfd")) {
    int p[2];
    char b[16];
    if (pipe(p) != 0 || dup2(p[0], 700) != 700 || dup2(p[1], 701) != 701)
      return 1;
    close(p[0]);
    close(p[1]);
    if (write(701, "0123456789", 10) != 10)
      return 1;
    nap();
    printf("highfd: %zd bytes\n", read(700, b, sizeof(b)));
  } else if (!strcmp(mode, "dual")) {
    int a = listener(AF_INET, "127.0.0.1", 0), port = port_of(a);
    int b = listener(AF_INET6, "::1", port);
    if (a < 0 || b < 0) {
      printf("dual: no IPv6 here\n");
      return 0;
    }
    nap();
    printf("dual: v4 %d v6 %d\n", dial(AF_INET, "127.0.0.1", port),
           dial(AF_INET6, "::1", port));
  } else if (!strcmp(mode, "redir")) {
    int real = dup(1);
    pthread_t t;
    if (pipe(logpipe) != 0 || dup2(logpipe[1], 1) != 1)
      return 1;
    close(logpipe[1]);
    pthread_create(&t, NULL, logger, NULL);
    for (int i = 0; i < 16; i++) {
      printf("line %d\n", i);
      fflush(stdout);
      usleep(50000);
    }
    close(1);
    pthread_join(t, NULL);
    dprintf(real, "redir: the logger saw %d of 16 lines\n", logged);
  } else if (!strcmp(mode, "bigsend")) {
    static char b[300000];
    pthread_t t;
    socketpair(AF_UNIX, SOCK_STREAM, 0, bigpair);
    pthread_create(&t, NULL, late_reader, NULL);
    ssize_t n = send(bigpair[0], b, sizeof(b), 0);
    shutdown(bigpair[0], SHUT_WR);
    pthread_join(t, NULL);
    printf("bigsend: one send of %zd, %ld read\n", n, bigread);
  } else if (!strcmp(mode, "tmpfile")) {
    char name[] = "/var/tmp/sockedge.XXXXXX", b[5000], c[5000];
    int fd = mkstemp(name);
    for (int i = 0; i < 5000; i++)
      b[i] = (char)(i * 7);
    if (fd < 0 || unlink(name) != 0 || write(fd, b, sizeof(b)) != 5000)
      return 1;
    nap();
    ssize_t n = pread(fd, c, sizeof(c), 0);
    printf("tmpfile: %zd bytes back, same %d, offset %ld\n", n,
           n == 5000 && !memcmp(b, c, 5000), (long)lseek(fd, 0, SEEK_CUR));
  } else if (!strcmp(mode, "mode")) {
    char dir[] = "/tmp/sockedge.XXXXXX";
    struct sockaddr_un u = {.sun_family = AF_UNIX};
    struct stat st;
    if (!mkdtemp(dir))
      return 1;
    snprintf(u.sun_path, sizeof(u.sun_path), "%s/s", dir);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (bind(s, (struct sockaddr *)&u, sizeof(u)) != 0 || listen(s, 4) != 0)
      return 1;
    chmod(u.sun_path, 0666);
    nap();
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    int ok = connect(c, (struct sockaddr *)&u, sizeof(u)) == 0;
    stat(u.sun_path, &st);
    printf("mode: %o, connect %d\n", st.st_mode & 0777, ok);
    unlink(u.sun_path);
    rmdir(dir);
  }
  return 0;
}
