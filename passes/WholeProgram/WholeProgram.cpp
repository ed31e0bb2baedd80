// SPDX-License-Identifier: Apache-2.0
//
// WholeProgram.cpp -- the compile step's record and the link step's pass of
// a whole-program (LTO) build; WholeProgram.h describes both.

#include "WholeProgram/WholeProgram.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

#include <cstdlib>
#include <map>
#include <optional>

using namespace llvm;

namespace {

cl::opt<std::string> CompileOptions(
    "pmkit-whole-program", cl::init(""),
    cl::desc("The compile step of a whole-program build: apply these pmkit "
             "options (OPT;OPT, percent-encoded), attach annotations and "
             "record the options; the mode's passes run at link time"));

// A build error: the message alone, and the compiler or linker exits with
// status 1 (report_fatal_error would make clang print a crash report).
[[noreturn]] void fail(const Twine &Msg) {
  errs() << "pmkit: error: " << Msg << "\n";
  errs().flush();
  std::exit(1);
}

std::string decode(StringRef S) {
  std::string Out;
  for (size_t I = 0; I < S.size(); ++I) {
    if (S[I] != '%') {
      Out += S[I];
      continue;
    }
    unsigned Byte;
    if (I + 2 >= S.size() || S.substr(I + 1, 2).getAsInteger(16, Byte))
      fail("malformed option list '" + S + "' (bad %-escape)");
    Out += static_cast<char>(Byte);
    I += 2;
  }
  return Out;
}

StringRef optionName(StringRef Opt) { return Opt.split('=').first; }

} // namespace

