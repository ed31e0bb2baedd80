/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trace.c -- the trace recorder of libpmkit-trace: the __pmkit_trace_* calls
 * the pmkit-trace pass inserts (abi.h), the pool hooks of pool.c, and
 * pmkit_mark_begin/end. When PMKIT_TRACE=FILE is set at start-up, every
 * event inside a registered pool goes to a per-thread buffer that is
 * appended to FILE as one block per write() in the format of
 * include/pmkit/trace_format.h; an atexit handler writes the last buffers
 * and the END block. Without PMKIT_TRACE every call returns at once.
 *
 * Order. Every event takes its seq from one global counter with a locked
 * fetch-add. A plain store takes it before it executes, so if the store is
 * ordered before another thread's access by synchronisation, its seq is
 * smaller. Atomic accesses to PM hold one of 256 address-striped spin locks
 * from before the instruction until their record is written, so that two
 * atomics on one location are recorded in the order they took effect.
 *
 * Crash points. With PMKIT_CRASH_POINTS=stores or all (runtime/core/crash.c)
 * every store hook is a crash point before its store takes effect, whether
 * or not PMKIT_TRACE is set; otherwise the hooks pay one predictable branch
 * for it. Such a request needs instrumented code in the process: the
 * pass's module constructor registers every instrumented module with
 * __pmkit_trace_locs, and the first pool registration stops the program
 * (exit status 2) if none but this library's own did.
 *
 * This file is compiled without the trace pass: nothing here is traced.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "pmkit/abi.h"
#include "pmkit/trace_format.h"

#define BUF_SIZE (1u << 20) /* bytes of events per thread before a write */
#define MAX_BUFS 1024       /* threads that ever traced                  */

struct tbuf {
  uint32_t used;
  int pending;           /* a flush or NT store not yet ordered by a fence */
  pmkit_trace_block blk; /* written together with the events after it */
  char data[BUF_SIZE];
};
_Static_assert(offsetof(struct tbuf, data) ==
                   offsetof(struct tbuf, blk) + sizeof(pmkit_trace_block),
               "block header directly before the events");

static int trace_fd = -1;
static int active;         /* read on every call; set once at start-up */
static uint32_t arp_break; /* PMKIT_ARP_BREAK: the event it breaks, or 0 */
/* An instrumented module outside this library registered its locations. */
static _Atomic int program_registered;
static _Atomic uint64_t seq_next = 1;
static _Atomic uint64_t nevents;
static _Atomic uint64_t ndropped;
static _Atomic uint32_t ntids;
static _Atomic uint32_t npools;
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct tbuf *bufs[MAX_BUFS];
static __thread struct tbuf *tb __attribute__((tls_model("initial-exec")));

static struct {
  _Atomic int lock;
  char pad[60];
} stripes[256] __attribute__((aligned(64)));

/* Ids of strings already written (open addressing; 0 = empty). */
#define SEEN_SLOTS 65536u
static _Atomic uint32_t seen[SEEN_SLOTS];
static _Atomic uint32_t nseen;

/* The thread's call stack (abi.h): frames[i] is the call site of the call
 * at depth i, hashes[i + 1] a hash of frames[0..i], so that an event's
 * STACK id costs one mix. Deeper than PMKIT_TRACE_DEPTH, depth still
 * counts but nothing is recorded. */
static __thread uint32_t depth __attribute__((tls_model("initial-exec")));
static __thread uint32_t frames[PMKIT_TRACE_DEPTH]
    __attribute__((tls_model("initial-exec")));
static __thread uint32_t hashes[PMKIT_TRACE_DEPTH + 1]
    __attribute__((tls_model("initial-exec")));

static void write_all(const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(trace_fd, c, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      atomic_fetch_add(&ndropped, 1);
      return;
    }
    c += w;
    n -= (size_t)w;
  }
}

/* Every write to the file holds file_lock, so blocks never interleave (the
 * POOL block is written in pieces). */
