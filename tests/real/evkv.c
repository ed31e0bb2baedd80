// SPDX-License-Identifier: Apache-2.0
// evkv.c -- a key-value server written the way libevent servers are written
// (memcached's shape), for whole-process persistence tests against Debian's
// libevent, built from its source with `pmkit wpp cc` as a real dependency.
// The main thread accepts (an evconnlistener) and hands each connection to a
// worker thread through a queue and event_active() on the worker's base, which
// libevent turns into a write to the worker's eventfd: the eventfd between
// threads that must come back after a power failure. The main base is made
// with EVENT_BASE_FLAG_PRECISE_TIMER, so its timeouts go through a timerfd,
// and it keeps a 10 ms timer; SIGTERM arrives through libevent's signal pipe
// and stops the server cleanly (exit 0, after printing its key count).
// Protocol: kvserver.c's (bench/kvserver), one request per line:
//   "S key value" -> "OK"   "G key" -> "V value" | "N"   "C" -> "# n"
//   "T" -> "# ticks" (the timer's count)   "Q" -> the server exits 0.
// It does nothing for persistence.
// Usage: evkv [-p port] [-t threads]; prints "listening on PORT".
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NBUCKETS (1u << 16)
#define NSTRIPES 64u
#define MAXLINE 512
#define MAXWORKERS 16

struct node {
  struct node *next;
  uint64_t hash;
  char *key, *val;
};

static struct node *table[NBUCKETS];
static pthread_mutex_t stripes[NSTRIPES];
static atomic_long nkeys, ticks;

struct pending {
  struct pending *next;
  evutil_socket_t fd;
};

struct worker {
  pthread_t tid;
  struct event_base *base;
  struct event *wake; /* made active by the main thread: connections queued */
  pthread_mutex_t lock;
  struct pending *queue;
};

static struct worker workers[MAXWORKERS];
static int nworkers = 2;

static uint64_t hash_of(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

static void put(const char *k, const char *v) {
  uint64_t h = hash_of(k);
  pthread_mutex_t *m = &stripes[h % NSTRIPES];
  pthread_mutex_lock(m);
  struct node **b = &table[h % NBUCKETS];
  for (struct node *n = *b; n; n = n->next)
    if (n->hash == h && strcmp(n->key, k) == 0) {
      char *nv = strdup(v);
      if (nv) {
        free(n->val);
        n->val = nv;
      }
      pthread_mutex_unlock(m);
      return;
    }
  struct node *n = malloc(sizeof(*n));
  if (n && (n->key = strdup(k)) && (n->val = strdup(v))) {
    n->hash = h;
    n->next = *b;
    *b = n;
    nkeys++;
  }
  pthread_mutex_unlock(m);
}

static int get(const char *k, char *out, size_t cap) {
  uint64_t h = hash_of(k);
  pthread_mutex_t *m = &stripes[h % NSTRIPES];
  int found = 0;
  pthread_mutex_lock(m);
  for (struct node *n = table[h % NBUCKETS]; n; n = n->next)
    if (n->hash == h && strcmp(n->key, k) == 0) {
      snprintf(out, cap, "%s", n->val);
      found = 1;
      break;
    }
  pthread_mutex_unlock(m);
  return found;
}

static void answer(struct evbuffer *out, char *line) {
  char *save = NULL, val[MAXLINE];
  char *cmd = strtok_r(line, " \r", &save);
  char *k = strtok_r(NULL, " \r", &save), *v = strtok_r(NULL, " \r", &save);
  if (!cmd)
    evbuffer_add_printf(out, "E\n");
  else if (cmd[0] == 'S' && k && v) {
    put(k, v);
    evbuffer_add_printf(out, "OK\n");
  } else if (cmd[0] == 'G' && k) {
    if (get(k, val, sizeof(val)))
      evbuffer_add_printf(out, "V %s\n", val);
    else
      evbuffer_add_printf(out, "N\n");
  } else if (cmd[0] == 'C')
    evbuffer_add_printf(out, "# %ld\n", (long)nkeys);
  else if (cmd[0] == 'T')
    evbuffer_add_printf(out, "# %ld\n", (long)ticks);
  else if (cmd[0] == 'Q')
    exit(0);
  else
    evbuffer_add_printf(out, "E\n");
}

static void on_read(struct bufferevent *bev, void *arg) {
  (void)arg;
  struct evbuffer *in = bufferevent_get_input(bev);
  struct evbuffer *out = bufferevent_get_output(bev);
  char *line;
  size_t n;
  while ((line = evbuffer_readln(in, &n, EVBUFFER_EOL_LF))) {
    if (n < MAXLINE)
      answer(out, line);
    else
      evbuffer_add_printf(out, "E\n");
    free(line);
  }
  if (evbuffer_get_length(in) >= MAXLINE) /* a line that never ends */
    bufferevent_free(bev);
}

static void on_conn_event(struct bufferevent *bev, short what, void *arg) {
  (void)arg;
  if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) /* the client left */
    bufferevent_free(bev);
}

