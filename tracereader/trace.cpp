// SPDX-License-Identifier: Apache-2.0
//
// trace.cpp -- reads a trace file (include/pmkit/trace_format.h) into
// events sorted by their global seq, the initial image of every pool, and
// the location and mark strings. The file is mapped read-only and payloads
// are referenced in place. Every field is validated, each event by its
// kind and every address against the pools once all blocks are read; an
// inconsistency is an Error of one line naming the byte offset or the
// event, so that a damaged or hostile file never crashes, hangs or misleads
// the explorer and the simulator (docs/explorer.md lists what is refused;
// fuzz/ tries arbitrary input).

#include "trace.h"

#include "pmkit/pmkit.h"

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

std::string eventAt(uint64_t off) {
  return ": event at byte " + std::to_string(off) + ": ";
}

std::string hex(uint64_t v) {
  char b[24];
  snprintf(b, sizeof b, "%#llx", (unsigned long long)v);
  return b;
}

// The kinds as trace_format.h names them (PMKIT_EV_*), for messages.
const char *kindName(uint8_t k) {
  static const char *const names[] = {
      "?",       "STORE",   "NTSTORE",    "RMW",      "MEMSET",    "FLUSH",
      "FENCE",   "LOAD",    "MARK_BEGIN", "MARK_END", "POOL_OPEN", "POOL_CLOSE",
      "ACQUIRE", "RELEASE", "SEQPOINT",   "CALL"};
  return k < sizeof names / sizeof *names ? names[k] : "?";
}

// "a STORE", "an RMW".
std::string aKind(uint8_t k) {
  bool an = k == PMKIT_EV_NTSTORE || k == PMKIT_EV_RMW || k == PMKIT_EV_ACQUIRE;
  return std::string(an ? "an " : "a ") + kindName(k);
}

bool accessSize(uint8_t s) { return s == 1 || s == 2 || s == 4 || s == 8; }

// What is wrong with an event's fields on their own, or "". Addresses are
// checked against the pools once every block is read (checkAddresses).
std::string badFields(const pmkit_trace_event &e) {
  auto k = [&] { return aKind(e.kind) + " event"; };
  if (e.seq == 0)
    return k() + " with seq 0 (seqs start at 1)";
  // Fields a kind does not use are 0 (trace_format.h).
  enum : unsigned { Addr = 1, Arg = 2, Size = 4, Aux = 8 };
  unsigned unused = 0;
  switch (e.kind) {
  case PMKIT_EV_STORE:
  case PMKIT_EV_NTSTORE:
  case PMKIT_EV_RMW:
  case PMKIT_EV_LOAD:
    unused = Aux;
    if (e.size == 0 && e.arg == 0)
      return k() + " of 0 bytes";
    if (e.size != 0 && !accessSize(e.size))
      return k() + " of size " + std::to_string(e.size) +
             " (1, 2, 4, 8, or 0 with a length)";
    break;
  case PMKIT_EV_MEMSET:
    unused = Size;
    if (e.arg == 0)
      return k() + " of 0 bytes";
    if (e.aux > 0xff)
      return k() + " with fill byte " + std::to_string(e.aux);
    break;
  case PMKIT_EV_FLUSH:
    unused = Arg | Size;
    if (e.aux < PMKIT_FLUSH_CLFLUSH || e.aux > PMKIT_FLUSH_CLWB)
      return k() + " of unknown flush kind " + std::to_string(e.aux) +
             " (1 clflush, 2 clflushopt, 3 clwb)";
    break;
  case PMKIT_EV_FENCE:
    unused = Addr | Arg | Size;
    if (e.aux < PMKIT_FENCE_SFENCE || e.aux > PMKIT_FENCE_LOCKED)
      return k() + " of unknown fence kind " + std::to_string(e.aux) +
             " (1 sfence, 2 mfence, 3 locked)";
    break;
  case PMKIT_EV_MARK_BEGIN:
  case PMKIT_EV_MARK_END:
    unused = Addr | Size | Aux;
    if (e.arg == 0 || e.arg > UINT32_MAX)
      return k() + " with mark id " + std::to_string(e.arg);
    break;
  case PMKIT_EV_POOL_OPEN:
  case PMKIT_EV_POOL_CLOSE:
    unused = Size | Aux;
    break;
  case PMKIT_EV_ACQUIRE:
  case PMKIT_EV_RELEASE: {
    unsigned known = PMKIT_SYNC_VOLATILE | PMKIT_SYNC_RMW |
                     (e.kind == PMKIT_EV_ACQUIRE ? PMKIT_SYNC_FAILED : 0);
    if (e.addr == 0)
      return k() + " at address 0";
    if (e.size != 0 && !accessSize(e.size))
      return k() + " of size " + std::to_string(e.size);
    if (e.aux & ~known)
      return k() + " with unknown sync flags " + hex(e.aux);
    break;
  }
  case PMKIT_EV_SEQPOINT:
    unused = Addr | Arg | Size;
    if (e.aux & ~PMKIT_SYNC_VOLATILE)
      return k() + " with unknown sync flags " + hex(e.aux);
    break;
  case PMKIT_EV_CALL:
    unused = Arg | Size | Aux;
    break;
  }
  if ((unused & Addr) && e.addr)
    return k() + " with address " + hex(e.addr) + " (its kind has none)";
  if ((unused & Arg) && e.arg)
    return k() + " with arg " + std::to_string(e.arg) + " (its kind has none)";
  if ((unused & Size) && e.size)
    return k() + " with size " + std::to_string(e.size) +
           " (its kind has none)";
  if ((unused & Aux) && e.aux)
    return k() + " with aux " + std::to_string(e.aux) + " (its kind has none)";
  return "";
}

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
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer; a trace
  // is a regular file, and anything else is refused before it is read.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw Error("cannot open trace " + path + ": " + strerror(errno));
  struct stat sb = {};
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    throw Error(path + " is not a regular file" +
                (S_ISFIFO(sb.st_mode)  ? " (a FIFO)"
                 : S_ISDIR(sb.st_mode) ? " (a directory)"
                                       : ""));
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
  try {
    parse((const uint8_t *)map_, mapSize_, path);
  } catch (...) {
    munmap(map_, mapSize_); // the destructor does not run
    map_ = nullptr;
    throw;
  }
}

