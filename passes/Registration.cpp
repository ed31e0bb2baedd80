// SPDX-License-Identifier: Apache-2.0
//
// Registration.cpp -- the one place where pmkit-passes.so tells LLVM about
// its passes. It maps each pass's -passes= name to the pass for opt, and for
// clang (-fpass-plugin) adds pmkit-annotations at pipeline start followed by
// the passes of the mode chosen with -pmkit-mode, and pmkit-trace last when
// -pmkit-trace is given. The modes and their options are listed in
// modes.def (read by the pmkit command too); a mode's passes are added by
// its add<ID>Passes below, after the optimizer. Entry point:
// llvmGetPassPluginInfo. Run a pass with
//   opt-16 -load-pass-plugin=pmkit-passes.so -passes=pmkit-annotations -S in.ll
// or a whole mode with
//   clang-16 -fpass-plugin=pmkit-passes.so -fplugin=pmkit-passes.so \
//     -mllvm -pmkit-mode=<mode> -c x.c
// (-fplugin loads the library before -mllvm options are parsed).

#include "ARP/ARP.h"
#include "Annotations/Annotations.h"
#include "Clobber/Clobber.h"
#include "Common/Pipeline.h"
#include "PMAlias/PMAlias.h"
#include "Robust/Robust.h"
#include "SSAPP/SSAPP.h"
#include "Trace/Trace.h"
#include "WholeProgram/WholeProgram.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/OptimizationLevel.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Compiler.h"
#include "llvm/Support/ErrorHandling.h"

using namespace llvm;

