// SPDX-License-Identifier: Apache-2.0
//
// order.cpp -- the persist memory order of the arp model (PersistOrder in
// explorer.h): per-thread frontiers carried through sequence points and
// persistent release/acquire pairs, in the trace's seq order. The engine
// (engine.cpp) uses it to keep every crash image closed under the order.
// Thread creation and joining are not in a trace, so they order nothing
// here; docs/explorer.md says what that means for a checker.

#include "explorer.h"

#include <algorithm>

namespace pmx {

PersistOrder::PersistOrder(const Trace &T)
    : T(T), width_(T.threads + 1), idx_(T.events.size(), 0),
      front_(T.events.size(), NONE),
      cur_(width_, std::vector<uint32_t>(width_)), curId_(width_, NONE),
      writes_(width_) {}

void PersistOrder::observe(size_t i) {
  const Event &e = T.events[i];
  uint32_t t = e.tid;
  std::vector<uint32_t> &F = cur_[t];
  bool vol = e.aux & PMKIT_SYNC_VOLATILE;
  if (e.writes()) {
    if (curId_[t] == NONE) {
      curId_[t] = (uint32_t)(fronts_.size() / width_);
      fronts_.insert(fronts_.end(), F.begin(), F.end());
    }
    front_[i] = curId_[t];
    idx_[i] = (uint32_t)writes_[t].size();
    writes_[t].push_back((uint32_t)i);
  } else if (e.kind == PMKIT_EV_SEQPOINT && !vol) {
    // Equation 1: everything the thread wrote so far, before what follows.
    F[t] = (uint32_t)writes_[t].size();
    curId_[t] = NONE;
  } else if (e.kind == PMKIT_EV_RELEASE) {
    // The acquire half of a read-modify-write reads what came before it.
    std::vector<uint32_t> prior;
    if (e.aux & PMKIT_SYNC_RMW) {
      auto it = released_.find(e.addr);
      if (it != released_.end())
        prior = it->second;
      rmwPrior_[t] = {e.addr, prior};
    }
    if (vol) { // an acquire reading it is ordered after nothing
      released_.erase(e.addr);
      return;
    }
    // Equation 2's left half (3: with what is ordered before it). A
    // read-modify-write continues the release sequence it extends.
    std::vector<uint32_t> C = F;
    C[t] = (uint32_t)writes_[t].size();
    for (size_t u = 0; u < prior.size(); u++)
      C[u] = std::max(C[u], prior[u]);
    released_[e.addr] = std::move(C);
  } else if (e.kind == PMKIT_EV_ACQUIRE && (e.aux & PMKIT_SYNC_FAILED)) {
    // The compare-exchange failed: its release never happened.
    auto prior = rmwPrior_.find(t);
    if (prior != rmwPrior_.end() && prior->second.first == e.addr) {
      if (prior->second.second.empty())
        released_.erase(e.addr);
      else
        released_[e.addr] = prior->second.second;
    }
  } else if (e.kind == PMKIT_EV_ACQUIRE && !vol) {
    const std::vector<uint32_t> *C = nullptr;
    auto prior = rmwPrior_.find(t);
    if ((e.aux & PMKIT_SYNC_RMW) && prior != rmwPrior_.end() &&
        prior->second.first == e.addr) {
      C = &prior->second.second;
    } else {
      auto it = released_.find(e.addr);
      if (it != released_.end())
        C = &it->second;
    }
    if (C && !C->empty()) {
      for (size_t u = 0; u < width_; u++)
        F[u] = std::max(F[u], (*C)[u]);
      curId_[t] = NONE;
    }
    rmwPrior_.erase(t);
  }
}

} // namespace pmx
