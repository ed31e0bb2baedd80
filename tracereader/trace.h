// SPDX-License-Identifier: Apache-2.0
//
// trace.h -- the reader of pmkit traces (include/pmkit/trace_format.h),
// shared by the explorer and the simulator (sim/): Trace maps a file,
// validates it and holds its events in seq order, the pools' initial
// images and the location and mark strings. Built as the static library
// pmkit-trace-reader (trace.cpp).

#ifndef PMKIT_TRACEREADER_TRACE_H
#define PMKIT_TRACEREADER_TRACE_H

#include "pmkit/trace_format.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace pmx {

// A problem with the input or the environment: one line, exit status 2.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Event {
  uint64_t seq;
  uint64_t addr;
  uint64_t arg;
  const uint8_t *data; // payload of a size-0 store, else null
  uint32_t loc;
  uint32_t tid;
  uint8_t kind;
  uint8_t size;
  uint16_t aux;
  bool writes() const {
    return kind == PMKIT_EV_STORE || kind == PMKIT_EV_NTSTORE ||
           kind == PMKIT_EV_RMW || kind == PMKIT_EV_MEMSET;
  }
  uint64_t length() const {
    if (kind == PMKIT_EV_MEMSET ||
        ((writes() || kind == PMKIT_EV_LOAD) && size == 0))
      return arg;
    return size;
  }
  // Byte i of what the event writes.
  uint8_t byte(uint64_t i) const {
    if (kind == PMKIT_EV_MEMSET)
      return (uint8_t)aux;
    if (data)
      return data[i];
    return (uint8_t)(arg >> (8 * i));
  }
};

// Zero-filled memory backed lazily (an anonymous mapping), so a large,
// mostly empty pool image costs what its data costs.
class Buffer {
public:
  Buffer() = default;
  explicit Buffer(size_t n);
  Buffer(Buffer &&o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  Buffer &operator=(Buffer &&o) noexcept;
  ~Buffer();
  uint8_t *data() const { return p_; }
  size_t size() const { return n_; }

private:
  uint8_t *p_ = nullptr;
  size_t n_ = 0;
};

struct Pool {
  uint32_t id = 0;
  std::string path;
  uint64_t base = 0, size = 0, checksum = 0, openSeq = 0;
  Buffer image; // initial image
  std::vector<uint64_t>
      pages; // its non-zero pages (PMKIT_TRACE_PAGE), ascending
};

// Limits the reader enforces beyond the format's own (trace.cpp): what the
// recorder can produce, and what keeps the memory and time of a reader
// bounded on a damaged or hostile file.
constexpr uint32_t TraceMaxThreads = 1024;         // runtime/trace's MAX_BUFS
constexpr uint32_t TraceMaxPools = 4096;           // POOL blocks in a trace
constexpr uint64_t TraceMaxPoolSize = 1ull << 40;  // bytes of one pool
constexpr uint64_t TraceMaxPoolTotal = 1ull << 42; // bytes of all pools
constexpr uint64_t TraceAddressLimit = 1ull << 56; // user address space

class Trace {
public:
  // Reads and validates a trace file; throws Error with one line naming
  // the byte offset or the event that is wrong. See docs/explorer.md
  // ("What the trace reader refuses").
  explicit Trace(const std::string &path);
  // The same from bytes in memory (the fuzzers use it), named `name` in
  // errors. Payloads are referenced in place: `data` must outlive the
  // Trace.
  Trace(const uint8_t *data, size_t size, const std::string &name);
  ~Trace();
  Trace(const Trace &) = delete;
  Trace &operator=(const Trace &) = delete;

  std::vector<Event> events; // sorted by seq
  std::vector<Pool> pools;
  std::unordered_map<uint32_t, std::string> locs, marks;
  // Call stacks: id -> location ids, the event's own first (format 4).
  std::unordered_map<uint32_t, std::vector<uint32_t>> stacks;
  uint32_t threads = 0;
  bool complete = false; // has an END block

  // An event's place: its frames, innermost first (a location's inlining
  // chain, then the call sites of its STACK record), and the index of the
  // first one in the program's own code (0 if all are pmkit's).
  struct Site {
    std::vector<std::string> frames;
    size_t user = 0;
  };
  const Site *site(uint32_t id) const; // null: unknown id
  // The innermost frame of a location or stack id ("?" for 0).
  std::string locText(uint32_t id) const;
  // The first frame in the program's code (not pmkit's, not a system
  // header's): where a user looks.
  std::string userText(uint32_t id) const;
  // Every frame, "a <- b <- c" ("..." where the recorder cut the stack).
  std::string stackText(uint32_t id) const;
  // Whether the innermost frame is in the pmkit runtime ("pmkit:").
  bool inRuntime(uint32_t id) const;
  std::string markText(uint32_t id) const;
  const Pool *poolOf(uint64_t addr) const;

private:
  void *map_ = nullptr;
  size_t mapSize_ = 0;
  void parse(const uint8_t *d, uint64_t n, const std::string &name);
  uint64_t readPool(const uint8_t *d, uint64_t off, uint64_t p, uint64_t q,
                    const std::string &name);
  void checkAddresses(const std::vector<uint64_t> &offsets,
                      const std::string &name) const;
  void checkPoolEvents(const std::string &name) const;
  void resolveSites();
  std::unordered_map<uint32_t, Site> sites_;
};

// pmkit_trace_checksum of an image whose pages outside `pages` are zero.
uint64_t sparseChecksum(const uint8_t *img, uint64_t size,
                        const std::vector<uint64_t> &pages);

} // namespace pmx

#endif // PMKIT_TRACEREADER_TRACE_H
