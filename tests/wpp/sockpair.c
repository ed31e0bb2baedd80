// SPDX-License-Identifier: Apache-2.0
// sockpair.c -- socket pairs between threads across power failures (WPP
// golden test). A stream pair carries numbered records one way and an
// acknowledgement back every 1000 records; a datagram pair and a seqpacket
// pair carry numbered messages of varying length. Every reader checks order
// and content itself and the program prints only totals, so a pair that comes
// back dead, or without the bytes or messages queued in it at the failure,
// changes the output (an early end, a wrong record).
// Usage: sockpair [records]
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static long n_records = 800000;
static int st[2];
static long stream_done;

static void fail(const char *what, long at) {
  printf("%s at %ld\n", what, at);
  fflush(stdout);
  exit(1);
}

static void send_all(int fd, const char *p, size_t n, long at) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      fail("stream: a send failed", at);
    p += w;
    n -= (size_t)w;
  }
}

static void *stream_writer(void *arg) {
  (void)arg;
  char buf[64 * 10], ack[32];
  for (long i = 0; i < n_records;) {
    size_t n = 0;
    for (int k = 1 + (int)(i % 53); k > 0 && i < n_records; k--, i++) {
      n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%08ld\n", i);
      if ((i + 1) % 1000 == 0) { /* wait for the reader's acknowledgement */
        send_all(st[0], buf, n, i);
        n = 0;
        size_t got = 0;
        while (got < 13) {
          ssize_t r = read(st[0], ack + got, 13 - got);
          if (r < 0 && errno == EINTR)
            continue;
          if (r <= 0)
            fail("stream: no acknowledgement", i);
          got += (size_t)r;
        }
        if (strtol(ack + 4, NULL, 10) != i + 1)
          fail("stream: a wrong acknowledgement", i);
      }
    }
    send_all(st[0], buf, n, i);
  }
  return NULL;
}

static void *stream_reader(void *arg) {
  (void)arg;
  char buf[4096], line[16];
  size_t have = 0;
  long next = 0;
  while (next < n_records) {
    ssize_t r = read(st[1], buf + have, sizeof(buf) - have);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      fail("stream: ended early", next);
    have += (size_t)r;
    size_t off = 0;
    while (have - off >= 9) {
      snprintf(line, sizeof(line), "%08ld\n", next);
      if (memcmp(buf + off, line, 9) != 0)
        fail("stream: a wrong record", next);
      off += 9;
      if (++next % 1000 == 0) {
        char ack[32];
        snprintf(ack, sizeof(ack), "ack %08ld\n", next);
        send_all(st[1], ack, 13, next);
      }
    }
    memmove(buf, buf + off, have - off);
    have -= off;
  }
  stream_done = next;
  return NULL;
}

struct msgs {
  const char *name;
  int sv[2];
  long n, done;
};

static size_t msg_len(long i) { return 1 + (size_t)((i * 7) % 300); }

static void *msg_sender(void *arg) {
  struct msgs *m = arg;
  unsigned char b[512];
  for (long i = 0; i < m->n; i++) {
    size_t l = msg_len(i);
    for (size_t j = 0; j < l; j++)
      b[j] = (unsigned char)(i * 31 + (long)j);
    ssize_t w;
    while ((w = send(m->sv[0], b, l, MSG_NOSIGNAL)) < 0 && errno == EINTR)
      ;
    if (w != (ssize_t)l)
      fail(m->name, i);
  }
  return NULL;
}

static void *msg_receiver(void *arg) {
  struct msgs *m = arg;
  unsigned char b[512];
  for (long i = 0; i < m->n; i++) {
    ssize_t r;
    while ((r = recv(m->sv[1], b, sizeof(b), 0)) < 0 && errno == EINTR)
      ;
    if (r != (ssize_t)msg_len(i))
      fail(m->name, i);
    for (size_t j = 0; j < (size_t)r; j++)
      if (b[j] != (unsigned char)(i * 31 + (long)j))
        fail(m->name, i);
  }
  m->done = m->n;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1)
    n_records = atol(argv[1]);
  struct msgs dg = {"datagram", {-1, -1}, n_records / 4, 0};
  struct msgs sp = {"seqpacket", {-1, -1}, n_records / 4, 0};
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, st) != 0 ||
      socketpair(AF_UNIX, SOCK_DGRAM, 0, dg.sv) != 0 ||
      socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp.sv) != 0) {
    perror("socketpair");
    return 1;
  }
  pthread_t t[6];
  pthread_create(&t[0], NULL, stream_writer, NULL);
  pthread_create(&t[1], NULL, stream_reader, NULL);
  pthread_create(&t[2], NULL, msg_sender, &dg);
  pthread_create(&t[3], NULL, msg_receiver, &dg);
  pthread_create(&t[4], NULL, msg_sender, &sp);
  pthread_create(&t[5], NULL, msg_receiver, &sp);
  for (int i = 0; i < 6; i++)
    pthread_join(t[i], NULL);
  printf("stream: %ld records in order, %ld acknowledgements\n", stream_done,
         stream_done / 1000);
  printf("%s: %ld messages in order\n", dg.name, dg.done);
  printf("%s: %ld messages in order\n", sp.name, sp.done);
  return 0;
}