namespace {

enum ModeFlags : unsigned {
  MODE_WHOLE_PROGRAM = 1u << 0,
  MODE_KEEP_FASE_ARGS = 1u << 1,
};

enum class Mode {
#define PMK_MODE(ID, NAME, FLAGS, DOC, HELP) ID,
#include "modes.def"
};

// Adds a mode's passes after the optimizer (and before pmkit-trace).
using AddModePassesFn = void (*)(ModulePassManager &, OptimizationLevel);

struct ModeInfo {
  Mode M;
  const char *Name; // the -pmkit-mode= value
  unsigned Flags;
  const char *Help;
  AddModePassesFn AddLatePasses;
};

void addNonePasses(ModulePassManager &, OptimizationLevel) {}

// Robust mode works on the optimised code, so that it flushes the stores
// that remain (after mem2reg, DSE, store merging) and nothing moves them.
void addRobustPasses(ModulePassManager &MPM, OptimizationLevel) {
  MPM.addPass(pmkit::RobustPass());
}

// Clobber mode too: it analyses the optimised FASE (after inlining by the
// optimizer, mem2reg and GVN), and its calls stay where it puts them.
void addClobberPasses(ModulePassManager &MPM, OptimizationLevel) {
  MPM.addPass(pmkit::ClobberPass());
}

// SSAPP works on the optimised FASE too (after inlining and mem2reg):
// fewer values live across RISEs, fewer loads to persist.
void addSSAPPPasses(ModulePassManager &MPM, OptimizationLevel) {
  MPM.addPass(pmkit::SSAPPPass());
}

// arp mode too: the pmkit::atomic calls it lowers stay opaque through the
// optimizer, which therefore moves no store across them.
void addARPPasses(ModulePassManager &MPM, OptimizationLevel) {
  MPM.addPass(pmkit::ARPPass());
}

// modes.def: mode ID's passes are added by add<ID>Passes above.
const ModeInfo ModeTable[] = {
#define PMK_MODE(ID, NAME, FLAGS, DOC, HELP)                                   \
  {Mode::ID, NAME, FLAGS, HELP, add##ID##Passes},
#include "modes.def"
};

// The -mllvm options modes.def gives each mode (pmkit cc's flags pass them).
struct ModeOption {
  const char *Mode, *Option;
};
const ModeOption ModeOptions[] = {
#define PMK_MODE_OPTION(MODE, FLAG, OPTION, KIND, VALUES, HELP) {MODE, OPTION},
#include "modes.def"
};

// modes.def names options pmkit cc passes on: each must be one the plugin
// defines, or the CLI would pass an option clang rejects.
void checkModeOptions() {
  StringMap<cl::Option *> &Opts = cl::getRegisteredOptions();
  for (const ModeOption &O : ModeOptions)
    if (!Opts.count(O.Option))
      report_fatal_error(Twine("pmkit-passes: modes.def names -") + O.Option +
                             " for mode " + O.Mode +
                             ", which the plugin does not define",
                         false);
}

// Fills the option's values from ModeTable, so the table is the only list.
struct ModeValuesFromTable {
  template <class Opt> void apply(Opt &O) const {
    for (const ModeInfo &I : ModeTable)
      O.getParser().addLiteralOption(I.Name, I.M, I.Help);
  }
};

cl::opt<Mode> PmkitMode("pmkit-mode",
                        cl::desc("Crash-consistency mode whose passes run "
                                 "at pipeline start (clang, or opt "
                                 "-passes='default<On>')"),
                        cl::init(Mode::None), ModeValuesFromTable());

const ModeInfo &selectedMode() {
  for (const ModeInfo &I : ModeTable)
    if (I.M == PmkitMode)
      return I;
  llvm_unreachable("every Mode has a ModeTable entry");
}

// What a build adds at pipeline start (annotations) and after the optimizer
// (the mode's passes, then tracing, which sees
// the code as it will run). A whole-program link runs both around clang's
// LTO pipeline.
void addStartPasses(ModulePassManager &MPM, OptimizationLevel Level) {
  const ModeInfo &Selected = selectedMode();
  MPM.addPass(pmkit::AnnotationsPass(Selected.Flags & MODE_KEEP_FASE_ARGS));
}

void addLastPasses(ModulePassManager &MPM, OptimizationLevel Level) {
  const ModeInfo &Selected = selectedMode();
  Selected.AddLatePasses(MPM, Level);
  if (pmkit::traceEnabled())
    MPM.addPass(pmkit::TracePass());
}

bool parseModulePass(StringRef Name, ModulePassManager &MPM,
                     ArrayRef<PassBuilder::PipelineElement>) {
  if (Name == pmkit::AnnotationsPass::PassName) {
    MPM.addPass(pmkit::AnnotationsPass());
    return true;
  }
  if (Name == pmkit::TracePass::PassName) {
    MPM.addPass(pmkit::TracePass());
    return true;
  }
  if (Name == pmkit::RobustPass::PassName) {
    MPM.addPass(pmkit::RobustPass());
    return true;
  }
  if (Name == pmkit::ClobberPass::PassName) {
    MPM.addPass(pmkit::ClobberPass());
    return true;
  }
  if (Name == pmkit::SSAPPPass::PassName) {
    MPM.addPass(pmkit::SSAPPPass());
    return true;
  }
  if (Name == pmkit::ARPPass::PassName) {
    MPM.addPass(pmkit::ARPPass());
    return true;
  }
  if (Name == pmkit::PMAliasPrinterPass::PassName) {
    MPM.addPass(pmkit::PMAliasPrinterPass());
    return true;
  }
  return false;
}

void registerCallbacks(PassBuilder &PB) {
  checkModeOptions();
  if (PassInstrumentationCallbacks *PIC =
          PB.getPassInstrumentationCallbacks()) {
    PIC->addClassToPassName(pmkit::AnnotationsPass::name(),
                            pmkit::AnnotationsPass::PassName);
    PIC->addClassToPassName(pmkit::TracePass::name(),
                            pmkit::TracePass::PassName);
    PIC->addClassToPassName(pmkit::RobustPass::name(),
                            pmkit::RobustPass::PassName);
    PIC->addClassToPassName(pmkit::ClobberPass::name(),
                            pmkit::ClobberPass::PassName);
    PIC->addClassToPassName(pmkit::SSAPPPass::name(),
                            pmkit::SSAPPPass::PassName);
    PIC->addClassToPassName(pmkit::ARPPass::name(), pmkit::ARPPass::PassName);
    PIC->addClassToPassName(pmkit::PMAliasPrinterPass::name(),
                            pmkit::PMAliasPrinterPass::PassName);
  }

  PB.registerAnalysisRegistrationCallback([](ModuleAnalysisManager &MAM) {
    MAM.registerPass([] { return pmkit::PMAliasAnalysis(); });
  });
  PB.registerPipelineParsingCallback(parseModulePass);
  // The link step of a whole-program build (WholeProgram.h): the passes of
  // one file's build around clang's LTO pipeline. PB outlives the pipeline
  // it builds.
  PB.registerPipelineParsingCallback(
      [&PB](StringRef Name, ModulePassManager &MPM,
            ArrayRef<PassBuilder::PipelineElement>) {
        return pmkit::parseWholeProgramLink(
            Name, MPM, [&PB](ModulePassManager &Inner, OptimizationLevel L) {
              addStartPasses(Inner, L);
              Inner.addPass(PB.buildLTODefaultPipeline(L, nullptr));
              addLastPasses(Inner, L);
            });
      });
  // Options are parsed by the time a pipeline is built; the compile step of
  // a whole-program build applies its own here, attaches the annotations
  // and records the options, and leaves the mode's passes to the link.
  PB.registerPipelineStartEPCallback([](ModulePassManager &MPM,
                                        OptimizationLevel Level) {
    std::vector<std::string> WholeProgram = pmkit::wholeProgramCompileOptions();
    pmkit::applyOptions(WholeProgram, "compile step");
    if (WholeProgram.empty()) {
      addStartPasses(MPM, Level);
      return;
    }
    const ModeInfo &Selected = selectedMode();
    MPM.addPass(pmkit::AnnotationsPass(Selected.M == Mode::Clobber));
    MPM.addPass(pmkit::WholeProgramCompilePass(WholeProgram));
  });
  PB.registerOptimizerLastEPCallback(
      [](ModulePassManager &MPM, OptimizationLevel Level) {
        if (pmkit::wholeProgramCompileOptions().empty())
          addLastPasses(MPM, Level);
      });
}

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "pmkit-passes", PMKIT_VERSION,
          registerCallbacks};
}