Trace::Trace(const uint8_t *data, size_t size, const std::string &name) {
  if (size < sizeof(pmkit_trace_header))
    throw Error(name + " is not a pmkit trace (" + std::to_string(size) +
                " bytes, shorter than a trace header)");
  parse(data, size, name);
}

void Trace::parse(const uint8_t *d, uint64_t end, const std::string &path) {
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
  if (h.flags & ~PMKIT_TRACE_F_LOADS)
    throw Error(path + ": unknown header flags " + hex(h.flags) + at(20));
  for (uint32_t r : h.reserved)
    if (r)
      throw Error(path + ": reserved header fields are not zero" + at(44));

  const uint8_t maxKind = h.version >= 3   ? PMKIT_EV_CALL
                          : h.version == 2 ? PMKIT_EV_SEQPOINT
                                           : PMKIT_EV_POOL_CLOSE;
  std::vector<uint64_t> offsets;                     // of each event read
  std::vector<uint64_t> lastSeq(TraceMaxThreads, 0); // per thread
  uint64_t poolBytes = 0, endEvents = 0, endOff = 0, off = sizeof h;
  while (off < end) {
    if (complete)
      throw Error(path + ": block at byte " + std::to_string(off) +
                  " follows the END block (END must be the last block)");
    if (end - off < sizeof(pmkit_trace_block))
      throw Error(path + " is truncated: partial block header" + at(off));
    pmkit_trace_block b;
    memcpy(&b, d + off, sizeof b);
    uint64_t p = off + sizeof b;
    if (b.size > end - p)
      throw Error(path + " is truncated: a block of " + std::to_string(b.size) +
                  " bytes runs past the end" + at(off));
    if (b.size % 8)
      throw Error(path + ": a block of " + std::to_string(b.size) +
                  " bytes, not a multiple of 8" + at(off));
    if (b.type != PMKIT_TB_EVENTS && b.tid != 0)
      throw Error(path + ": a block of type " + std::to_string(b.type) +
                  " with thread id " + std::to_string(b.tid) +
                  " (only EVENTS blocks have one)" + at(off));
    uint64_t q = p + b.size;
    switch (b.type) {
    case PMKIT_TB_EVENTS:
      if (b.tid >= TraceMaxThreads)
        throw Error(path + ": EVENTS block at byte " + std::to_string(off) +
                    ": thread id " + std::to_string(b.tid) +
                    " out of range (a trace has at most " +
                    std::to_string(TraceMaxThreads) + " threads)");
      threads = std::max(threads, b.tid + 1);
      while (p < q) {
        if (q - p < sizeof(pmkit_trace_event))
          throw Error(path + ": partial event" + at(p));
        pmkit_trace_event e;
        const uint64_t eo = p;
        memcpy(&e, d + p, sizeof e);
        p += sizeof e;
        if (e.kind < PMKIT_EV_STORE || e.kind > maxKind)
          throw Error(path + ": unknown event kind " + std::to_string(e.kind) +
                      " for format version " + std::to_string(h.version) +
                      at(eo));
        std::string bad = badFields(e);
        if (!bad.empty())
          throw Error(path + eventAt(eo) + bad);
        if (e.seq <= lastSeq[b.tid])
          throw Error(path + eventAt(eo) + "seq " + std::to_string(e.seq) +
                      " after seq " + std::to_string(lastSeq[b.tid]) +
                      " in thread " + std::to_string(b.tid) +
                      " (seqs increase in each thread)");
        lastSeq[b.tid] = e.seq;
        Event ev{e.seq, e.addr, e.arg,  nullptr, e.loc,
                 b.tid, e.kind, e.size, e.aux};
        if (ev.writes() && e.kind != PMKIT_EV_MEMSET && e.size == 0) {
          if (e.arg > q - p)
            throw Error(path + eventAt(eo) + "a payload of " +
                        std::to_string(e.arg) + " bytes runs past its block");
          ev.data = d + p;
          p += (e.arg + 7) & ~7ull; // within the block: q is a multiple of 8
        }
        events.push_back(ev);
        offsets.push_back(eo);
      }
      break;
    case PMKIT_TB_STRING:
      while (p < q) {
        pmkit_trace_string s;
        if (q - p < sizeof s)
          throw Error(path + ": partial string record" + at(p));
        memcpy(&s, d + p, sizeof s);
        const uint16_t maxStr =
            h.version >= 4 ? PMKIT_STR_STACK : PMKIT_STR_MARK;
        if (s.id == 0 || s.kind < PMKIT_STR_LOC || s.kind > maxStr)
          throw Error(path + ": a string record with id " +
                      std::to_string(s.id) + " and kind " +
                      std::to_string(s.kind) + " (ids are non-zero, kinds " +
                      "1 location, 2 mark" +
                      (h.version >= 4 ? ", 3 call stack" : "") + ")" + at(p));
        const uint64_t so = p;
        p += sizeof s;
        uint64_t pad = (s.len + 7u) & ~7ull;
        if (pad > q - p)
          throw Error(path + ": string runs past its block" + at(p));
        if (s.kind == PMKIT_STR_STACK) {
          if (s.len % 4 || s.len == 0 || s.len / 4 > 1 + PMKIT_TRACE_FRAMES)
            throw Error(path + ": a call stack record of " +
                        std::to_string(s.len) + " bytes (1 to " +
                        std::to_string(1 + PMKIT_TRACE_FRAMES) +
                        " location ids of 4 bytes)" + at(so));
          std::vector<uint32_t> ids(s.len / 4);
          memcpy(ids.data(), d + p, s.len);
          stacks[s.id] = std::move(ids);
        } else {
          std::string text((const char *)d + p, s.len);
          (s.kind == PMKIT_STR_MARK ? marks : locs)[s.id] = text;
        }
        p += pad;
      }
      break;
    case PMKIT_TB_POOL:
      poolBytes += readPool(d, off, p, q, path);
      if (poolBytes > TraceMaxPoolTotal)
        throw Error(path + ": POOL block at byte " + std::to_string(off) +
                    ": the pools add up to more than " +
                    std::to_string(TraceMaxPoolTotal >> 40) + " TiB");
      break;
    case PMKIT_TB_END: {
      pmkit_trace_end fin;
      const std::string endAt =
          path + ": END block at byte " + std::to_string(off) + ": ";
      if (b.size != sizeof fin)
        throw Error(endAt + std::to_string(b.size) + " bytes, not " +
                    std::to_string(sizeof fin));
      memcpy(&fin, d + p, sizeof fin);
      if (fin.dropped)
        throw Error(endAt + "the recorder dropped " +
                    std::to_string(fin.dropped) +
                    " events (a write to the trace failed), so crash images "
                    "would be wrong; record the trace again");
      endEvents = fin.events; // checked once no block follows
      endOff = off;
      complete = true;
      break;
    }
    default:
      throw Error(path + ": unknown block type " + std::to_string(b.type) +
                  at(off));
    }
    off = q;
  }
  if (complete && endEvents != events.size())
    throw Error(path + ": END block at byte " + std::to_string(endOff) +
                ": counts " + std::to_string(endEvents) +
                " events, but the trace has " + std::to_string(events.size()));
  checkAddresses(offsets, path);
  std::stable_sort(
      events.begin(), events.end(),
      [](const Event &a, const Event &b) { return a.seq < b.seq; });
  for (size_t i = 1; i < events.size(); i++)
    if (events[i].seq == events[i - 1].seq)
      throw Error(path + ": two events share seq " +
                  std::to_string(events[i].seq) + " (events " +
                  std::to_string(i - 1) + " and " + std::to_string(i) + ")");
  checkPoolEvents(path);
  resolveSites();
}