static void write_block(uint32_t type, uint32_t tid, const void *payload,
                        uint64_t size) {
  pmkit_trace_block b = {type, tid, size};
  char *tmp = malloc(sizeof b + size);
  if (!tmp) {
    atomic_fetch_add(&ndropped, 1);
    return;
  }
  memcpy(tmp, &b, sizeof b);
  memcpy(tmp + sizeof b, payload, size);
  pthread_mutex_lock(&file_lock);
  write_all(tmp, sizeof b + size);
  pthread_mutex_unlock(&file_lock);
  free(tmp);
}

static void buf_flush_locked(struct tbuf *t) {
  if (!t->used)
    return;
  t->blk.size = t->used;
  write_all(&t->blk, sizeof t->blk + t->used);
  t->used = 0;
}

static void buf_flush(struct tbuf *t) {
  pthread_mutex_lock(&file_lock);
  buf_flush_locked(t);
  pthread_mutex_unlock(&file_lock);
}

static void at_exit(void) {
  if (!active)
    return;
  pthread_mutex_lock(&file_lock);
  uint32_t n = atomic_load(&ntids);
  for (uint32_t i = 0; i < n && i < MAX_BUFS; i++)
    if (bufs[i])
      buf_flush_locked(bufs[i]);
  pmkit_trace_end e = {atomic_load(&nevents), atomic_load(&ndropped)};
  pmkit_trace_block b = {PMKIT_TB_END, 0, sizeof e};
  write_all(&b, sizeof b);
  write_all(&e, sizeof e);
  active = 0;
  pthread_mutex_unlock(&file_lock);
}

static void in_child(void) {
  /* A forked child must not append to its parent's trace. */
  active = 0;
  trace_fd = -1;
}

static void trace_init(void) {
  const char *path = pmk_opt_text(PMK_OPT_TRACE);
  if (!*path)
    return;
  trace_fd =
      open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (trace_fd < 0) {
    fprintf(stderr, "pmkit: cannot write the trace PMKIT_TRACE=%s: %s\n", path,
            strerror(errno));
    _exit(2);
  }
  pmkit_trace_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, PMKIT_TRACE_MAGIC, sizeof h.magic);
  h.version = PMKIT_TRACE_VERSION;
  h.header_size = sizeof h;
  h.event_size = sizeof(pmkit_trace_event);
  h.pid = (uint64_t)getpid();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  h.start_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  h.abi_version = PMKIT_ABI_VERSION;
  write_all(&h, sizeof h);
  arp_break = pmk_opt_is(PMK_OPT_ARP_BREAK, "seqpoints")  ? PMKIT_EV_SEQPOINT
              : pmk_opt_is(PMK_OPT_ARP_BREAK, "releases") ? PMKIT_EV_RELEASE
                                                          : 0;
  atexit(at_exit);
  pthread_atfork(NULL, NULL, in_child);
  active = 1;
}

__attribute__((constructor(101))) static void trace_ctor(void) {
  pthread_once(&once, trace_init);
}

static struct tbuf *buf_new(void) {
  uint32_t tid = atomic_fetch_add(&ntids, 1);
  struct tbuf *t = calloc(1, sizeof *t);
  if (!t || tid >= MAX_BUFS) {
    fprintf(stderr, "pmkit: trace: more than %u threads; stopping the trace\n",
            MAX_BUFS);
    active = 0;
    free(t);
    return NULL;
  }
  t->blk.type = PMKIT_TB_EVENTS;
  t->blk.tid = tid;
  bufs[tid] = t;
  return t;
}

/* Room for one event and `extra` payload bytes (a multiple of 8). */
static pmkit_trace_event *reserve(struct tbuf **tp, uint64_t extra) {
  struct tbuf *t = tb;
  if (__builtin_expect(!t, 0)) {
    pthread_mutex_lock(&file_lock);
    t = tb = buf_new();
    pthread_mutex_unlock(&file_lock);
    if (!t)
      return NULL;
  }
  uint64_t need = sizeof(pmkit_trace_event) + extra;
  if (t->used + need > BUF_SIZE) {
    buf_flush(t);
    if (need > BUF_SIZE) { /* a huge memcpy: its own block */
      *tp = t;
      return NULL;
    }
  }
  *tp = t;
  pmkit_trace_event *e = (pmkit_trace_event *)(t->data + t->used);
  t->used += (uint32_t)need;
  atomic_fetch_add_explicit(&nevents, 1, memory_order_relaxed);
  return e;
}

