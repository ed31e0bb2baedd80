// SPDX-License-Identifier: Apache-2.0
//
// WholeProgram.h -- whole-program builds through clang's LTO. A compile step
// (`pmkit cc --whole-program -c`, clang -flto=full) gets its pmkit options as
// one list, -mllvm -pmkit-whole-program=OPT;OPT;..., applies them, attaches
// the annotations and records the list in the bitcode (named metadata
// pmkit.build: source file, then each option); the mode's passes do not run.
// It also plants a guard: a reference to an undefined symbol
// (GuardSymbol) that only the link step's pass removes, so bitcode linked
// without the pmkit passes fails to link instead of running uninstrumented.
//
// The link step (ld.lld --load-pass-plugin=pmkit-passes.so
// --lto-newpm-passes='pmkit-whole-program<O2;OPT;...>') runs
// WholeProgramLinkPass on the merged module: the link's options and every
// object's recorded options must agree (an option given only when compiling
// still applies; two values of one option are an error, naming the files),
// then the annotations, clang's LTO pipeline, the mode's passes and
// pmkit-trace run on it. lld parses -mllvm options before it loads pass
// plugins, so pipeline parameters are the link step's only way in.
//
// Options travel percent-encoded (',', ';', '<', '>', '(', ')', '%' and
// spaces as %XX), since pipeline text and the list use those characters.

#ifndef PMKIT_PASSES_WHOLEPROGRAM_H
#define PMKIT_PASSES_WHOLEPROGRAM_H

#include "llvm/ADT/StringRef.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/OptimizationLevel.h"

#include <functional>
#include <string>
#include <vector>

namespace pmkit {

inline constexpr llvm::StringLiteral WholeProgramPassName =
    "pmkit-whole-program";
inline constexpr llvm::StringLiteral BuildMetadataName = "pmkit.build";
inline constexpr llvm::StringLiteral GuardSymbol =
    "__pmkit_link_with_pmkit_cc_whole_program";

// The options of a compile step's -pmkit-whole-program=..., or none.
std::vector<std::string> wholeProgramCompileOptions();

// Decodes "OPT;OPT" (each percent-encoded).
std::vector<std::string> decodeOptionList(llvm::StringRef List);

// Sets pmkit's options from `Options` ("-pmkit-x=v" each); a non-pmkit or
// unknown option, or a bad value, is a fatal error naming it.
void applyOptions(const std::vector<std::string> &Options,
                  llvm::StringRef Where);

// The compile step's record and guard (see above).
class WholeProgramCompilePass
    : public llvm::PassInfoMixin<WholeProgramCompilePass> {
public:
  explicit WholeProgramCompilePass(std::vector<std::string> Options)
      : Options(std::move(Options)) {}
  llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &);
  static bool isRequired() { return true; }

private:
  std::vector<std::string> Options;
};

// Adds the whole pipeline of a link step, once the options are applied.
using AddLinkPassesFn =
    std::function<void(llvm::ModulePassManager &, llvm::OptimizationLevel)>;

class WholeProgramLinkPass : public llvm::PassInfoMixin<WholeProgramLinkPass> {
public:
  WholeProgramLinkPass(llvm::OptimizationLevel Level,
                       std::vector<std::string> Options, AddLinkPassesFn Add)
      : Level(Level), Options(std::move(Options)), Add(std::move(Add)) {}
  llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &);
  static bool isRequired() { return true; }

private:
  llvm::OptimizationLevel Level;
  std::vector<std::string> Options;
  AddLinkPassesFn Add;
};

// Parses "pmkit-whole-program<LEVEL;OPT;...>" into the pass; false if `Name`
// is not this pass (a malformed one is a fatal error).
bool parseWholeProgramLink(llvm::StringRef Name, llvm::ModulePassManager &MPM,
                           AddLinkPassesFn Add);

} // namespace pmkit

#endif // PMKIT_PASSES_WHOLEPROGRAM_H
