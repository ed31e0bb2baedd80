// SPDX-License-Identifier: Apache-2.0
//
// Diagnose.h -- how every pmkit pass tells the user something: warnings and
// errors go through LLVM's diagnostic handler, never straight to stderr, so
// that clang prints them as its own (file:line:col, the source line, a
// caret), -Werror turns a warning into an error, and opt prints them with
// the function's name. A message starts with the pass's name ("pmkit-robust:
// ..."). Reports asked for with -pmkit-*-report are output, not diagnostics,
// and stay on stderr. Header only.

#ifndef PMKIT_PASSES_COMMON_DIAGNOSE_H
#define PMKIT_PASSES_COMMON_DIAGNOSE_H

#include "llvm/ADT/Twine.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Instruction.h"
#include "llvm/IR/LLVMContext.h"

#include <string>

namespace pmkit {

// About F, at its source line.
inline void diagnose(const llvm::Function &F, const llvm::Twine &Msg,
                     llvm::DiagnosticSeverity Severity) {
  F.getContext().diagnose(llvm::DiagnosticInfoUnsupported(
      F, Msg, llvm::DiagnosticLocation(F.getSubprogram()), Severity));
}

// About instruction I, at its source line (the function's without debug
// information).
inline void diagnoseAt(const llvm::Instruction &I, const llvm::Twine &Msg,
                       llvm::DiagnosticSeverity Severity) {
  const llvm::Function &F = *I.getFunction();
  llvm::DiagnosticLocation Loc(F.getSubprogram());
  if (const llvm::DebugLoc &DL = I.getDebugLoc())
    Loc = llvm::DiagnosticLocation(DL);
  F.getContext().diagnose(
      llvm::DiagnosticInfoUnsupported(F, Msg, Loc, Severity));
}

// About no function (an annotation on a variable): clang prints it as a
// backend-plugin diagnostic (-Wbackend-plugin).
class ModuleDiagnostic : public llvm::DiagnosticInfo {
  std::string Msg;

public:
  ModuleDiagnostic(const llvm::Twine &Msg, llvm::DiagnosticSeverity Severity)
      : llvm::DiagnosticInfo(kind(), Severity), Msg(Msg.str()) {}
  void print(llvm::DiagnosticPrinter &DP) const override { DP << Msg; }
  static int kind() {
    static const int K = llvm::getNextAvailablePluginDiagnosticKind();
    return K;
  }
};

inline void diagnoseModule(llvm::LLVMContext &C, const llvm::Twine &Msg,
                           llvm::DiagnosticSeverity Severity) {
  C.diagnose(ModuleDiagnostic(Msg, Severity));
}

} // namespace pmkit

#endif // PMKIT_PASSES_COMMON_DIAGNOSE_H
