// SPDX-License-Identifier: Apache-2.0
//
// SourceLoc.h -- "file:line" of an instruction for the messages and reports
// of pmkit's passes, or the function's name when there is no debug
// information; function names as the source spells them (demangled).
// Header only.

#ifndef PMKIT_PASSES_COMMON_SOURCELOC_H
#define PMKIT_PASSES_COMMON_SOURCELOC_H

#include "llvm/Demangle/Demangle.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Instruction.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace pmkit {

// A function's name for people: `do_op(TPCC_DB*, unsigned long*, ...)`
// rather than `_Z5do_opP7TPCC_DBPmmm`; C names are unchanged.
inline std::string displayName(const llvm::Function &F) {
  return llvm::demangle(F.getName().str());
}

inline std::string sourceLoc(const llvm::Instruction *I) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  if (const llvm::DebugLoc &DL = I->getDebugLoc())
    OS << DL->getFilename() << ':' << DL.getLine();
  else
    OS << displayName(*I->getFunction()) << " (no debug info)";
  return S;
}

} // namespace pmkit

#endif // PMKIT_PASSES_COMMON_SOURCELOC_H