// A location id without a STRING record: "?" for 0 (none recorded), else
// the id (the recorder's table of written strings was full).
static std::string unnamedLoc(uint32_t id) {
  if (!id)
    return "?";
  char buf[32];
  snprintf(buf, sizeof buf, "loc#%08x", id);
  return buf;
}

// Whether a frame is in pmkit's code: its runtime ("pmkit:...") or code
// inlined from its headers (pmkit::atomic of arp.hpp).
static bool pmkitFrame(const std::string &f) {
  return f.rfind("pmkit:", 0) == 0 ||
         f.find("include/pmkit/") != std::string::npos;
}

// Whether a frame is in a system library's headers (std::atomic, the C++
// library's algorithms): code the program uses but did not write.
static bool libraryFrame(const std::string &f) {
  return f.rfind("/usr/", 0) == 0 ||
         f.find("/include/c++/") != std::string::npos;
}

// The frames of every location and stack id, and the first of them in the
// program's own code.
void Trace::resolveSites() {
  auto split = [](const std::string &text, std::vector<std::string> &out) {
    static const std::string arrow = " <- ";
    size_t b = 0;
    for (size_t e; (e = text.find(arrow, b)) != std::string::npos;
         b = e + arrow.size())
      out.push_back(text.substr(b, e - b));
    out.push_back(text.substr(b));
  };
  auto textOf = [&](uint32_t id) {
    auto it = locs.find(id);
    return it != locs.end() ? it->second : unnamedLoc(id);
  };
  auto add = [&](uint32_t id, const std::vector<uint32_t> &ids) {
    Site st;
    for (size_t i = 0; i < ids.size(); i++) {
      if (i && !ids[i]) // the recorder cut the stack here
        st.frames.push_back("...");
      else
        split(textOf(ids[i]), st.frames);
    }
    // The first frame of the program's own code; else of code it uses;
    // else the innermost (all of it is pmkit's).
    auto first = [&](bool (*skip)(const std::string &)) {
      for (size_t i = 0; i < st.frames.size(); i++)
        if (st.frames[i] != "?" && st.frames[i] != "..." && !skip(st.frames[i]))
          return i;
      return st.frames.size();
    };
    st.user = first(
        [](const std::string &f) { return pmkitFrame(f) || libraryFrame(f); });
    if (st.user == st.frames.size())
      st.user = first(pmkitFrame);
    if (st.user == st.frames.size())
      st.user = 0;
    sites_[id] = std::move(st);
  };
  for (auto &[id, text] : locs)
    add(id, {id});
  for (auto &[id, ids] : stacks)
    if (!locs.count(id))
      add(id, ids);
}

