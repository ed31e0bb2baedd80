/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool.c -- persistent pools: a file mapped MAP_SHARED at the fixed address
 * recorded in its header, so raw pointers stay valid across runs. Creating
 * builds the pool under a temporary name and links it into place only when
 * complete; opening validates the header before mapping anything, takes an
 * exclusive flock, maps with MAP_FIXED_NOREPLACE so an occupied range is an
 * error rather than a silent clobber, bumps the run generation (which frees
 * PM locks of a crashed run) and rebuilds the allocator state. Also the
 * registry of open pools behind pmkit_in_pool(). Entry points:
 * pmkit_pool_create, pmkit_pool_open, pmkit_pool_close.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

const uint32_t __pmkit_abi_version = PMKIT_ABI_VERSION;
uintptr_t __pmkit_pool_lo = UINTPTR_MAX;
uintptr_t __pmkit_pool_hi = 0;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pmkit_pool *_Atomic reg[PMK_MAX_POOLS];
static _Atomic uint64_t serials;

/* Automatic base addresses: 1 GiB aligned slots in [32 TiB, 80 TiB), above
 * the shadow memory of AddressSanitizer and below the usual mmap area. */
#define AUTO_BASE_LO 0x200000000000ull
#define AUTO_BASE_SLOTS 49152ull
#define AUTO_BASE_ALIGN (1ull << 30)

uint64_t pmk_next_serial(void) { return atomic_fetch_add(&serials, 1) + 1; }

