// SPDX-License-Identifier: Apache-2.0
//
// PMAlias.h -- which pointers may point to persistent memory. A module
// analysis (PMAliasAnalysis) computes an inclusion-based (Andersen) points-to
// solution over abstract objects -- allocas, globals, heap allocation sites,
// PM allocation sites, and one "unknown" object for memory the module cannot
// see -- field-sensitive by byte offset within each object, and answers
// mayBePM(pointer): whether the pointer may point into a PM object (or into
// unknown memory, which may be PM). PM objects come from pmkit's pool API,
// libpmem/libpmemobj, mmap of a file, functions annotated
// PMKIT_PM_ALLOCATOR, and the allocators listed in a configuration file
// (-pmkit-pmalias-config). The printer pass lists every memory access with
// its verdict:
//   opt-16 -load-pass-plugin=pmkit-passes.so -passes=pmkit-pmalias \
//     -disable-output in.ll

#ifndef PMKIT_PASSES_PMALIAS_H
#define PMKIT_PASSES_PMALIAS_H

#include "llvm/IR/PassManager.h"

#include <memory>
#include <string>

namespace llvm {
class Value;
} // namespace llvm

namespace pmkit {

class PMAliasSolver;

// The solution for one module. Valid as long as the module's IR is not
// changed in ways that create new pointers (inserting flushes is fine).
class PMAliasInfo {
public:
  explicit PMAliasInfo(std::unique_ptr<PMAliasSolver> S);
  PMAliasInfo(PMAliasInfo &&);
  ~PMAliasInfo();

  // True if V (a pointer, or an integer made from one) may point into PM.
  bool mayBePM(const llvm::Value *V) const;
  // A short description of one PM object V may point to ("pmkit_alloc at
  // file:line", "unknown memory (a parameter of an exported function)"), or
  // "" if V cannot point to PM.
  std::string pmSource(const llvm::Value *V) const;

  bool invalidate(llvm::Module &, const llvm::PreservedAnalyses &,
                  llvm::ModuleAnalysisManager::Invalidator &) {
    return false; // pmkit passes keep it valid by construction
  }

private:
  std::unique_ptr<PMAliasSolver> S;
};

class PMAliasAnalysis : public llvm::AnalysisInfoMixin<PMAliasAnalysis> {
public:
  using Result = PMAliasInfo;
  Result run(llvm::Module &M, llvm::ModuleAnalysisManager &);

private:
  friend llvm::AnalysisInfoMixin<PMAliasAnalysis>;
  static llvm::AnalysisKey Key;
};

// Marks the PM allocators the module defines (PMKIT_PM_ALLOCATOR, or named
// in -pmkit-pmalias-config) noinline, so that their calls, which the
// analysis recognises, survive the optimizer that runs before it (LTO's
// inliner in a whole-program build). True if it changed a function.
bool keepAllocatorCalls(llvm::Module &M);

// Prints "<function>: PM|DRAM <instruction>" for every load, store, atomic
// and memory intrinsic, with the PM source for PM accesses.
class PMAliasPrinterPass : public llvm::PassInfoMixin<PMAliasPrinterPass> {
public:
  // The -passes= name; also the analysis's DEBUG_TYPE and option prefix.
  static constexpr llvm::StringLiteral PassName = "pmkit-pmalias";

  llvm::PreservedAnalyses run(llvm::Module &M,
                              llvm::ModuleAnalysisManager &MAM);
  static bool isRequired() { return true; }
};

} // namespace pmkit

#endif // PMKIT_PASSES_PMALIAS_H
