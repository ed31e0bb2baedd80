/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mem_test.c -- unit tests of the WPP runtime's persistent address space
 * (runtime/wpp/mem.c, included here so that its allocator's static helpers
 * are reachable). Each case maps a fresh context file with the runtime's own
 * wpp_mem_map, turns the runtime on (wpp_on) and makes the program's calls
 * (mmap, munmap, mremap, mprotect, madvise, routed by the --wrap layer to
 * the runtime as in a program built by `pmkit wpp cc`), then checks what the
 * context records: the bump pointer, the free list, the live page count, the
 * page map byte of each page (0x80 | protection), the page map's reserved
 * high-water mark, the file space of the pages (FIEMAP), and what the kernel
 * has mapped (/proc/self/maps). One case maps the same file again, as a
 * restore does, and checks that every page gets its protection and bytes
 * back.
 *
 * Groups: mem (every case must pass); control (must fail: a page map byte
 * corrupted before the remap, which the remap case must report).
 */
#include "mem.c"

#include "unit.h"

#define PG ((size_t)WPP_PAGE)
#define RW (PROT_READ | PROT_WRITE)
#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)

static char *pg(uint64_t p) { return HEAP + p * WPP_PAGE; }

/* mmap of n pages with prot, through the wrapped libc call */
static char *take_pages(uint64_t n, int prot) {
  char *p = mmap(NULL, n * PG, prot, ANON, -1, 0);
  CHECK(p != MAP_FAILED);
  return p;
}

static void check_free(uint32_t k, uint64_t page, uint64_t npages) {
  CHECK(k < wpp_hdr->nfree);
  CHECK_EQ(wpp_hdr->free[k].page, page);
  CHECK_EQ(wpp_hdr->free[k].npages, npages);
}

/* Fresh pages come from the bump pointer, in order, rounded up to whole
 * pages, each with its protection in the page map and in the kernel, and
 * with file space (the page map's in 64 KiB steps). */
static void mem_alloc_from_bump(void) {
  struct wpp_hdr *h = wpp_hdr;
  wpp_on = 1;
  char *a = take_pages(1, RW);
  char *b = take_pages(3, PROT_READ);
  char *c = mmap(NULL, 5000, RW, ANON, -1, 0);
  CHECK_EQ(a, pg(0));
  CHECK_EQ(b, pg(1));
  CHECK_EQ(c, pg(4));
  CHECK_EQ(h->bump, 6);
  CHECK_EQ(h->live_pages, 6);
  CHECK_EQ(h->nfree, 0);
  CHECK_EQ(PMAP[0], 0x80 | RW);
  for (int i = 1; i <= 3; i++)
    CHECK_EQ(PMAP[i], 0x80 | PROT_READ);
  CHECK_EQ(PMAP[4], 0x80 | RW);
  CHECK_EQ(PMAP[5], 0x80 | RW);
  CHECK_EQ(PMAP[6], 0);
  CHECK_EQ(h->map_reserved, 0x10000);
  CHECK_STR(unit_prot_at(a), "rw-s");
  CHECK_STR(unit_prot_at(b + 2 * PG), "r--s");
  CHECK_STR(unit_prot_at(c + PG), "rw-s");
  CHECK_STR(unit_prot_at(pg(6)), "---s");
  a[0] = 1;
  c[4999] = 2;
  long long heap = unit_file_space(WPP_HEAP_OFF, 64 * PG);
  if (heap >= 0) {
    CHECK_EQ(heap, 6 * PG);
    CHECK_EQ(unit_file_space(WPP_MAP_OFF, 0x20000), 0x10000);
  }
}

/* Freed ranges join their neighbours in the free list (sorted, never two
 * adjacent extents), and a range ending at the bump pointer moves it back,
 * taking the last extent with it. */
