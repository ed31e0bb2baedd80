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

#include "Common/Attributes.h"
#include "Common/Diagnose.h"
#include "Common/PersistOps.h"
#include "PMAlias/PMAlias.h"
#include "Robust/RobustOpt.h"
#include "pmkit/abi.h"

#include "Common/CallEffects.h"
#include "Common/SourceLoc.h"
#include "Common/Target.h"
#include "Common/WriteBack.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/Statistic.h"
#include "llvm/Analysis/ValueTracking.h"
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
#include "llvm/Support/Debug.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"

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
STATISTIC(NumObjectFlushes, "Fresh objects written back as they escape");
STATISTIC(NumFlitStores, "Atomic PM writes wrapped in FliT counters");
STATISTIC(NumFlitLoads, "Atomic PM loads with a FliT counter check");
STATISTIC(NumSplitStores, "Stores wider than their alignment split");

namespace {

enum class Setting { Base, Opt, Flit };

cl::opt<Setting> SettingOpt(
    "pmkit-robust-setting", cl::Hidden, cl::init(Setting::Base),
    cl::desc("pmkit-robust: how flushes and fences are placed"),
    cl::values(clEnumValN(Setting::Base, "base",
                          "write back and fence after every PM access"),
               clEnumValN(Setting::Opt, "opt",
                          "escape and persistency-state dataflow: fences "
                          "only where robustness needs them"),
               clEnumValN(Setting::Flit, "flit",
                          "opt, with FliT counters for atomic accesses")));

cl::opt<bool> StripExisting(
    "pmkit-robust-strip-existing", cl::Hidden, cl::init(false),
    cl::desc("pmkit-robust: remove the program's own flushes and fences "
             "first, so that the pass derives all of them"));

cl::opt<bool> StripOnly(
    "pmkit-robust-strip-only", cl::Hidden, cl::init(false),
    cl::desc("pmkit-robust: with -pmkit-robust-strip-existing, insert "
             "nothing: the program as robust mode's user writes it, the "
             "control of the mode's end-to-end tests"));

cl::opt<bool> NoSplit(
    "pmkit-robust-no-split", cl::Hidden, cl::init(false),
    cl::desc("pmkit-robust: leave stores wider than their alignment whole "
             "(the control of the split's end-to-end test)"));

cl::opt<bool> Report("pmkit-robust-report", cl::Hidden, cl::init(false),
                     cl::desc("pmkit-robust: list every flush and fence "
                              "inserted, with its reason, on stderr"));

using pmkit::FlushInsn;
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

// A store wider than its alignment may straddle two cache lines, and the
// two lines persist independently: the later part can persist while the
// earlier is lost, which no strict-persistency execution produces (and no
// flush after the store prevents). Each such store becomes stores of its
// aligned parts in address order, so that the pass orders them like any
// two stores. Stores into the stack are left alone, and atomic stores are
// naturally aligned. Returns whether it split any; each split goes into
// Lines for the report.
bool splitUnderalignedStores(Module &M, std::vector<std::string> &Lines) {
  const DataLayout &DL = M.getDataLayout();
  std::vector<StoreInst *> Todo;
  for (Function &F : M) {
    if (F.isDeclaration() || F.hasFnAttribute(AttrRobustIgnore) ||
        !pmkit::mustNotInstrument(F).empty())
      continue;
    for (Instruction &I : instructions(F)) {
      auto *SI = dyn_cast<StoreInst>(&I);
      if (!SI || SI->isAtomic())
        continue;
      Type *T = SI->getValueOperand()->getType();
      uint64_t Size = DL.getTypeStoreSize(T).getKnownMinValue();
      uint64_t Align = SI->getAlign().value();
      if (Align >= Size || Size % Align || Size > 64 ||
          isa<ScalableVectorType>(T) || DL.getTypeSizeInBits(T) != Size * 8 ||
          isa<AllocaInst>(getUnderlyingObject(SI->getPointerOperand())))
        continue;
      Type *E = T->getScalarType();
      if (!E->isIntegerTy() && !E->isFloatingPointTy() && !E->isPointerTy())
        continue;
      Todo.push_back(SI);
    }
  }
  for (StoreInst *SI : Todo) {
    IRBuilder<> B(SI);
    Value *V = SI->getValueOperand();
    Type *T = V->getType();
    uint64_t Size = DL.getTypeStoreSize(T).getFixedValue();
    uint64_t Align = SI->getAlign().value();
    IntegerType *Whole = B.getIntNTy((unsigned)(Size * 8));
    if (T->isPtrOrPtrVectorTy()) // (a vector of pointers: of integers)
      V = B.CreatePtrToInt(V, DL.getIntPtrType(T));
    V = B.CreateBitCast(V, Whole);
    IntegerType *Part = B.getIntNTy((unsigned)(Align * 8));
    for (uint64_t Off = 0; Off < Size; Off += Align) {
      uint64_t Shift = DL.isLittleEndian() ? Off : Size - Off - Align;
      Value *Bits = B.CreateTrunc(B.CreateLShr(V, Shift * 8), Part);
      Value *P = B.CreateConstInBoundsGEP1_64(B.getInt8Ty(),
                                              SI->getPointerOperand(), Off);
      StoreInst *N =
          B.CreateAlignedStore(Bits, P, SI->getAlign(), SI->isVolatile());
      N->setDebugLoc(SI->getDebugLoc());
    }
    Lines.push_back(sourceLoc(SI) + ": split the " + std::to_string(Size) +
                    "-byte store aligned to " + std::to_string(Align) +
                    " into " + std::to_string(Size / Align) +
                    " stores: across two cache lines its later part could "
                    "persist without the earlier");
    SI->eraseFromParent();
    ++NumSplitStores;
  }
  return !Todo.empty();
}

class Robustifier {
public:
  Robustifier(Module &M, const PMAliasInfo &PA, FunctionAnalysisManager &FAM,
              std::vector<std::string> Lines)
      : M(M), PA(PA), FAM(FAM), DL(M.getDataLayout()), Ctx(M.getContext()),
        Lines(std::move(Lines)) {}
  bool run();

private:
  Module &M;
  const PMAliasInfo &PA;
  FunctionAnalysisManager &FAM;
  const DataLayout &DL;
  LLVMContext &Ctx;
  FunctionCallee FlushRange;
  GlobalVariable *FlitCounters = nullptr;
  std::vector<std::string> Lines; // the report
  DenseSet<const Instruction *> IgnoredInsts;
  DenseSet<Function *> Touched;

