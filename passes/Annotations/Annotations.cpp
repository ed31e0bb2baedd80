// SPDX-License-Identifier: Apache-2.0
//
// Annotations.cpp -- the pmkit-annotations module pass. It reads
// @llvm.global.annotations and, for each function annotated with a known
// "pmkit.*" string, adds a string function attribute of that same name;
// unknown "pmkit.*" strings and pmkit annotations on non-functions are
// reported on stderr and skipped, other annotations are left alone. With
// -pmkit-annotations-report it prints `pmkit-annotations: <function> <kind>`
// per annotated function, sorted. Entry point: AnnotationsPass::run. Run with
//   opt-16 -load-pass-plugin=pmkit-passes.so -passes=pmkit-annotations \
//     -pmkit-annotations-report -S in.ll

#include "Annotations/Annotations.h"
#include "Common/Diagnose.h"
#include "PMAlias/PMAlias.h"

#include "llvm/ADT/Statistic.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ModRef.h"
#include "llvm/Support/raw_ostream.h"

#include <set>
#include <string>
#include <utility>

using namespace llvm;

#define DEBUG_TYPE "pmkit-annotations"

STATISTIC(NumFase, "Functions annotated pmkit.fase");
STATISTIC(NumPMAllocator, "Functions annotated pmkit.pm_allocator");
STATISTIC(NumRobustIgnore, "Functions annotated pmkit.robust_ignore");
STATISTIC(NumFaseBuf,
          "FASE buffer parameters declared (pmkit.fase_in/scratch)");
STATISTIC(NumUnknown, "pmkit.* annotations skipped: unknown kind");
STATISTIC(NumNotOnFunction,
          "pmkit.* annotations skipped: not on a function (e.g. a variable)");

static cl::opt<bool> Report(
    "pmkit-annotations-report", cl::Hidden, cl::init(false),
    cl::desc("Print 'pmkit-annotations: <function> <kind>' to stderr for "
             "each function carrying a pmkit annotation"));

static cl::opt<bool> KeepFaseArgsOpt(
    "pmkit-annotations-keep-fase-args", cl::init(false),
    cl::desc("Anchor each FASE's parameters with a call of " +
             pmkit::FaseKeepFn.str() +
             " at its entry (clobber mode does at pipeline start)"));

namespace {

constexpr StringLiteral Prefix = "pmkit.";

struct KindInfo {
  StringLiteral Attr; // the annotation string and attribute name
  StringLiteral Kind; // as shown by the report
  Statistic *Counter;
};

const KindInfo Kinds[] = {
    {pmkit::AttrFase, "fase", &NumFase},
    {pmkit::AttrPMAllocator, "pm_allocator", &NumPMAllocator},
    {pmkit::AttrRobustIgnore, "robust_ignore", &NumRobustIgnore},
};

// Annotations with parameters, "pmkit.fase_in:P:N": collected into the
// value of one attribute (AttrFaseBufs) as "in:P:N".
struct ParamKindInfo {
  StringLiteral Prefix; // up to and including the first ':'
  StringLiteral Item;   // the item's name in the attribute value
  StringLiteral Attr;
};
const ParamKindInfo ParamKinds[] = {
    {"pmkit.fase_in:", "in", pmkit::AttrFaseBufs},
    {"pmkit.fase_scratch:", "scratch", pmkit::AttrFaseBufs},
};

const KindInfo *findKind(StringRef Annotation) {
  for (const KindInfo &K : Kinds)
    if (K.Attr == Annotation)
      return &K;
  return nullptr;
}

class AnnotationReader {
public:
  explicit AnnotationReader(Module &M) : M(M) {}

  // Attaches the attributes; returns true if any function changed.
  bool run();

private:
  void visit(GlobalValue &Target, StringRef Annotation);
  void printReport();

