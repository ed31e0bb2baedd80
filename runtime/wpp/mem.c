/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mem.c -- the persistent address space of a WPP process. Every anonymous
 * mapping the program or libc asks for (malloc's arenas, thread stacks and
 * TLS, the program's own mmap) is carved out of the heap part of the context
 * file, which is mapped MAP_SHARED at a fixed address, so it outlives the
 * process exactly as data in eADR caches outlives a power failure. Entry
 * points: wpp_mmap, wpp_munmap, wpp_mremap, wpp_mprotect and wpp_madvise
 * (wrap.c routes libc's internal __mmap and friends here as well as the
 * program's mmap) and wpp_mem_map, which maps the file at start and at
 * restore puts back each page's protection from the page map.
 *
 * The allocator needs no crash consistency of its own: a thread stopped
 * inside it resumes inside it. One rule instead: the page map, which a
 * restore applies to the new address space, changes before the system call
 * it describes, and that call is idempotent, so a thread stopped between the
 * two redoes the call on a map that already agrees. It needs only a lock; a
 * first-fit list of free extents with coalescing, and a bump pointer for
 * never-used pages. munmap punches the pages out of the file (MADV_REMOVE), so
 * a freed range costs no memory and reads as zeros when handed out again.
 *
 * The file is sparse; its pages are given file space (fallocate) when they
 * are handed out, not when first stored to: on a full file system a store
 * to a page that has none kills the process (SIGBUS) with the context
 * unsaved, while a failed fallocate is a failed mmap (ENOMEM), which the
 * program handles, and the last save stays resumable.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "wpp.h"

#define HEAP ((char *)(uintptr_t)(WPP_BASE + WPP_HEAP_OFF))
#define PMAP ((uint8_t *)(uintptr_t)(WPP_BASE + WPP_MAP_OFF))
#define PROT_BITS (PROT_READ | PROT_WRITE | PROT_EXEC)

static uint64_t npages_of(size_t len) {
  return (len + WPP_PAGE - 1) / WPP_PAGE;
}

int wpp_in_heap(const void *p, size_t len) {
  uintptr_t a = (uintptr_t)p;
  return a >= (uintptr_t)HEAP && a + len <= WPP_BASE + WPP_SIZE && a + len >= a;
}

void *wpp_heap_ptr(uint64_t off) { return HEAP + off; }
uint64_t wpp_heap_off(const void *p) { return (uint64_t)((char *)p - HEAP); }

int wpp_reserve(uint64_t off, uint64_t len) {
  static int unsupported;
  if (unsupported || !len || wpp_broken("reserve"))
    return 0;
  int r;
  do
    r = fallocate(wpp_ctxfd, 0, (off_t)off, (off_t)len);
  while (r != 0 && errno == EINTR);
  if (r != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) {
    unsupported = 1;
    wpp_warn("the context's file system cannot reserve space (fallocate): a "
             "full file system will kill the program instead of failing its "
             "allocations");
    return 0;
  }
  return r;
}

/* File space for heap pages [page, page + n) and their page map bytes (the
 * map is reserved up to a high-water mark, in 64 KiB steps). Caller holds
 * the lock. 0, or -1 with errno ENOMEM. */
static int reserve_pages(uint64_t page, uint64_t n) {
  struct wpp_hdr *h = wpp_hdr;
  if (page + n > h->map_reserved) {
    uint64_t top = (page + n + 0xffff) & ~0xffffull;
    if (top > WPP_HEAP_PAGES)
      top = WPP_HEAP_PAGES;
    if (wpp_reserve(WPP_MAP_OFF + h->map_reserved, top - h->map_reserved))
      goto full;
    h->map_reserved = top;
  }
  if (!wpp_reserve(WPP_HEAP_OFF + page * WPP_PAGE, n * WPP_PAGE))
    return 0;
full:
  errno = ENOMEM;
  return -1;
}

static void mark(uint64_t page, uint64_t n, int prot) {
  memset(PMAP + page, prot < 0 ? 0 : 0x80 | (prot & PROT_BITS), n);
}

/* The free list again from the page map (every free run below the bump
 * pointer), keeping the largest runs when there are more than fit. */
static void rebuild_free_list(void) {
  struct wpp_hdr *h = wpp_hdr;
  h->nfree = 0;
  uint64_t i = 0;
  while (i < h->bump) {
    if (PMAP[i]) {
      i++;
      continue;
    }
    uint64_t j = i;
    while (j < h->bump && !PMAP[j])
      j++;
    if (j == h->bump) {
      h->bump = i;
      break;
    }
    uint32_t k = h->nfree;
    if (k == WPP_MAX_FREE) { /* replace the smallest kept run */
      uint32_t m = 0;
      for (uint32_t q = 1; q < k; q++)
        if (h->free[q].npages < h->free[m].npages)
          m = q;
      if (h->free[m].npages >= j - i) {
        i = j;
        continue;
      }
      memmove(&h->free[m], &h->free[m + 1], (k - m - 1) * sizeof(h->free[0]));
      k = --h->nfree;
    }
    h->free[k].page = i;
    h->free[k].npages = j - i;
    h->nfree++;
    i = j;
  }
}

/* Free list: sorted by page, no two extents adjacent. Caller holds lock. */
static void free_insert(uint64_t page, uint64_t n) {
  struct wpp_hdr *h = wpp_hdr;
  uint32_t i = 0;
  while (i < h->nfree && h->free[i].page < page)
    i++;
  if (i > 0 && h->free[i - 1].page + h->free[i - 1].npages == page) {
    h->free[i - 1].npages += n;
    if (i < h->nfree && page + n == h->free[i].page) {
      h->free[i - 1].npages += h->free[i].npages;
      memmove(&h->free[i], &h->free[i + 1],
              (h->nfree - i - 1) * sizeof(h->free[0]));
      h->nfree--;
    }
  } else if (i < h->nfree && page + n == h->free[i].page) {
    h->free[i].page = page;
    h->free[i].npages += n;
  } else if (page + n == h->bump) {
    h->bump = page; /* the top of the heap goes back to the bump pointer */
  } else if (h->nfree < WPP_MAX_FREE) {
    memmove(&h->free[i + 1], &h->free[i], (h->nfree - i) * sizeof(h->free[0]));
    h->free[i].page = page;
    h->free[i].npages = n;
    h->nfree++;
  } else {
    rebuild_free_list(); /* the list is full: rebuild it from the page map */
    return;
  }
  /* the last extent may now touch the bump pointer */
  if (h->nfree &&
      h->free[h->nfree - 1].page + h->free[h->nfree - 1].npages == h->bump) {
    h->bump = h->free[h->nfree - 1].page;
    h->nfree--;
  }
}

/* Take a range from the heap; -1 when full. Caller holds lock. */
static int64_t take(uint64_t n) {
  struct wpp_hdr *h = wpp_hdr;
  for (uint32_t i = 0; i < h->nfree; i++) {
    if (h->free[i].npages < n)
      continue;
    uint64_t page = h->free[i].page;
    h->free[i].page += n;
    h->free[i].npages -= n;
    if (!h->free[i].npages) {
      memmove(&h->free[i], &h->free[i + 1],
              (h->nfree - i - 1) * sizeof(h->free[0]));
      h->nfree--;
    }
    return (int64_t)page;
  }
  if (h->bump + n > WPP_HEAP_PAGES)
    return -1;
  h->bump += n;
  return (int64_t)(h->bump - n);
}

void *wpp_alloc(size_t len, int prot) {
  uint64_t n = npages_of(len);
  wpp_lock(&wpp_hdr->lock);
  int64_t page = take(n);
  /* a PROT_NONE reservation gets its file space when it is opened up */
  if (page >= 0 && prot != PROT_NONE && reserve_pages((uint64_t)page, n)) {
    free_insert((uint64_t)page, n);
    page = -1;
  }
  if (page >= 0) {
    mark((uint64_t)page, n, prot);
    wpp_hdr->live_pages += n;
  }
  wpp_unlock(&wpp_hdr->lock);
  if (page < 0)
    return NULL;
  char *p = HEAP + (uint64_t)page * WPP_PAGE;
  if (wpp_real.mprotect(p, n * WPP_PAGE, prot) != 0) {
    /* give it back rather than hand out memory with the wrong protection */
    wpp_lock(&wpp_hdr->lock);
    mark((uint64_t)page, n, -1);
    wpp_hdr->live_pages -= n;
    free_insert((uint64_t)page, n);
    wpp_unlock(&wpp_hdr->lock);
    return NULL;
  }
  return p;
}

static void release(char *p, size_t len) {
  uint64_t page = (uint64_t)(p - HEAP) / WPP_PAGE, n = npages_of(len);
  wpp_real.madvise(p, n * WPP_PAGE, MADV_REMOVE);
  wpp_real.mprotect(p, n * WPP_PAGE, PROT_NONE);
  wpp_lock(&wpp_hdr->lock);
  /* only pages that are live go back: a double munmap must not free twice */
  uint64_t i = 0;
  while (i < n) {
    if (!PMAP[page + i]) {
      i++;
      continue;
    }
    uint64_t j = i;
    while (j < n && PMAP[page + j])
      j++;
    mark(page + i, j - i, -1);
    wpp_hdr->live_pages -= j - i;
    free_insert(page + i, j - i);
    i = j;
  }
  wpp_unlock(&wpp_hdr->lock);
}

void *wpp_mmap(void *addr, size_t len, int prot, int flags, int fd, long off) {
  if (!wpp_on || !(flags & MAP_ANONYMOUS) || len == 0) {
    if (!wpp_on && (flags & MAP_ANONYMOUS))
      wpp_early_maps++;
    /* a file mapping is mapped again at a restore (fd.c), from the file:
     * what a private writable one changed is not in the file */
    if (wpp_on && !(flags & MAP_ANONYMOUS) && (flags & MAP_PRIVATE) &&
        (prot & PROT_WRITE))
      wpp_lost_at_failure("what the program writes to a private mapping of a "
                          "file (MAP_PRIVATE with PROT_WRITE)");
    return wpp_real.mmap(addr, len, prot, flags, fd, off);
  }
  if (len > WPP_SIZE) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  if (flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) {
    if (!wpp_in_heap(addr, len) || ((uintptr_t)addr & (WPP_PAGE - 1)))
      return wpp_real.mmap(addr, len, prot, flags, fd, off);
    /* a fixed mapping inside the heap replaces live pages with zeros */
    uint64_t page = wpp_heap_off(addr) / WPP_PAGE, n = npages_of(len);
    for (uint64_t i = 0; i < n; i++)
      if (!PMAP[page + i] || (flags & MAP_FIXED_NOREPLACE)) {
        errno = (flags & MAP_FIXED_NOREPLACE) ? EEXIST : ENOMEM;
        return MAP_FAILED;
      }
    wpp_real.madvise(addr, n * WPP_PAGE, MADV_REMOVE);
    wpp_lock(&wpp_hdr->lock);
    int full = prot != PROT_NONE && reserve_pages(page, n);
    wpp_unlock(&wpp_hdr->lock);
    mark(page, n, full ? PROT_NONE : prot);
    wpp_real.mprotect(addr, n * WPP_PAGE, full ? PROT_NONE : prot);
    if (full) { /* the old pages are gone, as the program asked */
      errno = ENOMEM;
      return MAP_FAILED;
    }
    return addr;
  }
  void *p = wpp_alloc(len, prot);
  if (!p) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  return p;
}

int wpp_munmap(void *addr, size_t len) {
  if (!wpp_on || !wpp_in_heap(addr, len))
    return wpp_real.munmap(addr, len);
  if (((uintptr_t)addr & (WPP_PAGE - 1)) || len == 0) {
    errno = EINVAL;
    return -1;
  }
  release(addr, len);
  return 0;
}

void *wpp_mremap(void *old, size_t oldlen, size_t newlen, int flags,
                 void *newaddr) {
  if (!wpp_on || !wpp_in_heap(old, oldlen))
    return wpp_real.mremap(old, oldlen, newlen, flags, newaddr);
  uint64_t on = npages_of(oldlen), nn = npages_of(newlen);
  if ((flags & MREMAP_FIXED) || newlen == 0) {
    errno = EINVAL;
    return MAP_FAILED;
  }
  if (nn <= on) {
    if (nn < on)
      release((char *)old + nn * WPP_PAGE, (on - nn) * WPP_PAGE);
    return old;
  }
  if (!(flags & MREMAP_MAYMOVE)) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  if (newlen > WPP_SIZE) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  int prot = PMAP[wpp_heap_off(old) / WPP_PAGE] & PROT_BITS;
  if (!(prot & PROT_READ)) /* the copy must read it */
    wpp_real.mprotect(old, on * WPP_PAGE, PROT_READ);
  char *p = wpp_alloc(newlen, prot | PROT_READ | PROT_WRITE);
  if (!p) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  memcpy(p, old, on * WPP_PAGE);
  if (!(prot & PROT_WRITE))
    wpp_mprotect(p, nn * WPP_PAGE, prot);
  release(old, on * WPP_PAGE);
  return p;
}

int wpp_mprotect(void *addr, size_t len, int prot) {
  if (!wpp_on || !wpp_in_heap(addr, len))
    return wpp_real.mprotect(addr, len, prot);
  /* the page map first: a thread stopped between the two resumes into the
   * kernel call, which is idempotent; the other order would restore the
   * old protection under a thread that believes it changed */
  uint64_t page = wpp_heap_off(addr) / WPP_PAGE, n = npages_of(len);
  if (prot != PROT_NONE) { /* opening up a reservation: file space first */
    int closed = 0;
    for (uint64_t i = 0; i < n && !closed; i++)
      closed = PMAP[page + i] && !(PMAP[page + i] & PROT_BITS);
    wpp_lock(&wpp_hdr->lock);
    int full = closed && reserve_pages(page, n);
    wpp_unlock(&wpp_hdr->lock);
    if (full)
      return -1;
  }
  uint8_t *old = __builtin_alloca(n <= 4096 ? n : 1);
  if (n <= 4096)
    memcpy(old, PMAP + page, n);
  for (uint64_t i = 0; i < n; i++)
    if (PMAP[page + i])
      PMAP[page + i] = 0x80 | (prot & PROT_BITS);
  int r = wpp_real.mprotect(addr, len, prot);
  if (r != 0 && n <= 4096) {
    int e = errno;
    memcpy(PMAP + page, old, n);
    errno = e;
  }
  return r;
}

int wpp_madvise(void *addr, size_t len, int advice) {
  /* Pages of a shared file mapping are not zeroed by DONTNEED or FREE; the
   * program expects zeros (DONTNEED) or don't-care (FREE): punch them, and
   * reserve them again (still mapped, they may be stored to). */
  if (!wpp_on || !wpp_in_heap(addr, len) ||
      (advice != MADV_DONTNEED && advice != MADV_FREE))
    return wpp_real.madvise(addr, len, advice);
  int r = wpp_real.madvise(addr, len, MADV_REMOVE);
  uint64_t page = wpp_heap_off(addr) / WPP_PAGE, n = npages_of(len);
  wpp_lock(&wpp_hdr->lock);
  int full = r == 0 && PMAP[page] && reserve_pages(page, n);
  wpp_unlock(&wpp_hdr->lock);
  if (full) {
    static int said;
    if (!said++)
      wpp_warn("the file system is full: pages given back with madvise have "
               "no file space again, and a store to them kills the program");
  }
  return r;
}

/* Map the context file at WPP_BASE. The header and page map are read-write;
 * the heap is PROT_NONE except for the pages the page map says are live,
 * which get their recorded protection back (restore) -- on a fresh file
 * there are none. Returns 0 or -errno. */
int wpp_mem_map(int fd) {
  void *b = wpp_real.mmap((void *)(uintptr_t)WPP_BASE, WPP_HEAP_OFF,
                          PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
  if (b == MAP_FAILED)
    return -errno;
  if (b != (void *)(uintptr_t)WPP_BASE)
    return -EEXIST; /* an old kernel that ignores MAP_FIXED_NOREPLACE */
  void *hp = wpp_real.mmap(HEAP, WPP_SIZE - WPP_HEAP_OFF, PROT_NONE,
                           MAP_SHARED | MAP_FIXED_NOREPLACE | MAP_NORESERVE, fd,
                           WPP_HEAP_OFF);
  if (hp != HEAP)
    return hp == MAP_FAILED ? -errno : -EEXIST;
  uint64_t top = wpp_hdr->bump;
  for (uint64_t i = 0; i < top;) {
    if (!PMAP[i]) {
      i++;
      continue;
    }
    uint64_t j = i;
    while (j < top && PMAP[j] == PMAP[i])
      j++;
    if (wpp_real.mprotect(HEAP + i * WPP_PAGE, (j - i) * WPP_PAGE,
                          PMAP[i] & PROT_BITS) != 0)
      return -errno;
    i = j;
  }
  return 0;
}

/* musl's malloc takes memory with brk while the break can grow. A
 * PROT_NONE page at the break stops it, and malloc falls back to mmap --
 * ours. Must run before the first malloc. */
void wpp_block_brk(void) {
  uintptr_t brk0 = (uintptr_t)syscall(SYS_brk, 0);
  brk0 = (brk0 + WPP_PAGE - 1) & ~(uintptr_t)(WPP_PAGE - 1);
  wpp_real.mmap((void *)brk0, WPP_PAGE, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
}
