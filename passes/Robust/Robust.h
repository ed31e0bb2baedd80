// SPDX-License-Identifier: Apache-2.0
//
// Robust.h -- the pmkit-robust module pass (robust mode, after PMRobust):
// inserts the cache-line write-backs and fences that make a program robust
// under the x86 persistency model, so that every crash leaves a state some
// strict-persistency execution could leave. Which accesses touch persistent
// memory comes from the PM pointer analysis (PMAlias). Settings
// (-pmkit-robust-setting): `base` writes back and fences after every store,
// RMW, memory intrinsic and atomic load that may touch PM. Entry point:
// pmkit::RobustPass::run. Run it with
//   opt-16 -load-pass-plugin=pmkit-passes.so -passes=pmkit-robust \
//     -pmkit-robust-report -S in.ll
// or through clang: pmkit cc --mode=robust.

#ifndef PMKIT_PASSES_ROBUST_H
#define PMKIT_PASSES_ROBUST_H

#include "llvm/IR/PassManager.h"

namespace pmkit {

class RobustPass : public llvm::PassInfoMixin<RobustPass> {
public:
  // The -passes= name; also this pass's DEBUG_TYPE and option prefix.
  static constexpr llvm::StringLiteral PassName = "pmkit-robust";

  llvm::PreservedAnalyses run(llvm::Module &M,
                              llvm::ModuleAnalysisManager &MAM);
  // Robustness is a correctness property: run even on optnone functions.
  static bool isRequired() { return true; }
};

} // namespace pmkit

#endif // PMKIT_PASSES_ROBUST_H
