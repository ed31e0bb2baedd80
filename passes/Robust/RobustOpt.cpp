// SPDX-License-Identifier: Apache-2.0
//
// RobustOpt.cpp -- the `opt` and `flit` planner of pmkit-robust (see
// RobustOpt.h). The abstract state at a program point has two parts:
//
//  * Escape states of fresh objects. A fresh object is a block a PM
//    allocator just returned (pmkit_alloc/pmkit_zalloc through a stack
//    slot, or a call of a function that returns such a block). It is
//    NotAlloc before its allocation, FreshClean after it, FreshDirty once
//    written, Escaped once its address is stored anywhere, passed to code
//    that may keep it, returned or converted to an integer. Writes to a
//    captured object need no flush yet: nothing can reach it after a crash.
//    When it escapes, the whole object is written back just before.
//    (The paper's Fig. 8 with "captured" = fresh.)
//  * Persistency states of escaped locations (Fig. 9). Every escaped write
//    is written back right after it, so a location is clean or clwb: the
//    state holds the set of clwb (pending) locations, each a base pointer
//    and a constant offset and size, plus "some unknown location" (Anon)
//    and, inside a function callers may enter with pending writes, the
//    caller's pending writes (Entry).
//
// Violations, each fixed by an sfence just before the instruction:
//  * a store to an escaped location while a different location is pending
//    (two escaped non-clean locations; a second field of one object counts,
//    as the paper's does, since the analysis does not know line bounds);
//  * a release -- an atomic release store or release fence on DRAM, a call
//    to code that may unlock or write PM, an unknown inline asm -- while
//    anything is pending;
//  * function exit with a pending location, in functions code outside the
//    module may call (exported or address-taken), by a return or by an
//    exception unwinding out of it (resume).
// Locked instructions (RMW, compare-and-swap, seq_cst store, mfence) clear
// every pending location, as they order earlier write-backs on x86. Atomic
// loads from escaped PM make the location pending (another thread's store
// may not be durable): write-back after the load, the fence deferred to the
// next store. With FliT instead, atomic writes bump a per-line counter
// around the write and write-back, and an atomic load writes back (and
// fences) only when the counter is up.
//
// A location is keyed by an SSA base; when the base is redefined (a loop's
// next iteration, an array index), its pending entry turns into Anon, so an
// array element stays one location only while its index does.
//
// Calls: one summary per function (computed bottom-up over the call graph,
// iterated to a fixpoint in recursive cycles): does it write PM or release
// before it fences on some path (callers must fence first -- the paper's
// markObjDirEsp), does it fence its entry's pending writes on every path,
// may it return with its own write-backs unfenced, and does it return a
// fresh object (an allocation wrapper). Internal functions may return with
// pending write-backs; their callers fence before the next violation point.

#include "Robust/RobustOpt.h"

#include "Common/CallEffects.h"
#include "Common/PersistOps.h"
#include "Common/SourceLoc.h"
#include "PMAlias/PMAlias.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/PostOrderIterator.h"
#include "llvm/ADT/SCCIterator.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Analysis/CFG.h"
#include "llvm/Analysis/CallGraph.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <deque>
#include <map>

using namespace llvm;
using namespace pmkit;

namespace {

// An external function that neither writes PM nor releases anything another
// thread could act on: a caller's pending write-backs may stay pending
// across it. (pmkit's own locks write the pool: not one of them.)
bool harmlessExternal(StringRef Name) {
  unsigned E = callEffects(Name);
  if (E & CE_PMKIT_SAFE)
    return false;
  return (E & (CE_READS_ARGS | CE_HEAP | CE_QUERY | CE_THREAD | CE_ENV |
               CE_LOCK_ACQUIRE)) != 0;
}

// Allocators whose fresh block goes to an out-parameter are CE_OUT_ARG2
// (pool, size, out). pmkit_zalloc writes back its zeroes itself.
enum : unsigned { OutAllocSizeArg = 1, OutAllocOutArg = 2 };

enum ObjSt : uint8_t { NotAlloc, FreshClean, FreshDirty, Escaped, Conflict };

ObjSt joinObj(ObjSt A, ObjSt B) {
  if (A == B)
    return A;
  if (A > B)
    std::swap(A, B);
  if (A == NotAlloc)
    return B;
  if (B == Conflict)
    return Conflict;
  if (A == FreshClean)
    return B;
  return Conflict; // FreshDirty meets Escaped: a dirty object escaped on
                   // one path only
}

struct Key {
  const Value *Base;
  int64_t Off;
  uint64_t Size;
  const Instruction *Src; // what made it pending (for the report)
  bool same(const Key &O) const {
    return Base == O.Base && Off == O.Off && Size == O.Size;
  }
};

constexpr unsigned MaxKeys = 8;

struct State {
  bool Reached = false;
  bool Anon = false;  // some location the analysis cannot name is pending
  bool Entry = false; // the caller's pending writes (internal functions)
  const Instruction *AnonSrc = nullptr;
  SmallVector<Key, 4> Pending;
  SmallVector<ObjSt, 4> Obj;

