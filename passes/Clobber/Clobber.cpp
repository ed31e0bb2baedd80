// SPDX-License-Identifier: Apache-2.0
//
// Clobber.cpp -- the pmkit-clobber pass (Clobber.h). For each FASE:
//  1. inline every callee with a body (up to -pmkit-clobber-inline-limit
//     instructions); callees left as calls, and anything reachable from
//     them, are instrumented conservatively (every PM write logged);
//  2. classify every call that is left: known runtime and libc functions,
//     functions the user allowed (-pmkit-clobber-allow), or an error naming
//     the source line;
//  3. find the clobber writes: a write W is one if some input read R (not
//     of memory the FASE allocated, not dominated by a write covering it)
//     can execute before W and may alias it (LLVM alias analysis). Writes
//     to memory the FASE allocated, and writes dominated by a write to the
//     same address at least as wide, are dropped ("propagation");
//  4. insert __pmkit_clobber_log before each clobber write, a write-back
//     after each write that may reach PM (ADR), the entry and exit calls,
//     a replay stub, and the FASE table with its constructor.
// Entry point: ClobberPass::run. Run with
//   opt-16 -load-pass-plugin=pmkit-passes.so \
//     -passes=pmkit-annotations,pmkit-clobber -pmkit-clobber-report -S in.ll

#include "Clobber/Clobber.h"
#include "Common/Access.h"
#include "Common/Attributes.h"
#include "Common/CallEffects.h"
#include "Common/Diagnose.h"
#include "Common/Fase.h"
#include "Common/PersistOps.h"
#include "Common/SourceLoc.h"
#include "Common/Target.h"

#include "pmkit/abi.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/Statistic.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Analysis/AliasAnalysis.h"
#include "llvm/Analysis/CaptureTracking.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/MemoryLocation.h"
#include "llvm/Analysis/PostDominators.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/LoopUtils.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"
#include "llvm/Transforms/Utils/ScalarEvolutionExpander.h"

#include <functional>
#include <string>
#include <vector>

using namespace llvm;

#define DEBUG_TYPE "pmkit-clobber"

STATISTIC(NumFase, "FASEs instrumented");
STATISTIC(NumInlined, "Call sites inlined into FASEs");
STATISTIC(NumConservative, "Functions instrumented conservatively (called "
                           "from a FASE but not inlined)");
STATISTIC(NumWrites, "Writes in FASEs that may reach PM");
STATISTIC(NumLogged, "Writes logged (clobber writes, or all under undo)");
STATISTIC(NumFresh, "Writes not logged: memory the FASE allocated");
STATISTIC(NumDominated, "Writes not logged: dominated by a covering write");
STATISTIC(NumNoInput, "Writes not logged: no input read may precede them");
STATISTIC(NumWriteBacks, "Write-backs inserted (ADR)");
STATISTIC(NumBatched, "Log calls moved up to share the fence of a batch");
STATISTIC(NumPreLogged, "Log calls moved before their loop (one fence)");
STATISTIC(NumLockWarnings, "Two-phase locking warnings");
STATISTIC(NumStripped, "Flushes and fences of the program removed from FASEs");

namespace {

enum class Setting { Clobber, Undo };
cl::opt<Setting> SettingOpt(
    "pmkit-clobber-setting", cl::Hidden, cl::init(Setting::Clobber),
    cl::desc("What a FASE logs"),
    cl::values(clEnumValN(Setting::Clobber, "clobber",
                          "clobber writes only; recovery re-executes"),
               clEnumValN(Setting::Undo, "undo",
                          "every PM write; recovery rolls back")));
enum class Domain { ADR, EADR };
cl::opt<Domain> DomainOpt(
    "pmkit-clobber-domain", cl::Hidden, cl::init(Domain::ADR),
    cl::desc("Persistence domain the code is built for"),
    cl::values(clEnumValN(Domain::ADR, "adr", "write back every PM write"),
               clEnumValN(Domain::EADR, "eadr", "no write-backs")));
cl::list<std::string>
    AllowOpt("pmkit-clobber-allow", cl::Hidden, cl::CommaSeparated,
             cl::desc("External functions a FASE may call: they write no "
                      "PM and may read what their pointer arguments point "
                      "to"));
cl::opt<bool> ReportOpt("pmkit-clobber-report", cl::Hidden, cl::init(false),
                        cl::desc("Print each FASE's writes and why each is "
                                 "or is not logged"));
cl::opt<bool> CrashPointsOpt(
    "pmkit-clobber-crash-points", cl::Hidden, cl::init(false),
    cl::desc("A crash point before every write that may reach PM (tests)"));
cl::opt<bool> SkipLogOpt(
    "pmkit-clobber-skip-log", cl::Hidden, cl::init(false),
    cl::desc("Insert no log calls (tests: the crash checks must fail)"));
cl::opt<unsigned>
    InlineLimit("pmkit-clobber-inline-limit", cl::Hidden, cl::init(50000),
                cl::desc("Instructions a FASE may grow to by inlining"));

// A memory access of the analysed function.
struct Access {
  Instruction *I;
  MemoryLocation Loc;    // meaningless when All
  bool All = false;      // may read anything (an opaque call)
  Value *Size = nullptr; // bytes written (writes), as an i64 value
};

// Why a write is or is not logged, for the report.
enum class Why { NotPM, Fresh, Dominated, NoInput, Clobber, Undo, Callee };

const char *whyText(Why W) {
  switch (W) {
  case Why::NotPM:
    return "not logged: stack or global memory";
  case Why::Fresh:
    return "not logged: memory this FASE allocated";
  case Why::Dominated:
    return "not logged: an earlier write to the same address covers it";
  case Why::NoInput:
    return "not logged: no input read can precede it";
  case Why::Clobber:
    return "logged: clobbers an input read";
  case Why::Undo:
    return "logged: undo setting";
  case Why::Callee:
    return "logged: conservative (function called from a FASE)";
  }
  return "";
}

class ClobberInstrumenter {
public:
  ClobberInstrumenter(Module &M, FunctionAnalysisManager &FAM)
      : M(M), FAM(FAM), Ctx(M.getContext()), DL(M.getDataLayout()) {
    for (const std::string &A : AllowOpt)
      Allowed.insert(A);
  }
  bool run();

private:
  void collectConservative();
  // Analyse F's accesses; fills Writes with (access, why).
  bool analyse(Function &F, bool Conservative);
  bool classifyCall(CallBase &CB, Function &Owner, std::vector<Access> &Reads,
                    std::vector<Access> &Wr);
  void findFresh(Function &F);
  bool isFresh(const Value *P) const;
  bool isNotPM(const Value *P) const;
  void instrumentWrites(Function &F);
  void instrumentFase(Function &F);
  Function *makeReplay(Function &F);
  void checkLocks(Function &F);
  const Instruction *pmAccessAfter(const Instruction *From);
  void checkCallers(Function &F);
  void emitTable();
  void diag(const Instruction *I, const Twine &Msg, bool Error);