  Module &M;
  bool Changed = false;
  // (function name, kind): counts each pair once, ordered for the report.
  std::set<std::pair<std::string, std::string>> Found;
};

bool AnnotationReader::run() {
  GlobalVariable *Table = M.getNamedGlobal("llvm.global.annotations");
  // An empty table is a zeroinitializer rather than a ConstantArray.
  auto *Entries = Table && Table->hasInitializer()
                      ? dyn_cast<ConstantArray>(Table->getInitializer())
                      : nullptr;
  if (Entries) {
    for (Value *Op : Entries->operands()) {
      // Each entry is { ptr target, ptr string, ptr file, i32 line, ptr args }.
      auto *Entry = dyn_cast<ConstantStruct>(Op);
      if (!Entry || Entry->getNumOperands() < 2)
        continue;
      auto *Target =
          dyn_cast<GlobalValue>(Entry->getOperand(0)->stripPointerCasts());
      StringRef Annotation;
      if (!Target || !getConstantStringInfo(Entry->getOperand(1), Annotation))
        continue;
      if (Annotation.startswith(Prefix))
        visit(*Target, Annotation);
    }
  }
  if (Report)
    printReport();
  return Changed;
}

void AnnotationReader::visit(GlobalValue &Target, StringRef Annotation) {
  auto *F = dyn_cast<Function>(&Target);
  if (!F) {
    ++NumNotOnFunction;
    pmkit::diagnoseModule(
        Target.getContext(),
        Twine(DEBUG_TYPE ": annotation '") + Annotation + "' on '" +
            Target.getName() +
            "' ignored: pmkit annotations apply to functions only",
        DS_Warning);
    return;
  }
  for (const ParamKindInfo &PK : ParamKinds) {
    if (!Annotation.startswith(PK.Prefix))
      continue;
    std::string Item =
        (PK.Item + ":" + Annotation.drop_front(PK.Prefix.size())).str();
    if (!Found.emplace(F->getName().str(), Item).second)
      return;
    ++NumFaseBuf;
    StringRef Old = F->getFnAttribute(PK.Attr).getValueAsString();
    F->addFnAttr(PK.Attr, Old.empty() ? Item : (Old + "," + Item).str());
    Changed = true;
    return;
  }
  const KindInfo *K = findKind(Annotation);
  if (!K) {
    // Skipped rather than attached, so a misspelling cannot half-work.
    ++NumUnknown;
    std::string Known;
    for (const KindInfo &K : Kinds)
      Known += " " + K.Attr.str();
    pmkit::diagnose(*F,
                    Twine(DEBUG_TYPE ": unknown annotation '") + Annotation +
                        "' on function '" + F->getName() +
                        "' ignored (known:" + Known + ")",
                    DS_Warning);
    return;
  }
  if (!Found.emplace(F->getName().str(), K->Kind.str()).second)
    return;
  ++*K->Counter;
  if (!F->hasFnAttribute(K->Attr)) {
    F->addFnAttr(K->Attr);
    Changed = true;
  }
}

void AnnotationReader::printReport() {
  for (const auto &[Name, Kind] : Found)
    errs() << DEBUG_TYPE ": " << Name << ' ' << Kind << '\n';
}

} // namespace

// Adds the anchor call to each FASE with a body and parameters that lacks
// one; returns true if any was added.
static bool keepFaseArgs(Module &M) {
  bool Changed = false;
  for (Function &F : M) {
    if (F.isDeclaration() || F.arg_empty() ||
        !F.hasFnAttribute(pmkit::AttrFase))
      continue;
    BasicBlock &Entry = F.getEntryBlock();
    bool Has = false;
    for (Instruction &I : Entry)
      if (auto *CB = dyn_cast<CallBase>(&I))
        if (Function *G = CB->getCalledFunction())
          Has |= G->getName() == pmkit::FaseKeepFn;
    if (Has)
      continue;
    LLVMContext &Ctx = M.getContext();
    FunctionCallee Keep = M.getOrInsertFunction(
        pmkit::FaseKeepFn, FunctionType::get(Type::getVoidTy(Ctx), true));
    if (auto *G = dyn_cast<Function>(Keep.getCallee())) {
      G->setDoesNotThrow();
      G->addFnAttr(Attribute::WillReturn);
      G->setMemoryEffects(MemoryEffects::inaccessibleMemOnly());
    }
    SmallVector<Value *, 8> Args;
    for (Argument &A : F.args())
      Args.push_back(&A);
    IRBuilder<> B(&*Entry.getFirstInsertionPt());
    B.CreateCall(Keep, Args);
    Changed = true;
  }
  return Changed;
}

PreservedAnalyses pmkit::AnnotationsPass::run(Module &M,
                                              ModuleAnalysisManager &) {
  bool Changed = AnnotationReader(M).run();
  Changed |= keepAllocatorCalls(M);
  if (KeepFaseArgs || KeepFaseArgsOpt) {
    if (keepFaseArgs(M))
      return PreservedAnalyses::none();
  }
  if (!Changed)
    return PreservedAnalyses::all();
  // A string attribute changes no instruction and no CFG.
  PreservedAnalyses PA;
  PA.preserveSet<CFGAnalyses>();
  return PA;
}