  bool clean() const { return !Anon && !Entry && Pending.empty(); }
  void clear() {
    Anon = Entry = false;
    AnonSrc = nullptr;
    Pending.clear();
  }
  void addAnon(const Instruction *Src) {
    if (!Anon)
      AnonSrc = Src;
    Anon = true;
  }
  void addKey(const Key &K) {
    for (const Key &P : Pending)
      if (P.same(K))
        return;
    if (Pending.size() >= MaxKeys) {
      addAnon(K.Src);
      return;
    }
    Pending.push_back(K);
  }
  // Only K (or nothing) is pending.
  bool onlyPending(const Key &K) const {
    if (Anon || Entry)
      return false;
    for (const Key &P : Pending)
      if (!P.same(K))
        return false;
    return true;
  }
  bool join(const State &O) {
    if (!O.Reached)
      return false;
    if (!Reached) {
      *this = O;
      return true;
    }
    State Old = *this;
    if (O.Anon)
      addAnon(O.AnonSrc);
    Entry |= O.Entry;
    for (const Key &K : O.Pending)
      addKey(K);
    for (unsigned I = 0; I < Obj.size(); ++I)
      Obj[I] = joinObj(Obj[I], O.Obj[I]);
    return !(Old == *this);
  }
  bool operator==(const State &O) const {
    if (Reached != O.Reached || Anon != O.Anon || Entry != O.Entry ||
        Obj != O.Obj || Pending.size() != O.Pending.size())
      return false;
    for (const Key &K : Pending) {
      bool Have = false;
      for (const Key &P : O.Pending)
        Have |= P.same(K);
      if (!Have)
        return false;
    }
    return true;
  }
};

struct Summary {
  bool NeedsClean = false; // writes PM or releases before fencing
  bool ClearsEntry = true; // fences its entry's pending writes on all paths
  bool ExitPending = false;
  // Returns a fresh object (or null) of size FreshSize (a constant) or of
  // the size in argument FreshSizeArg.
  bool ReturnsFresh = false;
  ConstantInt *FreshSize = nullptr;
  int FreshSizeArg = -1;
  // Contexts with captured parameters (clones): which of them the function
  // writes, and whether it lets one escape (then the context is not used).
  uint32_t Dirtied = 0;
  bool Infeasible = false;
  bool operator==(const Summary &O) const {
    return NeedsClean == O.NeedsClean && ClearsEntry == O.ClearsEntry &&
           ExitPending == O.ExitPending && ReturnsFresh == O.ReturnsFresh &&
           FreshSize == O.FreshSize && FreshSizeArg == O.FreshSizeArg &&
           Dirtied == O.Dirtied && Infeasible == O.Infeasible;
  }
};

struct FreshObj {
  Instruction *Root;          // the allocating call (null: a parameter)
  AllocaInst *Slot = nullptr; // where the allocator wrote it, if it did
  Value *Size;                // its size, available wherever Root dominates
  bool Deferrable = true;
  int Param = -1; // in a context clone: the captured parameter it is
};

// Contexts: bit i set = parameter i is a captured object at the call.
constexpr unsigned MaxContextParams = 32;

std::string where(const Instruction *I) {
  return I ? sourceLoc(I) : std::string("an earlier write");
}

class Planner {
public:
  Planner(Module &M, const PMAliasInfo &PA, FunctionAnalysisManager &FAM,
          function_ref<bool(const Instruction &)> Ignored,
          function_ref<bool(const Function &)> SkipFn, bool Flit,
          RobustOptStats &Stats)
      : M(M), PA(PA), FAM(FAM), DL(M.getDataLayout()), Ignored(Ignored),
        SkipFn(SkipFn), Flit(Flit), Stats(Stats) {}

  std::vector<RobustAction> run();

private:
  Module &M;
  const PMAliasInfo &PA;
  FunctionAnalysisManager &FAM;
  const DataLayout &DL;
  function_ref<bool(const Instruction &)> Ignored;
  function_ref<bool(const Function &)> SkipFn;
  bool Flit;
  RobustOptStats &Stats;
  DenseMap<const Function *, Summary> Sums;
  DenseMap<const Function *, bool> Planned;
  // Whose plans read a function's summary: re-planned when it changes.
  DenseMap<const Function *, SmallVector<Function *, 4>> Dependents;
  // Context clones: (function, captured-parameter mask) -> clone, and back.
  std::map<std::pair<Function *, uint32_t>, Function *> Clones;
  DenseMap<const Function *, uint32_t> CloneMask;
  DenseMap<const Value *, const Value *> CloneOrigin;
  std::deque<Function *> Queue;
  DenseSet<Function *> Queued;
  bool NoDefer = false; // plan with no fresh objects (the fallback)

  // Per function being planned.
  Function *F = nullptr;
  DominatorTree *DT = nullptr;
  LoopInfo *LI = nullptr;
  DenseMap<const Loop *, bool> LoopFences; // may fence in some iteration
  bool Exported = false;
  std::vector<FreshObj> Objs;
  DenseMap<const Value *, unsigned> Derived; // value -> fresh object
  DenseMap<const Value *, bool> AtStart;     // derived value = object start
  bool Restart = false;
  bool Emit = false;
  Summary Sum;
  std::vector<RobustAction> Acts;