const Trace::Site *Trace::site(uint32_t id) const {
  auto it = sites_.find(id);
  return it == sites_.end() ? nullptr : &it->second;
}

// A POOL block whose payload is [p, q) at byte off; returns the pool's size.
uint64_t Trace::readPool(const uint8_t *d, uint64_t off, uint64_t p, uint64_t q,
                         const std::string &path) {
  pmkit_trace_pool ph;
  if (q - p < sizeof ph)
    throw Error(path + ": partial pool record" + at(off));
  memcpy(&ph, d + p, sizeof ph);
  p += sizeof ph;
  const std::string block =
      path + ": POOL block at byte " + std::to_string(off) + ": ";
  const std::string what = block + "pool " + std::to_string(ph.pool_id);
  if (pools.size() >= TraceMaxPools)
    throw Error(block + "more than " + std::to_string(TraceMaxPools) +
                " pools");
  if (ph.pool_id != pools.size())
    throw Error(what + " where pool " + std::to_string(pools.size()) +
                " comes next (ids count up from 0 in file order)");
  if (ph.seq == 0 || (!pools.empty() && ph.seq <= pools.back().openSeq))
    throw Error(what + " opens at seq " + std::to_string(ph.seq) +
                ", not after the pool before it");
  if (ph.base == 0 || ph.base % PMKIT_TRACE_PAGE)
    throw Error(what + " has base " + hex(ph.base) +
                " (non-zero and page-aligned)");
  if (ph.size == 0 || ph.size % PMKIT_TRACE_PAGE || ph.size > TraceMaxPoolSize)
    throw Error(what + " has size " + std::to_string(ph.size) +
                " (a multiple of 4096 bytes up to " +
                std::to_string(TraceMaxPoolSize >> 40) + " TiB)");
  if (ph.base > TraceAddressLimit - ph.size)
    throw Error(what + " at " + hex(ph.base) +
                " ends above the user address space");
  if (ph.path_len == 0 || ph.path_len > 4096)
    throw Error(what + " has a path of " + std::to_string(ph.path_len) +
                " bytes (1 to 4096)");
  uint64_t ppad = (ph.path_len + 7ull) & ~7ull;
  if (ppad > q - p || ph.npages > ph.size / PMKIT_TRACE_PAGE ||
      ph.npages * (8 + PMKIT_TRACE_PAGE) != q - p - ppad)
    throw Error(path + ": inconsistent pool record" + at(off));
  Pool pool;
  pool.id = ph.pool_id;
  pool.path.assign((const char *)d + p, ph.path_len);
  // The path is shown in messages and reports, one line each.
  for (unsigned char c : pool.path)
    if (c < 0x20 || c == 0x7f)
      throw Error(what + " has a path with control character " + hex(c));
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
  if (sparseChecksum(pool.image.data(), pool.size, pool.pages) != pool.checksum)
    throw Error(path + ": the initial image of pool " + pool.path +
                " does not match its checksum" + at(off));
  pools.push_back(std::move(pool));
  return ph.size;
}