static void mem_free_coalesces(void) {
  struct wpp_hdr *h = wpp_hdr;
  wpp_on = 1;
  char *a = take_pages(2, RW), *b = take_pages(3, RW), *c = take_pages(1, RW),
       *d = take_pages(4, RW);
  CHECK_EQ(h->bump, 10);
  CHECK_EQ(munmap(b, 3 * PG), 0);
  CHECK_EQ(h->nfree, 1);
  check_free(0, 2, 3);
  CHECK_EQ(h->live_pages, 7);
  CHECK_EQ(PMAP[2], 0);
  CHECK_STR(unit_prot_at(b), "---s");
  CHECK_EQ(munmap(c, PG), 0); /* joins the extent before it */
  CHECK_EQ(h->nfree, 1);
  check_free(0, 2, 4);
  CHECK_EQ(munmap(a, 2 * PG), 0); /* joins the extent after it */
  CHECK_EQ(h->nfree, 1);
  check_free(0, 0, 6);
  CHECK_EQ(h->live_pages, 4);
  CHECK_EQ(munmap(d, 4 * PG), 0); /* the top: everything back to the bump */
  CHECK_EQ(h->nfree, 0);
  CHECK_EQ(h->bump, 0);
  CHECK_EQ(h->live_pages, 0);
}

/* A range freed between two free extents joins both into one. */
static void mem_free_joins_both(void) {
  struct wpp_hdr *h = wpp_hdr;
  wpp_on = 1;
  char *p = take_pages(8, RW);
  CHECK_EQ(munmap(p + 1 * PG, PG), 0);
  CHECK_EQ(munmap(p + 3 * PG, PG), 0);
  CHECK_EQ(h->nfree, 2);
  check_free(0, 1, 1);
  check_free(1, 3, 1);
  CHECK_EQ(munmap(p + 2 * PG, PG), 0);
  CHECK_EQ(h->nfree, 1);
  check_free(0, 1, 3);
  CHECK_EQ(h->live_pages, 5);
  CHECK_EQ(h->bump, 8);
}

/* An allocation takes the first free extent that is big enough, from its
 * start, before the bump pointer. */
static void mem_first_fit(void) {
  struct wpp_hdr *h = wpp_hdr;
  wpp_on = 1;
  take_pages(1, RW);
  char *b = take_pages(4, RW);
  take_pages(1, RW);
  char *d = take_pages(2, RW);
  take_pages(1, RW);
  CHECK_EQ(munmap(b, 4 * PG), 0);
  CHECK_EQ(munmap(d, 2 * PG), 0);
  CHECK_EQ(h->nfree, 2);
  CHECK_EQ(take_pages(5, RW), pg(9)); /* nothing fits: the bump */
  CHECK_EQ(take_pages(2, RW), pg(1));
  check_free(0, 3, 2);
  CHECK_EQ(take_pages(2, RW), pg(3));
  CHECK_EQ(h->nfree, 1);
  check_free(0, 6, 2);
  CHECK_EQ(take_pages(1, RW), pg(6));
  check_free(0, 7, 1);
  CHECK_EQ(h->bump, 14);
  CHECK_EQ(h->live_pages, 13);
}

/* munmap frees only pages that are live: a second munmap of a range, or one
 * that covers freed and live pages, frees each page once. */
static void mem_double_munmap(void) {
  struct wpp_hdr *h = wpp_hdr;
  wpp_on = 1;
  char *p = take_pages(6, RW);
  CHECK_EQ(munmap(p + PG, 2 * PG), 0);
  CHECK_EQ(munmap(p + PG, 2 * PG), 0);
  CHECK_EQ(h->live_pages, 4);
  CHECK_EQ(h->nfree, 1);
  check_free(0, 1, 2);
  CHECK_EQ(munmap(p, 4 * PG), 0); /* 0 and 3 live, 1-2 free already */
  CHECK_EQ(h->live_pages, 2);
  CHECK_EQ(h->nfree, 1);
  check_free(0, 0, 4);
  errno = 0;
  CHECK_EQ(munmap(p + 1, PG), -1); /* unaligned */
  CHECK_EQ(errno, EINVAL);
}

