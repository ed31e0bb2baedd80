// SPDX-License-Identifier: Apache-2.0
//
// trace.cpp -- reads a trace file (include/pmkit/trace_format.h) into
// events sorted by their global seq, the initial image of every pool, and
// the location and mark strings. The file is mapped read-only and payloads
// are referenced in place. Every inconsistency is an Error naming the byte
// offset, so a truncated or foreign file never crashes the explorer.

#include "trace.h"

#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pmx {

namespace {

std::string at(uint64_t off) { return " at byte " + std::to_string(off); }

} // namespace

Buffer::Buffer(size_t n) : n_(n) {
  if (!n)
    return;
  void *m = mmap(nullptr, n, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    throw Error("out of memory for a " + std::to_string(n) + "-byte image");
  p_ = (uint8_t *)m;
}

Buffer &Buffer::operator=(Buffer &&o) noexcept {
  if (this != &o) {
    if (p_)
      munmap(p_, n_);
    p_ = o.p_, n_ = o.n_;
    o.p_ = nullptr, o.n_ = 0;
  }
  return *this;
}

Buffer::~Buffer() {
  if (p_)
    munmap(p_, n_);
}

Trace::Trace(const std::string &path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error("cannot open trace " + path + ": " + strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    throw Error(path + " is not a regular file");
  }
  mapSize_ = (size_t)sb.st_size;
  if (mapSize_ < sizeof(pmkit_trace_header)) {
    close(fd);
    throw Error(path + " is not a pmkit trace (" + std::to_string(mapSize_) +
                " bytes, shorter than a trace header)");
  }
  map_ = mmap(nullptr, mapSize_, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw Error("cannot map trace " + path + ": " + strerror(errno));
  }
  const uint8_t *d = (const uint8_t *)map_;
  pmkit_trace_header h;
  memcpy(&h, d, sizeof h);
  if (memcmp(h.magic, PMKIT_TRACE_MAGIC, 8) != 0)
    throw Error(path + " is not a pmkit trace (bad magic)");
  if (h.version < 1 || h.version > PMKIT_TRACE_VERSION)
    throw Error(path + " has trace format version " +
                std::to_string(h.version) +
                "; this reader reads versions 1 to " +
                std::to_string(PMKIT_TRACE_VERSION));
  if (h.header_size != sizeof h || h.event_size != sizeof(pmkit_trace_event))
    throw Error(path + ": header sizes do not match this format version");

  uint64_t off = sizeof h;
  const uint64_t end = mapSize_;
  while (off < end) {
    if (end - off < sizeof(pmkit_trace_block))
      throw Error(path + " is truncated: partial block header" + at(off));
    pmkit_trace_block b;
    memcpy(&b, d + off, sizeof b);
    uint64_t p = off + sizeof b;
    if (b.size > end - p)
      throw Error(path + " is truncated: a block of " + std::to_string(b.size) +
                  " bytes runs past the end" + at(off));
    uint64_t q = p + b.size;
    switch (b.type) {
    case PMKIT_TB_EVENTS:
      threads = std::max(threads, b.tid + 1);
      while (p < q) {
        if (q - p < sizeof(pmkit_trace_event))
          throw Error(path + ": partial event" + at(p));
        pmkit_trace_event e;
        memcpy(&e, d + p, sizeof e);
        p += sizeof e;
        Event ev{e.seq, e.addr, e.arg,  nullptr, e.loc,
                 b.tid, e.kind, e.size, e.aux};
        if (e.kind < PMKIT_EV_STORE || e.kind > PMKIT_EV_CALL)
          throw Error(path + ": unknown event kind " + std::to_string(e.kind) +
                      at(p - sizeof e));
        if ((e.kind == PMKIT_EV_STORE || e.kind == PMKIT_EV_NTSTORE ||
             e.kind == PMKIT_EV_RMW) &&
            e.size == 0) {
          uint64_t pad = (e.arg + 7) & ~7ull;
          if (pad > q - p)
            throw Error(path + ": bad payload length" + at(p - sizeof e));
          ev.data = d + p;
          p += pad;
        } else if (e.size != 0 && e.size != 1 && e.size != 2 && e.size != 4 &&
                   e.size != 8) {
          throw Error(path + ": bad access size" + at(p - sizeof e));
        }
        events.push_back(ev);
      }
      break;
    case PMKIT_TB_STRING:
      while (p < q) {
        pmkit_trace_string s;
        if (q - p < sizeof s)
          throw Error(path + ": partial string record" + at(p));
        memcpy(&s, d + p, sizeof s);
        p += sizeof s;
        uint64_t pad = (s.len + 7u) & ~7ull;
        if (pad > q - p)
          throw Error(path + ": string runs past its block" + at(p));
        std::string text((const char *)d + p, s.len);
        (s.kind == PMKIT_STR_MARK ? marks : locs)[s.id] = text;
        p += pad;
      }
      break;
    case PMKIT_TB_POOL: {
      pmkit_trace_pool ph;
      if (q - p < sizeof ph)
        throw Error(path + ": partial pool record" + at(p));
      memcpy(&ph, d + p, sizeof ph);
      p += sizeof ph;
      uint64_t ppad = (ph.path_len + 7ull) & ~7ull;
      if (ppad > q - p || ph.size > (1ull << 46) ||
          ph.npages > ph.size / PMKIT_TRACE_PAGE ||
          ph.npages * (8 + PMKIT_TRACE_PAGE) != q - p - ppad)
        throw Error(path + ": inconsistent pool record" + at(off));
      Pool pool;
      pool.id = ph.pool_id;
      pool.path.assign((const char *)d + p, ph.path_len);
      p += ppad;
      pool.base = ph.base;
      pool.size = ph.size;
      pool.checksum = ph.checksum;
      pool.openSeq = ph.seq;
      pool.image = Buffer(ph.size);
      for (uint64_t i = 0; i < ph.npages; i++) {
        uint64_t pg;
        memcpy(&pg, d + p, 8);
        if (pg >= ph.size / PMKIT_TRACE_PAGE ||
            (!pool.pages.empty() && pg <= pool.pages.back()))
          throw Error(path + ": pool page out of range or order" + at(p));
        memcpy(pool.image.data() + pg * PMKIT_TRACE_PAGE, d + p + 8,
               PMKIT_TRACE_PAGE);
        pool.pages.push_back(pg);
        p += 8 + PMKIT_TRACE_PAGE;
      }
      if (sparseChecksum(pool.image.data(), pool.size, pool.pages) !=
          pool.checksum)
        throw Error(path + ": the initial image of pool " + pool.path +
                    " does not match its checksum");
      pools.push_back(std::move(pool));
      break;
    }
    case PMKIT_TB_END:
      complete = true;
      break;
    default:
      throw Error(path + ": unknown block type " + std::to_string(b.type) +
                  at(off));
    }
    off = q;
  }
  std::stable_sort(
      events.begin(), events.end(),
      [](const Event &a, const Event &b) { return a.seq < b.seq; });
  for (size_t i = 1; i < events.size(); i++)
    if (events[i].seq == events[i - 1].seq &&
        events[i].kind != PMKIT_EV_POOL_OPEN &&
        events[i - 1].kind != PMKIT_EV_POOL_OPEN)
      throw Error(path + ": two events share seq " +
                  std::to_string(events[i].seq));
}

uint64_t sparseChecksum(const uint8_t *img, uint64_t size,
                        const std::vector<uint64_t> &pages) {
  auto powPrime = [](uint64_t n) {
    uint64_t r = 1, b = 0x100000001b3ull;
    for (; n; n >>= 1, b *= b)
      if (n & 1)
        r *= b;
    return r;
  };
  const uint64_t words = PMKIT_TRACE_PAGE / 8;
  uint64_t h = 0xcbf29ce484222325ull, next = 0; // next page not yet hashed
  for (uint64_t pg : pages) {
    h *= powPrime((pg - next) * words); // zero words only multiply
    const uint8_t *w = img + pg * PMKIT_TRACE_PAGE;
    for (uint64_t i = 0; i < words; i++) {
      uint64_t v;
      memcpy(&v, w + 8 * i, 8);
      h ^= v;
      h *= 0x100000001b3ull;
    }
    next = pg + 1;
  }
  return h * powPrime((size / PMKIT_TRACE_PAGE - next) * words);
}

Trace::~Trace() {
  if (map_)
    munmap(map_, mapSize_);
}

std::string Trace::locText(uint32_t id) const {
  if (!id)
    return "?";
  auto it = locs.find(id);
  if (it != locs.end())
    return it->second;
  char buf[32];
  snprintf(buf, sizeof buf, "loc#%08x", id);
  return buf;
}

std::string Trace::markText(uint32_t id) const {
  auto it = marks.find(id);
  return it != marks.end() ? it->second : "mark#" + std::to_string(id);
}

const Pool *Trace::poolOf(uint64_t addr) const {
  for (const Pool &p : pools)
    if (addr >= p.base && addr - p.base < p.size)
      return &p;
  return nullptr;
}

} // namespace pmx
