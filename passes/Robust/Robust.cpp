// SPDX-License-Identifier: Apache-2.0
//
// Robust.cpp -- the pmkit-robust module pass (see Robust.h). For each
// function it first removes the flushes and fences already there when
// -pmkit-robust-strip-existing is given (x86 intrinsics, inline asm, pmkit's
// and libpmem's primitives), then, for every access PMAlias says may touch
// PM and that no PMKIT_ROBUST_IGNORE covers, inserts a write-back of the
// lines it wrote (clwb by default; a runtime call for memcpy/memset, whose
// length may be unknown) followed by an sfence -- the paper's `base`
// setting, under which every execution is strictly persistent. Atomic loads
// get the same treatment, since another thread's store they read may not be
// durable yet. With -pmkit-robust-report each insertion is listed on stderr
// with its source line and the PM object behind it. Entry point:
// RobustPass::run. Run with
//   opt-16 -load-pass-plugin=pmkit-passes.so -passes=pmkit-robust -S in.ll

#include "Robust/Robust.h"

#include "Annotations/Annotations.h"
#include "Common/PersistOps.h"
#include "PMAlias/PMAlias.h"

#include "Common/SourceLoc.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Statistic.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

using namespace llvm;
using namespace pmkit;

#define DEBUG_TYPE "pmkit-robust"

STATISTIC(NumFlushes, "Write-backs inserted (one per cache line)");
STATISTIC(NumRangeFlushes, "Range write-backs inserted (memcpy/memset)");
STATISTIC(NumFences, "Fences inserted");
STATISTIC(NumDRAM, "Accesses left alone: the analysis proved them DRAM");
STATISTIC(NumIgnored, "Accesses left alone: PMKIT_ROBUST_IGNORE");
STATISTIC(NumStripped, "Existing flushes and fences removed");

namespace {

enum class Setting { Base, Opt, Flit };

cl::opt<Setting> SettingOpt(
    "pmkit-robust-setting", cl::Hidden, cl::init(Setting::Base),
    cl::desc("pmkit-robust: how flushes and fences are placed"),
    cl::values(clEnumValN(Setting::Base, "base",
                          "write back and fence after every PM access"),
               clEnumValN(Setting::Opt, "opt",
                          "escape and persistency-state dataflow (not "
                          "available yet)"),
               clEnumValN(Setting::Flit, "flit",
                          "opt plus FliT counters for atomics (not "
                          "available yet)")));

cl::opt<bool> StripExisting(
    "pmkit-robust-strip-existing", cl::Hidden, cl::init(false),
    cl::desc("pmkit-robust: remove the program's own flushes and fences "
             "first, so that the pass derives all of them"));

cl::opt<bool> StripOnly(
    "pmkit-robust-strip-only", cl::Hidden, cl::init(false),
    cl::desc("pmkit-robust: with -pmkit-robust-strip-existing, insert "
             "nothing: the program as robust mode's user writes it, the "
             "control of the mode's end-to-end tests"));

cl::opt<bool> Report("pmkit-robust-report", cl::Hidden, cl::init(false),
                     cl::desc("pmkit-robust: list every flush and fence "
                              "inserted, with its reason, on stderr"));

enum class FlushInsn { Clwb, Clflushopt, Clflush };
cl::opt<FlushInsn> FlushOpt(
    "pmkit-robust-flush", cl::Hidden, cl::init(FlushInsn::Clwb),
    cl::desc("pmkit-robust: the write-back instruction inserted"),
    cl::values(clEnumValN(FlushInsn::Clwb, "clwb", "clwb (default)"),
               clEnumValN(FlushInsn::Clflushopt, "clflushopt", "clflushopt"),
               clEnumValN(FlushInsn::Clflush, "clflush",
                          "clflush (orders itself; the fence stays)")));

// Names of the library persistence primitives stripped with the
// instructions: pmkit's and libpmem's.
const char *const LibraryPrimitives[] = {
    "pmkit_flush", "pmkit_fence",  "pmkit_persist",  "pmem_flush",
    "pmem_drain",  "pmem_persist", "pmem_deep_flush"};

// The inline-asm markers PMKIT_ROBUST_IGNORE_BEGIN/END expand to.
constexpr StringLiteral IgnoreBegin = "pmkit.robust_ignore_begin";
constexpr StringLiteral IgnoreEnd = "pmkit.robust_ignore_end";

StringRef asmText(const Instruction &I) {
  if (auto *CB = dyn_cast<CallBase>(&I))
    if (auto *IA = dyn_cast<InlineAsm>(CB->getCalledOperand()))
      return IA->getAsmString();
  return "";
}

class Robustifier {
public:
  Robustifier(Module &M, const PMAliasInfo &PA)
      : M(M), PA(PA), DL(M.getDataLayout()), Ctx(M.getContext()) {}
  bool run();

private:
  Module &M;
  const PMAliasInfo &PA;
  const DataLayout &DL;
  LLVMContext &Ctx;
  FunctionCallee FlushRange;
  std::vector<std::string> Lines; // the report