  bool planFunction(Function &Fn); // false: give up (too many restarts)
  void enqueue(Function *Fn) {
    if (Queued.insert(Fn).second)
      Queue.push_back(Fn);
  }
  const Summary *summaryOf(Function *Callee) {
    auto &D = Dependents[Callee];
    if (!is_contained(D, F))
      D.push_back(F);
    if (!Planned.lookup(Callee))
      return nullptr;
    return &Sums[Callee];
  }
  Function *contextClone(Function *Callee, uint32_t Mask);
  // The PM analysis and the ignore regions know the original functions.
  const Value *origin(const Value *V) const {
    auto It = CloneOrigin.find(V);
    return It == CloneOrigin.end() ? V : It->second;
  }
  bool mayBePM(const Value *V) const { return PA.mayBePM(origin(V)); }
  bool ignored(const Instruction &I) const {
    return Ignored(*cast<Instruction>(origin(&I)));
  }
  void findFresh();
  int freshOf(const Value *V) const {
    auto It = Derived.find(V);
    if (It == Derived.end() || !Objs[It->second].Deferrable)
      return -1;
    return It->second;
  }
  void undefer(unsigned O) {
    if (Objs[O].Param >= 0) { // a captured parameter cannot be given up
      Sum.Infeasible = true;
      return;
    }
    if (Objs[O].Deferrable) {
      Objs[O].Deferrable = false;
      Restart = true;
    }
  }
  void act(RobustAction::Kind K, Instruction *At, std::string Why) {
    if (Emit)
      Acts.push_back({K, At, nullptr, false, nullptr, std::move(Why)});
  }
  std::string pendingText(const State &S) const;
  void fenceIfPending(State &S, Instruction &I, const Twine &Why);
  void escape(unsigned O, Instruction &I, State &S);
  void accessFresh(unsigned O, State &S);
  void transfer(Instruction &I, State &S);
  bool summarized(const Function *Callee) const;
  bool callWaits(const CallBase &CB, bool Defined, const Summary *Sp) const;
  bool mayFence(const Loop *L);
  void leaveBlock(BasicBlock &BB, State &S);
  void transferCall(CallBase &CB, State &S);
  Key keyOf(Value *Ptr, uint64_t Size, const Instruction *Src) const {
    APInt Off(DL.getIndexTypeSizeInBits(Ptr->getType()), 0);
    const Value *B = Ptr->stripAndAccumulateConstantOffsets(DL, Off, true);
    return {B, Off.getSExtValue(), Size, Src};
  }
};

void Planner::findFresh() {
  Objs.clear();
  Derived.clear();
  AtStart.clear();
  if (NoDefer)
    return;
  SmallVector<Value *, 16> Work;
  auto derive = [&](Value *V, unsigned O, bool Start) {
    auto [It, New] = Derived.try_emplace(V, O);
    if (!New) {
      if (It->second != O) { // two objects flow into one value
        Objs[It->second].Deferrable = false;
        Objs[O].Deferrable = false;
      }
      return;
    }
    AtStart[V] = Start;
    Work.push_back(V);
  };
  // In a context clone, the captured parameters are fresh objects.
  uint32_t Mask = CloneMask.lookup(F);
  for (Argument &A : F->args())
    if (A.getArgNo() < MaxContextParams && (Mask >> A.getArgNo()) & 1) {
      unsigned O = Objs.size();
      Objs.push_back({nullptr, nullptr, nullptr, true, (int)A.getArgNo()});
      derive(&A, O, true);
    }
  for (Instruction &I : instructions(*F)) {
    auto *CB = dyn_cast<CallBase>(&I);
    if (!CB || !CB->getCalledFunction())
      continue;
    Function *Callee = CB->getCalledFunction();
    do { // (break: not such an allocation; the call goes on below)
      if (!(callEffects(Callee->getName()) & CE_OUT_ARG2) ||
          CB->arg_size() <= OutAllocOutArg)
        break;
      auto *Slot = dyn_cast<AllocaInst>(
          CB->getArgOperand(OutAllocOutArg)->stripPointerCasts());
      if (!Slot)
        break;
      // The slot must hold nothing but this allocator's result.
      bool Ok = true;
      SmallVector<LoadInst *, 4> Loads;
      for (User *U : Slot->users()) {
        if (U == CB)
          continue;
        if (auto *LI = dyn_cast<LoadInst>(U))
          Loads.push_back(LI);
        else if (auto *SI = dyn_cast<StoreInst>(U))
          // A null store after the allocation would make the slot's
          // reload at the escape (the object's write-back) miss it.
          Ok &= SI->getPointerOperand() == Slot &&
                isa<ConstantPointerNull>(SI->getValueOperand()) &&
                DT->dominates(SI, CB);
        else if (auto *II = dyn_cast<IntrinsicInst>(U))
          Ok &= II->isLifetimeStartOrEnd() || isa<DbgInfoIntrinsic>(II);
        else
          Ok = false;
      }
      for (Use &U : CB->args())
        if (U.get()->stripPointerCasts() == Slot &&
            U.getOperandNo() != OutAllocOutArg)
          Ok = false;
      if (!Ok)
        break;
      unsigned O = Objs.size();
      Objs.push_back({CB, Slot, CB->getArgOperand(OutAllocSizeArg)});
      for (LoadInst *LI : Loads)
        derive(LI, O, true);
    } while (false);
    const Summary *RS =
        Callee != F && summarized(Callee) ? summaryOf(Callee) : nullptr;
    if (RS && RS->ReturnsFresh) {
      const Summary &S = *RS;
      Value *Size = S.FreshSize;
      if (S.FreshSizeArg >= 0 && (unsigned)S.FreshSizeArg < CB->arg_size())
        Size = CB->getArgOperand(S.FreshSizeArg);
      if (Size) {
        unsigned O = Objs.size();
        Objs.push_back({CB, nullptr, Size});
        derive(CB, O, true);
      }
    }
  }
  while (!Work.empty()) {
    Value *V = Work.pop_back_val();
    unsigned O = Derived[V];
    bool Start = AtStart[V];
    for (User *U : V->users()) {
      auto *UI = dyn_cast<Instruction>(U);
      if (!UI)
        continue;
      if (auto *GEP = dyn_cast<GetElementPtrInst>(UI)) {
        if (GEP->getPointerOperand() == V)
          derive(GEP, O, Start && GEP->hasAllZeroIndices());
      } else if (isa<BitCastInst>(UI) || isa<AddrSpaceCastInst>(UI)) {
        derive(UI, O, Start);
      } else if (isa<PHINode>(UI) || isa<SelectInst>(UI)) {
        // Optimistic here; checked below once every value is known.
        if (!isa<SelectInst>(UI) || UI->getOperand(0) != V)
          derive(UI, O, Start);
      }
    }
  }
  // Every value of an allocated object must name its latest instance: it
  // comes after the allocation on every path (and is no phi, which may
  // take an earlier iteration's value), or the allocation cannot run again
  // after it. Otherwise a loop header's phi or a reload of the slot before
  // the call may hold the previous iteration's object.
  for (auto &[V, O] : Derived) {
    auto *UI = dyn_cast<Instruction>(V);
    Instruction *Root = Objs[O].Root;
    if (!UI || !Root || UI == Root)
      continue;
    if (!isa<PHINode>(UI) && DT->dominates(Root, UI))
      continue;
    if (isPotentiallyReachable(UI, Root, nullptr, DT))
      Objs[O].Deferrable = false;
  }
  // A phi or select of a fresh object must take nothing but that object,
  // null or undef; otherwise the object is not tracked.
  for (auto &[V, O] : Derived) {
    auto *UI = dyn_cast<Instruction>(V);
    if (!UI || !(isa<PHINode>(UI) || isa<SelectInst>(UI)))
      continue;
    for (unsigned K = isa<SelectInst>(UI) ? 1 : 0; K < UI->getNumOperands();
         ++K) {
      Value *In = UI->getOperand(K);
      if (isa<ConstantPointerNull>(In) || isa<UndefValue>(In))
        continue;
      auto D = Derived.find(In);
      if (D == Derived.end() || D->second != O)
        Objs[O].Deferrable = false;
      else if (!AtStart.lookup(In))
        AtStart[V] = false;
    }
  }
  Stats.FreshObjects += Objs.size();
}

std::string Planner::pendingText(const State &S) const {
  std::string T;
  if (!S.Pending.empty())
    T = "the write at " + where(S.Pending.front().Src);
  else if (S.Anon)
    T = "the write-back after " + where(S.AnonSrc);
  else
    T = "the caller's writes";
  return T + " is not yet fenced";
}

void Planner::fenceIfPending(State &S, Instruction &I, const Twine &Why) {
  if (S.clean())
    return;
  if (S.Entry && !S.Anon && S.Pending.empty()) {
    // Only the caller's writes: the callers fence before calling.
    if (Emit)
      Sum.NeedsClean = true;
    S.clear();
    return;
  }
  act(RobustAction::FenceBefore, &I, (Why + ", while " + pendingText(S)).str());
  S.clear();
}

void Planner::escape(unsigned O, Instruction &I, State &S) {
  if (Objs[O].Param >= 0) {
    // The caller flushes its object; this context needs it kept captured.
    Sum.Infeasible = true;
    S.Obj[O] = Escaped;
    return;
  }
  switch (S.Obj[O]) {
  case FreshDirty:
    if (!DT->dominates(Objs[O].Root, &I)) {
      undefer(O);
      return;
    }
    if (Emit) {
      RobustAction A{RobustAction::FlushObjectBefore,
                     &I,
                     Objs[O].Slot ? (Value *)Objs[O].Slot : Objs[O].Root,
                     Objs[O].Slot != nullptr,
                     Objs[O].Size,
                     "the new object from " + where(Objs[O].Root) +
                         " escapes here: write back its lines"};
      Acts.push_back(std::move(A));
      ++Stats.Deferred;
    }
    S.addAnon(&I);
    S.Obj[O] = Escaped;
    return;
  case Conflict:
    undefer(O);
    return;
  default:
    S.Obj[O] = Escaped;
  }
}

void Planner::accessFresh(unsigned O, State &S) {
  if (S.Obj[O] == Conflict)
    undefer(O);
  else
    S.Obj[O] = FreshDirty;
  if (Objs[O].Param >= 0)
    Sum.Dirtied |= 1u << Objs[O].Param;
}

// Which uses of a fresh object's pointer let it escape; the pointer operand
// of an access does not, nor a comparison.
bool usesEscape(const Instruction &I, const Use &U) {
  if (auto *SI = dyn_cast<StoreInst>(&I))
    return U.get() == SI->getValueOperand() && U.getOperandNo() == 0;
  if (isa<LoadInst>(I) || isa<ICmpInst>(I) || isa<GetElementPtrInst>(I) ||
      isa<BitCastInst>(I) || isa<AddrSpaceCastInst>(I))
    return false;
  if (auto *RMW = dyn_cast<AtomicRMWInst>(&I))
    return U.getOperandNo() != RMW->getPointerOperandIndex();
  if (auto *CX = dyn_cast<AtomicCmpXchgInst>(&I))
    return U.getOperandNo() != CX->getPointerOperandIndex();
  return true;
}

void Planner::transferCall(CallBase &CB, State &S) {
  Function *Callee = CB.getCalledFunction();
  bool Defined = summarized(Callee);
  // A call passing captured objects uses the callee's clone for that
  // context, once the clone is planned and keeps them captured.
  uint32_t Mask = 0;
  const Summary *Ctx = nullptr;
  Function *Clone = nullptr;
  if (Defined && !Callee->isVarArg() && !isa<IntrinsicInst>(CB)) {
    for (Use &U : CB.args()) {
      unsigned ArgNo = CB.getArgOperandNo(&U);
      int O = freshOf(U.get());
      if (O >= 0 && ArgNo < MaxContextParams &&
          (S.Obj[O] == FreshClean || S.Obj[O] == FreshDirty))
        Mask |= 1u << ArgNo;
    }
    if (Mask) {
      Clone = contextClone(Callee, Mask);
      Ctx = summaryOf(Clone);
      if (Ctx && Ctx->Infeasible)
        Ctx = nullptr;
    }
  }
  // The object arguments: captured by the context, escaped, or (for code
  // that may write into a block it does not keep) dirty.
  // Memory intrinsics and masked stores: accesses, not calls.
  bool Access = isa<IntrinsicInst>(CB) && accessOf(CB, DL).Addr;
  if (!Access) {
    for (Use &U : CB.args()) {
      int O = freshOf(U.get());
      if (O < 0)
        continue;
      unsigned ArgNo = CB.getArgOperandNo(&U);
      if (Ctx && ArgNo < MaxContextParams && (Mask >> ArgNo) & 1) {
        if ((Ctx->Dirtied >> ArgNo) & 1)
          accessFresh(O, S);
        continue;
      }
      bool NoCapture = CB.paramHasAttr(ArgNo, Attribute::NoCapture);
      if (auto *II = dyn_cast<IntrinsicInst>(&CB))
        if (II->isLifetimeStartOrEnd() || isa<DbgInfoIntrinsic>(II))
          continue;
      if (!NoCapture)
        escape(O, CB, S);
      else if (!Defined)
        if (!CB.onlyReadsMemory(ArgNo))
          accessFresh(O, S);
    }
  }
  if (Ctx && Emit)
    Acts.push_back({RobustAction::RedirectCall, &CB, Clone, false, nullptr,
                    "call with captured objects: the clone for that context"});
  if (Access) {
    PMAccess A = accessOf(CB, DL);
    if (ignored(CB) || !mayBePM(A.Addr))
      return;
    int O = freshOf(A.Addr);
    if (O >= 0 && S.Obj[O] != Escaped && S.Obj[O] != NotAlloc) {
      accessFresh(O, S);
      return;
    }
    fenceIfPending(S, CB, Twine(A.What) + " at " + where(&CB));
    act(RobustAction::WriteBackAfter, &CB,
        std::string(A.What) + ": write back the range");
    S.addAnon(&CB);
    return;
  }
  if (auto *II = dyn_cast<IntrinsicInst>(&CB)) {
    switch (II->getIntrinsicID()) {
    case Intrinsic::x86_sse_sfence:
    case Intrinsic::x86_sse2_mfence:
      S.clear();
      break;
    default:
      break;
    }
    return;
  }
  if (CB.isInlineAsm()) {
    StringRef T = cast<InlineAsm>(CB.getCalledOperand())->getAsmString();
    if (callWaits(CB, false, nullptr))
      fenceIfPending(S, CB, "inline asm at " + where(&CB));
    else if (!T.contains("pmkit.robust_ignore") && asmEffect(T).Fence)
      S.clear();
    // Its own access to PM, as a store or an atomic load in IR would be:
    // written back at once, fenced when something must not overtake it.
    PMAccess A = accessOf(CB, DL);
    if (!A.Addr || !mayBePM(A.Addr) || ignored(CB))
      return;
    int O = freshOf(A.Addr);
    if (O >= 0 && S.Obj[O] != Escaped && S.Obj[O] != NotAlloc &&
        (A.AsmStore || S.Obj[O] != Conflict)) {
      if (A.AsmStore)
        accessFresh(O, S);
      return;
    }
    if (Flit) {
      act(A.AsmStore ? RobustAction::FlitStore : RobustAction::FlitLoad, &CB,
          std::string(A.What) +
              (A.AsmStore ? ": FliT counter around the write-back"
                          : ": write back if its FliT counter is up"));
      if (A.AsmStore)
        S.clear();
      return;
    }
    act(RobustAction::WriteBackAfter, &CB, A.What);
    S.addKey(keyOf(A.Addr, A.Size, &CB));
    return;
  }
  std::string Name = Callee ? displayName(*cast<Function>(origin(Callee)))
                            : std::string("an indirect call");
  // (A defined callee not planned yet: the fixpoint's optimistic start.)
  const Summary *Sp = Defined ? (Ctx ? Ctx : summaryOf(Callee)) : nullptr;
  Summary CS = Sp ? *Sp : Summary();
  if (callWaits(CB, Defined, &CS))
    fenceIfPending(S, CB,
                   "call to " + Name + " at " + where(&CB) +
                       (Defined
                            ? ", which writes PM or releases before it fences"
                            : " (code that may write PM or release a lock)"));
  if (Defined && CS.ClearsEntry)
    S.clear();
  if (Defined && CS.ExitPending)
    S.addAnon(&CB);
  // pmkit_zalloc writes back its zeroes but does not fence them.
  if (Callee && Callee->getName() == "pmkit_zalloc")
    S.addAnon(&CB);
  for (unsigned O = 0; O < Objs.size(); ++O)
    if (Objs[O].Root == &CB && Objs[O].Deferrable)
      S.Obj[O] = FreshClean;
}

void Planner::transfer(Instruction &I, State &S) {
  // Escapes of fresh objects through this instruction's operands.
  if (!isa<CallBase>(I) && !isa<PHINode>(I) && !isa<SelectInst>(I)) {
    for (Use &U : I.operands()) {
      int O = freshOf(U.get());
      if (O >= 0 && usesEscape(I, U))
        escape(O, I, S);
    }
  } else if (isa<PHINode>(I) || isa<SelectInst>(I)) {
    if (freshOf(&I) < 0) // (findFresh untracks such objects already)
      for (Use &U : I.operands())
        if (int O = freshOf(U.get()); O >= 0)
          undefer(O);
  }

  if (auto *CB = dyn_cast<CallBase>(&I)) {
    transferCall(*CB, S);
  } else if (auto *SI = dyn_cast<StoreInst>(&I)) {
    bool SeqCst = SI->getOrdering() == AtomicOrdering::SequentiallyConsistent;
    PMAccess A = accessOf(I, DL);
    if (!mayBePM(A.Addr)) {
      if (SeqCst)
        S.clear(); // xchg
      else if (SI->isAtomic() && isReleaseOrStronger(SI->getOrdering()))
        fenceIfPending(S, I, "release store at " + where(&I));
    } else if (ignored(I)) {
      if (SeqCst)
        S.clear();
    } else if (int O = freshOf(A.Addr);
               O >= 0 && S.Obj[O] != Escaped && S.Obj[O] != NotAlloc) {
      if (SeqCst)
        S.clear();
      accessFresh(O, S);
    } else {
      Key K = keyOf(A.Addr, A.Size, &I);
      if (Flit && (SI->isAtomic() || SI->isVolatile())) {
        act(RobustAction::FlitStore, &I,
            "atomic store to PM: FliT counter around the write-back");
        S.clear();
      } else {
        if (SeqCst)
          S.clear();
        else if (!S.onlyPending(K))
          fenceIfPending(S, I, std::string(A.What) + " at " + where(&I));
        act(RobustAction::WriteBackAfter, &I, A.What);
        S.clear();
        S.addKey(K);
      }
    }
  } else if (auto *LI = dyn_cast<LoadInst>(&I)) {
    if ((LI->isAtomic() || LI->isVolatile()) &&
        mayBePM(LI->getPointerOperand()) && !ignored(I)) {
      int O = freshOf(LI->getPointerOperand());
      if (O < 0 || S.Obj[O] == Escaped || S.Obj[O] == NotAlloc ||
          S.Obj[O] == Conflict) {
        PMAccess A = accessOf(I, DL);
        if (Flit) {
          act(RobustAction::FlitLoad, &I,
              std::string(A.What) + ": write back if its FliT counter is up");
        } else {
          act(RobustAction::WriteBackAfter, &I,
              std::string(A.What) + " (the fence waits for the next PM store)");
          S.addKey(keyOf(A.Addr, A.Size, &I));
        }
      }
    }
  } else if (isa<AtomicRMWInst>(I) || isa<AtomicCmpXchgInst>(I)) {
    S.clear(); // a locked instruction orders earlier write-backs
    PMAccess A = accessOf(I, DL);
    if (mayBePM(A.Addr) && !ignored(I)) {
      int O = freshOf(A.Addr);
      if (O >= 0 && S.Obj[O] != Escaped && S.Obj[O] != NotAlloc) {
        accessFresh(O, S);
      } else if (Flit) {
        act(RobustAction::FlitStore, &I,
            std::string(A.What) + ": FliT counter around the write-back");
      } else {
        act(RobustAction::WriteBackAfter, &I, A.What);
        S.addKey(keyOf(A.Addr, A.Size, &I));
      }
    }
  } else if (auto *FI = dyn_cast<FenceInst>(&I)) {
    if (FI->getSyncScopeID() != SyncScope::SingleThread) {
      if (FI->getOrdering() == AtomicOrdering::SequentiallyConsistent)
        S.clear();
      else if (isReleaseOrStronger(FI->getOrdering()))
        fenceIfPending(S, I, "release fence at " + where(&I));
    }
  } else if (isa<ReturnInst>(I) || isa<ResumeInst>(I)) {
    // An exception leaving the function (resume) is an exit too: the
    // caller's landing pad runs next.
    if (Exported && (S.Anon || !S.Pending.empty())) {
      fenceIfPending(S, I,
                     std::string(isa<ResumeInst>(I) ? "unwinding out of "
                                                    : "return from ") +
                         displayName(*F) +
                         ", which code outside the module may call");
    }
    if (Emit) {
      Sum.ExitPending |= S.Anon || !S.Pending.empty();
      Sum.ClearsEntry &= !S.Entry;
    }
  }

  // A redefined base: its pending entry now names another location.
  if (!I.getType()->isVoidTy()) {
    for (unsigned K = 0; K < S.Pending.size();) {
      if (S.Pending[K].Base == &I) {
        S.addAnon(S.Pending[K].Src);
        S.Pending.erase(S.Pending.begin() + K);
      } else {
        ++K;
      }
    }
  }
}

// Whether calls of Callee may use its summary: defined here, not skipped,
// and not interposable (a definition that may be replaced at link or load
// time would not hold to it).
bool Planner::summarized(const Function *Callee) const {
  return Callee && !Callee->isDeclaration() && !Callee->isInterposable() &&
         !SkipFn(*Callee);
}

// Whether a call that is not a memory access needs the pending write-backs
// fenced before it: inline asm that neither fences nor flushes, a callee
// whose summary Sp says it writes PM or releases before it fences (Defined:
// it has one; not planned yet, it is assumed not to), or code the analysis
// cannot see and does not know to be harmless. Intrinsics need nothing.
bool Planner::callWaits(const CallBase &CB, bool Defined,
                        const Summary *Sp) const {
  if (isa<IntrinsicInst>(CB))
    return false;
  if (CB.isInlineAsm()) {
    StringRef T = cast<InlineAsm>(CB.getCalledOperand())->getAsmString();
    if (T.contains("pmkit.robust_ignore"))
      return false;
    AsmEffect E = asmEffect(T);
    return !E.Fence && !E.Flush;
  }
  if (Defined)
    return Sp && Sp->NeedsClean;
  const Function *Callee = CB.getCalledFunction();
  return !Callee || !harmlessExternal(Callee->getName());
}

// Whether some instruction of L may need a fence when something is pending:
// a store or memory intrinsic on PM, a release, a call that waits (as
// transferCall decides it, with the callee's own summary).
bool Planner::mayFence(const Loop *L) {
  auto [It, New] = LoopFences.try_emplace(L, false);
  if (!New)
    return It->second;
  for (BasicBlock *BB : L->blocks())
    for (Instruction &I : *BB) {
      bool May = false;
      if (auto *CB = dyn_cast<CallBase>(&I)) {
        Function *Callee = CB->getCalledFunction();
        bool Defined = summarized(Callee);
        if (Value *Addr =
                isa<IntrinsicInst>(CB) ? accessOf(*CB, DL).Addr : nullptr)
          May = mayBePM(Addr);
        else
          May = callWaits(*CB, Defined, Defined ? summaryOf(Callee) : nullptr);
      } else if (auto *SI = dyn_cast<StoreInst>(&I)) {
        May = mayBePM(SI->getPointerOperand()) ||
              (SI->isAtomic() && isReleaseOrStronger(SI->getOrdering()));
      } else if (auto *FI = dyn_cast<FenceInst>(&I)) {
        May = isReleaseOrStronger(FI->getOrdering());
      }
      if (May)
        return It->second = true;
    }
  return false;
}

// The end of BB: a write-back still pending when the path enters a loop
// that fences is fenced here, once, rather than in the loop's first
// iteration, where the join with the back edge would keep the fence in
// every iteration.
void Planner::leaveBlock(BasicBlock &BB, State &S) {
  // (A terminator that is a call -- invoke, callbr -- acts after the fence.)
  if (S.clean() || !(isa<BranchInst>(BB.getTerminator()) ||
                     isa<SwitchInst>(BB.getTerminator())))
    return;
  for (BasicBlock *Succ : successors(&BB)) {
    Loop *L = LI->getLoopFor(Succ);
    if (L && L->getHeader() == Succ && !L->contains(&BB) && mayFence(L)) {
      fenceIfPending(S, *BB.getTerminator(),
                     "entering the loop at " +
                         where(Succ->getFirstNonPHIOrDbg()));
      return;
    }
  }
}

Function *Planner::contextClone(Function *Callee, uint32_t Mask) {
  auto [It, New] = Clones.try_emplace({Callee, Mask}, nullptr);
  if (!New)
    return It->second;
  ValueToValueMapTy VMap;
  Function *C = CloneFunction(Callee, VMap);
  C->setName(Callee->getName() + ".pmkit.ctx" + Twine::utohexstr(Mask));
  C->setLinkage(GlobalValue::InternalLinkage);
  C->setVisibility(GlobalValue::DefaultVisibility);
  C->setDSOLocal(true);
  for (auto It = VMap.begin(); It != VMap.end(); ++It)
    if (Value *To = It->second)
      CloneOrigin[To] = origin(It->first);
  CloneOrigin[C] = Callee;
  CloneMask[C] = Mask;
  It->second = C;
  ++Stats.Clones;
  enqueue(C);
  return C;
}

bool Planner::planFunction(Function &Fn) {
  F = &Fn;
  DT = &FAM.getResult<DominatorTreeAnalysis>(Fn);
  LI = &FAM.getResult<LoopAnalysis>(Fn);
  LoopFences.clear();
  Exported =
      !CloneMask.count(&Fn) && (!Fn.hasLocalLinkage() || Fn.hasAddressTaken());
  findFresh();
  ReversePostOrderTraversal<Function *> RPOT(&Fn);
  for (unsigned Round = 0; Round < 64; ++Round) {
    Restart = false;
    Emit = false;
    DenseMap<const BasicBlock *, State> In;
    State Init;
    Init.Reached = true;
    Init.Entry = true; // the caller's writes, for the summary
    Init.Obj.assign(Objs.size(), NotAlloc);
    for (unsigned O = 0; O < Objs.size(); ++O)
      if (Objs[O].Param >= 0)
        Init.Obj[O] = FreshClean;
    In[&Fn.getEntryBlock()] = Init;
    bool Changed = true;
    while (Changed && !Restart) {
      Changed = false;
      for (BasicBlock *BB : RPOT) {
        State S = In[BB];
        if (!S.Reached)
          continue;
        for (Instruction &I : *BB) {
          transfer(I, S);
          if (Restart)
            break;
        }
        if (Restart)
          break;
        leaveBlock(*BB, S);
        for (BasicBlock *Succ : successors(BB)) {
          State &SI = In[Succ];
          if (!SI.Reached) {
            SI = S;
            Changed = true;
          } else {
            Changed |= SI.join(S);
          }
        }
      }
    }
    if (Restart) {
      ++Stats.Restarts;
      continue;
    }
    // The final pass over the fixpoint records the actions and summary.
    Emit = true;
    Acts.clear();
    Sum = Summary();
    Sum.ClearsEntry = true;
    // A captured parameter mixed with other pointers (findFresh untracked
    // it): the context cannot keep it captured.
    for (const FreshObj &O : Objs)
      if (O.Param >= 0 && !O.Deferrable)
        Sum.Infeasible = true;
    for (BasicBlock *BB : RPOT) {
      State S = In[BB];
      if (!S.Reached)
        continue;
      for (Instruction &I : *BB)
        transfer(I, S);
      leaveBlock(*BB, S);
    }
    // An allocation wrapper: every return gives a fresh, clean object.
    // (The transfer below only reads states: nothing is emitted twice.)
    Emit = false;
    int RetObj = -1;
    bool Fresh = true;
    for (BasicBlock &BB : Fn) {
      auto *RI = dyn_cast<ReturnInst>(BB.getTerminator());
      if (!RI || !In[&BB].Reached)
        continue;
      Value *RV = RI->getReturnValue();
      if (!RV || isa<ConstantPointerNull>(RV))
        continue;
      int O = freshOf(RV);
      if (O < 0 || !Objs[O].Root || !AtStart.lookup(RV) ||
          (RetObj >= 0 && O != RetObj)) {
        Fresh = false;
        break;
      }
      RetObj = O;
      State S = In[&BB];
      for (Instruction &I : BB)
        if (&I != RI)
          transfer(I, S);
      Fresh &= S.Obj[O] == FreshClean;
    }
    if (Fresh && RetObj >= 0) {
      Value *Size = Objs[RetObj].Size;
      if (auto *C = dyn_cast<ConstantInt>(Size))
        Sum.FreshSize = C, Sum.ReturnsFresh = true;
      else if (auto *A = dyn_cast<Argument>(Size))
        Sum.FreshSizeArg = A->getArgNo(), Sum.ReturnsFresh = true;
    }
    return true;
  }
  return false;
}

std::vector<RobustAction> Planner::run() {
  // Bottom-up over the call graph first, so that most callers see their
  // callees' summaries; then until no summary changes (recursion, and the
  // context clones callers ask for).
  CallGraph CG(M);
  for (scc_iterator<CallGraph *> It = scc_begin(&CG); !It.isAtEnd(); ++It)
    for (CallGraphNode *N : *It)
      if (Function *Fn = N->getFunction())
        if (!Fn->isDeclaration() && !SkipFn(*Fn))
          enqueue(Fn);
  DenseMap<Function *, std::vector<RobustAction>> Plans;
  DenseMap<Function *, unsigned> Rounds;
  constexpr unsigned MaxRounds = 64;
  while (!Queue.empty()) {
    Function *Fn = Queue.front();
    Queue.pop_front();
    Queued.erase(Fn);
    Summary Old = Sums.lookup(Fn);
    bool Was = Planned.lookup(Fn);
    ++Stats.Plans;
    if (++Rounds[Fn] > MaxRounds || !planFunction(*Fn)) {
      // No fixpoint, or the fresh objects would not settle: plan with no
      // fresh objects and assume the worst of the function.
      NoDefer = true;
      planFunction(*Fn);
      NoDefer = false;
      Sum.NeedsClean = Sum.ExitPending = true;
      Sum.ClearsEntry = Sum.ReturnsFresh = false;
      Sum.Infeasible = CloneMask.count(Fn) != 0;
    }
    Plans[Fn] = Acts;
    Sums[Fn] = Sum;
    Planned[Fn] = true;
    if (!Was || !(Old == Sum))
      for (Function *D : Dependents.lookup(Fn))
        enqueue(D);
  }
  // The functions whose plans count: the originals, and the clones their
  // plans (transitively) call.
  SmallVector<Function *, 16> Live;
  DenseSet<Function *> IsLive;
  for (Function &Fn : M)
    if (!CloneMask.count(&Fn) && Plans.count(&Fn) && IsLive.insert(&Fn).second)
      Live.push_back(&Fn);
  for (unsigned I = 0; I < Live.size(); ++I)
    for (const RobustAction &A : Plans[Live[I]])
      if (A.K == RobustAction::RedirectCall)
        if (auto *C = cast<Function>(A.Obj); IsLive.insert(C).second)
          Live.push_back(C);
  std::vector<RobustAction> All;
  for (Function *Fn : Live) {
    ++Stats.Functions;
    for (RobustAction &A : Plans[Fn])
      All.push_back(std::move(A));
  }
  for (auto &[Key, C] : Clones)
    if (!IsLive.count(C)) {
      FAM.clear(*C, C->getName());
      C->eraseFromParent();
    }
  return All;
}

} // namespace

std::vector<RobustAction>
pmkit::planRobustOpt(Module &M, const PMAliasInfo &PA,
                     FunctionAnalysisManager &FAM,
                     function_ref<bool(const Instruction &)> Ignored,
                     function_ref<bool(const Function &)> SkipFn, bool Flit,
                     RobustOptStats &Stats) {
  return Planner(M, PA, FAM, Ignored, SkipFn, Flit, Stats).run();
}
