// SPDX-License-Identifier: Apache-2.0
// kvclient.c -- load generator and checker for kvserver.c. Each of T threads
// owns a key range and sends requests over its own connection, one at a time:
// a set with probability W%, else a get. It reconnects when the server goes
// away (a power failure, then the restart) and resends what was not answered.
// It remembers, for each of its keys, the last value the server acknowledged
// (a set cut off by a broken connection is sent again until acknowledged);
// at the end it reads every key back and counts those not holding it:
// acknowledged writes that were lost. Prints one line of JSON.
// Usage: kvclient PORT [-t threads] [-n ops per thread] [-k keys per thread]
//                      [-w write percent] [-d seconds instead of -n]
//                      [-T seconds: a request unanswered this long on an open
//                       connection is a stuck server, exit 3; default 30]
//                      [-P memcached: speak memcached's text protocol]
//        kvclient -s "SERVER ARGS" [options]   starts the server itself
//                      (reading its port from its first line), stops it
//                      with "Q" at the end: one benchmark run (bench/run.py)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int port, nthreads = 4, keys = 2000, wpct = 50;
static long ops = 20000;
static double duration, stall = 30;
static int memc; /* -P memcached */

struct client {
  int id, fd;
  uint32_t *acked; /* last acknowledged value number per key; 0 = none */
  long done, reconnects, lost, checked;
  double loop_secs; /* the timed part, before the read-back */
  char in[4096];
  size_t have;
  uint64_t rng;
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void dial(struct client *c) {
  double t0 = now();
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      struct timeval tv = {
          (time_t)stall, (suseconds_t)((stall - (double)(time_t)stall) * 1e6)};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      c->fd = fd;
      c->have = 0;
      return;
    }
    close(fd);
    if (now() - t0 > 60) {
      fprintf(stderr, "kvclient: server gone for 60 s\n");
      exit(1);
    }
    usleep(5000);
  }
}

/* One answer line, without its end (\n or \r\n); 0 on success, -1 if the
 * connection broke. */
static int read_line(struct client *c, char *ans, size_t cap) {
  for (;;) {
    char *nl = memchr(c->in, '\n', c->have);
    if (nl) {
      size_t l = (size_t)(nl - c->in);
      snprintf(ans, cap, "%.*s", (int)(l && c->in[l - 1] == '\r' ? l - 1 : l),
               c->in);
      c->have -= l + 1;
      memmove(c->in, nl + 1, c->have);
      return 0;
    }
    ssize_t r = recv(c->fd, c->in + c->have, sizeof(c->in) - c->have, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      fprintf(stderr,
              "kvclient: no answer in %g s on an open connection: the "
              "server is stuck\n",
              stall);
      exit(3);
    }
    if (r <= 0)
      return -1;
    c->have += (size_t)r;
  }
}

/* One request and its answer, in kvserver's terms ("OK", "V value", "N"):
 * memcached's answers ("STORED", "VALUE k f n" + data + "END", "END") are
 * translated. 0 on success, -1 if the connection broke. */
static int call(struct client *c, const char *req, char *ans, size_t cap) {
  size_t n = strlen(req);
  if (send(c->fd, req, n, MSG_NOSIGNAL) != (ssize_t)n ||
      read_line(c, ans, cap) != 0)
    return -1;
  if (!memc)
    return 0;
  char data[200], end[16];
  if (!strncmp(ans, "VALUE ", 6)) {
    if (read_line(c, data, sizeof(data)) || read_line(c, end, sizeof(end)))
      return -1;
    snprintf(ans, cap, "V %s", data);
  } else if (!strcmp(ans, "END"))
    snprintf(ans, cap, "N");
  else if (!strcmp(ans, "STORED"))
    snprintf(ans, cap, "OK");
  return 0;
}

static void set_request(char *req, size_t cap, const char *key,
                        const char *val) {
  if (memc)
    snprintf(req, cap, "set %s 0 0 %zu\r\n%s\r\n", key, strlen(val), val);
  else
    snprintf(req, cap, "S %s %s\n", key, val);
}

static void get_request(char *req, size_t cap, const char *key) {
  snprintf(req, cap, memc ? "get %s\r\n" : "G %s\n", key);
}

static void call_retry(struct client *c, const char *req, char *ans,
                       size_t cap) {
  while (call(c, req, ans, cap) != 0) {
    close(c->fd);
    c->reconnects++;
    dial(c);
  }
}

static uint64_t next(struct client *c) {
  c->rng ^= c->rng << 13;
  c->rng ^= c->rng >> 7;
  c->rng ^= c->rng << 17;
  return c->rng;
}