static inline uint64_t next_seq(void) {
  return atomic_fetch_add_explicit(&seq_next, 1, memory_order_seq_cst);
}

/* With several pools open the bounding box may span DRAM between them. */
static inline int in_pools(const void *a) {
  return atomic_load_explicit(&npools, memory_order_relaxed) <= 1 ||
         pmkit_in_pool(a);
}

/* A store to a pool is about to take effect: a crash point if store points
 * are selected (PMKIT_CRASH_POINTS). */
static inline void store_point(const void *addr) {
  if (PMK_UNLIKELY(pmk_crash_stores) && in_pools(addr))
    pmk_crash_tick();
}

static uint32_t site(uint32_t loc);
static size_t put_string(char *buf, size_t cap, uint32_t id, uint16_t kind,
                         const char *text, size_t len);

static void record_at(uint64_t seq, uint8_t kind, const void *addr,
                      uint64_t arg, uint8_t size, uint16_t aux, uint32_t loc) {
  struct tbuf *t;
  pmkit_trace_event *e = reserve(&t, 0);
  if (!e)
    return;
  e->seq = seq ? seq : next_seq();
  e->addr = (uint64_t)(uintptr_t)addr;
  e->arg = arg;
  e->loc = site(loc);
  e->kind = kind;
  e->size = size;
  e->aux = aux;
}

static void record(uint8_t kind, const void *addr, uint64_t arg, uint8_t size,
                   uint16_t aux, uint32_t loc) {
  record_at(0, kind, addr, arg, size, aux, loc);
}

/* The number of the atomic access between __pmkit_trace_atomic_begin and
 * _end: taken before the access takes effect, as a plain store's is, so that
 * a load in another thread that reads what it wrote (loads are numbered
 * after they read) comes after it in the trace. Taken at _end, a release
 * store (a plain mov) could be read, and the load recorded, first. */
static __thread uint64_t atomic_seq;

void __pmkit_trace_store(void *addr, uint64_t val, uint32_t size,
                         uint32_t loc) {
  store_point(addr);
  if (!active || !in_pools(addr))
    return;
  record(PMKIT_EV_STORE, addr, val, (uint8_t)size, 0, loc);
}

void __pmkit_trace_ntstore(void *addr, uint64_t val, uint32_t size,
                           uint32_t loc) {
  store_point(addr);
  if (!active || !in_pools(addr))
    return;
  record(PMKIT_EV_NTSTORE, addr, val, (uint8_t)size, 0, loc);
  if (tb)
    tb->pending = 1;
}

void __pmkit_trace_write(void *addr, const void *src, uint64_t len,
                         uint32_t loc) {
  if (len)
    store_point(addr);
  if (!active || !len || !in_pools(addr))
    return;
  uint64_t pad = (len + 7) & ~7ull;
  struct tbuf *t;
  pmkit_trace_event *e = reserve(&t, pad);
  if (!e) {
    if (!t)
      return;
    /* Too big for a buffer: a block of its own, still in seq order. */
    char *tmp = calloc(1, sizeof(pmkit_trace_event) + pad);
    if (!tmp) {
      atomic_fetch_add(&ndropped, 1);
      return;
    }
    pmkit_trace_event *b = (pmkit_trace_event *)tmp;
    b->seq = next_seq();
    b->addr = (uint64_t)(uintptr_t)addr;
    b->arg = len;
    b->loc = site(loc);
    b->kind = PMKIT_EV_STORE;
    memcpy(b + 1, src, len);
    write_block(PMKIT_TB_EVENTS, t->blk.tid, tmp,
                sizeof(pmkit_trace_event) + pad);
    atomic_fetch_add(&nevents, 1);
    free(tmp);
    return;
  }
  e->seq = next_seq();
  e->addr = (uint64_t)(uintptr_t)addr;
  e->arg = len;
  e->loc = site(loc);
  e->kind = PMKIT_EV_STORE;
  e->size = 0;
  e->aux = 0;
  memcpy(e + 1, src, len);
  if (pad != len)
    memset((char *)(e + 1) + len, 0, pad - len);
}

