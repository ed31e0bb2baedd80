// SPDX-License-Identifier: Apache-2.0
//
// Access.h -- the memory an access of the program touches: the address of
// a load, a store, an atomic read-modify-write or compare-exchange, or a
// memory intrinsic (its destination), header only; and, for the passes that
// write PM back (robust, arp), the bytes an instruction writes, inline asm
// included (accessOf, in Access.cpp).

#ifndef PMKIT_PASSES_COMMON_ACCESS_H
#define PMKIT_PASSES_COMMON_ACCESS_H

#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/Support/Alignment.h"

#include <cstdint>

namespace pmkit {

// The address `I` accesses, or null if it is not such an access.
inline const llvm::Value *accessedAddress(const llvm::Instruction &I) {
  using namespace llvm;
  if (auto *LI = dyn_cast<LoadInst>(&I))
    return LI->getPointerOperand();
  if (auto *SI = dyn_cast<StoreInst>(&I))
    return SI->getPointerOperand();
  if (auto *CX = dyn_cast<AtomicCmpXchgInst>(&I))
    return CX->getPointerOperand();
  if (auto *RMW = dyn_cast<AtomicRMWInst>(&I))
    return RMW->getPointerOperand();
  if (auto *MI = dyn_cast<MemIntrinsic>(&I))
    return MI->getRawDest();
  return nullptr;
}

// The memory an instruction writes (or, for an atomic load, reads): Size
// bytes at Addr, or Len bytes when Len is set (memcpy, memmove, memset).
struct PMAccess {
  llvm::Value *Addr = nullptr;
  uint64_t Size = 0;
  llvm::Align A;
  llvm::Value *Len = nullptr;
  const char *What = "";
  bool AsmStore = false; // inline asm that writes (else, with Addr, reads)
};
// The access of a store, atomic load, RMW, compare-and-swap, memory
// intrinsic (element-wise atomic ones too), masked store or inline asm that
// reads or writes memory through an operand (its first write, else its
// first read); Addr is null for anything else.
PMAccess accessOf(llvm::Instruction &I, const llvm::DataLayout &DL);

// The pointer a call of an allocator with an out-parameter (CE_OUT_ARG2:
// pmkit_alloc, pmkit_zalloc) stores through its argument 2, else Addr null.
PMAccess outParamAccess(llvm::Instruction &I);

} // namespace pmkit

#endif // PMKIT_PASSES_COMMON_ACCESS_H