static void *run(void *arg) {
  struct client *c = arg;
  char req[160], ans[256], key[32], val[32];
  dial(c);
  double start = now(), end = duration > 0 ? start + duration : 0;
  uint32_t ver = 0;
  for (long i = 0; end ? now() < end : i < ops; i++) {
    int k = (int)(next(c) % (uint64_t)keys);
    snprintf(key, sizeof(key), "k%d.%d", c->id, k);
    if ((int)(next(c) % 100) < wpct) {
      ver++;
      snprintf(val, sizeof(val), "v%u.%d", ver, k);
      set_request(req, sizeof(req), key, val);
      while (call(c, req, ans, sizeof(ans)) != 0) {
        close(c->fd);
        c->reconnects++;
        dial(c); /* the set may or may not have been applied: resend */
      }
      if (strcmp(ans, "OK") != 0) {
        fprintf(stderr, "kvclient: the server answered '%s' to a set\n", ans);
        exit(1);
      }
      c->acked[k] = ver;
    } else {
      get_request(req, sizeof(req), key);
      call_retry(c, req, ans, sizeof(ans));
    }
    c->done++;
  }
  c->loop_secs = now() - start;
  for (int k = 0; k < keys; k++) {
    if (!c->acked[k])
      continue;
    snprintf(key, sizeof(key), "k%d.%d", c->id, k);
    get_request(req, sizeof(req), key);
    call_retry(c, req, ans, sizeof(ans));
    unsigned v = 0;
    c->checked++;
    if (sscanf(ans, "V v%u.", &v) != 1 || v != c->acked[k])
      c->lost++;
  }
  close(c->fd);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  int opt;
  char *spawn = NULL;
  if (argv[1][0] != '-') {
    port = atoi(argv[1]);
    optind = 2;
  }
  while ((opt = getopt(argc, argv, "t:n:k:w:d:s:T:P:")) != -1) {
    if (opt == 's')
      spawn = optarg;
    else if (opt == 't')
      nthreads = atoi(optarg);
    else if (opt == 'n')
      ops = atol(optarg);
    else if (opt == 'k')
      keys = atoi(optarg);
    else if (opt == 'w')
      wpct = atoi(optarg);
    else if (opt == 'd')
      duration = atof(optarg);
    else if (opt == 'T')
      stall = atof(optarg);
    else if (opt == 'P' && !strcmp(optarg, "memcached"))
      memc = 1;
    else
      return 2;
  }
  pid_t server = 0;
  if (spawn) {
    char *sargv[32];
    int sargc = 0;
    for (char *tok = strtok(spawn, " "); tok && sargc < 31;
         tok = strtok(NULL, " "))
      sargv[sargc++] = tok;
    sargv[sargc] = NULL;
    int pfd[2];
    if (pipe(pfd) != 0)
      return 2;
    server = fork();
    if (server == 0) {
      dup2(pfd[1], 1);
      close(pfd[0]);
      execv(sargv[0], sargv);
      perror(sargv[0]);
      _exit(127);
    }
    close(pfd[1]);
    FILE *f = fdopen(pfd[0], "r");
    char line[128];
    if (!f || !fgets(line, sizeof(line), f) ||
        sscanf(line, "listening on %d", &port) != 1) {
      fprintf(stderr, "kvclient: the server did not start\n");
      return 1;
    }
  }
  struct client *cs = calloc((size_t)nthreads, sizeof(*cs));
  pthread_t *ts = calloc((size_t)nthreads, sizeof(*ts));
  double t0 = now();
  for (int i = 0; i < nthreads; i++) {
    cs[i].id = i;
    cs[i].acked = calloc((size_t)keys, sizeof(uint32_t));
    cs[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    pthread_create(&ts[i], NULL, run, &cs[i]);
  }
  long done = 0, rec = 0, lost = 0, checked = 0;
  double loop = 0;
  for (int i = 0; i < nthreads; i++) {
    pthread_join(ts[i], NULL);
    done += cs[i].done;
    rec += cs[i].reconnects;
    lost += cs[i].lost;
    checked += cs[i].checked;
    if (cs[i].loop_secs > loop)
      loop = cs[i].loop_secs;
  }
  double secs = now() - t0;
  int server_exit = 0;
  if (server > 0) {
    struct client q = {.id = -1};
    char ans[64];
    dial(&q);
    send(q.fd, "Q\n", 2, MSG_NOSIGNAL);
    (void)recv(q.fd, ans, sizeof(ans), 0);
    close(q.fd);
    int st;
    waitpid(server, &st, 0);
    server_exit = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  /* throughput over the timed part; seconds include the read-back */
  printf("{\"ops\": %ld, \"seconds\": %.3f, \"ops_per_sec\": %.0f, "
         "\"reconnects\": %ld, \"checked\": %ld, \"lost\": %ld, "
         "\"server_exit\": %d}\n",
         done, secs, (double)done / loop, rec, checked, lost, server_exit);
  return lost || server_exit ? 1 : 0;
}
