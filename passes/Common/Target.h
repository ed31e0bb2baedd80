// SPDX-License-Identifier: Apache-2.0
//
// Target.h -- what every pmkit pass asks before it changes a module or a
// function: is the target x86-64, the only one whose write-back and fence
// instructions (clwb, clflushopt, sfence) pmkit emits and whose persistency
// model (Px86) its guarantees are stated for; and may the function be
// changed at all (a naked function is its own assembly; one marked
// disable_sanitizer_instrumentation promises that the compiler adds
// nothing). Header only.

#ifndef PMKIT_PASSES_COMMON_TARGET_H
#define PMKIT_PASSES_COMMON_TARGET_H

#include "llvm/ADT/StringRef.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/TargetParser/Triple.h"

#include <string>

namespace pmkit {

// True if the module targets x86-64 (or names no target, as hand-written IR
// may); otherwise reports an error naming the pass and the target, and the
// pass must leave the module alone.
inline bool targetSupported(llvm::Module &M, llvm::StringRef Pass) {
  const std::string &TT = M.getTargetTriple();
  if (TT.empty() || llvm::Triple(TT).getArch() == llvm::Triple::x86_64)
    return true;
  M.getContext().emitError(
      Pass + ": the target " + TT +
      " is not supported: pmkit emits x86-64 write-backs and fences "
      "(clwb, sfence) and states its guarantees for x86-64 only");
  return false;
}

// Why F must not be instrumented ("naked",
// "disable_sanitizer_instrumentation"), or "" if it may be.
inline llvm::StringRef mustNotInstrument(const llvm::Function &F) {
  if (F.hasFnAttribute(llvm::Attribute::Naked))
    return "naked";
  if (F.hasFnAttribute(llvm::Attribute::DisableSanitizerInstrumentation))
    return "disable_sanitizer_instrumentation";
  return "";
}

} // namespace pmkit

#endif // PMKIT_PASSES_COMMON_TARGET_H