// Every address an event names lies in a pool, whichever block registered
// it: a thread's events are written when its buffer fills, so a pool's
// events and its POOL block come in any file order. Acquires and releases
// may be in DRAM; fences and marks have no address.
void Trace::checkAddresses(const std::vector<uint64_t> &offsets,
                           const std::string &path) const {
  // The pools' ranges by base, and the furthest end of each prefix: the
  // pool that holds an address and reaches furthest past it ends at the
  // furthest end among the pools based at or below it, if that lies
  // above the address.
  std::vector<std::pair<uint64_t, uint64_t>> rs; // base, end
  for (const Pool &p : pools)
    rs.push_back({p.base, p.base + p.size});
  std::sort(rs.begin(), rs.end());
  for (size_t i = 1; i < rs.size(); i++)
    rs[i].second = std::max(rs[i].second, rs[i - 1].second);
  // The end of the pool that holds a and reaches furthest, or 0.
  auto endOf = [&](uint64_t a) -> uint64_t {
    auto it =
        std::upper_bound(rs.begin(), rs.end(), std::make_pair(a, UINT64_MAX));
    return it != rs.begin() && std::prev(it)->second > a ? std::prev(it)->second
                                                         : 0;
  };
  for (size_t i = 0; i < events.size(); i++) {
    const Event &e = events[i];
    bool range = e.writes() || e.kind == PMKIT_EV_LOAD;
    if (!range && e.kind != PMKIT_EV_FLUSH && e.kind != PMKIT_EV_CALL)
      continue;
    uint64_t len = range ? e.length() : 1, end = endOf(e.addr);
    // A library call's read (a LOAD of size 0) of a string that runs to
    // the pool's end counts the NUL it did not find there.
    uint64_t slack = e.kind == PMKIT_EV_LOAD && !e.size;
    if (end && end - e.addr + slack >= len)
      continue;
    throw Error(path + eventAt(offsets[i]) + aKind(e.kind) +
                (range ? " of " + std::to_string(len) + " bytes" : "") +
                " at " + hex(e.addr) +
                (end ? " runs past the end of its pool (" + hex(end) + ")"
                     : " is outside every pool"));
  }
}

