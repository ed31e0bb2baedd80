/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool_open.c -- libFuzzer target: pool files as an attacker or a bad disk
 * writes them. A template pool (made once: a root, published small and
 * large blocks, unreachable leaks) is patched by the input and given to
 * every tool that reads pools: open (writable, then inspection), stat,
 * pmkit_root, the full check with its report, allocation and free, gc, and
 * repair (a dry run, then a real one).
 *
 * The input is a list of patches. Each is a 1-byte selector, a 2-byte
 * offset, a 1-byte length and that many bytes; the selector picks where the
 * offset lands: 0 the header, 1 the state page, 2 the context slots, 3 the
 * chunk table, 4 the first KiB of a used chunk (its header and bitmap; the
 * offset's high byte picks the chunk), 5 anywhere in the metadata area, 6 a
 * new file length (the offset, in 64-byte units, below or above the pool's
 * size).
 *
 * Refusals are PMKIT_E_* codes. A crash, a hang, a leak, and these are
 * findings: a repair that succeeds and leaves a pool that does not open or
 * does not pass the check; a block the allocator hands out that overlaps
 * the root object of a pool open accepted and check passed.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../runtime/core/internal.h"

static unsigned char *tmpl;
static size_t tmpl_len;
static char path[256];
static uint32_t used[64]; /* chunks that are not free in the template */
static unsigned nused;

static void die(const char *what) {
  fprintf(stderr, "fuzz-pool-open: %s: %s\n", what, pmkit_errormsg());
  abort();
}

static void cleanup(void) { unlink(path); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  atexit(cleanup);
  const char *dir = getenv("PMKIT_FUZZ_DIR");
  snprintf(path, sizeof path, "%s/pmkit-fuzz-pool.%d", dir ? dir : "/dev/shm",
           (int)getpid());
  unlink(path);
  pmkit_pool *p;
  void **root;
  if (pmkit_pool_create(path, PMKIT_POOL_MIN_SIZE, NULL, &p) ||
      pmkit_root(p, 64 * sizeof(void *), (void **)&root))
    die("template");
  /* Two large blocks, of 1 and 2 chunks (the second leaks: a reachable one
   * would make every walk of the heap, and so every input, slower). */
  for (int i = 0; i < 60; i++) {
    size_t size = i == 20 ? 9000 : i == 40 ? 70000 : 16u << (i % 9);
    void *b;
    if (pmkit_zalloc(p, size, &b))
      die("template alloc");
    if (i % 7 != 3 && i != 40) /* the rest leak: gc and repair find them */
      root[i] = b;
  }
  pmkit_persist(root, 64 * sizeof(void *));
  pmkit_pool_close(p);
  FILE *f = fopen(path, "rb");
  tmpl_len = PMKIT_POOL_MIN_SIZE;
  tmpl = malloc(tmpl_len);
  if (!f || !tmpl || fread(tmpl, 1, tmpl_len, f) != tmpl_len)
    die("template read");
  fclose(f);
  const struct pmk_hdr *h = (const struct pmk_hdr *)tmpl;
  const uint32_t *table = (const uint32_t *)(tmpl + h->table_off);
  for (uint32_t id = 0; id < h->nchunks && nused < 64; id++)
    if (table[id] && table[id] != PMK_T_CONT)
      used[nused++] = id;
  return 0;
}

/* Apply the input's patches to img (tmpl_len + 64 KiB); the file length. */
static size_t patch(unsigned char *img, const uint8_t *d, size_t n) {
  const struct pmk_hdr *h = (const struct pmk_hdr *)tmpl;
  size_t len = tmpl_len;
  while (n >= 4) {
    unsigned sel = d[0] % 7, off = d[1] | (unsigned)d[2] << 8, k = d[3];
    d += 4, n -= 4;
    if (k > n)
      k = (unsigned)n;
    size_t at, room;
    switch (sel) {
    case 0:
      at = off % PMK_HDR_SIZE, room = PMK_HDR_SIZE - at;
      break;
    case 1:
      at = PMK_STATE_OFF + off % 4096, room = PMK_CTX_OFF - at;
      break;
    case 2:
      at = PMK_CTX_OFF + off % (PMKIT_MAX_THREADS * PMK_CTX_SIZE);
      room = h->table_off - at;
      break;
    case 3:
      at = h->table_off + off % (h->nchunks * 4);
      room = h->heap_off - at;
      break;
    case 4:
      at = h->heap_off + ((size_t)used[(off >> 8) % nused] << PMK_CHUNK_SHIFT) +
           (off & 0xff) * 4;
      room = 64;
      break;
    case 5:
      at = off % h->heap_off, room = h->heap_off - at;
      break;
    default:
      len = off < 0x8000 ? (size_t)off * 64 % tmpl_len
                         : tmpl_len + (off & 0x3ff) * 64;
      continue;
    }
    if (k > room)
      k = (unsigned)room;
    memcpy(img + at, d, k);
    d += k, n -= k;
  }
  return len;
}

static void load(const unsigned char *img, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || write(fd, img, len) != (ssize_t)len)
    die("write");
  close(fd);
}