/* Pages handed out again read as zeros, as fresh anonymous memory does (the
 * heap is a shared file mapping: munmap punches the pages out of the file),
 * and the file space of freed pages is given back. */
static void mem_freed_pages_read_zero(void) {
  wpp_on = 1;
  char *p = take_pages(3, RW);
  memset(p, 0xab, 3 * PG);
  take_pages(1, RW); /* keeps p from going back to the bump */
  CHECK_EQ(munmap(p, 3 * PG), 0);
  long long sp = unit_file_space(WPP_HEAP_OFF, 3 * PG);
  if (sp >= 0)
    CHECK_EQ(sp, 0);
  char *q = take_pages(3, RW);
  CHECK_EQ(q, p);
  size_t first = 0; /* the first byte that is not zero, if any */
  while (first < 3 * PG && !q[first])
    first++;
  CHECK_EQ(first, 3 * PG);
}

/* mprotect changes the page map of live pages with the kernel's protection;
 * one the kernel refuses leaves the page map as it was; free pages stay
 * free in the page map. */
static void mem_mprotect_page_map(void) {
  struct wpp_hdr *h = wpp_hdr;
  wpp_on = 1;
  char *p = take_pages(3, RW);
  take_pages(1, RW);
  CHECK_EQ(mprotect(p + PG, PG, PROT_READ), 0);
  CHECK_EQ(PMAP[0], 0x80 | RW);
  CHECK_EQ(PMAP[1], 0x80 | PROT_READ);
  CHECK_EQ(PMAP[2], 0x80 | RW);
  CHECK_STR(unit_prot_at(p + PG), "r--s");
  CHECK_EQ(mprotect(p, 3 * PG, PROT_NONE), 0);
  for (int i = 0; i < 3; i++)
    CHECK_EQ(PMAP[i], 0x80);
  CHECK_STR(unit_prot_at(p), "---s");
  errno = 0;
  CHECK_EQ(mprotect(p, 2 * PG, PROT_READ | 0x1000), -1); /* an unknown bit */
  CHECK_EQ(errno, EINVAL);
  CHECK_EQ(PMAP[0], 0x80);
  CHECK_EQ(PMAP[1], 0x80);
  CHECK_EQ(munmap(p + 2 * PG, PG), 0);
  CHECK_EQ(mprotect(p + PG, 2 * PG, PROT_READ), 0);
  CHECK_EQ(PMAP[1], 0x80 | PROT_READ);
  CHECK_EQ(PMAP[2], 0); /* still free */
  CHECK_EQ(h->live_pages, 3);
}

/* A PROT_NONE reservation takes no file space, for its pages nor for the
 * page map; opening it up with mprotect gives it both. */
static void mem_reservation_space_on_open(void) {
  struct wpp_hdr *h = wpp_hdr;
  wpp_on = 1;
  char *p = take_pages(16, PROT_NONE);
  CHECK_EQ(p, pg(0));
  CHECK_EQ(PMAP[0], 0x80);
  CHECK_EQ(PMAP[15], 0x80);
  CHECK_EQ(h->map_reserved, 0);
  CHECK_EQ(h->live_pages, 16);
  long long sp = unit_file_space(WPP_HEAP_OFF, 16 * PG);
  if (sp >= 0)
    CHECK_EQ(sp, 0);
  CHECK_EQ(mprotect(p + 4 * PG, 4 * PG, RW), 0);
  CHECK_EQ(h->map_reserved, 0x10000);
  sp = unit_file_space(WPP_HEAP_OFF, 16 * PG);
  if (sp >= 0)
    CHECK_EQ(sp, 4 * PG);
  p[4 * PG] = 1;
  CHECK_EQ(PMAP[4], 0x80 | RW);
  CHECK_EQ(PMAP[3], 0x80);
}

