// SPDX-License-Identifier: Apache-2.0
//
// Clobber.h -- the pmkit-clobber module pass (clobber mode, after
// Clobber-NVM): makes each function marked PMKIT_FASE failure-atomic by
// undo-logging only its clobber writes (stores that may overwrite a value
// the function read earlier) and recording its arguments, so that recovery
// restores the clobbered inputs and re-executes it. Callees with a body are
// inlined into the FASE first; the rest of the pass is the clobber analysis
// (reads that reach a write and may alias it), its refinement (writes to
// memory the FASE allocated, writes dominated by a write to the same
// address), the instrumentation (abi.h: __pmkit_clobber_*) and a dispatch
// table for recovery. Settings (-pmkit-clobber-setting): `clobber`, and
// `undo` (every PM write logged, recovery rolls back: the baseline). Entry
// point: pmkit::ClobberPass::run. Run it with
//   opt-16 -load-pass-plugin=pmkit-passes.so \
//     -passes=pmkit-annotations,pmkit-clobber -pmkit-clobber-report -S in.ll
// or through clang: pmkit cc --mode=clobber.

#ifndef PMKIT_PASSES_CLOBBER_H
#define PMKIT_PASSES_CLOBBER_H

#include "llvm/IR/PassManager.h"

namespace pmkit {

class ClobberPass : public llvm::PassInfoMixin<ClobberPass> {
public:
  // The -passes= name; also this pass's DEBUG_TYPE and option prefix.
  static constexpr llvm::StringLiteral PassName = "pmkit-clobber";

  llvm::PreservedAnalyses run(llvm::Module &M,
                              llvm::ModuleAnalysisManager &MAM);
  // Failure atomicity is a correctness property: run on optnone code too.
  static bool isRequired() { return true; }
};

} // namespace pmkit

#endif // PMKIT_PASSES_CLOBBER_H