  bool strip(Function &F);
  DenseMap<const BasicBlock *, bool> ignoredAtEntry(Function &F);
  bool robustify(Function &F);
  void persistAfter(Instruction *I, Value *Addr, uint64_t Size, Align A,
                    Value *Len, StringRef What);
  void flushLine(IRBuilder<> &B, Value *Addr);
};

// A flush or fence the program placed itself: an x86 intrinsic, inline asm
// that flushes or fences (but not a locked RMW in asm, which does more), or
// a library primitive.
bool isExistingPersistOp(const Instruction &I) {
  auto *CB = dyn_cast<CallBase>(&I);
  if (!CB)
    return false;
  if (isa<InlineAsm>(CB->getCalledOperand())) {
    AsmEffect E = asmEffect(asmText(I));
    return E.Flush || E.Fence == FenceSfence || E.Fence == FenceMfence;
  }
  Function *F = CB->getCalledFunction();
  if (!F)
    return false;
  switch (F->getIntrinsicID()) {
  case Intrinsic::x86_clwb:
  case Intrinsic::x86_clflushopt:
  case Intrinsic::x86_sse2_clflush:
  case Intrinsic::x86_sse_sfence:
  case Intrinsic::x86_sse2_mfence:
    return true;
  case Intrinsic::not_intrinsic:
    return is_contained(LibraryPrimitives, F->getName());
  default:
    return false;
  }
}

bool Robustifier::strip(Function &F) {
  SmallVector<Instruction *, 16> Dead;
  for (Instruction &I : instructions(F))
    if (isExistingPersistOp(I) && I.use_empty())
      Dead.push_back(&I);
  for (Instruction *I : Dead)
    I->eraseFromParent();
  NumStripped += Dead.size();
  return !Dead.empty();
}

// Whether each block starts inside a PMKIT_ROBUST_IGNORE region on every
// path to it (a forward must-analysis over the markers).
DenseMap<const BasicBlock *, bool> Robustifier::ignoredAtEntry(Function &F) {
  DenseMap<const BasicBlock *, bool> In, Out;
  auto exitState = [&](const BasicBlock &BB, bool S) {
    for (const Instruction &I : BB) {
      StringRef T = asmText(I);
      if (T.contains(IgnoreBegin))
        S = true;
      else if (T.contains(IgnoreEnd))
        S = false;
    }
    return S;
  };
  for (BasicBlock &BB : F)
    Out[&BB] = true; // optimistic start for a must-analysis
  bool Changed = true;
  while (Changed) {
    Changed = false;
    for (BasicBlock &BB : F) {
      bool S = !BB.isEntryBlock() && !pred_empty(&BB);
      for (const BasicBlock *P : predecessors(&BB))
        S = S && Out[P];
      In[&BB] = S;
      bool O = exitState(BB, S);
      if (O != Out[&BB]) {
        Out[&BB] = O;
        Changed = true;
      }
    }
  }
  return In;
}

void Robustifier::flushLine(IRBuilder<> &B, Value *Addr) {
  Intrinsic::ID ID = FlushOpt == FlushInsn::Clwb ? Intrinsic::x86_clwb
                     : FlushOpt == FlushInsn::Clflushopt
                         ? Intrinsic::x86_clflushopt
                         : Intrinsic::x86_sse2_clflush;
  B.CreateCall(Intrinsic::getDeclaration(&M, ID), {Addr});
  ++NumFlushes;
}

// Write back what I wrote ([Addr, Addr+Size), or Len bytes when Size is 0)
// and fence, right after I.
void Robustifier::persistAfter(Instruction *I, Value *Addr, uint64_t Size,
                               Align A, Value *Len, StringRef What) {
  IRBuilder<> B(I->getNextNode());
  B.SetCurrentDebugLocation(I->getDebugLoc());
  if (Len) {
    B.CreateCall(FlushRange, {Addr, B.CreateZExtOrTrunc(Len, B.getInt64Ty())});
    ++NumRangeFlushes;
  } else {
    flushLine(B, Addr);
    // A store not aligned to its size may end on the next line.
    if (Size > 1 && A.value() < Size)
      flushLine(B, B.CreateConstGEP1_64(B.getInt8Ty(), Addr, Size - 1));
  }
  B.CreateCall(Intrinsic::getDeclaration(&M, Intrinsic::x86_sse_sfence));
  ++NumFences;
  if (Report)
    Lines.push_back(
        sourceLoc(I) + ": " + What.str() + " (" + PA.pmSource(Addr) +
        "): " + (Len ? "range write-back" : "write-back") + " + sfence");
}

bool Robustifier::robustify(Function &F) {
  DenseMap<const BasicBlock *, bool> Ignored = ignoredAtEntry(F);
  struct Todo {
    Instruction *I;
    Value *Addr;
    uint64_t Size;
    Align A;
    Value *Len;
    const char *What;
  };
  SmallVector<Todo, 32> Work;
  for (BasicBlock &BB : F) {
    bool Ign = Ignored[&BB];
    for (Instruction &I : BB) {
      StringRef T = asmText(I);
      if (T.contains(IgnoreBegin))
        Ign = true;
      else if (T.contains(IgnoreEnd))
        Ign = false;
      Todo W{&I, nullptr, 0, Align(1), nullptr, ""};
      if (auto *SI = dyn_cast<StoreInst>(&I)) {
        W = {&I,
             SI->getPointerOperand(),
             DL.getTypeStoreSize(SI->getValueOperand()->getType()),
             SI->getAlign(),
             nullptr,
             SI->isAtomic() ? "atomic store to PM" : "store to PM"};
      } else if (auto *LI = dyn_cast<LoadInst>(&I)) {
        if (LI->isAtomic())
          W = {&I,
               LI->getPointerOperand(),
               DL.getTypeStoreSize(LI->getType()),
               LI->getAlign(),
               nullptr,
               "atomic load from PM"};
      } else if (auto *RMW = dyn_cast<AtomicRMWInst>(&I)) {
        W = {&I,
             RMW->getPointerOperand(),
             DL.getTypeStoreSize(RMW->getValOperand()->getType()),
             RMW->getAlign(),
             nullptr,
             "atomic RMW on PM"};
      } else if (auto *CX = dyn_cast<AtomicCmpXchgInst>(&I)) {
        W = {&I,
             CX->getPointerOperand(),
             DL.getTypeStoreSize(CX->getNewValOperand()->getType()),
             CX->getAlign(),
             nullptr,
             "compare-and-swap on PM"};
      } else if (auto *MI = dyn_cast<MemIntrinsic>(&I)) {
        W = {&I,
             MI->getRawDest(),
             0,
             Align(1),
             MI->getLength(),
             isa<MemSetInst>(MI) ? "memset into PM" : "memcpy into PM"};
      }
      if (!W.Addr)
        continue;
      if (!PA.mayBePM(W.Addr)) {
        ++NumDRAM;
        continue;
      }
      if (Ign) {
        ++NumIgnored;
        continue;
      }
      Work.push_back(W);
    }
  }
  for (const Todo &W : Work)
    persistAfter(W.I, W.Addr, W.Size, W.A, W.Len, W.What);
  if (!Work.empty() && FlushOpt != FlushInsn::Clflush) {
    // The write-back intrinsics need their target feature in the function.
    StringRef Feature = FlushOpt == FlushInsn::Clwb ? "+clwb" : "+clflushopt";
    std::string Features =
        F.getFnAttribute("target-features").getValueAsString().str();
    if (!StringRef(Features).contains(Feature))
      F.addFnAttr("target-features", Features.empty()
                                         ? Feature.str()
                                         : Features + "," + Feature.str());
  }
  return !Work.empty();
}

bool Robustifier::run() {
  if (SettingOpt != Setting::Base) {
    Ctx.emitError("pmkit-robust: -pmkit-robust-setting=" +
                  Twine(SettingOpt == Setting::Opt ? "opt" : "flit") +
                  " is not available in this build yet (use base)");
    return false;
  }
  FlushRange =
      M.getOrInsertFunction("__pmkit_flush_range", Type::getVoidTy(Ctx),
                            PointerType::getUnqual(Ctx), Type::getInt64Ty(Ctx));
  bool Changed = false;
  for (Function &F : M) {
    if (F.isDeclaration())
      continue;
    if (StripExisting)
      Changed |= strip(F);
    if (F.hasFnAttribute(AttrRobustIgnore) || StripOnly)
      continue;
    Changed |= robustify(F);
  }
  if (Report)
    for (const std::string &L : Lines)
      errs() << DEBUG_TYPE << ": " << L << '\n';
  return Changed;
}

} // namespace

PreservedAnalyses RobustPass::run(Module &M, ModuleAnalysisManager &MAM) {
  const PMAliasInfo &PA = MAM.getResult<PMAliasAnalysis>(M);
  if (!Robustifier(M, PA).run())
    return PreservedAnalyses::all();
  // New instructions only: the PM analysis stays valid (PMAliasInfo).
  PreservedAnalyses P;
  P.preserve<PMAliasAnalysis>();
  return P;
}
