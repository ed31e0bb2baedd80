// SPDX-License-Identifier: Apache-2.0
// kvserver.c -- a multi-threaded TCP key-value server, the WPP mode's server
// workload: an unmodified program of the kind whole-process persistence is
// for. Each worker thread has its own epoll set holding the listening socket
// (EPOLLEXCLUSIVE) and the connections it accepted; the table is a chained
// hash with one mutex per stripe of buckets. Text protocol, one request per
// line:  "S key value" -> "OK"   "G key" -> "V value" | "N"   "C" -> "# n"
//        "Q" -> the server exits 0.
// It does nothing for persistence: under `pmkit wpp run` its table, its
// connections' state and its threads survive a power failure; a connection
// that was open then comes back dead, which it handles as a client that left.
// Built with -DKV_PMDK (and glibc, -lpmemobj) it is instead the PMDK way of
// doing it, for comparison: the table lives in a libpmemobj pool (-P FILE),
// each set is one transaction under its stripe's lock, keys and values are
// at most 47 and 111 bytes, and a restart reopens the table.
// Usage: kvserver [-p port] [-t threads] [-s stripes] [-P pool]; prints the
// port.
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define NBUCKETS (1u << 20)
#define MAXLINE 512

struct node {
  struct node *next;
  uint64_t hash;
  char *key, *val;
};

struct conn {
  int fd;
  size_t have;
  char buf[MAXLINE * 4];
};

static struct node **table __attribute__((unused)); /* not in KV_PMDK */
static pthread_mutex_t *stripes;
static unsigned nstripes = 1024;
static long count;
static pthread_mutex_t count_mu = PTHREAD_MUTEX_INITIALIZER;
static int listen_fd;

static uint64_t hash_of(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  while (*s)
    h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
  return h;
}

/* Hash key k, find its bucket and take the bucket's stripe lock; returns
 * the lock, to release when done. */
static pthread_mutex_t *lock_bucket(const char *k, uint64_t *h, size_t *b) {
  *h = hash_of(k);
  *b = *h & (NBUCKETS - 1);
  pthread_mutex_t *m = &stripes[*b % nstripes];
  pthread_mutex_lock(m);
  return m;
}

#ifdef KV_PMDK
#include <libpmemobj.h>

struct pnode {
  PMEMoid next;
  uint64_t hash;
  char key[48], val[112];
};
struct proot {
  PMEMoid buckets; /* NBUCKETS PMEMoids */
  uint64_t count;
};
static PMEMobjpool *pop;
static PMEMoid *pbuckets;
static struct proot *proot;

static void pmdk_open(const char *path) {
  pop = pmemobj_open(path, "kvserver");
  if (!pop)
    pop = pmemobj_create(path, "kvserver", (size_t)1 << 30, 0600);
  if (!pop) {
    perror(path);
    exit(1);
  }
  proot = pmemobj_direct(pmemobj_root(pop, sizeof(struct proot)));
  if (OID_IS_NULL(proot->buckets)) {
    TX_BEGIN(pop) {
      pmemobj_tx_add_range_direct(proot, sizeof(*proot));
      proot->buckets = pmemobj_tx_zalloc(NBUCKETS * sizeof(PMEMoid), 1);
    }
    TX_END
  }
  pbuckets = pmemobj_direct(proot->buckets);
}

static void put(const char *k, const char *v) {
  uint64_t h;
  size_t b;
  pthread_mutex_t *m = lock_bucket(k, &h, &b);
  TX_BEGIN(pop) {
    struct pnode *n = NULL;
    for (PMEMoid o = pbuckets[b]; !OID_IS_NULL(o);) {
      struct pnode *c = pmemobj_direct(o);
      if (c->hash == h && !strcmp(c->key, k)) {
        n = c;
        break;
      }
      o = c->next;
    }
    if (n) {
      pmemobj_tx_add_range_direct(n->val, sizeof(n->val));
      snprintf(n->val, sizeof(n->val), "%s", v);
    } else {
      PMEMoid o = pmemobj_tx_alloc(sizeof(struct pnode), 2);
      n = pmemobj_direct(o);
      n->hash = h;
      snprintf(n->key, sizeof(n->key), "%s", k);
      snprintf(n->val, sizeof(n->val), "%s", v);
      n->next = pbuckets[b];
      pmemobj_tx_add_range_direct(&pbuckets[b], sizeof(PMEMoid));
      pbuckets[b] = o;
    }
  }
  TX_END
  pthread_mutex_unlock(m);
}

static int get(const char *k, char *out, size_t cap) {
  uint64_t h;
  size_t b;
  int found = 0;
  pthread_mutex_t *m = lock_bucket(k, &h, &b);
  for (PMEMoid o = pbuckets[b]; !OID_IS_NULL(o);) {
    struct pnode *n = pmemobj_direct(o);
    if (n->hash == h && !strcmp(n->key, k)) {
      snprintf(out, cap, "%s", n->val);
      found = 1;
      break;
    }
    o = n->next;
  }
  pthread_mutex_unlock(m);
  return found;
}
#else

