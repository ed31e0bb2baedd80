// SPDX-License-Identifier: Apache-2.0
//
// Access.h -- the address a memory access of the program touches: a load,
// a store, an atomic read-modify-write or compare-exchange, or a memory
// intrinsic (its destination). Header only.

#ifndef PMKIT_PASSES_COMMON_ACCESS_H
#define PMKIT_PASSES_COMMON_ACCESS_H

#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"

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

} // namespace pmkit

#endif // PMKIT_PASSES_COMMON_ACCESS_H
