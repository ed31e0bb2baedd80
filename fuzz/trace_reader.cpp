// SPDX-License-Identifier: Apache-2.0
//
// trace_reader.cpp -- libFuzzer target: the trace reader
// (tracereader/trace.cpp) on arbitrary bytes, read both ways, from memory and
// from a file as `pmkit explore --trace` reads it. Either both refuse the input
// with the same one-line Error, or both accept it and the result keeps the
// promises the explorer and the simulator build on: events in seq order, thread
// ids below `threads`, every write inside one pool, payloads inside the input.

#include "trace.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace {

[[noreturn]] void broken(const char *what) {
  fprintf(stderr, "fuzz-trace-reader: %s\n", what);
  abort();
}

// The input as a file: one memfd, rewritten for each input.
std::string asFile(const uint8_t *data, size_t size) {
  static int fd = memfd_create("fuzz-trace", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, 0) != 0 ||
      pwrite(fd, data, size, 0) != (ssize_t)size)
    broken("cannot write the memfd");
  return "/proc/self/fd/" + std::to_string(fd);
}

// What a reading yields, to compare the two ways: the error, or a summary.
std::string outcome(const pmx::Trace &T, const uint8_t *lo, const uint8_t *hi) {
  uint64_t sum = 0;
  for (size_t i = 0; i < T.events.size(); i++) {
    const pmx::Event &e = T.events[i];
    if (i && e.seq <= T.events[i - 1].seq)
      broken("events not in strictly increasing seq order");
    if (e.tid >= T.threads)
      broken("an event's thread id is not below threads");
    if (e.writes()) {
      uint64_t len = e.length();
      const pmx::Pool *p = T.poolOf(e.addr);
      if (!p || len == 0 || len > p->size - (e.addr - p->base)) {
        bool inSome = false; // it may lie in another pool at the same place
        for (const pmx::Pool &q : T.pools)
          inSome |= e.addr >= q.base && e.addr - q.base < q.size &&
                    len <= q.size - (e.addr - q.base);
        if (!inSome)
          broken("a write outside every pool was accepted");
      }
      if (e.data && (e.data < lo || e.data + len > hi))
        broken("a payload outside the input");
      for (uint64_t b = 0; b < len && b < 4096; b++)
        sum += e.byte(b); // touches the payload: ASan checks the bounds
    }
    sum += T.locText(e.loc).size();
    if (e.kind == PMKIT_EV_MARK_BEGIN || e.kind == PMKIT_EV_MARK_END)
      sum += T.markText((uint32_t)e.arg).size();
  }
  for (const pmx::Pool &p : T.pools)
    for (uint64_t pg : p.pages)
      sum += p.image.data()[pg * PMKIT_TRACE_PAGE];
  return "ok " + std::to_string(T.events.size()) + " events, " +
         std::to_string(T.pools.size()) + " pools, " +
         std::to_string(T.threads) + " threads, complete " +
         std::to_string(T.complete) + ", sum " + std::to_string(sum);
}

std::string readMemory(const uint8_t *data, size_t size) {
  try {
    pmx::Trace T(data, size, "input");
    return outcome(T, data, data + size);
  } catch (const pmx::Error &e) {
    return e.what();
  }
}

std::string readFile(const uint8_t *data, size_t size) {
  std::string path = asFile(data, size);
  try {
    pmx::Trace T(path);
    // The file's mapping is private to T: check payloads against the
    // event data only (no bounds to compare with here).
    return outcome(T, nullptr, (const uint8_t *)UINTPTR_MAX);
  } catch (const pmx::Error &e) {
    std::string m = e.what();
    // An error starts with the file's name (the input may hold it too).
    if (m.compare(0, path.size(), path) == 0)
      m.replace(0, path.size(), "input");
    return m;
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string a = readMemory(data, size);
  if (a.find('\n') != std::string::npos)
    broken(("an error of more than one line: " + a).c_str());
  std::string b = readFile(data, size);
  if (a != b) {
    fprintf(stderr, "memory: %s\nfile:   %s\n", a.c_str(), b.c_str());
    broken("the file and the memory readings differ");
  }
  return 0;
}