  bool strip(Function &F);
  void warnUnmodeled(Function &F);
  DenseMap<const BasicBlock *, bool> ignoredAtEntry(Function &F);
  void collectIgnored(Function &F);
  bool robustify(Function &F);
  void persistAfter(Instruction *I, const PMAccess &X);
  void writeBack(IRBuilder<> &B, const PMAccess &X);
  void flushLine(IRBuilder<> &B, Value *Addr);
  void fence(IRBuilder<> &B);
  Value *flitCounter(IRBuilder<> &B, Value *Addr);
  void apply(const RobustAction &A);
  void addFlushFeature(Function &F);
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

// Writes to PM the pass does not model (a scatter, a library function
// writing a string): robust mode fences before them like before any call,
// but cannot write back what they wrote -- say so.
void Robustifier::warnUnmodeled(Function &F) {
  for (Instruction &I : instructions(F)) {
    auto *CB = dyn_cast<CallBase>(&I);
    if (CB && CB->isInlineAsm() && !IgnoredInsts.count(&I)) {
      AsmEffect E = asmEffect(*CB);
      PMAccess X = accessOf(I, DL);
      SmallSet<int, 2> Written;
      for (const AsmMem &Mm : E.Mem)
        if (Mm.Store)
          Written.insert(Mm.Arg);
      bool Unnamed = Written.count(-1);
      if (Unnamed || Written.size() > 1 || (Written.size() == 1 && !X.AsmStore))
        pmkit::diagnoseAt(
            I,
            Twine(DEBUG_TYPE) +
                ": inline asm writes memory robust mode cannot place: " +
                (Unnamed ? "at an address no operand names"
                         : "through more than one operand") +
                " (only its first write to an operand is written "
                "back; if the rest may be PM, write it back yourself)",
            DS_Warning);
      continue;
    }
    Function *Callee = CB ? CB->getCalledFunction() : nullptr;
    if (!Callee || IgnoredInsts.count(&I) || CB->arg_size() == 0)
      continue;
    Value *Dst = nullptr;
    switch (Callee->getIntrinsicID()) {
    case Intrinsic::masked_scatter:
      Dst = CB->getArgOperand(1);
      break;
    case Intrinsic::masked_compressstore:
      Dst = CB->getArgOperand(1);
      break;
    case Intrinsic::not_intrinsic:
      if (int A = writtenArgument(callEffects(Callee->getName()));
          A >= 0 && (unsigned)A < CB->arg_size())
        Dst = CB->getArgOperand(A);
      break;
    default:
      break;
    }
    // printf's %n stores an int through an argument: warned about where
    // the format's %n targets (any argument after a format that is not a
    // constant) may be PM. The arguments behind a va_list are not followed.
    if (unsigned E = Callee->getIntrinsicID() == Intrinsic::not_intrinsic
                         ? callEffects(Callee->getName())
                         : 0;
        formatArgument(E) >= 0 && !(E & CE_VA_LIST)) {
      SmallVector<unsigned, 2> Targets;
      if (!formatStores(*CB, E, Targets))
        for (unsigned K = formatArgument(E) + 1; K < CB->arg_size(); ++K)
          Targets.push_back(K);
      for (unsigned K : Targets)
        if (K < CB->arg_size() &&
            CB->getArgOperand(K)->getType()->isPointerTy() &&
            PA.mayBePM(CB->getArgOperand(K))) {
          pmkit::diagnoseAt(
              I,
              Twine(DEBUG_TYPE) + ": " + displayName(*Callee) +
                  "'s format may store through an argument that may be PM "
                  "(a %n conversion, or a format that is not a constant "
                  "string): that write is not written back",
              DS_Warning);
          break;
        }
    }
    // (A scatter's vector of addresses: warned about whatever it points to.)
    if (!Dst || (Dst->getType()->isPointerTy() && !PA.mayBePM(Dst)))
      continue;
    pmkit::diagnoseAt(
        I,
        Twine(DEBUG_TYPE) + ": " + displayName(*Callee) +
            " may write PM in a way robust mode does not model: its "
            "writes are not written back (write them back yourself, "
            "or write PM with plain stores or memcpy)",
        DS_Warning);
  }
}

// The address an existing persistence op writes back; null for a fence
// (the library fences and the fence intrinsics take no argument) or a flush
// whose address the asm decoder cannot name.
const Value *writtenBackAddress(const Instruction &I) {
  const auto &CB = cast<CallBase>(I);
  if (!CB.isInlineAsm())
    return CB.arg_size() ? CB.getArgOperand(0) : nullptr;
  for (const AsmOp &Op : asmEffect(CB).Ops)
    if (Op.IsFlush && Op.Arg >= 0)
      return CB.getArgOperand(Op.Arg);
  return nullptr;
}

// Removes the program's own write-backs and fences -- but never one whose
// address the analysis finds no PM at: the pass would place no write-back
// of its own for those stores. Such a write-back stays, and so do the
// function's fences, which may be what orders it.
bool Robustifier::strip(Function &F) {
  SmallVector<Instruction *, 16> Dead;
  bool KeepFences = false;
  for (Instruction &I : instructions(F)) {
    if (!isExistingPersistOp(I) || !I.use_empty())
      continue;
    const Value *Addr = writtenBackAddress(I);
    if (Addr && !PA.mayBePM(Addr)) {
      KeepFences = true;
      if (Report)
        Lines.push_back(sourceLoc(&I) +
                        ": kept the program's write-back: the analysis "
                        "finds no PM at its address, so it places none");
      continue;
    }
    Dead.push_back(&I);
  }
  if (KeepFences)
    erase_if(Dead, [](Instruction *I) { return !writtenBackAddress(*I); });
  for (Instruction *I : Dead) {
    // An invoke (a pmkit_persist in a C++ scope with a destructor, of a
    // header that does not say it cannot throw) ends its block: in its
    // place, the branch it takes when it returns.
    if (auto *II = dyn_cast<InvokeInst>(I)) {
      BranchInst::Create(II->getNormalDest(), II);
      II->getUnwindDest()->removePredecessor(II->getParent());
    }
    I->eraseFromParent();
  }
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

// The instructions inside PMKIT_ROBUST_IGNORE_BEGIN/END regions of F.
void Robustifier::collectIgnored(Function &F) {
  DenseMap<const BasicBlock *, bool> AtEntry = ignoredAtEntry(F);
  for (BasicBlock &BB : F) {
    bool Ign = AtEntry[&BB];
    for (Instruction &I : BB) {
      StringRef T = asmText(I);
      if (T.contains(IgnoreBegin))
        Ign = true;
      else if (T.contains(IgnoreEnd))
        Ign = false;
      else if (Ign)
        IgnoredInsts.insert(&I);
    }
  }
}

void Robustifier::flushLine(IRBuilder<> &B, Value *Addr) {
  Intrinsic::ID ID = pmkit::flushIntrinsic(FlushOpt).ID;
  B.CreateCall(Intrinsic::getDeclaration(&M, ID), {Addr});
  ++NumFlushes;
  Touched.insert(B.GetInsertBlock()->getParent());
}

void Robustifier::fence(IRBuilder<> &B) {
  B.CreateCall(Intrinsic::getDeclaration(&M, Intrinsic::x86_sse_sfence));
  ++NumFences;
}

void Robustifier::writeBack(IRBuilder<> &B, const PMAccess &X) {
  Intrinsic::ID ID = pmkit::flushIntrinsic(FlushOpt).ID;
  NumFlushes += emitWriteBack(B, ID, FlushRange, X.Addr, X.Size, X.A, X.Len);
  NumRangeFlushes += X.Len != nullptr;
  Touched.insert(B.GetInsertBlock()->getParent());
}

// base: write back what I wrote and fence, right after I.
void Robustifier::persistAfter(Instruction *I, const PMAccess &X) {
  IRBuilder<> B(I->getNextNode());
  B.SetCurrentDebugLocation(I->getDebugLoc());
  writeBack(B, X);
  fence(B);
  if (Report)
    Lines.push_back(sourceLoc(I) + ": " + X.What + " (" + PA.pmSource(X.Addr) +
                    "): " + (X.Len ? "range write-back" : "write-back") +
                    " + sfence");
}

bool Robustifier::robustify(Function &F) {
  SmallVector<std::pair<Instruction *, PMAccess>, 32> Work;
  for (Instruction &I : instructions(F)) {
    PMAccess X = accessOf(I, DL);
    if (!X.Addr)
      X = outParamAccess(I); // pmkit_alloc(pool, n, &pm->field)
    if (!X.Addr)
      continue;
    if (!PA.mayBePM(X.Addr)) {
      ++NumDRAM;
      continue;
    }
    if (IgnoredInsts.count(&I)) {
      ++NumIgnored;
      continue;
    }
    Work.push_back({&I, X});
  }
  for (auto &[I, X] : Work)
    persistAfter(I, X);
  return !Work.empty();
}

// The FliT counter of the line holding Addr (abi.h).
Value *Robustifier::flitCounter(IRBuilder<> &B, Value *Addr) {
  if (!FlitCounters) {
    auto *Ty = ArrayType::get(B.getInt64Ty(), PMKIT_FLIT_COUNTERS);
    FlitCounters =
        cast<GlobalVariable>(M.getOrInsertGlobal("__pmkit_flit_counters", Ty));
  }
  Value *Line = B.CreateLShr(B.CreatePtrToInt(Addr, B.getInt64Ty()),
                             PMKIT_FLIT_LINE_SHIFT);
  Value *Idx = B.CreateAnd(Line, PMKIT_FLIT_COUNTERS - 1);
  return B.CreateInBoundsGEP(FlitCounters->getValueType(), FlitCounters,
                             {B.getInt64(0), Idx});
}

void Robustifier::apply(const RobustAction &A) {
  Instruction *I = A.At;
  const char *Did = "";
  switch (A.K) {
  case RobustAction::WriteBackAfter: {
    PMAccess X = accessOf(*I, DL);
    IRBuilder<> B(I->getNextNode());
    B.SetCurrentDebugLocation(I->getDebugLoc());
    writeBack(B, X);
    Did = X.Len ? "range write-back after" : "write-back after";
    break;
  }
  case RobustAction::FenceBefore: {
    IRBuilder<> B(I);
    B.SetCurrentDebugLocation(I->getDebugLoc());
    fence(B);
    Did = "sfence before";
    break;
  }
  case RobustAction::FlushObjectBefore: {
    IRBuilder<> B(I);
    B.SetCurrentDebugLocation(I->getDebugLoc());
    Value *P = A.ObjFromSlot ? B.CreateLoad(B.getPtrTy(), A.Obj) : A.Obj;
    auto *C = dyn_cast<ConstantInt>(A.ObjSize);
    if (C && C->getZExtValue() <= 4 * 64) {
      // Every line of [P, P+size), wherever P falls in its line.
      uint64_t N = C->getZExtValue();
      for (uint64_t Off = 0; Off < N; Off += 64)
        flushLine(B, B.CreateConstGEP1_64(B.getInt8Ty(), P, Off));
      if (N > 1 && (N - 1) % 64 != 0)
        flushLine(B, B.CreateConstGEP1_64(B.getInt8Ty(), P, N - 1));
    } else {
      B.CreateCall(FlushRange,
                   {P, B.CreateZExtOrTrunc(A.ObjSize, B.getInt64Ty())});
      ++NumRangeFlushes;
      Touched.insert(I->getFunction());
    }
    ++NumObjectFlushes;
    Did = "write-back of the object before";
    break;
  }
  case RobustAction::FlitStore: {
    PMAccess X = accessOf(*I, DL);
    IRBuilder<> B(I);
    B.SetCurrentDebugLocation(I->getDebugLoc());
    Value *Cnt = flitCounter(B, X.Addr);
    // Locked RMWs: the first orders earlier write-backs before the write,
    // the second orders this write-back before the counter drops.
    B.CreateAtomicRMW(AtomicRMWInst::Add, Cnt, B.getInt64(1), Align(8),
                      AtomicOrdering::SequentiallyConsistent);
    B.SetInsertPoint(I->getNextNode());
    writeBack(B, X);
    B.CreateAtomicRMW(AtomicRMWInst::Sub, Cnt, B.getInt64(1), Align(8),
                      AtomicOrdering::SequentiallyConsistent);
    ++NumFlitStores;
    Did = "FliT counter around";
    break;
  }
  case RobustAction::RedirectCall:
    cast<CallBase>(I)->setCalledFunction(cast<Function>(A.Obj));
    Did = "calls a clone";
    break;
  case RobustAction::FlitLoad: {
    PMAccess X = accessOf(*I, DL);
    IRBuilder<> B(I->getNextNode());
    B.SetCurrentDebugLocation(I->getDebugLoc());
    // The program's load first: a compiler-only acquire fence keeps the
    // counter load after it (x86 keeps loads in order).
    B.CreateFence(AtomicOrdering::Acquire, SyncScope::SingleThread);
    Value *Cnt = flitCounter(B, X.Addr);
    LoadInst *C = B.CreateAlignedLoad(B.getInt64Ty(), Cnt, Align(8));
    C->setAtomic(AtomicOrdering::Monotonic);
    Value *Up = B.CreateICmpNE(C, B.getInt64(0));
    Instruction *Then = SplitBlockAndInsertIfThen(Up, &*B.GetInsertPoint(),
                                                  /*Unreachable=*/false);
    IRBuilder<> TB(Then);
    TB.SetCurrentDebugLocation(I->getDebugLoc());
    writeBack(TB, X);
    fence(TB);
    ++NumFlitLoads;
    Did = "FliT counter check after";
    break;
  }
  }
  Touched.insert(I->getFunction());
  if (Report)
    Lines.push_back(sourceLoc(I) + ": " + Did + ": " + A.Why);
}

void Robustifier::addFlushFeature(Function &F) {
  if (StringRef Feature = pmkit::flushIntrinsic(FlushOpt).Feature;
      !Feature.empty())
    addTargetFeature(F, Feature);
}

bool Robustifier::run() {
  FlushRange = flushRangeFn(M);
  bool Changed = false;
  for (Function &F : M) {
    if (F.isDeclaration() || !pmkit::mustNotInstrument(F).empty())
      continue;
    if (StripExisting)
      Changed |= strip(F);
    collectIgnored(F);
  }
  if (StripOnly)
    return Changed;
  auto Skip = [](const Function &F) {
    return F.hasFnAttribute(AttrRobustIgnore) ||
           !pmkit::mustNotInstrument(F).empty();
  };
  // Never silently: a function the pass may not change keeps its stores
  // unordered, and the user must know.
  for (Function &F : M)
    if (!F.isDeclaration() && !pmkit::mustNotInstrument(F).empty())
      pmkit::diagnose(F,
                      std::string(DEBUG_TYPE) + ": " + pmkit::displayName(F) +
                          " is " + pmkit::mustNotInstrument(F).str() +
                          ": no write-back or fence is inserted in it, so "
                          "its stores to PM are not made robust",
                      DS_Warning);
  for (Function &F : M)
    if (!F.isDeclaration() && !Skip(F))
      warnUnmodeled(F);
  if (SettingOpt == Setting::Base) {
    for (Function &F : M)
      if (!F.isDeclaration() && !Skip(F))
        Changed |= robustify(F);
  } else {
    RobustOptStats Stats;
    std::vector<RobustAction> Plan = planRobustOpt(
        M, PA, FAM,
        [&](const Instruction &I) { return IgnoredInsts.count(&I) != 0; }, Skip,
        SettingOpt == Setting::Flit, Stats);
    LLVM_DEBUG(dbgs() << DEBUG_TYPE ": " << Plan.size()
                      << " actions planned\n");
    for (const RobustAction &A : Plan)
      apply(A);
    Changed |= !Plan.empty();
  }
  for (Function *F : Touched)
    addFlushFeature(*F);
  if (Report)
    for (const std::string &L : Lines)
      errs() << DEBUG_TYPE << ": " << L << '\n';
  return Changed;
}

} // namespace

PreservedAnalyses RobustPass::run(Module &M, ModuleAnalysisManager &MAM) {
  if (!pmkit::targetSupported(M, PassName))
    return PreservedAnalyses::all();
  // Split first, and analyse the stores the program now has.
  std::vector<std::string> SplitLines;
  bool Split = !StripOnly && !NoSplit && splitUnderalignedStores(M, SplitLines);
  if (Split)
    MAM.invalidate(M, PreservedAnalyses::none());
  const PMAliasInfo &PA = MAM.getResult<PMAliasAnalysis>(M);
  FunctionAnalysisManager &FAM =
      MAM.getResult<FunctionAnalysisManagerModuleProxy>(M).getManager();
  if (!Robustifier(M, PA, FAM, std::move(SplitLines)).run() && !Split)
    return PreservedAnalyses::all();
  // New instructions (and, with FliT, new blocks): the PM analysis stays
  // valid (PMAliasInfo); function analyses do not.
  PreservedAnalyses P;
  P.preserve<PMAliasAnalysis>();
  return P;
}
