// SPDX-License-Identifier: Apache-2.0
//
// WriteBack.h -- how pmkit's passes write back what an access wrote (robust
// and arp modes): one flush instruction per 64 bytes of a store, one more
// if the store may cross a line, or a call of the runtime's
// __pmkit_flush_range (abi.h) for a memory intrinsic, whose length may be
// unknown. Header only.

#ifndef PMKIT_PASSES_COMMON_WRITEBACK_H
#define PMKIT_PASSES_COMMON_WRITEBACK_H

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/ErrorHandling.h"

#include <string>

namespace pmkit {

// __pmkit_flush_range(addr, len), declared in M.
inline llvm::FunctionCallee flushRangeFn(llvm::Module &M) {
  llvm::LLVMContext &C = M.getContext();
  return M.getOrInsertFunction("__pmkit_flush_range", llvm::Type::getVoidTy(C),
                               llvm::PointerType::getUnqual(C),
                               llvm::Type::getInt64Ty(C));
}

// Emits the write-back of Size bytes at Addr (alignment A) with the flush
// intrinsic Flush, or of Len bytes with FlushRange when Len is set.
// Returns the line flushes emitted (0 for a range call).
inline unsigned emitWriteBack(llvm::IRBuilder<> &B, llvm::Intrinsic::ID Flush,
                              llvm::FunctionCallee FlushRange,
                              llvm::Value *Addr, uint64_t Size, llvm::Align A,
                              llvm::Value *Len) {
  if (Len) {
    B.CreateCall(FlushRange, {Addr, B.CreateZExtOrTrunc(Len, B.getInt64Ty())});
    return 0;
  }
  llvm::Module *M = B.GetInsertBlock()->getModule();
  llvm::Function *F = llvm::Intrinsic::getDeclaration(M, Flush);
  unsigned N = 1;
  B.CreateCall(F, {Addr});
  for (uint64_t Off = 64; Off < Size; Off += 64, N++) // wide stores
    B.CreateCall(F, {B.CreateConstGEP1_64(B.getInt8Ty(), Addr, Off)});
  if (Size > 1 && A.value() < Size) {
    B.CreateCall(F, {B.CreateConstGEP1_64(B.getInt8Ty(), Addr, Size - 1)});
    N++;
  }
  return N;
}

// The write-back instructions a pass may insert: each one's intrinsic and
// the target feature the function that uses it needs ("" for clflush, part
// of SSE2). The one place that maps a choice to an instruction.
enum class FlushInsn { Clwb, Clflushopt, Clflush };
struct FlushChoice {
  llvm::Intrinsic::ID ID;
  llvm::StringRef Feature;
};
inline FlushChoice flushIntrinsic(FlushInsn K) {
  switch (K) {
  case FlushInsn::Clwb:
    return {llvm::Intrinsic::x86_clwb, "+clwb"};
  case FlushInsn::Clflushopt:
    return {llvm::Intrinsic::x86_clflushopt, "+clflushopt"};
  case FlushInsn::Clflush:
    return {llvm::Intrinsic::x86_sse2_clflush, ""};
  }
  llvm_unreachable("every FlushInsn has an instruction");
}

// Adds a target feature ("+clwb", "+clflushopt") to F, which the flush
// intrinsics need in the function that uses them.
inline void addTargetFeature(llvm::Function &F, llvm::StringRef Feature) {
  std::string Features =
      F.getFnAttribute("target-features").getValueAsString().str();
  if (!llvm::StringRef(Features).contains(Feature))
    F.addFnAttr("target-features", Features.empty()
                                       ? Feature.str()
                                       : Features + "," + Feature.str());
}

} // namespace pmkit

#endif // PMKIT_PASSES_COMMON_WRITEBACK_H