void __pmkit_trace_memset(void *addr, int byte, uint64_t len, uint32_t loc) {
  if (len)
    store_point(addr);
  if (!active || !len || !in_pools(addr))
    return;
  record(PMKIT_EV_MEMSET, addr, len, 0, (uint16_t)(byte & 0xff), loc);
}

void __pmkit_trace_load(const void *addr, uint64_t val, uint32_t size,
                        uint32_t loc) {
  if (!active || !in_pools(addr))
    return;
  record(PMKIT_EV_LOAD, addr, val, (uint8_t)size, 0, loc);
}

void __pmkit_trace_read(const void *addr, uint64_t len, uint32_t loc) {
  if (!active || !in_pools(addr))
    return;
  if (len == 0) { /* a string: up to its NUL, within the pool */
    pmkit_pool *p = pmkit_pool_of(addr);
    if (!p)
      return;
    uintptr_t end = (uintptr_t)pmkit_pool_base(p) + pmkit_pool_size(p);
    len = strnlen(addr, end - (uintptr_t)addr) + 1;
  }
  record(PMKIT_EV_LOAD, addr, len, 0, 0, loc);
}

void __pmkit_trace_flush(const void *addr, uint32_t kind, uint32_t loc) {
  if (!active || !__pmkit_maybe_pm(addr) || !in_pools(addr))
    return;
  record(PMKIT_EV_FLUSH, addr, 0, 0, (uint16_t)kind, loc);
  if (kind != PMKIT_FLUSH_CLFLUSH && tb)
    tb->pending = 1;
}

void __pmkit_trace_fence(uint32_t kind, uint32_t loc) {
  if (!active)
    return;
  record(PMKIT_EV_FENCE, NULL, 0, 0, (uint16_t)kind, loc);
  if (tb)
    tb->pending = 0;
}

int32_t __pmkit_trace_atomic_begin(const void *addr) {
  if (!__pmkit_maybe_pm(addr))
    return -1;
  store_point(addr); /* an RMW or a cmpxchg's attempt; an atomic store */
  if (!active || !in_pools(addr))
    return -1;
  int32_t s = (int32_t)(((uintptr_t)addr >> 3) & 255);
  while (atomic_exchange_explicit(&stripes[s].lock, 1, memory_order_acquire))
    while (atomic_load_explicit(&stripes[s].lock, memory_order_relaxed))
      pmk_cpu_relax();
  atomic_seq = next_seq();
  return s;
}

void __pmkit_trace_atomic_end(int32_t token, void *addr, uint64_t val,
                              uint32_t size, uint32_t kind, uint32_t loc) {
  if (token < 0) {
    /* Not PM, but a locked instruction is a fence all the same: it orders
     * this thread's pending flushes and non-temporal stores. A FENCE when
     * there are some; with none it would change no crash image, and a
     * thread spinning on a DRAM lock would bury the trace's few real fences
     * among crash points a sampling reader then mostly draws. */
    if (active && kind != PMKIT_EV_STORE && tb && tb->pending) {
      record(PMKIT_EV_FENCE, NULL, 0, 0, PMKIT_FENCE_LOCKED, loc);
      tb->pending = 0;
    }
    return;
  }
  if (kind == PMKIT_EV_FENCE)
    record_at(atomic_seq, PMKIT_EV_FENCE, NULL, 0, 0, PMKIT_FENCE_LOCKED, loc);
  else
    record_at(atomic_seq, (uint8_t)kind, addr, val, (uint8_t)size, 0, loc);
  if (kind != PMKIT_EV_STORE && tb)
    tb->pending = 0;
  atomic_store_explicit(&stripes[token].lock, 0, memory_order_release);
}

void __pmkit_trace_call(const void *addr, uint32_t loc) {
  if (!active || !in_pools(addr))
    return;
  record(PMKIT_EV_CALL, addr, 0, 0, 0, loc);
}