uint64_t pmk_fnv1a(const void *p, size_t n) {
  const unsigned char *s = p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) {
    h ^= s[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static uint64_t hdr_sum(const struct pmk_hdr *h) {
  return pmk_fnv1a(h, offsetof(struct pmk_hdr, checksum));
}

static void reg_bounds(void) {
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (unsigned i = 0; i < PMK_MAX_POOLS; i++) {
    pmkit_pool *p = reg[i];
    if (!p)
      continue;
    if (p->base < lo)
      lo = p->base;
    if (p->base + p->size > hi)
      hi = p->base + p->size;
  }
  __atomic_store_n(&__pmkit_pool_lo, lo, __ATOMIC_RELEASE);
  __atomic_store_n(&__pmkit_pool_hi, hi, __ATOMIC_RELEASE);
}

/* Claim a registry slot; fails if full or the range overlaps an open pool. */
static int reg_add(pmkit_pool *p) {
  pthread_mutex_lock(&reg_lock);
  int slot = -1;
  for (unsigned i = 0; i < PMK_MAX_POOLS; i++) {
    pmkit_pool *q = reg[i];
    if (!q) {
      if (slot < 0)
        slot = (int)i;
      continue;
    }
    if (p->base < q->base + q->size && q->base < p->base + p->size) {
      pthread_mutex_unlock(&reg_lock);
      return pmk_err(
          PMKIT_E_ADDRINUSE, "address range %#lx-%#lx is used by open pool %s",
          (unsigned long)p->base, (unsigned long)(p->base + p->size), q->path);
    }
  }
  if (slot < 0) {
    pthread_mutex_unlock(&reg_lock);
    return pmk_err(PMKIT_E_NOSPC, "%u pools are already open", PMK_MAX_POOLS);
  }
  p->id = (unsigned)slot;
  p->serial = pmk_next_serial();
  reg[slot] = p;
  reg_bounds();
  pthread_mutex_unlock(&reg_lock);
  return 0;
}

pmkit_pool *pmk_reg_lookup(unsigned id, uint64_t serial) {
  pthread_mutex_lock(&reg_lock);
  pmkit_pool *p = id < PMK_MAX_POOLS ? reg[id] : NULL;
  if (p && p->serial != serial)
    p = NULL;
  pthread_mutex_unlock(&reg_lock);
  return p;
}

pmkit_pool *pmk_only_pool(void) {
  pmkit_pool *only = NULL;
  for (unsigned i = 0; i < PMK_MAX_POOLS; i++) {
    pmkit_pool *p = atomic_load_explicit(&reg[i], memory_order_acquire);
    if (p && only)
      return NULL;
    if (p)
      only = p;
  }
  return only;
}

static void reg_del(pmkit_pool *p) {
  pthread_mutex_lock(&reg_lock);
  if (reg[p->id] == p)
    reg[p->id] = NULL;
  reg_bounds();
  pthread_mutex_unlock(&reg_lock);
}

pmkit_pool *pmkit_pool_of(const void *addr) {
  uintptr_t a = (uintptr_t)addr;
  if (a < __atomic_load_n(&__pmkit_pool_lo, __ATOMIC_RELAXED) ||
      a >= __atomic_load_n(&__pmkit_pool_hi, __ATOMIC_RELAXED))
    return NULL;
  for (unsigned i = 0; i < PMK_MAX_POOLS; i++) {
    pmkit_pool *p = atomic_load_explicit(&reg[i], memory_order_acquire);
    if (p && a >= p->base && a < p->base + p->size)
      return p;
  }
  return NULL;
}

int pmkit_in_pool(const void *addr) { return pmkit_pool_of(addr) != NULL; }

/* Map `size` bytes of fd at exactly `base`, never over an existing mapping. */
static int map_fixed(int fd, uintptr_t base, size_t size, int prot, int share,
                     void **out) {
  void *m = mmap((void *)base, size, prot, share | MAP_FIXED_NOREPLACE, fd, 0);
  if (m == MAP_FAILED) {
    if (errno == EEXIST)
      return pmk_err(PMKIT_E_ADDRINUSE,
                     "address range %#lx-%#lx is already mapped in this "
                     "process",
                     (unsigned long)base, (unsigned long)(base + size));
    return pmk_err(PMKIT_E_IO, "mmap at %#lx: %s", (unsigned long)base,
                   strerror(errno));
  }
  if ((uintptr_t)m != base) { /* a kernel without MAP_FIXED_NOREPLACE */
    munmap(m, size);
    return pmk_err(PMKIT_E_ADDRINUSE, "could not map at %#lx",
                   (unsigned long)base);
  }
  *out = m;
  return 0;
}

static void layout_geometry(size_t size, uint64_t *table_off,
                            uint64_t *heap_off, uint64_t *nchunks) {
  uint64_t t = PMK_CTX_OFF + (uint64_t)PMKIT_MAX_THREADS * PMK_CTX_SIZE;
  uint64_t n = size / PMK_CHUNK, h;
  /* The table shrinks the heap it describes: the most chunks that fit
   * together with their table (only ever decreasing, so it terminates). */
  for (;;) {
    h = (t + n * 4 + PMK_CHUNK - 1) / PMK_CHUNK * PMK_CHUNK;
    if (h + n * PMK_CHUNK <= size || n == 0)
      break;
    n--;
  }
  *table_off = t;
  *heap_off = h;
  *nchunks = n;
}

/* Validate a header read from a pool of `avail` bytes (got: bytes of the
 * header actually read). `name` is used in messages. */
static int hdr_check(const struct pmk_hdr *h, size_t got, uint64_t avail,
                     const char *name) {
  if (got >= sizeof h->magic && memcmp(h->magic, PMK_MAGIC, sizeof h->magic))
    return pmk_err(PMKIT_E_FOREIGN, "%s is not a pmkit pool (bad magic)", name);
  if (got < sizeof *h)
    return pmk_err(PMKIT_E_TRUNCATED,
                   "%s is truncated: %llu bytes, shorter than a pool header",
                   name, (unsigned long long)avail);
  if (h->layout_version != PMKIT_LAYOUT_VERSION)
    return pmk_err(PMKIT_E_VERSION,
                   "%s has layout version %u; this pmkit reads version %u",
                   name, h->layout_version, PMKIT_LAYOUT_VERSION);
  if (h->checksum != hdr_sum(h))
    return pmk_err(PMKIT_E_CORRUPT, "%s: header checksum mismatch", name);
  uint64_t t_off, h_off, nch;
  layout_geometry(h->size, &t_off, &h_off, &nch);
  if (h->hdr_size != sizeof *h || h->size < PMKIT_POOL_MIN_SIZE ||
      h->size % PMK_CHUNK || h->base % PMK_CHUNK || h->base == 0 ||
      h->ctx_off != PMK_CTX_OFF || h->nctx != PMKIT_MAX_THREADS ||
      h->ctx_size != PMK_CTX_SIZE || h->table_off != t_off ||
      h->heap_off != h_off || h->nchunks != nch || h->chunk_size != PMK_CHUNK)
    return pmk_err(PMKIT_E_CORRUPT, "%s: header geometry is inconsistent",
                   name);
  if (avail < h->size)
    return pmk_err(PMKIT_E_TRUNCATED,
                   "%s is truncated: %llu bytes, header says %llu", name,
                   (unsigned long long)avail, (unsigned long long)h->size);
  if (avail != UINT64_MAX && avail > h->size)
    return pmk_err(PMKIT_E_CORRUPT,
                   "%s has %llu bytes after the pool's end (the header says "
                   "%llu bytes)",
                   name, (unsigned long long)(avail - h->size),
                   (unsigned long long)h->size);
  return 0;
}

/* The state page's run generation, before open bumps it. */
static int gen_check(const pmkit_pool *p, const char *name) {
  if (pmk_gen_ok(p->st->run_gen))
    return 0;
  return pmk_err(PMKIT_E_CORRUPT,
                 "%s: the state page's run generation (%llu) is out of range",
                 name, (unsigned long long)p->st->run_gen);
}

static void attach(pmkit_pool *p, void *m) {
  p->base = (uintptr_t)m;
  p->hdr = m;
  p->size = p->hdr->size;
  p->st = (struct pmk_state *)((char *)m + PMK_STATE_OFF);
  p->ctxs = (struct pmk_ctx_pm *)((char *)m + p->hdr->ctx_off);
  p->table = (uint32_t *)((char *)m + p->hdr->table_off);
  p->heap = p->base + p->hdr->heap_off;
  p->nchunks = (uint32_t)p->hdr->nchunks;
  for (unsigned i = 0; i < PMKIT_MAX_THREADS; i++) {
    p->ctx[i].pool = p;
    p->ctx[i].pm = &p->ctxs[i];
    p->ctx[i].id = i;
  }
  pthread_mutex_init(&p->root_lock, NULL);
}

static void pool_free(pmkit_pool *p) {
  if (!p)
    return;
  if (p->fd >= 0)
    close(p->fd);
  free(p->path);
  free(p);
}

static pmkit_pool *pool_new(const char *path, int fd) {
  pmkit_pool *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->fd = fd;
  p->path = strdup(path);
  if (!p->path) {
    free(p);
    return NULL;
  }
  return p;
}

int pmkit_pool_create(const char *path, size_t size,
                      const pmkit_pool_opts *opts, pmkit_pool **out) {
  pmk_init();
  pmk_clear_err();
  if (!path || !*path || !out)
    return pmk_err(PMKIT_E_INVAL, "pmkit_pool_create: %s",
                   path && !*path ? "empty path" : "NULL argument");
  *out = NULL;
  const char *layout = opts && opts->layout ? opts->layout : "";
  if (strlen(layout) >= PMKIT_LAYOUT_MAX)
    return pmk_err(PMKIT_E_INVAL, "layout name longer than %d bytes",
                   PMKIT_LAYOUT_MAX - 1);
  if (size > ((size_t)1 << 46))
    return pmk_err(PMKIT_E_INVAL, "pool size %zu is above the 64 TiB limit",
                   size);
  if (size < PMKIT_POOL_MIN_SIZE)
    return pmk_err(PMKIT_E_TOOSMALL,
                   "pool size %zu is below the minimum of %u bytes", size,
                   PMKIT_POOL_MIN_SIZE);
  size = (size + PMK_CHUNK - 1) / PMK_CHUNK * PMK_CHUNK;
  uintptr_t want = opts ? opts->base : 0;
  if (want % PMK_CHUNK)
    return pmk_err(PMKIT_E_INVAL, "base address %#lx is not 64 KiB aligned",
                   (unsigned long)want);
  if (access(path, F_OK) == 0)
    return pmk_err(PMKIT_E_EXIST, "%s already exists", path);

  /* The new pool is an unnamed file in the target's directory, given its
   * name only once complete: a crash or kill before that leaves nothing.
   * Where the file system has no unnamed files, a named one
   * (PATH.pmkit-new.PID), removed on failure. */
  char tmp[4096], dir[4096];
  if (snprintf(tmp, sizeof tmp, "%s.pmkit-new.%d", path, (int)getpid()) >=
      (int)sizeof tmp)
    return pmk_err(PMKIT_E_INVAL, "path too long");
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else
    slash[slash == dir] = '\0'; /* "/x" -> "/" */
  int named = 0;
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    named = 1;
    fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  }
  if (fd < 0)
    return pmk_err(errno == ENOENT ? PMKIT_E_NOENT : PMKIT_E_IO,
                   "cannot create %s: %s", path, strerror(errno));
  pmkit_pool *p = pool_new(path, fd);
  int r;
  void *m = NULL;
  if (!p) {
    r = pmk_err(PMKIT_E_NOMEM, "out of memory");
    goto fail;
  }
  flock(fd, LOCK_EX | LOCK_NB); /* nobody else can have the new file */
  if ((r = posix_fallocate(fd, 0, (off_t)size)) != 0) {
    r = pmk_err(PMKIT_E_IO, "cannot allocate %zu bytes for %s: %s", size, path,
                strerror(r));
    goto fail;
  }
  uint8_t uuid[16];
  if (getrandom(uuid, sizeof uuid, 0) != sizeof uuid) {
    r = pmk_err(PMKIT_E_IO, "getrandom: %s", strerror(errno));
    goto fail;
  }
  uuid[6] = (uuid[6] & 0x0f) | 0x40; /* RFC 4122 version 4 */
  uuid[8] = (uuid[8] & 0x3f) | 0x80;
  if (want) {
    if ((r = map_fixed(fd, want, size, PROT_READ | PROT_WRITE, MAP_SHARED, &m)))
      goto fail;
  } else {
    uint64_t h = pmk_fnv1a(uuid, sizeof uuid);
    r = PMKIT_E_ADDRINUSE;
    for (unsigned k = 0; k < 64 && r; k++) {
      uintptr_t b = AUTO_BASE_LO +
                    ((h + k * 7919ull) % AUTO_BASE_SLOTS) * AUTO_BASE_ALIGN;
      r = map_fixed(fd, b, size, PROT_READ | PROT_WRITE, MAP_SHARED, &m);
      if (r && r != PMKIT_E_ADDRINUSE)
        goto fail;
    }
    if (r)
      goto fail;
  }

  /* The file is zero-filled: every context idle, every chunk free. Only the
   * header and state need writing; the header's checksum goes last. */
  struct pmk_hdr *h = m;
  struct pmk_state *st = (struct pmk_state *)((char *)m + PMK_STATE_OFF);
  st->run_gen = 1;
  st->root_check = pmk_root_word(0, 0);
  pmkit_flush(st, sizeof *st);
  memcpy(h->magic, PMK_MAGIC, sizeof h->magic);
  h->layout_version = PMKIT_LAYOUT_VERSION;
  h->hdr_size = sizeof *h;
  h->size = size;
  h->base = (uint64_t)(uintptr_t)m;
  memcpy(h->uuid, uuid, sizeof uuid);
  strncpy(h->layout, layout, sizeof h->layout - 1);
  h->ctx_off = PMK_CTX_OFF;
  h->nctx = PMKIT_MAX_THREADS;
  h->ctx_size = PMK_CTX_SIZE;
  layout_geometry(size, &h->table_off, &h->heap_off, &h->nchunks);
  h->chunk_size = PMK_CHUNK;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  h->created_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  /* No crash points here: until the link below the pool does not exist. */
  pmkit_flush(h, sizeof *h);
  pmk_fence();
  h->checksum = hdr_sum(h);
  pmkit_flush(&h->checksum, sizeof h->checksum);
  pmk_fence();
  if (fsync(fd) != 0) {
    r = pmk_err(PMKIT_E_IO, "fsync %s: %s", path, strerror(errno));
    goto fail;
  }
  char self[64];
  snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
  if (named ? link(tmp, path) != 0
            : linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW) != 0) {
    r = errno == EEXIST ? pmk_err(PMKIT_E_EXIST, "%s already exists", path)
                        : pmk_err(PMKIT_E_IO, "cannot create %s: %s", path,
                                  strerror(errno));
    goto fail;
  }
  if (named)
    unlink(tmp);
  attach(p, m);
  p->gen = st->run_gen;
  if (!(r = reg_add(p)))
    pmk_trace_pool_open(p);
  if (r || (r = pmk_heap_open(p, 1))) {
    if (!r)
      reg_del(p);
    munmap(m, size);
    pool_free(p);
    return r;
  }
  *out = p;
  return 0;
fail:
  if (m)
    munmap(m, size);
  if (named)
    unlink(tmp);
  if (p)
    pool_free(p);
  else
    close(fd);
  return r;
}