/* Use an accepted, checked pool: blocks handed out never overlap the root
 * object (open and check vouched for it). */
static void use(pmkit_pool *p) {
  void *root, *b[8];
  size_t rs;
  if (pmkit_root(p, 8, &root))
    return;
  rs = pmkit_usable_size(p, root);
  for (int i = 0; i < 8; i++) {
    if (pmkit_alloc(p, i < 6 ? 16u << i : 70000, &b[i])) {
      b[i] = NULL;
      continue;
    }
    uintptr_t a = (uintptr_t)b[i], r = (uintptr_t)root;
    if (a < r + rs && r < a + pmkit_usable_size(p, b[i])) {
      fprintf(stderr, "fuzz-pool-open: a new block overlaps the root\n");
      abort();
    }
  }
  for (int i = 0; i < 8; i++)
    if (b[i] && pmkit_free(p, b[i]))
      die("free of a new block");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static unsigned char *img;
  if (!img && !(img = malloc(tmpl_len + 65536)))
    abort();
  memcpy(img, tmpl, tmpl_len);
  memset(img + tmpl_len, 0, 65536);
  size_t len = patch(img, data, size);

  pmkit_pool *p;
  pmkit_pool_info info;
  pmkit_check_report rep;
  pmkit_gc_stats gs;
  pmkit_pool_opts ins = {.flags = PMKIT_POOL_INSPECT};

  load(img, len);
  if (pmkit_pool_open(path, &ins, &p) == 0) {
    void *root;
    (void)pmkit_pool_stat(p, &info);
    (void)pmkit_pool_check_report(p, 0, &rep);
    (void)pmkit_root(p, 8, &root);
    pmkit_pool_close(p);
  }
  if (pmkit_pool_open(path, NULL, &p) == 0) {
    if (pmkit_pool_check_report(p, 0, &rep) == 0 && !rep.suspects)
      use(p);
    (void)pmkit_pool_gc(p, PMKIT_GC_OFFSETS, &gs);
    pmkit_pool_close(p);
  }

  load(img, len);
  pmkit_repair_stats rs;
  int dry = pmkit_pool_repair(path, PMKIT_REPAIR_DRY_RUN, NULL, NULL, &rs);
  int real = pmkit_pool_repair(path, 0, NULL, NULL, &rs);
  if ((dry == 0) != (real == 0)) {
    fprintf(stderr, "fuzz-pool-open: the dry run said %d, the repair %d\n", dry,
            real);
    abort();
  }
  if (real == 0) {
    if (pmkit_pool_open(path, NULL, &p))
      die("a repaired pool does not open");
    if (pmkit_pool_check(p))
      die("a repaired pool fails the check");
    use(p);
    pmkit_pool_close(p);
  }
  return 0;
}