/* pmkit::atomic's synchronisation, wherever the atomic is: the release is
 * called before its store and the acquire after its load (runtime/arp), so
 * their seqs order a release before the acquires that read it. */
void pmk_trace_sync(uint8_t kind, const void *addr, uint64_t val, uint32_t size,
                    uint32_t flags) {
  if (!active)
    return;
  /* PMKIT_ARP_BREAK, the must-fail control of the explorer's arp model:
   * "seqpoints" records no sequence point, "releases" records every
   * release as volatile, as if the program had been written without. */
  if (arp_break == PMKIT_EV_SEQPOINT && kind == PMKIT_EV_SEQPOINT)
    return;
  if (arp_break == PMKIT_EV_RELEASE && kind == PMKIT_EV_RELEASE)
    flags |= PMKIT_SYNC_VOLATILE;
  int ok = size == 1 || size == 2 || size == 4 || size == 8;
  record(kind, addr, val, (uint8_t)(ok ? size : 0), (uint16_t)flags, 0);
}

static uint32_t str_id(const char *s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 16777619u;
  }
  return h ? h : 1;
}

/* Mark an id as written; 1 if it was new, 0 if it was there, -1 if the
 * table is full (the reader then shows the id instead of the text). */
static int seen_add(uint32_t id) {
  for (uint32_t i = 0; i < SEEN_SLOTS; i++) {
    _Atomic uint32_t *s = &seen[(id + i) & (SEEN_SLOTS - 1)];
    uint32_t cur = atomic_load(s);
    if (cur == id)
      return 0;
    if (cur == 0) {
      uint32_t zero = 0;
      if (atomic_compare_exchange_strong(s, &zero, id)) {
        atomic_fetch_add_explicit(&nseen, 1, memory_order_relaxed);
        return 1;
      }
      if (zero == id)
        return 0;
    }
  }
  return -1;
}

static inline uint32_t mix(uint32_t h, uint32_t v) {
  h ^= v;
  h *= 16777619u;
  return h ^ (h >> 15);
}

uint32_t __pmkit_trace_enter(uint32_t loc) {
  uint32_t d = depth;
  if (!active)
    return d;
  if (d < PMKIT_TRACE_DEPTH) {
    frames[d] = loc;
    hashes[d + 1] = mix(hashes[d], loc);
  }
  depth = d + 1;
  return d;
}

void __pmkit_trace_leave(uint32_t d) { depth = d; }
uint32_t __pmkit_trace_depth(void) { return depth; }

/* What an event at loc records as its location: the id of the STACK record
 * of loc and the call sites around it, written the first time it is seen;
 * loc itself outside any call, deeper than the recorder follows, or once
 * the table of written ids is three quarters full (ids of stacks must not
 * crowd out the locations). */
static uint32_t site(uint32_t loc) {
  uint32_t d = depth;
  if (!d || d > PMKIT_TRACE_DEPTH)
    return loc;
  uint32_t id = mix(hashes[d] ^ 0x5bd1e995u, loc);
  id = id ? id : 1;
  /* Most events repeat a stack already written: one probe finds it. */
  if (atomic_load_explicit(&seen[id & (SEEN_SLOTS - 1)],
                           memory_order_relaxed) == id)
    return id;
  if (atomic_load_explicit(&nseen, memory_order_relaxed) > SEEN_SLOTS / 4 * 3)
    return loc;
  int fresh = seen_add(id);
  if (fresh < 0)
    return loc;
  if (fresh) {
    uint32_t ids[1 + PMKIT_TRACE_FRAMES], n = 0;
    ids[n++] = loc;
    /* Cut: the last call sites that fit, then 0 for the rest. */
    uint32_t keep = d <= PMKIT_TRACE_FRAMES ? d : PMKIT_TRACE_FRAMES - 1;
    for (uint32_t i = d; i-- > d - keep;)
      ids[n++] = frames[i];
    if (keep < d)
      ids[n++] = 0;
    char buf[sizeof(pmkit_trace_string) + sizeof ids + 8];
    size_t w = put_string(buf, sizeof buf, id, PMKIT_STR_STACK,
                          (const char *)ids, n * sizeof ids[0]);
    write_block(PMKIT_TB_STRING, 0, buf, w);
  }
  return id;
}

