// SPDX-License-Identifier: Apache-2.0
// udp.c -- datagram sockets across power failures (WPP golden test). Two
// request-reply pairs run side by side: a UDP server bound to a port of
// 127.0.0.1 with a client connected to it, and an AF_UNIX datagram server
// bound to a path with a client bound to an abstract name (autobind) that
// the server answers with sendto. A client resends a request it got no
// answer to within 100 ms (a datagram in transit at the failure is lost, as
// on a network) and ignores stale answers; the program prints only totals,
// so a socket that comes back dead, unbound, or bound elsewhere changes the
// output (a failed send) or hangs the client.
// Usage: udp DIR [round trips]
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static long trips = 20000;

struct pair {
  const char *name;
  int server, client;
  long done;
};

static void fail(const struct pair *p, const char *what, long at) {
  printf("%s: %s at %ld\n", p->name, what, at);
  fflush(stdout);
  exit(1);
}

static void *serve(void *arg) {
  struct pair *p = arg;
  char buf[64];
  for (;;) {
    struct sockaddr_storage from;
    socklen_t fl = sizeof(from);
    ssize_t r = recvfrom(p->server, buf, sizeof(buf) - 1, 0,
                         (struct sockaddr *)&from, &fl);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      fail(p, "the server's receive failed", -1);
    buf[r] = 0;
    buf[0] = 'a'; /* "r N" -> "a N" */
    if (sendto(p->server, buf, (size_t)r, MSG_NOSIGNAL,
               (struct sockaddr *)&from, fl) != r)
      fail(p, "the server's answer failed", -1);
  }
  return NULL;
}

static void *ask(void *arg) {
  struct pair *p = arg;
  char req[32], ans[64];
  for (long i = 0; i < trips; i++) {
    int n = snprintf(req, sizeof(req), "r %ld", i);
    for (int got = 0; !got;) {
      if (send(p->client, req, (size_t)n, MSG_NOSIGNAL) != n)
        fail(p, "a send failed", i);
      struct pollfd pf = {p->client, POLLIN, 0};
      while (!got && poll(&pf, 1, 100) == 1) {
        ssize_t r = recv(p->client, ans, sizeof(ans) - 1, MSG_DONTWAIT);
        if (r <= 0) {
          if (r < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
          fail(p, "a receive failed", i);
        }
        ans[r] = 0;
        got = ans[0] == 'a' && strtol(ans + 2, NULL, 10) == i;
      }
    }
  }
  p->done = trips;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: udp DIR [round trips]\n");
    return 2;
  }
  if (argc > 2)
    trips = atol(argv[2]);
  struct pair udp = {"udp", socket(AF_INET, SOCK_DGRAM, 0),
                     socket(AF_INET, SOCK_DGRAM, 0), 0};
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof(a);
  if (bind(udp.server, (struct sockaddr *)&a, sizeof(a)) != 0 ||
      getsockname(udp.server, (struct sockaddr *)&a, &al) != 0 ||
      connect(udp.client, (struct sockaddr *)&a, sizeof(a)) != 0) {
    perror("udp");
    return 1;
  }
  struct pair local = {"unix datagram", socket(AF_UNIX, SOCK_DGRAM, 0),
                       socket(AF_UNIX, SOCK_DGRAM, 0), 0};
  struct sockaddr_un u = {.sun_family = AF_UNIX};
  snprintf(u.sun_path, sizeof(u.sun_path), "%s.sock", argv[1]);
  unlink(u.sun_path);
  sa_family_t fam = AF_UNIX; /* autobind: an abstract name of the kernel's */
  if (bind(local.server, (struct sockaddr *)&u, sizeof(u)) != 0 ||
      bind(local.client, (struct sockaddr *)&fam, sizeof(fam)) != 0 ||
      connect(local.client, (struct sockaddr *)&u, sizeof(u)) != 0) {
    perror("unix datagram");
    return 1;
  }
  pthread_t t[4];
  pthread_create(&t[0], NULL, serve, &udp);
  pthread_create(&t[1], NULL, ask, &udp);
  pthread_create(&t[2], NULL, serve, &local);
  pthread_create(&t[3], NULL, ask, &local);
  pthread_join(t[1], NULL); /* the servers serve until the program ends */
  pthread_join(t[3], NULL);
  unlink(u.sun_path);
  printf("%s: %ld round trips in order\n", udp.name, udp.done);
  printf("%s: %ld round trips in order\n", local.name, local.done);
  return 0;
}