static void put(const char *k, const char *v) {
  uint64_t h;
  size_t b;
  char *nv = strdup(v);
  pthread_mutex_t *m = lock_bucket(k, &h, &b);
  for (struct node *n = table[b]; n; n = n->next)
    if (n->hash == h && !strcmp(n->key, k)) {
      char *old = n->val;
      n->val = nv;
      pthread_mutex_unlock(m);
      free(old);
      return;
    }
  struct node *n = malloc(sizeof(*n));
  n->hash = h;
  n->key = strdup(k);
  n->val = nv;
  n->next = table[b];
  table[b] = n;
  pthread_mutex_unlock(m);
  pthread_mutex_lock(&count_mu);
  count++;
  pthread_mutex_unlock(&count_mu);
}

/* Copies the value into out (cap bytes); 0 if absent. */
static int get(const char *k, char *out, size_t cap) {
  uint64_t h;
  size_t b;
  int found = 0;
  pthread_mutex_t *m = lock_bucket(k, &h, &b);
  for (struct node *n = table[b]; n; n = n->next)
    if (n->hash == h && !strcmp(n->key, k)) {
      snprintf(out, cap, "%s", n->val);
      found = 1;
      break;
    }
  pthread_mutex_unlock(m);
  return found;
}
#endif

static int send_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Runs the complete lines in c->buf; -1 when the connection must close. */
static int serve(struct conn *c) {
  char *start = c->buf, *end = c->buf + c->have, *nl;
  char out[MAXLINE * 4];
  size_t olen = 0;
  while ((nl = memchr(start, '\n', (size_t)(end - start)))) {
    *nl = 0;
    char *save, *cmd = strtok_r(start, " ", &save),
                *k = strtok_r(NULL, " ", &save), *v = strtok_r(NULL, "", &save);
    char val[MAXLINE];
    if (olen > sizeof(out) - MAXLINE - 8) {
      if (send_all(c->fd, out, olen))
        return -1;
      olen = 0;
    }
    if (!cmd) {
      olen += (size_t)snprintf(out + olen, sizeof(out) - olen, "E\n");
    } else if (cmd[0] == 'S' && k && v) {
      put(k, v);
      olen += (size_t)snprintf(out + olen, sizeof(out) - olen, "OK\n");
    } else if (cmd[0] == 'G' && k) {
      if (get(k, val, sizeof(val)))
        olen += (size_t)snprintf(out + olen, sizeof(out) - olen, "V %s\n", val);
      else
        olen += (size_t)snprintf(out + olen, sizeof(out) - olen, "N\n");
    } else if (cmd[0] == 'C') {
      pthread_mutex_lock(&count_mu);
      long n = count;
      pthread_mutex_unlock(&count_mu);
      olen += (size_t)snprintf(out + olen, sizeof(out) - olen, "# %ld\n", n);
    } else if (cmd[0] == 'Q') {
      if (olen)
        send_all(c->fd, out, olen);
      send_all(c->fd, "BYE\n", 4);
      exit(0);
    } else {
      olen += (size_t)snprintf(out + olen, sizeof(out) - olen, "E\n");
    }
    start = nl + 1;
  }
  c->have = (size_t)(end - start);
  memmove(c->buf, start, c->have);
  if (c->have == sizeof(c->buf))
    return -1; /* a line longer than we take */
  return olen ? send_all(c->fd, out, olen) : 0;
}

static void *worker(void *arg) {
  (void)arg;
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE,
                           .data.ptr = NULL};
  if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &ev) != 0) {
    perror("epoll");
    exit(1);
  }
  struct epoll_event evs[64];
  for (;;) {
    int n = epoll_wait(ep, evs, 64, -1);
    if (n < 0 && errno == EINTR)
      continue; /* e.g. once after a restore */
    if (n < 0) {
      perror("epoll_wait");
      exit(1);
    }
    for (int i = 0; i < n; i++) {
      struct conn *c = evs[i].data.ptr;
      if (!c) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
          continue; /* another worker took it, or the client left */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c = calloc(1, sizeof(*c));
        c->fd = fd;
        struct epoll_event ce = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
        continue;
      }
      ssize_t r = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, 0);
      if (r < 0 && (errno == EAGAIN || errno == EINTR))
        continue;
      if (r <= 0 || (c->have += (size_t)r, serve(c) != 0)) {
        epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        free(c);
      }
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  int port = 0, threads = 2, opt;
  const char *pool = "/dev/shm/kvserver.pmdk";
  while ((opt = getopt(argc, argv, "p:t:s:P:")) != -1) {
    if (opt == 'P')
      pool = optarg;
    else if (opt == 'p')
      port = atoi(optarg);
    else if (opt == 't')
      threads = atoi(optarg);
    else if (opt == 's')
      nstripes = (unsigned)atoi(optarg);
    else
      return 2;
  }
#ifdef KV_PMDK
  pmdk_open(pool);
#else
  (void)pool;
  table = calloc(NBUCKETS, sizeof(*table));
#endif
  stripes = calloc(nstripes, sizeof(*stripes));
  for (unsigned i = 0; i < nstripes; i++)
    pthread_mutex_init(&stripes[i], NULL);
  listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof(a);
  if (bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
      listen(listen_fd, 512) != 0 ||
      getsockname(listen_fd, (struct sockaddr *)&a, &al) != 0) {
    perror("listen");
    return 1;
  }
  printf("listening on %d\n", ntohs(a.sin_port));
  fflush(stdout);
  pthread_t t;
  for (int i = 1; i < threads; i++)
    pthread_create(&t, NULL, worker, NULL);
  worker(NULL);
  return 0;
}