// POOL_OPEN and POOL_CLOSE events against the POOL blocks, in seq order:
// each pool opens at the seq of its block, with one POOL_OPEN event there
// (an incomplete trace may have lost it with its thread's last buffer); a
// pool is closed at most once, and pools open at the same time do not
// overlap. A pool may be opened again at the same address once closed.
void Trace::checkPoolEvents(const std::string &path) const {
  std::vector<const Pool *> open;
  std::vector<bool> opened(pools.size(), false);
  size_t next = 0; // pools are in openSeq order (readPool)
  auto name = [&](size_t i) {
    return path + ": event " + std::to_string(i) + " (" +
           kindName(events[i].kind) + ", seq " + std::to_string(events[i].seq) +
           ")";
  };
  auto openUpTo = [&](uint64_t seq) {
    for (; next < pools.size() && pools[next].openSeq <= seq; next++) {
      const Pool &p = pools[next];
      for (const Pool *o : open)
        if (p.base < o->base + o->size && o->base < p.base + p.size)
          throw Error(path + ": pool " + std::to_string(p.id) + " at " +
                      hex(p.base) + " overlaps pool " + std::to_string(o->id) +
                      " at " + hex(o->base) + ", which is still open");
      open.push_back(&p);
    }
  };
  for (size_t i = 0; i < events.size(); i++) {
    const Event &e = events[i];
    openUpTo(e.seq);
    if (e.kind == PMKIT_EV_POOL_OPEN) {
      if (e.arg >= pools.size() || pools[e.arg].openSeq != e.seq ||
          pools[e.arg].base != e.addr || opened[e.arg])
        throw Error(name(i) + " for pool " + std::to_string(e.arg) + " at " +
                    hex(e.addr) + " matches no POOL block");
      opened[e.arg] = true;
    } else if (e.kind == PMKIT_EV_POOL_CLOSE) {
      auto it = std::find_if(open.begin(), open.end(),
                             [&](const Pool *p) { return p->base == e.addr; });
      if (it == open.end())
        throw Error(name(i) + " at " + hex(e.addr) + " closes no open pool");
      open.erase(it);
    }
  }
  openUpTo(UINT64_MAX);
  for (size_t i = 0; complete && i < pools.size(); i++)
    if (!opened[i])
      throw Error(path + ": pool " + std::to_string(i) +
                  " has no POOL_OPEN event");
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
  const Site *st = id ? site(id) : nullptr;
  return st ? st->frames[0] : unnamedLoc(id);
}

std::string Trace::userText(uint32_t id) const {
  const Site *st = id ? site(id) : nullptr;
  return st ? st->frames[st->user] : locText(id);
}

std::string Trace::stackText(uint32_t id) const {
  const Site *st = id ? site(id) : nullptr;
  std::string out;
  for (size_t i = 0; st && i < st->frames.size(); i++)
    out += (i ? " <- " : "") + st->frames[i];
  return st ? out : locText(id);
}

bool Trace::inRuntime(uint32_t id) const {
  return locText(id).rfind("pmkit:", 0) == 0;
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