/* On the worker's thread: take the queued connections. */
static void on_wake(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct worker *w = arg;
  pthread_mutex_lock(&w->lock);
  struct pending *p = w->queue;
  w->queue = NULL;
  pthread_mutex_unlock(&w->lock);
  while (p) {
    struct pending *next = p->next;
    struct bufferevent *bev =
        bufferevent_socket_new(w->base, p->fd, BEV_OPT_CLOSE_ON_FREE);
    if (bev) {
      bufferevent_setcb(bev, on_read, NULL, on_conn_event, w);
      bufferevent_enable(bev, EV_READ | EV_WRITE);
    } else
      evutil_closesocket(p->fd);
    free(p);
    p = next;
  }
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  event_base_loop(w->base, EVLOOP_NO_EXIT_ON_EMPTY);
  return NULL;
}

/* On the main thread: hand the connection to the next worker. */
static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
                      struct sockaddr *sa, int len, void *arg) {
  (void)l;
  (void)sa;
  (void)len;
  (void)arg;
  static unsigned next;
  struct worker *w = &workers[next++ % (unsigned)nworkers];
  struct pending *p = malloc(sizeof(*p));
  if (!p) {
    evutil_closesocket(fd);
    return;
  }
  p->fd = fd;
  pthread_mutex_lock(&w->lock);
  p->next = w->queue;
  w->queue = p;
  pthread_mutex_unlock(&w->lock);
  event_active(w->wake, EV_READ, 0); /* from another thread: the eventfd */
}

static void on_tick(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  (void)arg;
  ticks++;
}

static void on_term(evutil_socket_t sig, short what, void *arg) {
  (void)sig;
  (void)what;
  event_base_loopbreak(arg);
}

int main(int argc, char **argv) {
  int port = 0, opt;
  while ((opt = getopt(argc, argv, "p:t:")) != -1) {
    if (opt == 'p')
      port = atoi(optarg);
    else if (opt == 't')
      nworkers = atoi(optarg);
    else {
      fprintf(stderr, "usage: evkv [-p port] [-t threads]\n");
      return 2;
    }
  }
  if (nworkers < 1 || nworkers > MAXWORKERS) {
    fprintf(stderr, "evkv: -t takes 1 to %d\n", MAXWORKERS);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  if (evthread_use_pthreads() != 0) {
    fprintf(stderr, "evkv: libevent has no pthreads support\n");
    return 1;
  }
  for (unsigned i = 0; i < NSTRIPES; i++)
    pthread_mutex_init(&stripes[i], NULL);

  struct event_config *cfg = event_config_new();
  event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
  struct event_base *base = event_base_new_with_config(cfg);
  event_config_free(cfg);
  if (!base) {
    fprintf(stderr, "evkv: no event base\n");
    return 1;
  }
  for (int i = 0; i < nworkers; i++) {
    struct worker *w = &workers[i];
    pthread_mutex_init(&w->lock, NULL);
    w->base = event_base_new();
    w->wake = w->base ? event_new(w->base, -1, EV_PERSIST, on_wake, w) : NULL;
    if (!w->wake || pthread_create(&w->tid, NULL, worker_main, w) != 0) {
      fprintf(stderr, "evkv: cannot start worker %d\n", i);
      return 1;
    }
  }

  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  struct evconnlistener *l = evconnlistener_new_bind(
      base, on_accept, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 128,
      (struct sockaddr *)&a, sizeof(a));
  if (!l) {
    perror("evkv: listen");
    return 1;
  }
  socklen_t alen = sizeof(a);
  getsockname(evconnlistener_get_fd(l), (struct sockaddr *)&a, &alen);
  struct event *tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
  struct timeval ten_ms = {0, 10000};
  event_add(tick, &ten_ms);
  struct event *term = evsignal_new(base, SIGTERM, on_term, base);
  event_add(term, NULL);

  printf("listening on %d\n", ntohs(a.sin_port));
  fflush(stdout);
  event_base_dispatch(base);
  printf("stopped: %ld keys, %ld ticks\n", (long)nkeys, (long)ticks);
  fflush(stdout);
  exit(0); /* the workers' loops never end by themselves */
}