  FunctionCallee rtFn(StringRef Name, Type *Ret, ArrayRef<Type *> Params) {
    return M.getOrInsertFunction(Name, FunctionType::get(Ret, Params, false));
  }

  Module &M;
  FunctionAnalysisManager &FAM;
  LLVMContext &Ctx;
  const DataLayout &DL;
  StringSet<> Allowed;
  SetVector<Function *> Fases;
  SetVector<Function *> Conservative;
  bool SawIndirect = false;
  bool Failed = false;
  // Per analysed function.
  SmallPtrSet<const Value *, 32> FreshObjs;
  // Parameters declared PMKIT_FASE_IN/SCRATCH: volatile, logged at entry.
  SmallPtrSet<const Value *, 4> BufParams;
  std::vector<std::pair<Access, Why>> Writes;
  // For the report: a read each clobber write may overwrite.
  DenseMap<const Instruction *, const Instruction *> ClobberedBy;
  struct TableEntry {
    uint64_t Id;
    Function *Fase;
    Function *Replay;
  };
  std::vector<TableEntry> Table;
};

void ClobberInstrumenter::diag(const Instruction *I, const Twine &Msg,
                               bool Error) {
  DiagnosticSeverity Severity = Error ? DS_Error : DS_Warning;
  Failed |= Error;
  if (I)
    pmkit::diagnoseAt(*I, "pmkit-clobber: " + Msg, Severity);
  else
    pmkit::diagnoseModule(Ctx, "pmkit-clobber: " + Msg, Severity);
}

// Functions a FASE still calls (and all they may call) log every write:
// their writes can clobber any input the FASE read before the call.
void ClobberInstrumenter::collectConservative() {
  std::vector<Function *> Work;
  auto Add = [&](Function *G) {
    if (G && !G->isDeclaration() && Conservative.insert(G))
      Work.push_back(G);
  };
  auto Visit = [&](Function &F) {
    for (Instruction &I : instructions(F))
      if (auto *CB = dyn_cast<CallBase>(&I)) {
        if (CB->isInlineAsm())
          continue;
        if (Function *G = CB->getCalledFunction()) {
          if (!G->doesNotReturn()) // ends the process (see classifyCall)
            Add(G);
        } else
          SawIndirect = true;
      }
  };
  for (Function *F : Fases)
    Visit(*F);
  while (!Work.empty()) {
    Function *G = Work.back();
    Work.pop_back();
    Visit(*G);
  }
  if (SawIndirect) // any address-taken function may be the callee
    for (Function &G : M)
      if (!G.isDeclaration() && G.hasAddressTaken() &&
          !G.getName().startswith("__pmkit_")) {
        if (Conservative.insert(&G)) {
          Visit(G);
        }
      }
  // A FASE reached through a call stays a FASE but logs every write.
  NumConservative += Conservative.size();
}

bool ClobberInstrumenter::isNotPM(const Value *P) const {
  SmallVector<const Value *, 4> Objs;
  getUnderlyingObjects(P, Objs);
  for (const Value *O : Objs) {
    if (isa<AllocaInst>(O) || isa<GlobalVariable>(O) || BufParams.count(O))
      continue;
    if (auto *II = dyn_cast<IntrinsicInst>(O))
      if (II->getIntrinsicID() == Intrinsic::threadlocal_address)
        continue;
    return false;
  }
  return !Objs.empty();
}

// A and B cannot overlap when one is based on a `restrict` (noalias)
// parameter that the function never lets escape and the other, followed
// through phis and selects (which alias analysis does not follow to loads),
// is not based on it: C's restrict rule.
static bool restrictDisjoint(const Value *A, const Value *B) {
  for (int Pass = 0; Pass < 2; Pass++, std::swap(A, B)) {
    auto *Arg = dyn_cast<Argument>(getUnderlyingObject(A));
    if (!Arg || !Arg->hasNoAliasAttr() ||
        PointerMayBeCaptured(Arg, /*ReturnCaptures=*/true,
                             /*StoreCaptures=*/true))
      continue;
    SmallVector<const Value *, 4> Objs;
    getUnderlyingObjects(B, Objs);
    if (!Objs.empty() && !is_contained(Objs, Arg))
      return true;
  }
  return false;
}

bool ClobberInstrumenter::isFresh(const Value *P) const {
  SmallVector<const Value *, 4> Objs;
  getUnderlyingObjects(P, Objs);
  bool Any = false;
  for (const Value *O : Objs) {
    if (isa<ConstantPointerNull>(O))
      continue; // an allocator's failure path: no write lands there
    if (!FreshObjs.count(O))
      return false;
    Any = true;
  }
  return Any;
}

// Memory this function allocated: what PM allocators return, and what
// pmkit_alloc/pmkit_zalloc store in their out argument (an alloca read back
// with plain loads).
void ClobberInstrumenter::findFresh(Function &F) {
  FreshObjs.clear();
  for (Instruction &I : instructions(F)) {
    auto *CB = dyn_cast<CallBase>(&I);
    Function *G = CB ? CB->getCalledFunction() : nullptr;
    if (!G)
      continue;
    StringRef N = G->getName();
    if (G->hasFnAttribute(pmkit::AttrPMAllocator) || N == "malloc" ||
        N == "calloc") {
      if (CB->getType()->isPointerTy())
        FreshObjs.insert(CB);
      continue;
    }
    if (!(pmkit::callEffects(N) & pmkit::CE_OUT_ARG2) || CB->arg_size() < 3)
      continue;
    auto *Slot =
        dyn_cast<AllocaInst>(CB->getArgOperand(2)->stripPointerCasts());
    if (!Slot)
      continue;
    bool OnlyLoads = true;
    SmallVector<LoadInst *, 4> Loads;
    for (User *U : Slot->users()) {
      if (auto *LI = dyn_cast<LoadInst>(U))
        Loads.push_back(LI);
      else if (auto *II = dyn_cast<IntrinsicInst>(U))
        OnlyLoads &= II->isLifetimeStartOrEnd();
      else if (auto *C = dyn_cast<CallBase>(U)) {
        Function *H = C->getCalledFunction();
        OnlyLoads &=
            H && (pmkit::callEffects(H->getName()) & pmkit::CE_OUT_ARG2);
      } else
        OnlyLoads = false;
    }
    if (OnlyLoads)
      for (LoadInst *LI : Loads)
        FreshObjs.insert(LI);
  }
}

// A call left in an analysed function: its reads and writes, or an error.
bool ClobberInstrumenter::classifyCall(CallBase &CB, Function &Owner,
                                       std::vector<Access> &Reads,
                                       std::vector<Access> &Wr) {
  Type *I64 = Type::getInt64Ty(Ctx);
  if (auto *MI = dyn_cast<AnyMemIntrinsic>(&CB)) {
    Value *Len = MI->getLength();
    Access W{&CB, MemoryLocation::getForDest(MI)};
    W.Size = Len;
    Wr.push_back(W);
    if (auto *MT = dyn_cast<AnyMemTransferInst>(MI))
      Reads.push_back({&CB, MemoryLocation::getForSource(MT)});
    return true;
  }
  if (auto *II = dyn_cast<IntrinsicInst>(&CB)) {
    Intrinsic::ID ID = II->getIntrinsicID();
    if (ID == Intrinsic::vastart || ID == Intrinsic::vaend ||
        ID == Intrinsic::vacopy) // the function's own va_list
      return true;
    if (II->doesNotAccessMemory() || II->onlyAccessesInaccessibleMemory() ||
        II->isAssumeLikeIntrinsic() || isa<DbgInfoIntrinsic>(II) ||
        II->isLifetimeStartOrEnd())
      return true;
    if (II->onlyReadsMemory()) {
      Access R{&CB, MemoryLocation()};
      R.All = true;
      Reads.push_back(R);
      return true;
    }
    diag(&CB,
         "intrinsic " + II->getCalledFunction()->getName() +
             " writes memory in a FASE and cannot be logged",
         true);
    return false;
  }
  if (CB.isInlineAsm()) {
    auto *IA = cast<InlineAsm>(CB.getCalledOperand());
    pmkit::AsmEffect E = pmkit::asmEffect(IA->getAsmString());
    StringRef T = StringRef(IA->getAsmString()).trim();
    if (E.Flush || E.Fence || T.empty() || T.startswith("#"))
      return true;
    diag(&CB,
         "inline asm in a FASE is assumed to read any memory and write "
         "none",
         false);
    Access R{&CB, MemoryLocation()};
    R.All = true;
    Reads.push_back(R);
    return true;
  }
  Function *G = CB.getCalledFunction();
  // A call that does not return ends the FASE with the process (exit,
  // abort, a fatal-error helper): nothing after it is re-executed twice.
  if (G && G->doesNotReturn())
    return true;
  if (!G || !G->isDeclaration()) {
    // Conservative callee (it logs its own writes) or unknown target.
    if (!G)
      diag(&CB,
           "indirect call in a FASE: every address-taken function is "
           "instrumented conservatively",
           false);
    Access R{&CB, MemoryLocation()};
    R.All = true;
    Reads.push_back(R);
    return true;
  }
  StringRef N = G->getName();
  if (N.startswith("__pmkit_") || G->doesNotAccessMemory())
    return true;
  // pmkit's allocator journals its own work and PM locks are reset after a
  // crash, so neither is a FASE input; DRAM locks do not survive a crash.
  unsigned E = pmkit::callEffects(N);
  // pmkit_alloc(pool, n, &pm->field) stores the block's pointer there with a
  // plain store: a write of the FASE's, logged if it clobbers an input.
  if ((E & pmkit::CE_OUT_ARG2) && CB.arg_size() >= 3) {
    Access W{&CB,
             MemoryLocation(CB.getArgOperand(2), LocationSize::precise(8))};
    W.Size = ConstantInt::get(I64, 8);
    Wr.push_back(W);
  }
  if (E &
      (pmkit::CE_PMKIT_SAFE | pmkit::CE_LOCK_ACQUIRE | pmkit::CE_LOCK_RELEASE |
       pmkit::CE_QUERY | pmkit::CE_THREAD | pmkit::CE_CRASH_POINT))
    return true;
  if (E & (pmkit::CE_COPY | pmkit::CE_SET)) {
    if (CB.arg_size() >= 3) {
      Value *Len = CB.getArgOperand(2);
      Access W{&CB, MemoryLocation::getBeforeOrAfter(CB.getArgOperand(0))};
      W.Size = Len->getType() == I64 ? Len : nullptr;
      Wr.push_back(W);
      if (E & pmkit::CE_COPY)
        Reads.push_back(
            {&CB, MemoryLocation::getBeforeOrAfter(CB.getArgOperand(1))});
      return true;
    }
  } else if (E & pmkit::CE_READS_ARGS) {
    for (Value *A : CB.args())
      if (A->getType()->isPointerTy())
        Reads.push_back({&CB, MemoryLocation::getBeforeOrAfter(A)});
    return true;
  }
  if (Allowed.count(N) || G->onlyReadsMemory()) {
    for (Value *A : CB.args())
      if (A->getType()->isPointerTy())
        Reads.push_back({&CB, MemoryLocation::getBeforeOrAfter(A)});
    if (G->onlyReadsMemory() && !G->onlyAccessesArgMemory()) {
      Access R{&CB, MemoryLocation()};
      R.All = true;
      Reads.push_back(R);
    }
    return true;
  }
  diag(&CB,
       "FASE " + pmkit::displayName(Owner) + " calls external function '" + N +
           "' with unknown side effects: re-execution after a crash would "
           "repeat them. Make its source part of the build, or allow it "
           "with -pmkit-clobber-allow=" +
           N + " (pmkit cc --clobber-allow=" + N + ") if it writes no PM",
       true);
  return false;
}

// Parameters (0-based) of F declared as volatile buffers, with the length
// parameter and whether it is scratch; false on a malformed declaration.
static bool declaredBufs(Function &F,
                         DenseMap<unsigned, std::pair<unsigned, bool>> &Bufs,
                         std::string &Bad) {
  StringRef Spec = F.getFnAttribute(pmkit::AttrFaseBufs).getValueAsString();
  SmallVector<StringRef, 4> Items;
  Spec.split(Items, ',', -1, false);
  for (StringRef It : Items) {
    SmallVector<StringRef, 3> Parts;
    It.split(Parts, ':');
    unsigned P = 0, N = 0;
    if (Parts.size() != 3 || Parts[1].trim().getAsInteger(10, P) ||
        Parts[2].trim().getAsInteger(10, N) || P == 0 || N == 0 ||
        P > F.arg_size() || N > F.arg_size() ||
        !F.getArg(P - 1)->getType()->isPointerTy() ||
        !F.getArg(N - 1)->getType()->isIntegerTy()) {
      Bad = It.str();
      return false;
    }
    Bufs[P - 1] = {N - 1, Parts[0] == "scratch"};
  }
  return true;
}

bool ClobberInstrumenter::analyse(Function &F, bool Cons) {
  Writes.clear();
  findFresh(F);
  BufParams.clear();
  DenseMap<unsigned, std::pair<unsigned, bool>> Bufs;
  std::string Bad;
  if (!Cons && declaredBufs(F, Bufs, Bad))
    for (auto &KV : Bufs)
      BufParams.insert(F.getArg(KV.first));
  std::vector<Access> Reads, Wr;
  for (Instruction &I : instructions(F)) {
    if (auto *LI = dyn_cast<LoadInst>(&I)) {
      if (!isNotPM(LI->getPointerOperand()))
        Reads.push_back({LI, MemoryLocation::get(LI)});
    } else if (auto *SI = dyn_cast<StoreInst>(&I)) {
      Access W{SI, MemoryLocation::get(SI)};
      W.Size = ConstantInt::get(
          Type::getInt64Ty(Ctx),
          DL.getTypeStoreSize(SI->getValueOperand()->getType()));
      Wr.push_back(W);
    } else if (isa<AtomicRMWInst>(I) || isa<AtomicCmpXchgInst>(I)) {
      MemoryLocation L = MemoryLocation::getOrNone(&I).value();
      Access W{&I, L};
      W.Size = ConstantInt::get(Type::getInt64Ty(Ctx),
                                L.Size.hasValue() ? L.Size.getValue() : 8);
      Wr.push_back(W);
      Reads.push_back({&I, L});
    } else if (auto *CB = dyn_cast<CallBase>(&I)) {
      classifyCall(*CB, F, Reads, Wr);
    }
  }

  DominatorTree &DT = FAM.getResult<DominatorTreeAnalysis>(F);
  AAResults &AAR = FAM.getResult<AAManager>(F);
  BatchAAResults AA(AAR);

  // Block reachability (irreflexive; a block reaches itself through a cycle).
  DenseMap<const BasicBlock *, unsigned> Idx;
  std::vector<const BasicBlock *> Blocks;
  for (BasicBlock &B : F) {
    Idx[&B] = Blocks.size();
    Blocks.push_back(&B);
  }
  std::vector<BitVector> Reach(Blocks.size(), BitVector(Blocks.size()));
  for (bool Changed = true; Changed;) {
    Changed = false;
    for (size_t I = Blocks.size(); I-- > 0;) {
      BitVector New = Reach[I];
      for (const BasicBlock *S : successors(Blocks[I])) {
        New.set(Idx[S]);
        New |= Reach[Idx[S]];
      }
      if (New != Reach[I]) {
        Reach[I] = std::move(New);
        Changed = true;
      }
    }
  }
  auto Before = [&](const Instruction *A, const Instruction *B) {
    unsigned IA = Idx[A->getParent()], IB = Idx[B->getParent()];
    if (IA == IB && A != B && A->comesBefore(B))
      return true;
    return Reach[IA].test(IB);
  };
  auto Covers = [&](const Access &W, const MemoryLocation &L) {
    if (!W.Loc.Ptr || !L.Ptr || !W.Loc.Size.isPrecise() ||
        !L.Size.isPrecise() || W.Loc.Size.getValue() < L.Size.getValue())
      return false;
    return AA.alias(W.Loc, L) == AliasResult::MustAlias;
  };
  auto DominatedByWrite = [&](const Instruction *At, const MemoryLocation &L) {
    for (const Access &W : Wr)
      if (W.I != At && DT.dominates(W.I, At) && Covers(W, L))
        return true;
    return false;
  };

  // Input reads: not of memory the FASE allocated, not of a value the FASE
  // wrote first on every path.
  std::vector<const Access *> Inputs;
  for (const Access &R : Reads) {
    if (!R.All && (isFresh(R.Loc.Ptr) || DominatedByWrite(R.I, R.Loc)))
      continue;
    Inputs.push_back(&R);
  }

  for (Access &W : Wr) {
    const Value *P = W.Loc.Ptr;
    if (P && isNotPM(P)) {
      Writes.push_back({W, Why::NotPM});
      continue;
    }
    ++NumWrites;
    // The undo baseline logs every PM write, as undo-logging systems that
    // instrument stores do (fresh memory included).
    if (SettingOpt == Setting::Undo) {
      Writes.push_back({W, Why::Undo});
      continue;
    }
    if (P && isFresh(P)) {
      ++NumFresh;
      Writes.push_back({W, Why::Fresh});
      continue;
    }
    if (DominatedByWrite(W.I, W.Loc)) {
      ++NumDominated;
      Writes.push_back({W, Why::Dominated});
      continue;
    }
    if (Cons) {
      Writes.push_back({W, Why::Callee});
      continue;
    }
    bool Clobber = false;
    for (const Access *R : Inputs) {
      bool Self = R->I == W.I;
      if (Self && isa<MemCpyInst>(W.I))
        continue; // source and destination of memcpy do not overlap
      if (!Self && !Before(R->I, W.I))
        continue;
      if (R->All || (AA.alias(R->Loc, W.Loc) != AliasResult::NoAlias &&
                     !restrictDisjoint(R->Loc.Ptr, W.Loc.Ptr))) {
        Clobber = true;
        ClobberedBy[W.I] = R->I;
        break;
      }
    }
    if (!Clobber)
      ++NumNoInput;
    Writes.push_back({W, Clobber ? Why::Clobber : Why::NoInput});
  }
  return true;
}

// The bytes a write writes: its size, or a memory call's length argument.
static Value *sizeOf(const Access &W) {
  return W.Size ? W.Size : cast<CallBase>(W.I)->getArgOperand(2);
}
// The same as an i64, computed before B's insertion point.
static Value *writeSize(IRBuilder<> &B, const Access &W, Type *I64) {
  return B.CreateZExtOrTrunc(sizeOf(W), I64);
}

// Runs of logged writes in one block with no call between them whose
// addresses and sizes are known at the first: their log calls all go before
// the first write and share one fence. Logging a later write's bytes early
// saves a value at least as old as the one its own position would see, which
// recovery restores just as well. Maps each run's first write to the run.
static DenseMap<Instruction *, SmallVector<const Access *, 4>>
batchLogs(Function &F, const std::vector<std::pair<Access, Why>> &Writes,
          DominatorTree &DT, const DenseSet<Instruction *> &PreLogged) {
  DenseMap<Instruction *, const Access *> Logged;
  for (const auto &[W, Why] : Writes)
    if ((Why == Why::Clobber || Why == Why::Undo || Why == Why::Callee) &&
        !W.I->isTerminator() && !PreLogged.count(W.I))
      Logged[W.I] = &W;
  DenseMap<Instruction *, SmallVector<const Access *, 4>> Runs;
  // V is available at At, or is an address computation (no side effects)
  // of values that are, which can move there.
  std::function<bool(Value *, Instruction *, unsigned)> Known =
      [&](Value *V, Instruction *At, unsigned Depth) {
        auto *I = dyn_cast<Instruction>(V);
        if (!I || DT.dominates(I, At))
          return true;
        if (Depth == 0 || I->getParent() != At->getParent() ||
            !(isa<GetElementPtrInst>(I) || isa<CastInst>(I) ||
              isa<BinaryOperator>(I)) ||
            I->mayHaveSideEffects() || I->mayReadFromMemory())
          return false;
        for (Value *Op : I->operands())
          if (!Known(Op, At, Depth - 1))
            return false;
        return true;
      };
  // Moves what Known accepted to before At, operands first.
  std::function<void(Value *, Instruction *)> Hoist = [&](Value *V,
                                                          Instruction *At) {
    auto *I = dyn_cast<Instruction>(V);
    if (!I || DT.dominates(I, At))
      return;
    for (Value *Op : I->operands())
      Hoist(Op, At);
    I->moveBefore(At);
  };
  for (BasicBlock &BB : F) {
    Instruction *First = nullptr;
    for (Instruction &I : BB) {
      if (auto It = Logged.find(&I); It != Logged.end()) {
        const Access *W = It->second;
        Value *Size = sizeOf(*W);
        Value *Addr = const_cast<Value *>(W->Loc.Ptr);
        if (First && Known(Addr, First, 3) && Known(Size, First, 3)) {
          Hoist(Addr, First);
          Hoist(Size, First);
          Runs[First].push_back(W);
          continue;
        }
        First = &I;
        Runs[First].push_back(W);
        continue;
      }
      if (auto *CB = dyn_cast<CallBase>(&I))
        if (!isa<DbgInfoIntrinsic>(CB) && !CB->isLifetimeStartOrEnd())
          First = nullptr; // a call may read or write anything logged
    }
  }
  return Runs;
}

// A loop whose logged writes can all be logged before it starts: a loop
// with one exit, at its latch, and a trip count scalar evolution knows,
// whose logged writes run in every iteration (their blocks dominate the
// latch, in no inner loop), at addresses computed from values defined
// before the loop, affine induction variables and loads of memory nothing
// in the loop may write. A copy of that computation, in a loop of its own
// before the original, logs every iteration's bytes with one fence at its
// end; the original loop logs nothing. As in a batch, a write logged early
// saves a value at least as old as its own position would see, which
// recovery restores just as well.
struct PreLog {
  Loop *L;
  SmallVector<const Access *, 4> Ws;
};

static std::vector<PreLog>
planPreLogs(const std::vector<std::pair<Access, Why>> &Writes, LoopInfo &LI,
            ScalarEvolution &SE, AAResults &AA, DominatorTree &DT) {
  MapVector<Loop *, SmallVector<const Access *, 4>> ByLoop;
  SmallPtrSet<Loop *, 4> Bad;
  for (const auto &[W, Why] : Writes) {
    if (!(Why == Why::Clobber || Why == Why::Undo || Why == Why::Callee) ||
        W.I->isTerminator())
      continue;
    Loop *L = LI.getLoopFor(W.I->getParent());
    if (!L)
      continue;
    BasicBlock *Latch = L->getLoopLatch();
    if (!Latch || !DT.dominates(W.I->getParent(), Latch))
      Bad.insert(L); // conditional in the loop: its own log, so the loop's
    ByLoop[L].push_back(&W);
  }
  std::vector<PreLog> Plan;
  for (auto &Entry : ByLoop) {
    Loop *L = Entry.first;
    auto &Ws = Entry.second;
    // Inlining into the FASE leaves loops without a preheader: add one.
    if (!Bad.count(L) && !L->getLoopPreheader() &&
        InsertPreheaderForLoop(L, &DT, &LI, nullptr, false))
      SE.forgetLoop(L);
    if (Bad.count(L) || !L->getSubLoops().empty() || !L->getLoopPreheader() ||
        L->getExitingBlock() != L->getLoopLatch() ||
        isa<SCEVCouldNotCompute>(SE.getBackedgeTakenCount(L)))
      continue;
    // What may write memory in the loop, for the loads the copy repeats.
    SmallVector<Instruction *, 16> Writers;
    for (BasicBlock *B : L->blocks())
      for (Instruction &I : *B)
        if (I.mayWriteToMemory() && !isa<DbgInfoIntrinsic>(I) &&
            !(isa<IntrinsicInst>(I) &&
              cast<IntrinsicInst>(I).isLifetimeStartOrEnd()))
          Writers.push_back(&I);
    DenseMap<Value *, bool> Memo;
    std::function<bool(Value *, unsigned)> Copyable = [&](Value *V,
                                                          unsigned Depth) {
      auto *I = dyn_cast<Instruction>(V);
      if (!I || !L->contains(I))
        return true; // defined before the loop, or a constant
      if (auto It = Memo.find(V); It != Memo.end())
        return It->second;
      bool Ok = false;
      if (auto *Phi = dyn_cast<PHINode>(I)) {
        auto *AR = dyn_cast<SCEVAddRecExpr>(SE.getSCEV(Phi));
        Ok = Phi->getParent() == L->getHeader() && AR && AR->isAffine() &&
             AR->getLoop() == L && Phi->getType()->isIntegerTy() &&
             SE.isLoopInvariant(AR->getStart(), L) &&
             SE.isLoopInvariant(AR->getStepRecurrence(SE), L);
      } else if (Depth > 0 &&
                 (isa<GetElementPtrInst>(I) || isa<CastInst>(I) ||
                  isa<BinaryOperator>(I) || isa<LoadInst>(I)) &&
                 !I->mayHaveSideEffects() && !I->isVolatile() &&
                 (!isa<LoadInst>(I) || cast<LoadInst>(I)->isSimple()) &&
                 !(isa<BinaryOperator>(I) && I->isIntDivRem())) {
        Ok = true;
        if (auto *Ld = dyn_cast<LoadInst>(I)) {
          MemoryLocation ML = MemoryLocation::get(Ld);
          for (Instruction *Wr : Writers)
            if (isModSet(AA.getModRefInfo(Wr, ML))) {
              Ok = false;
              break;
            }
        }
        for (Value *Op : I->operands())
          if (Ok && !Copyable(Op, Depth - 1))
            Ok = false;
      }
      Memo[V] = Ok;
      return Ok;
    };
    bool Ok = true;
    for (const Access *W : Ws)
      if (!Copyable(const_cast<Value *>(W->Loc.Ptr), 8) ||
          !Copyable(sizeOf(*W), 8)) {
        Ok = false;
        break;
      }
    if (Ok)
      Plan.push_back({L, Ws});
  }
  return Plan;
}

// Builds the logging loop of P between its loop's preheader and header.
static void emitPreLog(const PreLog &P, ScalarEvolution &SE,
                       FunctionCallee LogBatch, FunctionCallee Log,
                       const DataLayout &DL) {
  Loop *L = P.L;
  BasicBlock *Pre = L->getLoopPreheader(), *Header = L->getHeader();
  LLVMContext &Ctx = Header->getContext();
  Type *I64 = Type::getInt64Ty(Ctx);
  SCEVExpander Exp(SE, DL, "pmkit.prelog");
  Instruction *PreTerm = Pre->getTerminator();
  const SCEV *BTC = SE.getBackedgeTakenCount(L);
  Value *Last = Exp.expandCodeFor(BTC, BTC->getType(), PreTerm);
  Type *IT = Last->getType();
  Function *F = Header->getParent();
  BasicBlock *Body = BasicBlock::Create(Ctx, "pmkit.prelog", F, Header);
  BasicBlock *Done = BasicBlock::Create(Ctx, "pmkit.prelog.done", F, Header);
  // Header phis take their entry values from Done now.
  for (PHINode &Phi : Header->phis())
    Phi.replaceIncomingBlockWith(Pre, Done);
  PreTerm->replaceUsesOfWith(Header, Body);

  IRBuilder<> B(Body);
  PHINode *Iter = B.CreatePHI(IT, 2, "pmkit.prelog.i");
  Iter->addIncoming(ConstantInt::get(IT, 0), Pre);
  DenseMap<Value *, Value *> Map;
  std::function<Value *(Value *)> Copy = [&](Value *V) -> Value * {
    auto *I = dyn_cast<Instruction>(V);
    if (!I || !L->contains(I))
      return V;
    if (Value *C = Map.lookup(V))
      return C;
    Value *C;
    if (auto *Phi = dyn_cast<PHINode>(I)) {
      auto *AR = cast<SCEVAddRecExpr>(SE.getSCEV(Phi));
      Type *T = Phi->getType();
      Value *Start = Exp.expandCodeFor(AR->getStart(), T, PreTerm);
      Value *Step = Exp.expandCodeFor(AR->getStepRecurrence(SE), T, PreTerm);
      C = B.CreateAdd(Start, B.CreateMul(Step, B.CreateZExtOrTrunc(Iter, T)));
    } else {
      Instruction *N = I->clone();
      for (Use &U : N->operands())
        U.set(Copy(U.get()));
      B.Insert(N);
      C = N;
    }
    Map[V] = C;
    return C;
  };
  for (const Access *W : P.Ws) {
    Value *Addr = Copy(const_cast<Value *>(W->Loc.Ptr));
    Value *Size = B.CreateZExtOrTrunc(Copy(sizeOf(*W)), I64);
    B.CreateCall(LogBatch, {Addr, Size});
    ++NumPreLogged;
  }
  Value *More = B.CreateICmpNE(Iter, Last);
  Iter->addIncoming(B.CreateAdd(Iter, ConstantInt::get(IT, 1)), Body);
  B.CreateCondBr(More, Body, Done);
  IRBuilder<> D(Done);
  // A log of nothing: the fence of the entries above.
  D.CreateCall(Log, {ConstantPointerNull::get(PointerType::getUnqual(Ctx)),
                     ConstantInt::get(I64, 0)});
  D.CreateBr(Header);
}

// Logs before, write-backs after, crash points before: for every write of
// the last analyse() that may reach PM.
void ClobberInstrumenter::instrumentWrites(Function &F) {
  Type *Ptr = PointerType::getUnqual(Ctx);
  Type *I64 = Type::getInt64Ty(Ctx);
  Type *Void = Type::getVoidTy(Ctx);
  FunctionCallee Log = rtFn("__pmkit_clobber_log", Void, {Ptr, I64});
  FunctionCallee LogBatch = rtFn("__pmkit_clobber_log_batch", Void, {Ptr, I64});
  DenseMap<Instruction *, SmallVector<const Access *, 4>> Runs;
  DenseSet<Instruction *> Moved;     // logged by their run's first write
  DenseSet<Instruction *> PreLogged; // logged before their loop
  std::vector<PreLog> PreLogs;
  if (!SkipLogOpt) {
    DominatorTree &DT = FAM.getResult<DominatorTreeAnalysis>(F);
    PreLogs = planPreLogs(Writes, FAM.getResult<LoopAnalysis>(F),
                          FAM.getResult<ScalarEvolutionAnalysis>(F),
                          FAM.getResult<AAManager>(F), DT);
    for (const PreLog &P : PreLogs)
      for (const Access *W : P.Ws)
        PreLogged.insert(W->I);
    Runs = batchLogs(F, Writes, DT, PreLogged);
    for (auto &[First, Run] : Runs)
      for (const Access *W : Run)
        if (W->I != First)
          Moved.insert(W->I);
    for (const PreLog &P : PreLogs)
      emitPreLog(P, FAM.getResult<ScalarEvolutionAnalysis>(F), LogBatch, Log,
                 DL);
  }
  FunctionCallee Flush = rtFn("__pmkit_clobber_wb", Void, {Ptr, I64});
  FunctionCallee Crash = rtFn("__pmkit_crash_point", Void, {});
  GlobalVariable *Lo =
      cast<GlobalVariable>(M.getOrInsertGlobal("__pmkit_pool_lo", I64));
  GlobalVariable *Hi =
      cast<GlobalVariable>(M.getOrInsertGlobal("__pmkit_pool_hi", I64));

  if (ReportOpt)
    errs() << DEBUG_TYPE ": " << pmkit::displayName(F) << '\n';
  for (auto &[W, Why] : Writes) {
    if (ReportOpt) {
      errs() << DEBUG_TYPE ":   " << pmkit::sourceLoc(W.I) << ": "
             << W.I->getOpcodeName() << ": " << whyText(Why);
      if (const Instruction *R = ClobberedBy.lookup(W.I);
          R && Why == Why::Clobber)
        errs() << " (" << R->getOpcodeName() << " at " << pmkit::sourceLoc(R)
               << ")";
      if (PreLogged.count(W.I))
        errs() << ", before its loop";
      errs() << '\n';
    }
    if (Why == Why::NotPM)
      continue;
    if (W.I->isTerminator()) {
      diag(W.I, "a write that may throw (invoke) cannot be logged", true);
      continue;
    }
    Value *Addr = const_cast<Value *>(W.Loc.Ptr);
    IRBuilder<> B(W.I);
    Value *Size = writeSize(B, W, I64);
    if (CrashPointsOpt)
      B.CreateCall(Crash);
    if ((Why == Why::Clobber || Why == Why::Undo || Why == Why::Callee) &&
        !SkipLogOpt) {
      ++NumLogged;
      if (auto It = Runs.find(W.I); It != Runs.end()) {
        const auto &Run = It->second;
        for (size_t K = 0; K < Run.size(); K++)
          B.CreateCall(K + 1 < Run.size() ? LogBatch : Log,
                       {const_cast<Value *>(Run[K]->Loc.Ptr),
                        writeSize(B, *Run[K], I64)});
        NumBatched += Run.size() - 1;
      } else if (!Moved.count(W.I) && !PreLogged.count(W.I)) {
        B.CreateCall(Log, {Addr, Size});
      }
    }
    if (DomainOpt == Domain::EADR)
      continue;
    // After the write: if the address is in the pools' box, write back.
    Instruction *After = W.I->getNextNode();
    IRBuilder<> A(After);
    Value *AI = A.CreatePtrToInt(Addr, I64);
    Value *In = A.CreateAnd(A.CreateICmpUGE(AI, A.CreateLoad(I64, Lo)),
                            A.CreateICmpULT(AI, A.CreateLoad(I64, Hi)));
    Instruction *Then = SplitBlockAndInsertIfThen(In, After, false);
    IRBuilder<> T(Then);
    T.CreateCall(Flush, {Addr, Size});
    ++NumWriteBacks;
  }
}

// Entry: if outermost, log the arguments and begin; exit before returns.
void ClobberInstrumenter::instrumentFase(Function &F) {
  Type *Ptr = PointerType::getUnqual(Ctx);
  Type *I64 = Type::getInt64Ty(Ctx);
  Type *I32 = Type::getInt32Ty(Ctx);
  Type *Void = Type::getVoidTy(Ctx);
  FunctionCallee Enter = rtFn("__pmkit_clobber_enter", I32, {I64});
  FunctionCallee Arg = rtFn("__pmkit_clobber_arg", Void, {I64});
  FunctionCallee ArgPtr = rtFn("__pmkit_clobber_arg_ptr", Void, {Ptr});
  FunctionCallee ArgBuf =
      rtFn("__pmkit_clobber_arg_buf", Void, {Ptr, I64, I32});
  FunctionCallee Begin = rtFn("__pmkit_clobber_begin", Void, {});
  FunctionCallee Exit = rtFn("__pmkit_clobber_exit", Void, {});

  // Declared buffers: parameter (0-based) -> {length parameter, scratch}.
  DenseMap<unsigned, std::pair<unsigned, bool>> Bufs;
  std::string Bad;
  if (!declaredBufs(F, Bufs, Bad)) {
    Ctx.emitError("pmkit-clobber: FASE " + pmkit::displayName(F) +
                  ": PMKIT_FASE_IN/SCRATCH(" + Bad +
                  ") must name a pointer parameter and an integer "
                  "parameter, counting from 1");
    Failed = true;
    return;
  }

  BasicBlock &Entry = F.getEntryBlock();
  Instruction *At = &*Entry.getFirstInsertionPt();
  while (isa<AllocaInst>(At))
    At = At->getNextNode();
  IRBuilder<> B(At);
  Value *Outer = B.CreateICmpNE(
      B.CreateCall(Enter, {ConstantInt::get(I64, pmkit::faseId(F))}),
      ConstantInt::get(I32, 0));
  Instruction *Then = SplitBlockAndInsertIfThen(Outer, At, false);
  IRBuilder<> R(Then);
  for (Argument &A : F.args()) {
    Type *T = A.getType();
    unsigned No = A.getArgNo();
    if (auto It = Bufs.find(No); It != Bufs.end()) {
      R.CreateCall(ArgBuf,
                   {&A, R.CreateZExtOrTrunc(F.getArg(It->second.first), I64),
                    ConstantInt::get(I32, It->second.second)});
    } else if (Type *ST = A.getParamStructRetType()) {
      R.CreateCall(ArgBuf, {&A, ConstantInt::get(I64, DL.getTypeAllocSize(ST)),
                            ConstantInt::get(I32, 1)});
    } else if (Type *BT = A.getParamByValType()) {
      R.CreateCall(ArgBuf, {&A, ConstantInt::get(I64, DL.getTypeAllocSize(BT)),
                            ConstantInt::get(I32, 0)});
    } else if (T->isPointerTy()) {
      R.CreateCall(ArgPtr, {&A});
    } else if (T->isIntegerTy() && T->getIntegerBitWidth() <= 64) {
      R.CreateCall(Arg, {R.CreateZExt(&A, I64)});
    } else if (T->isFloatTy() || T->isDoubleTy()) {
      Value *Bits = R.CreateBitCast(
          &A, IntegerType::get(Ctx, T->getPrimitiveSizeInBits()));
      R.CreateCall(Arg, {R.CreateZExt(Bits, I64)});
    } else {
      std::string S;
      raw_string_ostream OS(S);
      T->print(OS);
      Ctx.emitError("pmkit-clobber: FASE " + pmkit::displayName(F) +
                    ": parameter " + Twine(No + 1) + " of type " + S +
                    " cannot be logged for re-execution (pass it by "
                    "pointer)");
      Failed = true;
      return;
    }
  }
  R.CreateCall(Begin);

  for (BasicBlock &BB : F)
    if (isa<ReturnInst>(BB.getTerminator()) ||
        isa<ResumeInst>(BB.getTerminator()))
      IRBuilder<>(BB.getTerminator()).CreateCall(Exit);
}

// void replay(const uint64_t *args): decode each argument word, call F.
Function *ClobberInstrumenter::makeReplay(Function &F) {
  Type *Ptr = PointerType::getUnqual(Ctx);
  Type *I64 = Type::getInt64Ty(Ctx);
  auto *Ty = FunctionType::get(Type::getVoidTy(Ctx), {Ptr}, false);
  Function *R = Function::Create(Ty, GlobalValue::InternalLinkage,
                                 "__pmkit_clobber_replay." + F.getName(), M);
  IRBuilder<> B(BasicBlock::Create(Ctx, "", R));
  SmallVector<Value *, 8> Args;
  for (Argument &A : F.args()) {
    Value *W = B.CreateLoad(
        I64, B.CreateConstGEP1_64(I64, R->getArg(0), A.getArgNo()));
    Type *T = A.getType();
    if (T->isPointerTy())
      Args.push_back(B.CreateIntToPtr(W, T));
    else if (T->isIntegerTy())
      Args.push_back(B.CreateTrunc(W, T));
    else
      Args.push_back(B.CreateBitCast(
          B.CreateTrunc(W, IntegerType::get(Ctx, T->getPrimitiveSizeInBits())),
          T));
  }
  CallInst *C = B.CreateCall(F.getFunctionType(), &F, Args);
  C->setAttributes(F.getAttributes());
  C->setCallingConv(F.getCallingConv());
  B.CreateRetVoid();
  return R;
}

// Strict two-phase locking: a FASE must hold its locks to its end. An
// unlock of a lock the FASE never took (it was taken before the FASE
// began) lets another thread see writes a crash would re-execute.
void ClobberInstrumenter::checkLocks(Function &F) {
  AAResults &AA = FAM.getResult<AAManager>(F);
  SmallVector<CallBase *, 8> Acquires, Releases;
  for (Instruction &I : instructions(F))
    if (auto *CB = dyn_cast<CallBase>(&I))
      if (Function *G = CB->getCalledFunction(); G && CB->arg_size()) {
        if (pmkit::isLockAcquire(G->getName()))
          Acquires.push_back(CB);
        else if (pmkit::isLockRelease(G->getName()))
          Releases.push_back(CB);
      }
  PostDominatorTree &PDT = FAM.getResult<PostDominatorTreeAnalysis>(F);
  for (CallBase *Rel : Releases) {
    // Taken: some acquire of the FASE may take this lock. Paired: the
    // release follows one on every path (a lock held over one step of the
    // FASE); a release on only some paths after it may be one that never
    // runs inside a FASE (the benchmarks' driver releases at once only
    // outside an operation), and is not judged.
    bool Taken = false, Paired = false;
    for (CallBase *Acq : Acquires)
      if (AA.alias(MemoryLocation::getBeforeOrAfter(Acq->getArgOperand(0)),
                   MemoryLocation::getBeforeOrAfter(Rel->getArgOperand(0))) !=
          AliasResult::NoAlias) {
        Taken = true;
        Paired |= PDT.dominates(Rel, Acq);
      }
    if (!Taken) {
      ++NumLockWarnings;
      diag(Rel,
           "FASE " + pmkit::displayName(F) +
               " releases a lock it did not take: FASEs must follow strict "
               "two-phase locking (take locks inside the FASE, release "
               "them after it returns)",
           false);
    } else if (const Instruction *After =
                   Paired ? pmAccessAfter(Rel) : nullptr) {
      // A lock taken and released inside, then more PM work: another
      // thread may change what this FASE read under the lock before it
      // commits (hand-over-hand locking of a tree walk). A release at the
      // very end, with no PM access after it, is not reported.
      ++NumLockWarnings;
      diag(Rel,
           "FASE " + pmkit::displayName(F) +
               " releases a lock it took before its end, then accesses "
               "memory that may be PM (" +
               pmkit::sourceLoc(After) +
               "): FASEs must follow strict two-phase locking (hold every "
               "lock to the end of the FASE)",
           false);
    }
  }
}

// The first load, store, atomic or memory intrinsic of memory that may be
// PM that can run after `From` in its function (a block reached again
// through a loop included), or null.
const Instruction *ClobberInstrumenter::pmAccessAfter(const Instruction *From) {
  auto IsPMAccess = [&](const Instruction &I) {
    const Value *Addr = pmkit::accessedAddress(I);
    return Addr && !isNotPM(Addr);
  };
  for (auto It = std::next(From->getIterator()); It != From->getParent()->end();
       ++It)
    if (IsPMAccess(*It))
      return &*It;
  SmallPtrSet<const BasicBlock *, 16> Seen;
  SmallVector<const BasicBlock *, 16> Work(successors(From->getParent()));
  while (!Work.empty()) {
    const BasicBlock *BB = Work.pop_back_val();
    if (!Seen.insert(BB).second)
      continue;
    for (const Instruction &I : *BB)
      if (IsPMAccess(I))
        return &I;
    append_range(Work, successors(BB));
  }
  return nullptr;
}

void ClobberInstrumenter::emitTable() {
  Type *Ptr = PointerType::getUnqual(Ctx);
  Type *I64 = Type::getInt64Ty(Ctx);
  Type *I32 = Type::getInt32Ty(Ctx);
  StructType *EntTy = StructType::get(Ctx, {I64, Ptr, Ptr, I32, I32});
  uint32_t Flags = (SettingOpt == Setting::Undo ? PMKIT_CLOBBER_UNDO : 0) |
                   (DomainOpt == Domain::EADR ? PMKIT_CLOBBER_EADR : 0);
  std::vector<Constant *> Ents;
  for (const TableEntry &E : Table) {
    GlobalVariable *NameGV =
        pmkit::privateString(M, E.Fase->getName(), "__pmkit_clobber_name");
    Ents.push_back(ConstantStruct::get(
        EntTy, {ConstantInt::get(I64, E.Id), NameGV, E.Replay,
                ConstantInt::get(I32, E.Fase->arg_size()),
                ConstantInt::get(I32, Flags)}));
  }
  pmkit::emitFaseTable(M, EntTy, Ents, "__pmkit_clobber");
}

// A caller that passes an undefined value where the runtime needs one (a
// pointer it classifies, a buffer's length): what optimisation does to a
// parameter the FASE itself never reads, unless the parameters were
// anchored before the optimizer ran (AnnotationsPass's KeepFaseArgs).
void ClobberInstrumenter::checkCallers(Function &F) {
  DenseMap<unsigned, std::pair<unsigned, bool>> Bufs;
  std::string Bad;
  declaredBufs(F, Bufs, Bad); // a malformed list is reported at entry
  SmallVector<unsigned, 4> Needed;
  for (Argument &A : F.args())
    if (A.getType()->isPointerTy())
      Needed.push_back(A.getArgNo());
  for (auto &[P, LenAndKind] : Bufs)
    Needed.push_back(LenAndKind.first);
  for (User *U : F.users()) {
    auto *CB = dyn_cast<CallBase>(U);
    if (!CB || CB->getCalledOperand() != &F)
      continue;
    for (unsigned No : Needed)
      if (No < CB->arg_size() && isa<UndefValue>(CB->getArgOperand(No)))
        diag(CB,
             "argument " + Twine(No + 1) + " of FASE " + pmkit::displayName(F) +
                 " was optimised away (the FASE never reads it) but "
                 "recovery needs it: compile with clobber mode from the "
                 "start (pmkit cc --mode=clobber), or run pmkit-annotations "
                 "with -pmkit-annotations-keep-fase-args before optimising",
             true);
  }
}

bool ClobberInstrumenter::run() {
  // The anchors have done their work: the optimizer ran.
  bool Stripped = pmkit::stripFaseAnchors(M);
  Fases = pmkit::collectFases(M, pmkit::ClobberPass::PassName);
  if (Fases.empty())
    return Stripped;
  if (auto Same = pmkit::sameFaseIds(Fases.getArrayRef())) {
    diag(Same->first, Same->second, true);
    return Stripped;
  }
  for (Function *F : Fases) {
    NumInlined += pmkit::inlineCallees(*F, InlineLimit);
    NumStripped += pmkit::stripPersistOps(*F);
    FAM.invalidate(*F, PreservedAnalyses::none());
  }
  collectConservative();

  // Analyse everything before changing anything.
  std::vector<std::pair<Function *, std::vector<std::pair<Access, Why>>>> Plan;
  for (Function *F : Fases) {
    checkCallers(*F);
    checkLocks(*F);
    analyse(*F, Conservative.count(F));
    Plan.push_back({F, Writes});
  }
  for (Function *G : Conservative)
    if (!Fases.count(G)) {
      analyse(*G, true);
      Plan.push_back({G, Writes});
    }
  if (Failed)
    return false;
  for (auto &[F, W] : Plan) {
    Writes = W;
    instrumentWrites(*F);
    FAM.invalidate(*F, PreservedAnalyses::none());
  }
  for (Function *F : Fases) {
    instrumentFase(*F);
    if (Failed)
      return true;
    LLVM_DEBUG(dbgs() << DEBUG_TYPE ": FASE " << F->getName() << " (id "
                      << pmkit::faseId(*F) << ", " << F->arg_size()
                      << " arguments) instrumented\n");
    Table.push_back({pmkit::faseId(*F), F, makeReplay(*F)});
    ++NumFase;
  }
  emitTable();
  return true;
}

} // namespace

PreservedAnalyses pmkit::ClobberPass::run(Module &M,
                                          ModuleAnalysisManager &MAM) {
  if (!pmkit::targetSupported(M, PassName))
    return PreservedAnalyses::all();
  FunctionAnalysisManager &FAM =
      MAM.getResult<FunctionAnalysisManagerModuleProxy>(M).getManager();
  if (!ClobberInstrumenter(M, FAM).run())
    return PreservedAnalyses::all();
  return PreservedAnalyses::none();
}
