// SPDX-License-Identifier: Apache-2.0
//
// Trace.h -- the pmkit-trace module pass, which makes a program report every
// access to persistent memory to runtime/trace (libpmkit-trace): stores,
// non-temporal stores, atomic read-modify-writes and cmpxchg, memcpy,
// memmove and memset, cache-line flushes (intrinsics and inline asm), fences
// (sfence, mfence, seq_cst fences, locked instructions), the buffers library
// calls fill (read, fread, clock_gettime, ...), pool pointers given to other
// uninstrumented calls and, with -pmkit-trace-loads, loads. Calls are those
// of include/pmkit/abi.h and carry
// a source location id from debug info. Entry point: pmkit::TracePass::run.
// It runs last in clang's pipeline with -mllvm -pmkit-trace, or alone with
//   opt-16 -load-pass-plugin=pmkit-passes.so -passes=pmkit-trace -S in.ll

#ifndef PMKIT_PASSES_TRACE_H
#define PMKIT_PASSES_TRACE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/IR/PassManager.h"

namespace pmkit {

class TracePass : public llvm::PassInfoMixin<TracePass> {
public:
  // The -passes= name; also this pass's DEBUG_TYPE and option prefix.
  static constexpr llvm::StringLiteral PassName = "pmkit-trace";

  llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &);

  // A trace that misses an access is wrong, so this runs at -O0 and on
  // optnone functions too.
  static bool isRequired() { return true; }
};

} // namespace pmkit

#endif // PMKIT_PASSES_TRACE_H
