// SPDX-License-Identifier: Apache-2.0
//
// models.cpp -- the persistency models of pmkit-sim, each a small class
// registered by name in one table (modelTable), which --model reads. A
// model says what each op sends to the PM controller through its core's
// persist buffer; the controller (sim.cpp) numbers epochs from what arrives
// with the paper's Algorithm 1: a full barrier opens a new epoch, a release
// arms the next acquire to open one.

#include "named.h"
#include "sim.h"

namespace pms {

namespace {

// Sequentially consistent persists: every persist is its own epoch.
class SCP : public Model {
public:
  const char *name() const override { return "scp"; }
  const char *help() const override {
    return "sequentially consistent persists: one persist per epoch";
  }
  void lower(const Op &o, std::vector<Msg> &out) const override {
    if (o.kind == Op::Persist) {
      out.push_back(Msg::Persist);
      out.push_back(Msg::Full);
    }
  }
  bool tracked(const Op &) const override { return true; }
  bool perStore() const override { return true; }
};

// RCBSP as ARP is compiled to it (the paper's Table 1): every acquire,
// release and sequence point is a full barrier, volatile or not.
class RCBSP : public Model {
public:
  const char *name() const override { return "rcbsp"; }
  const char *help() const override {
    return "RCBSP: every sync access and sequence point is a full barrier";
  }
  void lower(const Op &o, std::vector<Msg> &out) const override {
    out.push_back(o.kind == Op::Persist ? Msg::Persist : Msg::Full);
  }
  bool tracked(const Op &) const override { return true; }
};

// ARP on hardware that knows the direction of acquires and releases but
// not which of them are volatile.
class ARP : public Model {
public:
  const char *name() const override { return "arp"; }
  const char *help() const override {
    return "ARP: one-way acquire and release barriers (Algorithm 1)";
  }
  void lower(const Op &o, std::vector<Msg> &out) const override {
    switch (o.kind) {
    case Op::Persist:
      out.push_back(Msg::Persist);
      break;
    case Op::Acquire:
      out.push_back(Msg::Acq);
      break;
    case Op::Release:
      out.push_back(Msg::Rel);
      break;
    case Op::SeqPoint:
      out.push_back(Msg::Full);
      break;
    }
  }
  bool tracked(const Op &) const override { return true; }
};

// ARP with volatile annotations: volatile syncs never reach the persist
// buffers, so they neither split epochs nor order buffers.
class ARPVA : public ARP {
public:
  const char *name() const override { return "arp+va"; }
  const char *help() const override {
    return "ARP with volatile annotations: volatile syncs are not sent";
  }
  void lower(const Op &o, std::vector<Msg> &out) const override {
    if (o.kind == Op::Persist || !o.vol)
      ARP::lower(o, out);
  }
  bool tracked(const Op &o) const override {
    return o.kind == Op::Persist || !o.vol;
  }
};

// The limit study: 64 persists (the write queue) per epoch, no ordering.
// Not recoverable; only a bound on performance.
class Ideal : public Model {
public:
  const char *name() const override { return "ideal"; }
  const char *help() const override {
    return "limit study: a constant 64 persists per epoch, no ordering";
  }
  void lower(const Op &o, std::vector<Msg> &out) const override {
    if (o.kind == Op::Persist)
      out.push_back(Msg::Persist);
  }
  bool tracked(const Op &) const override { return false; }
  unsigned fixedEpoch() const override { return 64; }
};

template <class M> std::unique_ptr<Model> make() {
  return std::make_unique<M>();
}

} // namespace

const std::vector<ModelEntry> &modelTable() {
  static const std::vector<ModelEntry> table = {
      {"scp", make<SCP>},      {"rcbsp", make<RCBSP>}, {"arp", make<ARP>},
      {"arp+va", make<ARPVA>}, {"ideal", make<Ideal>},
  };
  return table;
}

std::unique_ptr<Model> makeModel(const std::string &name) {
  return pmx::makeNamed(modelTable(), name, "model");
}

} // namespace pms