/* mremap: growing with MREMAP_MAYMOVE moves to new pages with the bytes and
 * the protection, and frees the old ones; without it, ENOMEM and nothing
 * changes; shrinking keeps the address and frees the tail. */
static void mem_mremap(void) {
  struct wpp_hdr *h = wpp_hdr;
  wpp_on = 1;
  char *p = take_pages(2, RW);
  memset(p, 0x5a, 2 * PG);
  errno = 0;
  CHECK_EQ(mremap(p, 2 * PG, 4 * PG, 0), MAP_FAILED);
  CHECK_EQ(errno, ENOMEM);
  CHECK_EQ(h->bump, 2);
  char *q = mremap(p, 2 * PG, 5 * PG, MREMAP_MAYMOVE);
  CHECK_EQ(q, pg(2));
  CHECK_EQ(q[0], 0x5a);
  CHECK_EQ(q[2 * PG - 1], 0x5a);
  CHECK_EQ(q[2 * PG], 0);
  CHECK_EQ(h->bump, 7);
  CHECK_EQ(h->nfree, 1);
  check_free(0, 0, 2);
  CHECK_EQ(h->live_pages, 5);
  CHECK_EQ(PMAP[0], 0);
  CHECK_EQ(PMAP[6], 0x80 | RW);
  CHECK_EQ(mremap(q, 5 * PG, 2 * PG, 0), q);
  CHECK_EQ(h->live_pages, 2);
  CHECK_EQ(h->bump, 4); /* the tail was the top */
  CHECK_EQ(h->nfree, 1);
  check_free(0, 0, 2);
  /* read-only: moved read-only */
  char *r = take_pages(1, PROT_READ); /* page 0 */
  take_pages(1, RW);                  /* page 1 */
  char *s = mremap(r, PG, 2 * PG, MREMAP_MAYMOVE);
  CHECK_EQ(s, pg(4));
  CHECK_EQ(PMAP[4], 0x80 | PROT_READ);
  CHECK_STR(unit_prot_at(s), "r--s");
}

/* MAP_FIXED inside the heap replaces live pages with zeros (the others keep
 * their bytes) at the protection asked; over free pages it fails (ENOMEM),
 * and MAP_FIXED_NOREPLACE always finds the heap taken (EEXIST). */
static void mem_map_fixed(void) {
  struct wpp_hdr *h = wpp_hdr;
  wpp_on = 1;
  char *p = take_pages(3, RW);
  memset(p, 0x11, 3 * PG);
  CHECK_EQ(mmap(p + PG, PG, PROT_READ, ANON | MAP_FIXED, -1, 0), p + PG);
  CHECK_EQ(p[PG], 0);
  CHECK_EQ(p[0], 0x11);
  CHECK_EQ(p[2 * PG], 0x11);
  CHECK_EQ(PMAP[1], 0x80 | PROT_READ);
  CHECK_STR(unit_prot_at(p + PG), "r--s");
  CHECK_EQ(h->live_pages, 3);
  CHECK_EQ(h->bump, 3);
  errno = 0;
  CHECK_EQ(mmap(pg(3), PG, RW, ANON | MAP_FIXED, -1, 0), MAP_FAILED);
  CHECK_EQ(errno, ENOMEM);
  errno = 0;
  CHECK_EQ(mmap(p, PG, RW, ANON | MAP_FIXED_NOREPLACE, -1, 0), MAP_FAILED);
  CHECK_EQ(errno, EEXIST);
  CHECK_EQ(p[0], 0x11);
}

/* MADV_DONTNEED (and FREE) on heap pages zero them, as on anonymous memory
 * (a shared file mapping would keep the bytes); the pages stay live, with
 * file space. */
