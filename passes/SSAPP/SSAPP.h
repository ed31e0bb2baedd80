// SPDX-License-Identifier: Apache-2.0
//
// SSAPP.h -- the pmkit-ssapp module pass (ssapp mode, after SSAPP, Soh et
// al., ISMM'25): makes each function marked PMKIT_FASE crash-consistent on
// a platform whose caches persist (eADR) and generates its recovery. Each
// FASE is cut into RISEs -- blocks that only read, only write, or make one
// call -- so that each can be re-executed; the values that live from one
// RISE to another are kept in a per-thread persistent frame (loaded values
// with a torn bit per slot: load-to-persist); each RISE records its id in
// the frame's crash buoy and ends with a fence. A clone of the FASE
// entered through a switch on the resume point that the runtime computes
// (the paper's Table 3) is its recovery version. Settings:
// -pmkit-ssapp-fence=sfence|compiler. Entry point: pmkit::SSAPPPass::run.
// Run it with
//   opt-16 -load-pass-plugin=pmkit-passes.so \
//     -passes=pmkit-annotations,pmkit-ssapp -pmkit-ssapp-report -S in.ll
// or through clang: pmkit cc --mode=ssapp.

#ifndef PMKIT_PASSES_SSAPP_H
#define PMKIT_PASSES_SSAPP_H

#include "llvm/IR/PassManager.h"

namespace pmkit {

class SSAPPPass : public llvm::PassInfoMixin<SSAPPPass> {
public:
  // The -passes= name; also this pass's DEBUG_TYPE and option prefix.
  static constexpr llvm::StringLiteral PassName = "pmkit-ssapp";

  llvm::PreservedAnalyses run(llvm::Module &M,
                              llvm::ModuleAnalysisManager &MAM);
  static bool isRequired() { return true; }
};

} // namespace pmkit

#endif // PMKIT_PASSES_SSAPP_H
