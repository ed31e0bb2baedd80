// SPDX-License-Identifier: Apache-2.0
//
// Annotations.h -- the pmkit-annotations module pass, which turns the
// `annotate("pmkit.*")` attributes written through include/pmkit/annotations.h
// (recorded by clang in @llvm.global.annotations) into string function
// attributes (named in Common/Attributes.h), so that mode passes ask
// F.hasFnAttribute(pmkit::AttrFase) instead of decoding the annotation table
// again; it also marks PM
// allocators noinline (pmkit::keepAllocatorCalls), before the optimizer
// could inline away the calls the PM analysis recognises. Entry point:
// pmkit::AnnotationsPass::run. Run it alone with
//   opt-16 -load-pass-plugin=pmkit-passes.so -passes=pmkit-annotations -S in.ll
// clang-16 -fpass-plugin=pmkit-passes.so runs it at pipeline start.

#ifndef PMKIT_PASSES_ANNOTATIONS_H
#define PMKIT_PASSES_ANNOTATIONS_H

#include "Common/Attributes.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/IR/PassManager.h"

namespace pmkit {

class AnnotationsPass : public llvm::PassInfoMixin<AnnotationsPass> {
public:
  // The -passes= name; also this pass's DEBUG_TYPE and option prefix.
  static constexpr llvm::StringLiteral PassName = "pmkit-annotations";

  // KeepFaseArgs: also anchor each FASE's parameters (FaseKeepFn); clobber
  // mode asks for it at pipeline start, as does the option
  // -pmkit-annotations-keep-fase-args (for builds that optimise each file
  // before a whole-program clobber pass).
  explicit AnnotationsPass(bool KeepFaseArgs = false)
      : KeepFaseArgs(KeepFaseArgs) {}

  llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &);

  // Mode passes depend on the attributes, so this must run even at -O0 and
  // on optnone functions.
  static bool isRequired() { return true; }

private:
  bool KeepFaseArgs;
};

} // namespace pmkit

#endif // PMKIT_PASSES_ANNOTATIONS_H