static void mem_madvise_zeroes(void) {
  struct wpp_hdr *h = wpp_hdr;
  wpp_on = 1;
  char *p = take_pages(2, RW);
  memset(p, 0x77, 2 * PG);
  CHECK_EQ(madvise(p, PG, MADV_DONTNEED), 0);
  CHECK_EQ(p[0], 0);
  CHECK_EQ(p[PG - 1], 0);
  CHECK_EQ(p[PG], 0x77);
  CHECK_EQ(PMAP[0], 0x80 | RW);
  CHECK_EQ(h->live_pages, 2);
  long long sp = unit_file_space(WPP_HEAP_OFF, 2 * PG);
  if (sp >= 0)
    CHECK_EQ(sp, 2 * PG);
  CHECK_EQ(madvise(p + PG, PG, MADV_FREE), 0);
  CHECK_EQ(p[PG], 0);
}

/* A restore maps the same file again: every live page comes back with the
 * protection and the bytes it had, freed pages inaccessible. With corrupt
 * set (the must-fail control), page 1's page map byte is changed to
 * PROT_NONE before the remap: the check of its protection must fail. */
static void remap_case(int corrupt) {
  struct wpp_hdr *h = wpp_hdr;
  wpp_on = 1;
  char *a = take_pages(2, RW);
  char *b = take_pages(1, RW);
  char *c = take_pages(1, RW);
  char *d = take_pages(2, RW);
  memset(a, 0x21, 2 * PG);
  strcpy(b, "kept across the restore");
  CHECK_EQ(mprotect(b, PG, PROT_READ), 0);
  CHECK_EQ(mprotect(c, PG, PROT_NONE), 0);
  CHECK_EQ(munmap(d, PG), 0); /* page 4 free, 5 live */
  d[PG] = 0x42;
  if (corrupt)
    PMAP[2] = 0x80;
  wpp_on = 0;
  unit_ctx_unmap();
  CHECK_STR(unit_prot_at(a), "none");
  CHECK_EQ(unit_ctx_map(), 0);
  CHECK_EQ(h->bump, 6);
  CHECK_EQ(h->live_pages, 5);
  CHECK_STR(unit_prot_at(a + PG), "rw-s");
  CHECK_STR(unit_prot_at(b), "r--s");
  CHECK_STR(unit_prot_at(c), "---s");
  CHECK_STR(unit_prot_at(d), "---s");
  CHECK_STR(unit_prot_at(d + PG), "rw-s");
  CHECK_EQ(a[2 * PG - 1], 0x21);
  CHECK_STR(b, "kept across the restore");
  CHECK_EQ(d[PG], 0x42);
}

static void mem_remap_restores(void) { remap_case(0); }
static void control_remap_corrupt_page_map(void) { remap_case(1); }

/* The free list holds WPP_MAX_FREE extents; one more freed run rebuilds it
 * from the page map, keeping the largest runs (here: the three pages freed
 * last replace the first one-page extent). */
static void mem_free_list_full(void) {
  struct wpp_hdr *h = wpp_hdr;
  wpp_on = 1;
  const uint64_t n = 2 * WPP_MAX_FREE + 6;
  for (uint64_t i = 0; i < n; i++)
    CHECK_EQ(take_pages(1, PROT_NONE), pg(i)); /* no file space */
  for (uint64_t i = 0; i < 2 * WPP_MAX_FREE; i += 2)
    CHECK_EQ(munmap(pg(i), PG), 0);
  CHECK_EQ(h->nfree, WPP_MAX_FREE);
  check_free(WPP_MAX_FREE - 1, 2 * WPP_MAX_FREE - 2, 1);
  uint64_t run = 2 * WPP_MAX_FREE + 1; /* 3 pages between live ones */
  CHECK_EQ(munmap(pg(run), 3 * PG), 0);
  CHECK_EQ(h->nfree, WPP_MAX_FREE);
  check_free(0, 2, 1);
  check_free(WPP_MAX_FREE - 2, 2 * WPP_MAX_FREE - 2, 1);
  check_free(WPP_MAX_FREE - 1, run, 3);
  CHECK_EQ(h->bump, n);
  CHECK_EQ(h->live_pages, n - WPP_MAX_FREE - 3);
  /* page 0 is free in the page map, out of the list: a 3-page request takes
   * the kept run */
  CHECK_EQ(PMAP[0], 0);
  CHECK_EQ(take_pages(3, PROT_NONE), pg(run));
}