/* PMKIT_POOL_VERIFY=1 or =offsets: the flags it adds to every open. */
static unsigned verify_env(void) {
  if (pmk_opt_is(PMK_OPT_POOL_VERIFY, "1"))
    return PMKIT_POOL_VERIFY;
  if (pmk_opt_is(PMK_OPT_POOL_VERIFY, "offsets"))
    return PMKIT_POOL_VERIFY | PMKIT_POOL_VERIFY_OFFSETS;
  return 0;
}

/* PMKIT_POOL_VERIFY: the full check, suspects refused (before open writes). */
static int verify(pmkit_pool *p, unsigned flags) {
  pmkit_check_report rep;
  int r = pmkit_pool_check_report(
      p, flags & PMKIT_POOL_VERIFY_OFFSETS ? PMKIT_GC_OFFSETS : 0, &rep);
  if (r || !rep.suspects)
    return r;
  char from[48] = "a root";
  if (rep.suspect_from)
    snprintf(from, sizeof from, "the block at offset %#" PRIx64,
             rep.suspect_from);
  return pmk_err(PMKIT_E_CORRUPT,
                 "%s: %" PRIu64 " reachable word%s to %s, "
                 "the first to offset %#" PRIx64 " from %s: a lost allocation "
                 "bit, or a pointer the program kept to a block it freed "
                 "('pmkit pool check --repair' marks every reachable block "
                 "allocated)",
                 p->path, rep.suspects,
                 rep.suspects == 1 ? " points" : "s point",
                 rep.suspects == 1 ? "a free block" : "free blocks",
                 rep.suspect_off, from);
}