/* Appends one STRING record to buf (capacity cap); returns bytes used. */
static size_t put_string(char *buf, size_t cap, uint32_t id, uint16_t kind,
                         const char *text, size_t len) {
  if (len > 4000)
    len = 4000;
  size_t need = sizeof(pmkit_trace_string) + ((len + 7) & ~(size_t)7);
  if (need > cap)
    return 0;
  pmkit_trace_string s = {id, kind, (uint16_t)len};
  memcpy(buf, &s, sizeof s);
  memcpy(buf + sizeof s, text, len);
  memset(buf + sizeof s + len, 0, need - sizeof s - len);
  return need;
}

/* Whether code address `a` lies outside this library. */
static int foreign(const void *a) {
  Dl_info self, caller;
  if (!dladdr((const void *)__pmkit_trace_locs, &self) || !dladdr(a, &caller))
    return 1; /* cannot tell: take it for the program's */
  return self.dli_fbase != caller.dli_fbase;
}

void __pmkit_trace_locs(const struct __pmkit_trace_loc *locs, uint32_t n) {
  if (!atomic_load(&program_registered) &&
      foreign(__builtin_extract_return_addr(__builtin_return_address(0))))
    atomic_store(&program_registered, 1);
  pthread_once(&once, trace_init);
  if (!active)
    return;
  size_t cap = 1 << 16, used = 0;
  char *buf = malloc(cap);
  if (!buf)
    return;
  for (uint32_t i = 0; i < n; i++) {
    if (seen_add(locs[i].id) <= 0)
      continue;
    size_t len = strlen(locs[i].text);
    size_t w = put_string(buf + used, cap - used, locs[i].id, PMKIT_STR_LOC,
                          locs[i].text, len);
    if (!w) {
      write_block(PMKIT_TB_STRING, 0, buf, used);
      used = 0;
      w = put_string(buf, cap, locs[i].id, PMKIT_STR_LOC, locs[i].text, len);
    }
    used += w;
  }
  if (used)
    write_block(PMKIT_TB_STRING, 0, buf, used);
  free(buf);
}

static void mark(uint8_t kind, const char *name) {
  if (!active || !name)
    return;
  size_t len = strlen(name);
  uint32_t id = str_id(name, len);
  if (seen_add(id) > 0) {
    char buf[4096 + 16];
    size_t w = put_string(buf, sizeof buf, id, PMKIT_STR_MARK, name, len);
    write_block(PMKIT_TB_STRING, 0, buf, w);
  }
  record(kind, NULL, id, 0, 0, 0);
}

void pmkit_mark_begin(const char *name) { mark(PMKIT_EV_MARK_BEGIN, name); }
void pmkit_mark_end(const char *name) { mark(PMKIT_EV_MARK_END, name); }
int pmkit_tracing(void) { return active; }

static int page_zero(const uint64_t *w) {
  for (unsigned i = 0; i < PMKIT_TRACE_PAGE / 8; i++)
    if (w[i])
      return 0;
  return 1;
}

static uint64_t pow_prime(uint64_t n) { /* FNV prime ^ n, mod 2^64 */
  uint64_t r = 1, b = 0x100000001b3ull;
  for (; n; n >>= 1, b *= b)
    if (n & 1)
      r *= b;
  return r;
}

/* pmkit_trace_checksum of the pool, reading only the pages in its file's
 * data extents (SEEK_DATA/SEEK_HOLE): a zero word only multiplies the FNV
 * state by the prime, so a hole of n words is one multiplication by
 * prime^n. A large, mostly empty pool costs what its data costs. Marks the
 * non-zero pages in nonzero[] if given and returns their count in *nz. */
