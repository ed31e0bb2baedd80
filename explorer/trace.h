// SPDX-License-Identifier: Apache-2.0
//
// trace.h -- the reader of pmkit traces (include/pmkit/trace_format.h),
// shared by the explorer and the simulator (sim/): Trace maps a file,
// validates it and holds its events in seq order, the pools' initial
// images and the location and mark strings. Built as the static library
// pmkit-trace-reader (trace.cpp).

#ifndef PMKIT_EXPLORER_TRACE_H
#define PMKIT_EXPLORER_TRACE_H

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

class Trace {
public:
  // Reads and validates a trace file; throws Error with a clear message.
  explicit Trace(const std::string &path);
  ~Trace();
  Trace(const Trace &) = delete;
  Trace &operator=(const Trace &) = delete;

  std::vector<Event> events; // sorted by seq
  std::vector<Pool> pools;
  std::unordered_map<uint32_t, std::string> locs, marks;
  uint32_t threads = 0;
  bool complete = false; // has an END block

  std::string locText(uint32_t id) const;
  std::string markText(uint32_t id) const;
  const Pool *poolOf(uint64_t addr) const;

private:
  void *map_ = nullptr;
  size_t mapSize_ = 0;
};

// pmkit_trace_checksum of an image whose pages outside `pages` are zero.
uint64_t sparseChecksum(const uint8_t *img, uint64_t size,
                        const std::vector<uint64_t> &pages);

} // namespace pmx

#endif // PMKIT_EXPLORER_TRACE_H