/* wpp_in_heap: [heap start, context end), no wrap-around. */
static void mem_in_heap_bounds(void) {
  CHECK_EQ(wpp_in_heap(HEAP, 1), 1);
  CHECK_EQ(wpp_in_heap(HEAP - 1, 1), 0);
  CHECK_EQ(wpp_in_heap((char *)(uintptr_t)(WPP_BASE + WPP_SIZE) - 8, 8), 1);
  CHECK_EQ(wpp_in_heap((char *)(uintptr_t)(WPP_BASE + WPP_SIZE) - 8, 9), 0);
  CHECK_EQ(wpp_in_heap(HEAP, (size_t)-1), 0);
  CHECK_EQ(wpp_heap_off(pg(3)), 3 * WPP_PAGE);
  CHECK_EQ(wpp_heap_ptr(5 * WPP_PAGE), pg(5));
}

/* What the heap does not take: file mappings, empty lengths, fixed
 * addresses outside it, and everything while the runtime is off (counted as
 * early maps: memory a constructor took before main). */
static void mem_outside_heap(void) {
  struct wpp_hdr *h = wpp_hdr;
  int early = wpp_early_maps;
  char *x = mmap(NULL, PG, RW, ANON, -1, 0);
  CHECK(x != MAP_FAILED && !wpp_in_heap(x, PG));
  CHECK_EQ(wpp_early_maps, early + 1);
  CHECK_EQ(munmap(x, PG), 0);
  wpp_on = 1;
  errno = 0;
  CHECK_EQ(mmap(NULL, 0, RW, ANON, -1, 0), MAP_FAILED);
  CHECK_EQ(errno, EINVAL);
  char *f = mmap(NULL, PG, PROT_READ, MAP_SHARED, wpp_ctxfd, 0);
  CHECK(f != MAP_FAILED && !wpp_in_heap(f, PG));
  CHECK_EQ(*(uint64_t *)f, 0); /* the header: magic not written here */
  CHECK_EQ(munmap(f, PG), 0);
  CHECK_EQ(h->bump, 0);
  CHECK_EQ(h->live_pages, 0);
  CHECK_EQ(wpp_early_maps, early + 1);
}

static const struct unit_case cases[] = {
    {"mem.alloc_from_bump", mem_alloc_from_bump},
    {"mem.free_coalesces", mem_free_coalesces},
    {"mem.free_joins_both", mem_free_joins_both},
    {"mem.first_fit", mem_first_fit},
    {"mem.double_munmap", mem_double_munmap},
    {"mem.freed_pages_read_zero", mem_freed_pages_read_zero},
    {"mem.mprotect_page_map", mem_mprotect_page_map},
    {"mem.reservation_space_on_open", mem_reservation_space_on_open},
    {"mem.mremap", mem_mremap},
    {"mem.map_fixed", mem_map_fixed},
    {"mem.madvise_zeroes", mem_madvise_zeroes},
    {"mem.remap_restores", mem_remap_restores},
    {"mem.free_list_full", mem_free_list_full},
    {"mem.in_heap_bounds", mem_in_heap_bounds},
    {"mem.outside_heap", mem_outside_heap},
    {"control.remap_corrupt_page_map", control_remap_corrupt_page_map},
};

int main(int argc, char **argv) {
  unit_close_inherited();
  return unit_run(cases, sizeof(cases) / sizeof(cases[0]),
                  argc > 1 ? argv[1] : "mem.", unit_ctx_setup,
                  unit_ctx_teardown);
}