namespace pmkit {

std::vector<std::string> wholeProgramCompileOptions() {
  return decodeOptionList(CompileOptions);
}

std::vector<std::string> decodeOptionList(StringRef List) {
  std::vector<std::string> Out;
  SmallVector<StringRef, 8> Parts;
  List.split(Parts, ';', -1, /*KeepEmpty=*/false);
  for (StringRef P : Parts)
    Out.push_back(decode(P));
  return Out;
}

void applyOptions(const std::vector<std::string> &Options, StringRef Where) {
  for (const std::string &O : Options) {
    if (!StringRef(O).startswith("-pmkit-"))
      fail(Where + ": '" + O + "' is not a pmkit option (-pmkit-...)");
    const char *Argv[] = {"pmkit options", O.c_str()};
    std::string Err;
    raw_string_ostream ErrOS(Err);
    if (!cl::ParseCommandLineOptions(2, Argv, "", &ErrOS)) {
      // (A bad value is reported on stderr, not in ErrOS.)
      StringRef Why = StringRef(ErrOS.str()).trim();
      fail(Where + ": " +
           (Why.empty() ? "bad option '" + O + "' (above)" : Why));
    }
  }
}

PreservedAnalyses WholeProgramCompilePass::run(Module &M,
                                               ModuleAnalysisManager &) {
  LLVMContext &Ctx = M.getContext();
  SmallVector<Metadata *, 8> Ops{MDString::get(Ctx, M.getSourceFileName())};
  for (const std::string &O : Options)
    Ops.push_back(MDString::get(Ctx, O));
  M.getOrInsertNamedMetadata(BuildMetadataName)
      ->addOperand(MDTuple::get(Ctx, Ops));
  // The guard: a kept reference to a symbol nothing defines.
  auto *Sym = cast<GlobalVariable>(
      M.getOrInsertGlobal(GuardSymbol, Type::getInt8Ty(Ctx)));
  auto *Ref =
      new GlobalVariable(M, Sym->getType(), /*isConstant=*/true,
                         GlobalValue::PrivateLinkage, Sym, "pmkit.guard");
  appendToUsed(M, {Ref});
  return PreservedAnalyses::none();
}

PreservedAnalyses WholeProgramLinkPass::run(Module &M,
                                            ModuleAnalysisManager &MAM) {
  // The link step's own options, then what each object recorded.
  std::map<std::string, std::string> Effective; // name -> option
  std::map<std::string, std::string> From;      // name -> where it came from
  for (const std::string &O : Options) {
    Effective[optionName(O).str()] = O;
    From[optionName(O).str()] = "the link step";
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> Records;
  if (NamedMDNode *Build = M.getNamedMetadata(BuildMetadataName)) {
    for (MDNode *N : Build->operands()) {
      std::pair<std::string, std::vector<std::string>> R;
      for (unsigned I = 0; I < N->getNumOperands(); ++I) {
        auto *S = dyn_cast<MDString>(N->getOperand(I));
        if (!S)
          fail("malformed " + BuildMetadataName + " record");
        if (I == 0)
          R.first = S->getString().str();
        else
          R.second.push_back(S->getString().str());
      }
      Records.push_back(std::move(R));
    }
    Build->eraseFromParent();
  }
  std::vector<std::string> CompileOnly;
  for (const auto &[File, Opts] : Records) {
    for (const std::string &O : Opts) {
      std::string Name = optionName(O).str();
      // Tracing needs the link to link libpmkit-trace, which pmkit cc
      // does only when the link has --trace.
      if (StringRef(Name).startswith("-pmkit-trace") && !Effective.count(Name))
        fail(File + " was compiled with --trace: give --trace to the link "
                    "step too (it links libpmkit-trace)");
      auto It = Effective.find(Name);
      if (It == Effective.end()) {
        Effective[Name] = O;
        From[Name] = File;
        CompileOnly.push_back(O);
      } else if (It->second != O) {
        fail(File + " was compiled with " + O + " but " + From[Name] + " has " +
             It->second + ": a whole program has one value");
      }
    }
  }
  // An option that only some objects were compiled with would silently
  // apply to all of them. (A report is not a choice about the program: one
  // object's asks for all of it.)
  for (const std::string &O : CompileOnly)
    for (const auto &[File, Opts] : Records)
      if (!optionName(O).endswith("-report") && !llvm::is_contained(Opts, O))
        fail(From[optionName(O).str()] + " was compiled with " + O + " but " +
             File +
             " was not: give it to the link step to apply it to the "
             "whole program");
  applyOptions(Options, "link step");
  applyOptions(CompileOnly, "recorded by the compile step");

  // Remove the guards: this link runs the pmkit passes.
  if (GlobalVariable *Sym = M.getNamedGlobal(GuardSymbol)) {
    SmallVector<GlobalVariable *, 4> Refs;
    for (User *U : Sym->users())
      if (auto *G = dyn_cast<GlobalVariable>(U))
        Refs.push_back(G);
    removeFromUsedLists(M, [&](Constant *C) {
      return llvm::is_contained(Refs, C->stripPointerCasts());
    });
    for (GlobalVariable *G : Refs)
      G->eraseFromParent();
    if (Sym->use_empty())
      Sym->eraseFromParent();
  }

  ModulePassManager Inner;
  Add(Inner, Level);
  Inner.run(M, MAM);
  return PreservedAnalyses::none();
}

bool parseWholeProgramLink(StringRef Name, ModulePassManager &MPM,
                           AddLinkPassesFn Add) {
  if (!Name.consume_front(WholeProgramPassName))
    return false;
  if (!Name.consume_front("<") || !Name.consume_back(">"))
    fail("expected " + WholeProgramPassName + "<LEVEL;OPTION;...>, got '" +
         WholeProgramPassName + Name + "'");
  auto [LevelText, Rest] = Name.split(';');
  std::optional<OptimizationLevel> Level =
      StringSwitch<std::optional<OptimizationLevel>>(LevelText)
          .Case("O0", OptimizationLevel::O0)
          .Case("O1", OptimizationLevel::O1)
          .Case("O2", OptimizationLevel::O2)
          .Case("O3", OptimizationLevel::O3)
          .Case("Os", OptimizationLevel::Os)
          .Case("Oz", OptimizationLevel::Oz)
          .Default(std::nullopt);
  if (!Level)
    fail("unknown optimization level '" + LevelText + "' in " +
         WholeProgramPassName + " (O0, O1, O2, O3, Os or Oz)");
  MPM.addPass(
      WholeProgramLinkPass(*Level, decodeOptionList(Rest), std::move(Add)));
  return true;
}

} // namespace pmkit