static uint64_t pool_scan(pmkit_pool *p, uint8_t *nonzero, uint64_t *nz) {
  const uint64_t words = PMKIT_TRACE_PAGE / 8, page_pow = pow_prime(words);
  const uint64_t *img = (const uint64_t *)p->base;
  uint64_t h = 0xcbf29ce484222325ull, npages = p->size / PMKIT_TRACE_PAGE;
  uint64_t i = 0, count = 0;
  while (i < npages) {
    uint64_t data = i, hole = npages; /* the next data extent, in pages */
    if (p->fd >= 0) {
      off_t d = lseek(p->fd, (off_t)(i * PMKIT_TRACE_PAGE), SEEK_DATA);
      if (d < 0 && errno == ENXIO) {
        data = npages;
      } else if (d >= 0) {
        data = (uint64_t)d / PMKIT_TRACE_PAGE;
        off_t e = lseek(p->fd, d, SEEK_HOLE);
        if (e >= 0)
          hole = ((uint64_t)e + PMKIT_TRACE_PAGE - 1) / PMKIT_TRACE_PAGE;
      } /* else: no extent information; read everything */
      if (data > npages)
        data = npages;
      if (hole > npages || hole <= data)
        hole = npages;
    }
    h *= pow_prime((data - i) * words);
    for (i = data; i < hole; i++) {
      const uint64_t *pg = img + i * words;
      if (page_zero(pg)) {
        h *= page_pow;
        continue;
      }
      for (uint64_t w = 0; w < words; w++) {
        h ^= pg[w];
        h *= 0x100000001b3ull;
      }
      if (nonzero)
        nonzero[i] = 1;
      count++;
    }
  }
  if (nz)
    *nz = count;
  return h;
}

/* The POOL block with the initial image, and its POOL_OPEN event. Called
 * with the pool registered and mapped, before anything writes to it. */
void pmk_trace_pool_open(pmkit_pool *p) {
  /* Every module's constructor has run by now, and no store to the pool
   * has: the moment to refuse store points nothing would count. */
  if (pmk_crash_stores && !atomic_load(&program_registered))
    pmk_crash_need_stores();
  atomic_fetch_add(&npools, 1);
  if (!active)
    return;
  pthread_mutex_lock(&file_lock);
  static uint32_t next_id;
  const uint64_t *img = (const uint64_t *)p->base;
  uint64_t npages = p->size / PMKIT_TRACE_PAGE, nz = 0;
  uint8_t *nonzero = calloc(npages ? npages : 1, 1);
  if (!nonzero) {
    pthread_mutex_unlock(&file_lock);
    fprintf(stderr, "pmkit: trace: out of memory; stopping the trace\n");
    active = 0;
    return;
  }
  uint64_t sum = pool_scan(p, nonzero, &nz);
  size_t plen = strlen(p->path);
  uint64_t ppad = (plen + 7) & ~7ull;
  pmkit_trace_pool hdr = {
      next_id++, (uint32_t)plen, next_seq(), p->base, p->size, sum, nz};
  uint64_t size = sizeof hdr + ppad + nz * (8 + PMKIT_TRACE_PAGE);
  pmkit_trace_block b = {PMKIT_TB_POOL, 0, size};
  /* Streamed in pieces under file_lock: no other block can interleave,
   * because every block write holds it or is a single write(). */
  char pathbuf[4096 + 8] = {0};
  memcpy(pathbuf, p->path, plen < 4096 ? plen : 4096);
  write_all(&b, sizeof b);
  write_all(&hdr, sizeof hdr);
  write_all(pathbuf, ppad);
  for (uint64_t i = 0; i < npages; i++) {
    if (!nonzero[i])
      continue;
    write_all(&i, sizeof i);
    write_all(img + i * (PMKIT_TRACE_PAGE / 8), PMKIT_TRACE_PAGE);
  }
  pthread_mutex_unlock(&file_lock);
  free(nonzero);
  struct tbuf *t;
  pmkit_trace_event *e = reserve(&t, 0);
  if (e) {
    *e = (pmkit_trace_event){
        hdr.seq, p->base, hdr.pool_id, 0, PMKIT_EV_POOL_OPEN, 0, 0};
  }
}

void pmk_trace_pool_close(pmkit_pool *p) {
  if (active)
    record(PMKIT_EV_POOL_CLOSE, (void *)p->base, pool_scan(p, NULL, NULL), 0, 0,
           0);
  atomic_fetch_sub(&npools, 1);
}