int pmkit_pool_open(const char *path, const pmkit_pool_opts *opts,
                    pmkit_pool **out) {
  pmk_init();
  pmk_clear_err();
  if (!path || !*path || !out)
    return pmk_err(PMKIT_E_INVAL, "pmkit_pool_open: %s",
                   path && !*path ? "empty path" : "NULL argument");
  *out = NULL;
  unsigned flags = (opts ? opts->flags : 0) | verify_env();
  int inspect = (flags & PMKIT_POOL_INSPECT) != 0;
  /* O_NONBLOCK: opening a FIFO must not wait for a writer; refused below
   * (it has no effect on a regular file). */
  int fd = open(path, (inspect ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return pmk_err(errno == ENOENT ? PMKIT_E_NOENT : PMKIT_E_IO,
                   "cannot open %s: %s", path, strerror(errno));
  pmkit_pool *p = pool_new(path, fd);
  if (!p) {
    close(fd);
    return pmk_err(PMKIT_E_NOMEM, "out of memory");
  }
  p->flags = flags;
  int r;
  void *m = NULL;
  if (flock(fd, (inspect ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    r = errno == EWOULDBLOCK
            ? pmk_err(PMKIT_E_BUSY,
                      "%s is already open (by this or another "
                      "process)",
                      path)
            : pmk_err(PMKIT_E_IO, "flock %s: %s", path, strerror(errno));
    goto fail;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    r = pmk_err(PMKIT_E_IO, "fstat %s: %s", path, strerror(errno));
    goto fail;
  }
  if (!S_ISREG(sb.st_mode)) {
    r = pmk_err(PMKIT_E_FOREIGN, "%s is not a regular file", path);
    goto fail;
  }
  struct pmk_hdr h;
  memset(&h, 0, sizeof h);
  ssize_t got = pread(fd, &h, sizeof h, 0);
  if (got < 0) {
    r = pmk_err(PMKIT_E_IO, "read %s: %s", path, strerror(errno));
    goto fail;
  }
  if ((r = hdr_check(&h, (size_t)got, (uint64_t)sb.st_size, path)))
    goto fail;
  const char *want = opts && opts->layout ? opts->layout : "";
  if (*want && strncmp(want, h.layout, sizeof h.layout) != 0) {
    r = pmk_err(PMKIT_E_FOREIGN,
                "%s has layout \"%.*s\", the program expects \"%s\"", path,
                (int)sizeof h.layout, h.layout, want);
    goto fail;
  }
  p->base = h.base;
  p->size = h.size;
  if ((r = reg_add(p)))
    goto fail;
  if ((r = map_fixed(fd, h.base, h.size,
                     inspect ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED,
                     &m))) {
    reg_del(p);
    goto fail;
  }
  attach(p, m);
  if (memcmp(p->hdr, &h, sizeof h) != 0) { /* changed under our feet */
    r = pmk_err(PMKIT_E_CORRUPT, "%s changed while being opened", path);
    reg_del(p);
    goto fail;
  }
  if ((r = gen_check(p, path))) {
    reg_del(p);
    goto fail;
  }
  if ((flags & PMKIT_POOL_VERIFY) && (r = verify(p, flags))) {
    reg_del(p);
    goto fail;
  }
  pmk_trace_pool_open(p);
  /* Validate (and finish interrupted allocator work), then bump the run
   * generation: a pool refused is left as it was. */
  if ((r = pmk_heap_open(p, !inspect))) {
    pmk_err_wrap(r, path, ": ", ""); /* name the pool */
    reg_del(p);
    goto fail;
  }
  if (!inspect) {
    pmk_store64(&p->st->run_gen, p->st->run_gen + 1);
    pmkit_fence();
  }
  p->gen = p->st->run_gen;
  *out = p;
  return 0;
fail:
  if (m)
    munmap(m, h.size);
  pool_free(p);
  return r;
}

int pmkit_pool_attach(void *base, pmkit_pool **out) {
  pmk_init();
  pmk_clear_err();
  if (!base || !out)
    return pmk_err(PMKIT_E_INVAL, "pmkit_pool_attach: NULL argument");
  *out = NULL;
  char name[64];
  snprintf(name, sizeof name, "the image at %p", base);
  const struct pmk_hdr *h = base;
  int r;
  if ((r = hdr_check(h, sizeof *h, UINT64_MAX, name)))
    return r;
  if (h->base != (uint64_t)(uintptr_t)base)
    return pmk_err(PMKIT_E_INVAL, "%s belongs at %#llx", name,
                   (unsigned long long)h->base);
  pmkit_pool *p = pool_new(name, -1);
  if (!p)
    return pmk_err(PMKIT_E_NOMEM, "out of memory");
  p->flags = PMK_POOL_ATTACHED;
  p->base = h->base;
  p->size = h->size;
  if ((r = reg_add(p))) {
    pool_free(p);
    return r;
  }
  attach(p, base);
  if ((r = gen_check(p, name)) || (r = pmk_heap_open(p, 1))) {
    reg_del(p);
    pool_free(p);
    return r;
  }
  pmk_store64(&p->st->run_gen, p->st->run_gen + 1);
  pmkit_fence();
  p->gen = p->st->run_gen;
  *out = p;
  return 0;
}

int pmkit_pool_close(pmkit_pool *p) {
  if (!p)
    return pmk_err(PMKIT_E_INVAL, "pmkit_pool_close: NULL pool");
  struct pmk_tc *tc = pmk_tcs[p->id];
  if (tc && tc->serial == p->serial) {
    pmk_heap_thread_exit(p, tc);
    tc->serial = 0;
  }
  if (!(p->flags & PMKIT_POOL_INSPECT))
    pmk_fence();
  pmk_trace_pool_close(p);
  reg_del(p);
  pmk_heap_close(p);
  if (!(p->flags & PMK_POOL_ATTACHED))
    munmap((void *)p->base, p->size);
  pool_free(p); /* closing the descriptor drops the flock */
  return 0;
}

void *pmkit_pool_base(const pmkit_pool *p) {
  return p ? (void *)p->base : NULL;
}
size_t pmkit_pool_size(const pmkit_pool *p) { return p ? p->size : 0; }
uint64_t pmkit_pool_generation(const pmkit_pool *p) { return p ? p->gen : 0; }

uint64_t pmkit_off(const pmkit_pool *p, const void *ptr) {
  return ptr ? (uint64_t)((uintptr_t)ptr - p->base) : 0;
}
void *pmkit_ptr(const pmkit_pool *p, uint64_t off) {
  return off ? (void *)(p->base + off) : NULL;
}

int pmkit_root(pmkit_pool *p, size_t size, void **out) {
  pmk_clear_err();
  if (!p || !out || size == 0)
    return pmk_err(PMKIT_E_INVAL, "pmkit_root: bad argument");
  pthread_mutex_lock(&p->root_lock);
  int r = 0;
  if ((r = pmk_root_check(p)) != 0) {
    /* root fields the state page cannot vouch for (a zeroed offset would
     * otherwise make a second root): refuse them */
  } else if (p->st->root_off) {
    if (p->st->root_size < size)
      r = pmk_err(PMKIT_E_INVAL, "root object is %llu bytes; %zu requested",
                  (unsigned long long)p->st->root_size, size);
    else
      *out = pmk_at(p, p->st->root_off);
  } else if (p->flags & PMKIT_POOL_INSPECT) {
    r = pmk_err(PMKIT_E_STATE, "pool has no root object");
  } else {
    void *obj;
    if ((r = pmkit_zalloc(p, size, &obj)) == 0) {
      pmk_fence(); /* the object (and its allocation) before the commit */
      pmk_store64(&p->st->root_size, size);
      pmk_fence();
      pmk_store64(&p->st->root_off, pmkit_off(p, obj)); /* commit */
      pmk_fence();
      pmk_store64(&p->st->root_check,
                  pmk_root_word(pmkit_off(p, obj), size)); /* see internal.h */
      pmk_fence();
      *out = obj;
    }
  }
  pthread_mutex_unlock(&p->root_lock);
  return r;
}

int pmkit_pool_stat(pmkit_pool *p, pmkit_pool_info *info) {
  pmk_clear_err();
  if (!p || !info)
    return pmk_err(PMKIT_E_INVAL, "pmkit_pool_stat: NULL argument");
  memset(info, 0, sizeof *info);
  info->layout_version = p->hdr->layout_version;
  memcpy(info->uuid, p->hdr->uuid, sizeof info->uuid);
  memcpy(info->layout, p->hdr->layout, sizeof info->layout);
  info->layout[PMKIT_LAYOUT_MAX - 1] = '\0';
  info->base = p->base;
  info->size = p->size;
  info->generation = p->st->run_gen;
  info->heap_off = p->hdr->heap_off;
  info->chunk_size = PMK_CHUNK;
  info->nchunks = p->nchunks;
  info->root_off = p->st->root_off;
  info->root_size = p->st->root_size;
  info->nthreads = PMKIT_MAX_THREADS;
  for (unsigned i = 0; i < PMKIT_MAX_THREADS; i++)
    info->threads_busy += pmk_ctx_state(&p->ctxs[i]) != PMK_CTX_IDLE;
  if (!(p->flags & PMKIT_POOL_INSPECT))
    pmk_tc_unreserve(p); /* count the caller's reserved blocks as free */
  pmkit_pool_info tmp;
  int r = pmk_heap_check(p, &tmp, NULL, 0);
  info->blocks_used = tmp.blocks_used;
  info->bytes_used = tmp.bytes_used;
  info->chunks_free = tmp.chunks_free;
  info->chunks_small = tmp.chunks_small;
  info->chunks_large = tmp.chunks_large;
  return r;
}

int pmkit_pool_check(pmkit_pool *p) {
  pmk_clear_err();
  return pmkit_pool_check_report(p, 0, NULL);
}

int pmkit_pool_check_report(pmkit_pool *p, unsigned flags,
                            pmkit_check_report *report) {
  pmk_clear_err();
  if (report)
    memset(report, 0, sizeof *report);
  if (!p)
    return pmk_err(PMKIT_E_INVAL, "pmkit_pool_check: NULL pool");
  int r;
  if (hdr_sum(p->hdr) != p->hdr->checksum)
    r = pmk_err(PMKIT_E_CORRUPT, "header checksum mismatch");
  else if ((r = gen_check(p, p->path)) == 0 &&
           (r = pmk_heap_check(p, NULL, report, flags)) != 0)
    pmk_err_wrap(r, p->path, ": ", ""); /* name the pool */
  return r;
}

/* One pass of a repair over the pool in fd, mapped shared or privately (a
 * dry run); the repaired pool must pass the full check. */
static int repair_pass(pmkit_pool *p, int fd, const struct pmk_hdr *h,
                       int share, struct pmk_repair *rp) {
  void *m = NULL;
  int r = map_fixed(fd, h->base, h->size, PROT_READ | PROT_WRITE, share, &m);
  if (r)
    return r;
  attach(p, m);
  memset(rp->stats, 0, sizeof *rp->stats);
  if ((r = pmk_heap_repair(p, rp)) == 0 &&
      (r = pmk_heap_check(p, NULL, NULL, 0)) != 0)
    r = pmk_err_wrap(PMKIT_E_CORRUPT, "the repaired pool still fails", ": ",
                     "");
  munmap(m, h->size);
  return r;
}

static void repair_mute(void *arg, const char *line) { (void)arg, (void)line; }

int pmkit_pool_repair(const char *path, unsigned flags,
                      void (*note)(void *arg, const char *line), void *arg,
                      pmkit_repair_stats *stats) {
  pmk_init();
  pmk_clear_err();
  pmkit_repair_stats tmp;
  if (!stats)
    stats = &tmp;
  memset(stats, 0, sizeof *stats);
  if (!path || !*path || (flags & ~PMKIT_REPAIR_DRY_RUN))
    return pmk_err(PMKIT_E_INVAL, "pmkit_pool_repair: %s",
                   !path || !*path ? "empty path" : "unknown flags");
  int dry = (flags & PMKIT_REPAIR_DRY_RUN) != 0;
  /* O_NONBLOCK: a FIFO must not hang the open; refused below. */
  int fd = open(path, (dry ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return pmk_err(errno == ENOENT ? PMKIT_E_NOENT : PMKIT_E_IO,
                   "cannot open %s: %s", path, strerror(errno));
  pmkit_pool *p = pool_new(path, -1); /* reads go through the mapping */
  if (!p) {
    close(fd);
    return pmk_err(PMKIT_E_NOMEM, "out of memory");
  }
  int r, added = 0;
  struct stat sb;
  struct pmk_hdr h;
  memset(&h, 0, sizeof h);
  if (flock(fd, (dry ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    r = errno == EWOULDBLOCK
            ? pmk_err(PMKIT_E_BUSY, "%s is open (by this or another process)",
                      path)
            : pmk_err(PMKIT_E_IO, "flock %s: %s", path, strerror(errno));
    goto out;
  }
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    r = pmk_err(PMKIT_E_FOREIGN, "%s is not a regular file", path);
    goto out;
  }
  ssize_t got = pread(fd, &h, sizeof h, 0);
  if (got < 0) {
    r = pmk_err(PMKIT_E_IO, "read %s: %s", path, strerror(errno));
    goto out;
  }
  /* The header is not repaired: it is immutable and checksummed, and
   * nothing can be trusted without it. Bytes after the end are cut. */
  uint64_t len = (uint64_t)sb.st_size;
  if ((r = hdr_check(&h, (size_t)got,
                     (size_t)got < sizeof h || len < h.size ? len : h.size,
                     path)))
    goto out;
  p->base = h.base;
  p->size = h.size;
  if ((r = reg_add(p)))
    goto out;
  added = 1;
  /* A private pass first, always: a refusal changes nothing. Then, unless
   * this is the dry run, the same on the file. */
  struct pmk_repair rp = {dry ? note : repair_mute, arg, stats};
  if ((r = repair_pass(p, fd, &h, MAP_PRIVATE, &rp)))
    goto out;
  if (!dry) {
    rp.note = note;
    if ((r = repair_pass(p, fd, &h, MAP_SHARED, &rp)))
      goto out;
  }
  if (len > h.size) {
    stats->bytes_cut = len - h.size;
    if (note) {
      char line[128];
      snprintf(line, sizeof line, "file: %llu bytes after the pool's end cut",
               (unsigned long long)stats->bytes_cut);
      note(arg, line);
    }
    if (!dry && ftruncate(fd, (off_t)h.size) != 0) {
      r = pmk_err(PMKIT_E_IO, "truncate %s: %s", path, strerror(errno));
      goto out;
    }
  }
  if (!dry && fsync(fd) != 0)
    r = pmk_err(PMKIT_E_IO, "fsync %s: %s", path, strerror(errno));
out:
  if (added)
    reg_del(p);
  close(fd);
  pool_free(p);
  return r;
}
