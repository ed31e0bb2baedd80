// SPDX-License-Identifier: Apache-2.0
//
// CallEffects.h -- the facts pmkit's passes know about functions a program
// calls without defining them, from the one table CallEffects.def: what
// each reads and writes of the program's memory, whether it takes or
// releases a lock, whether it stores a pointer anywhere. Each pass asks its
// own question of the facts (clobber: may a FASE call it, and what does it
// read; ssapp: may a resumed FASE call it again; robust: may write-backs
// stay pending across it, does it write PM unseen; the PM analysis: can it
// move a pointer). Entry point: callEffects(name).

#ifndef PMKIT_PASSES_COMMON_CALLEFFECTS_H
#define PMKIT_PASSES_COMMON_CALLEFFECTS_H

#include "llvm/ADT/StringRef.h"

#include "llvm/ADT/SmallVector.h"

namespace llvm {
class CallBase;
} // namespace llvm

namespace pmkit {

enum CallEffect : unsigned {
  // Reads what its pointer arguments point to and nothing else of the
  // program's memory; writes none of it (memcmp, strlen).
  CE_READS_ARGS = 1u << 0,
  // memcpy-like: writes argument 0, reads argument 1, length argument 2.
  CE_COPY = 1u << 1,
  // memset-like: writes argument 0, length argument 2.
  CE_SET = 1u << 2,
  // Writes the program's memory through argument 0 (or 1), an amount the
  // arguments do not give as a memcpy's would (strcpy, read, *endptr).
  CE_WRITES_ARG0 = 1u << 3,
  CE_WRITES_ARG1 = 1u << 4,
  // Takes or gives back a lock: orders other threads' accesses.
  CE_LOCK_ACQUIRE = 1u << 5,
  CE_LOCK_RELEASE = 1u << 6,
  // The C heap: DRAM that no pass need persist.
  CE_HEAP = 1u << 7,
  // pmkit's runtime makes this call's own effects on PM crash-consistent
  // (the allocator's journal; PM locks are reset after a crash).
  CE_PMKIT_SAFE = 1u << 8,
  // Touches none of the program's memory and returns the same whenever it
  // is called again, in any thread (pmkit_off; abort and __assert_fail,
  // which end the process).
  CE_QUERY = 1u << 9,
  // Touches none of the program's memory; its result is the calling
  // thread's (pthread_self).
  CE_THREAD = 1u << 10,
  // Touches none of the program's memory apart from what CE_WRITES_ARG*
  // says, but its result or effect is the world's: clocks, randomness,
  // sleeping, the process's identity.
  CE_ENV = 1u << 11,
  // Returns no pointer and stores none through its arguments.
  CE_NO_POINTER = 1u << 12,
  // A crash point: the explorer may crash the program here.
  CE_CRASH_POINT = 1u << 13,
  // An allocator (pool, size, out) that stores the new block's pointer (8
  // bytes) through argument 2, which may be in PM: pmkit_alloc,
  // pmkit_zalloc. The size is argument 1.
  CE_OUT_ARG2 = 1u << 14,
  // printf-like: bits 15-17 hold 1 + the index of the format argument
  // (formatAt). A "%n" in it stores the number of characters written so
  // far, an int, through a later argument (formatStores).
  CE_FORMAT_MASK = 7u << 15,
  // Stores through argument 1 a pointer into what argument 0 points to, and
  // no other pointer anywhere (strtol's *endptr).
  CE_END_POINTER = 1u << 18,
  // printf-like with a va_list for the arguments after the format
  // (vprintf, __vsnprintf_chk): what its %n stores through is not followed.
  CE_VA_LIST = 1u << 19,
};

// The facts of the external function Name, 0 if the table does not know it.
unsigned callEffects(llvm::StringRef Name);

// The argument a CE_WRITES_ARG* function writes through (0 or 1), else -1.
inline int writtenArgument(unsigned Effects) {
  return (Effects & CE_WRITES_ARG0) ? 0 : (Effects & CE_WRITES_ARG1) ? 1 : -1;
}

// The fact "printf-like, its format is argument I" (I at most 6).
constexpr unsigned formatAt(unsigned I) { return (I + 1) << 15; }

// The argument holding a printf-like call's format, else -1.
inline int formatArgument(unsigned Effects) {
  return (int)((Effects & CE_FORMAT_MASK) >> 15) - 1;
}

// The arguments of the printf-like call CB (Effects are its callee's) that
// its format stores through (%n, %hn, "%2$n", ...), in Out. False when the
// format is not a constant string: then any argument after it may be one.
// True with Out empty for a call with no format fact.
bool formatStores(const llvm::CallBase &CB, unsigned Effects,
                  llvm::SmallVectorImpl<unsigned> &Out);

} // namespace pmkit

#endif // PMKIT_PASSES_COMMON_CALLEFFECTS_H
