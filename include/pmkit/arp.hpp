// SPDX-License-Identifier: Apache-2.0
//
// arp.hpp -- acquire-release persistency (ARP; Kolli et al., ISCA'17) for
// C++: the order of persists is given by C++11 synchronisation and by
// sequence points instead of flush and fence instructions.
// pmkit::atomic<T> is std::atomic<T> with one more argument on each access,
// its persistency: a persistent acquire or release (the default) orders
// persists across threads; pmkit::volatile_sync marks one that only
// synchronises threads (a work queue in DRAM, a statistics lock) and orders
// no persist. pmkit::sequence_point() orders every earlier persist of the
// thread before every later one. Data are ordinary loads and stores to a
// pool. The rules (docs/modes/arp.md):
//   1. M -po-> SP -po-> M'                     =>  M <=p M'
//   2. M -po-> R(x) -sw-> A(x) -po-> M'        =>  M <=p M'  (persistent R, A)
//   3. <=p is transitive.
// Built with `pmkit cc --mode arp`, the pmkit-arp pass lowers these to
// clwb and sfence (or to the SCP or epoch lowerings, for comparison); the
// calls below (include/pmkit/abi.h) are what it lowers.

#ifndef PMKIT_ARP_HPP
#define PMKIT_ARP_HPP

#include "pmkit/abi.h"
#include "pmkit/trace_format.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace pmkit {

// Whether a synchronisation access has persist semantics.
enum class persistency : uint32_t {
  persistent = 0,
  volatile_only = PMKIT_SYNC_VOLATILE,
};
inline constexpr persistency persistent_sync = persistency::persistent;
inline constexpr persistency volatile_sync = persistency::volatile_only;

