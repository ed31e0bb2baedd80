// SPDX-License-Identifier: Apache-2.0
//
// models.cpp -- the persistency models, each a small class registered by
// name in one table (modelTable), which is what --model reads and what
// `pmkit explore --help` lists. The rules themselves are applied by the
// engine (engine.cpp); docs/explorer.md states them with examples.

#include "explorer.h"
#include "named.h"

namespace pmx {

namespace {

// Px86 per location (the view-based formulation of Cho, Lee, Raad and Kang,
// PLDI'21): each aligned 8-byte location persists its writes in order and
// independently of other locations; a flush bounds from below what must
// have persisted; anything later may have been evicted already.
class X86 : public Model {
public:
  const char *name() const override { return "x86"; }
  const char *help() const override {
    return "Px86, per 8-byte location: volatile caches, clwb/clflushopt "
           "effective at the next fence, any unflushed write may persist";
  }
  unsigned unitShift() const override { return 3; }
  bool volatileCaches() const override { return true; }
  const char *defaultPoints() const override { return "fences"; }
};

// The same rules with a whole cache line as the unit: a line persists a
// prefix of its writes, as hardware that evicts whole lines does.
class X86Line : public Model {
public:
  const char *name() const override { return "x86-line"; }
  const char *help() const override {
    return "Px86 with whole-cache-line persistence: stricter than x86";
  }
  unsigned unitShift() const override { return 6; }
  bool volatileCaches() const override { return true; }
  const char *defaultPoints() const override { return "fences"; }
};

// Persistent caches: a crash keeps exactly the writes that were visible.
class EADR : public Model {
public:
  const char *name() const override { return "eadr"; }
  const char *help() const override {
    return "eADR: a crash image is a prefix of the visible order";
  }
  unsigned unitShift() const override { return 3; }
  bool volatileCaches() const override { return false; }
  const char *defaultPoints() const override { return "stores"; }
};

// Strict persistency: persists in the order of the (TSO) memory order, so
// the image at a point is the prefix there, non-temporal stores included
// (the reference for --robustness); otherwise the images are those of eadr,
// with a crash before every event.
class Strict : public Model {
public:
  const char *name() const override { return "strict"; }
  const char *help() const override {
    return "strict persistency: every prefix of the memory order";
  }
  unsigned unitShift() const override { return 3; }
  bool volatileCaches() const override { return false; }
  bool ntWaitsForFence() const override { return false; }
  const char *defaultPoints() const override { return "all"; }
};

// Acquire-release persistency (arp mode), per 8-byte location: a write
// persists with every write the ARP rules order before it (sequence
// points, persistent release/acquire pairs, transitively), and nothing
// else is ordered; an explicit flush and fence still makes a write (and so
// everything before it) durable. Check a program built without the
// lowering pass, whose trace holds its own order and no inserted fences.
class ARP : public Model {
public:
  const char *name() const override { return "arp"; }
  const char *help() const override {
    return "acquire-release persistency: only sequence points and "
           "persistent release/acquire order persists";
  }
  unsigned unitShift() const override { return 3; }
  bool volatileCaches() const override { return true; }
  const char *defaultPoints() const override { return "fences"; }
  bool persistOrder() const override { return true; }
};

template <class M> std::unique_ptr<Model> make() {
  return std::make_unique<M>();
}

} // namespace

const std::vector<ModelEntry> &modelTable() {
  static const std::vector<ModelEntry> table = {
      {"x86", make<X86>},   {"x86-line", make<X86Line>},
      {"eadr", make<EADR>}, {"strict", make<Strict>},
      {"arp", make<ARP>},
  };
  return table;
}

std::unique_ptr<Model> makeModel(const std::string &name) {
  return pmx::makeNamed(modelTable(), name, "model");
}

} // namespace pmx