namespace arp_detail {

constexpr bool releases(std::memory_order m) {
  return m == std::memory_order_release || m == std::memory_order_acq_rel ||
         m == std::memory_order_seq_cst;
}
constexpr bool acquires(std::memory_order m) {
  return m == std::memory_order_acquire || m == std::memory_order_consume ||
         m == std::memory_order_acq_rel || m == std::memory_order_seq_cst;
}
// The failure order of a compare-exchange given only its success order, as
// std::atomic derives it.
constexpr std::memory_order failureOf(std::memory_order m) {
  return m == std::memory_order_acq_rel   ? std::memory_order_acquire
         : m == std::memory_order_release ? std::memory_order_relaxed
                                          : m;
}
template <class T> inline uint64_t bits(const T &v) {
  uint64_t b = 0;
  if constexpr (sizeof(T) <= 8)
    std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T> constexpr uint32_t sizeOf() {
  return sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8
             ? (uint32_t)sizeof(T)
             : 0;
}

} // namespace arp_detail

// std::atomic<T> whose acquires and releases order persists (see above).
// Every operation takes the memory order of its std::atomic counterpart and
// then a persistency; a read-modify-write is a release before and an
// acquire after, as its order says. A compare-exchange that fails records
// that its release did not happen (a FAILED event), so that readers of the
// trace undo it.
template <class T> class atomic {
  static_assert(std::is_trivially_copyable_v<T>,
                "pmkit::atomic<T> needs a trivially copyable T");
  using mo = std::memory_order;
  static constexpr mo SC = std::memory_order_seq_cst;

public:
  using value_type = T;
  atomic() noexcept = default;
  constexpr atomic(T v) noexcept : v_(v) {}
  atomic(const atomic &) = delete;
  atomic &operator=(const atomic &) = delete;

  T load(mo m = SC, persistency p = persistent_sync) const noexcept {
    T v = v_.load(m);
    if (arp_detail::acquires(m))
      acquired(v, p, 0);
    return v;
  }
  void store(T v, mo m = SC, persistency p = persistent_sync) noexcept {
    if (arp_detail::releases(m))
      releasing(arp_detail::bits(v), p, 0);
    v_.store(v, m);
  }
  T exchange(T v, mo m = SC, persistency p = persistent_sync) noexcept {
    if (arp_detail::releases(m))
      releasing(arp_detail::bits(v), p, PMKIT_SYNC_RMW);
    T old = v_.exchange(v, m);
    if (arp_detail::acquires(m))
      acquired(old, p, PMKIT_SYNC_RMW);
    return old;
  }
  bool compare_exchange_strong(T &expected, T desired, mo success, mo failure,
                               persistency p = persistent_sync) noexcept {
    return cas(expected, desired, success, failure, p, false);
  }
  bool compare_exchange_strong(T &expected, T desired, mo m = SC,
                               persistency p = persistent_sync) noexcept {
    return cas(expected, desired, m, arp_detail::failureOf(m), p, false);
  }
  bool compare_exchange_weak(T &expected, T desired, mo success, mo failure,
                             persistency p = persistent_sync) noexcept {
    return cas(expected, desired, success, failure, p, true);
  }
  bool compare_exchange_weak(T &expected, T desired, mo m = SC,
                             persistency p = persistent_sync) noexcept {
    return cas(expected, desired, m, arp_detail::failureOf(m), p, true);
  }

  // Arithmetic and bitwise read-modify-writes, for integers (and + and -
  // for pointers), as std::atomic has them.
  template <class D>
  T fetch_add(D d, mo m = SC, persistency p = persistent_sync) noexcept {
    return rmw(m, p, [&] { return v_.fetch_add(d, m); });
  }
  template <class D>
  T fetch_sub(D d, mo m = SC, persistency p = persistent_sync) noexcept {
    return rmw(m, p, [&] { return v_.fetch_sub(d, m); });
  }
  T fetch_and(T d, mo m = SC, persistency p = persistent_sync) noexcept {
    return rmw(m, p, [&] { return v_.fetch_and(d, m); });
  }
  T fetch_or(T d, mo m = SC, persistency p = persistent_sync) noexcept {
    return rmw(m, p, [&] { return v_.fetch_or(d, m); });
  }
  T fetch_xor(T d, mo m = SC, persistency p = persistent_sync) noexcept {
    return rmw(m, p, [&] { return v_.fetch_xor(d, m); });
  }

  // seq_cst and persistent, as the std::atomic operators are seq_cst.
  operator T() const noexcept { return load(); }
  T operator=(T v) noexcept {
    store(v);
    return v;
  }

  // The std::atomic underneath, for code that must not be observed (set-up
  // before threads start, recovery). Its accesses order no persists.
  std::atomic<T> &raw() noexcept { return v_; }
  const std::atomic<T> &raw() const noexcept { return v_; }

private:
  std::atomic<T> v_;

  void releasing(uint64_t val, persistency p, uint32_t rmw) const noexcept {
    __pmkit_arp_release(&v_, val, arp_detail::sizeOf<T>(), (uint32_t)p | rmw);
  }
  void acquired(const T &v, persistency p, uint32_t rmw) const noexcept {
    __pmkit_arp_acquire(&v_, arp_detail::bits(v), arp_detail::sizeOf<T>(),
                        (uint32_t)p | rmw);
  }
  template <class F> T rmw(mo m, persistency p, F op) noexcept {
    if (arp_detail::releases(m))
      releasing(0, p, PMKIT_SYNC_RMW);
    T old = op();
    if (arp_detail::acquires(m))
      acquired(old, p, PMKIT_SYNC_RMW);
    return old;
  }
  bool cas(T &expected, T desired, mo success, mo failure, persistency p,
           bool weak) noexcept {
    if (arp_detail::releases(success))
      releasing(arp_detail::bits(desired), p, PMKIT_SYNC_RMW);
    T want = expected;
    bool ok =
        weak ? v_.compare_exchange_weak(expected, desired, success, failure)
             : v_.compare_exchange_strong(expected, desired, success, failure);
    if (!ok && arp_detail::releases(success)) // the release did not happen
      acquired(expected, p, PMKIT_SYNC_RMW | PMKIT_SYNC_FAILED);
    if (arp_detail::acquires(ok ? success : failure))
      acquired(ok ? want : expected, p, PMKIT_SYNC_RMW);
    return ok;
  }
};

// A sequence point: every persist the thread issued before it is ordered
// before every persist it issues after it. volatile_sync makes it a no-op
// for persistence (kept for symmetry with the ISA's volatile fence).
inline void sequence_point(persistency p = persistent_sync) noexcept {
  __pmkit_arp_seqpoint((uint32_t)p);
}

} // namespace pmkit

#endif // PMKIT_ARP_HPP
