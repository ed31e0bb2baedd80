// SPDX-License-Identifier: Apache-2.0
//
// SSAPP.cpp -- the pmkit-ssapp pass (SSAPP.h). For each FASE:
//  1. inline every callee with a body; check what is left (calls must be
//     known, allowed or idempotent; no setjmp, variadic, indirect or
//     exception-throwing calls): an error naming the source line if not;
//  2. cut every block into RISEs: a run of loads (read RISE), a run of
//     stores (write RISE), or one call, fence or memcpy; a read RISE whose
//     successor is not plainly the next block gets a tail holding its
//     terminator, which is where recovery continues after it;
//  3. move what lives across blocks to the thread's persistent frame: the
//     arguments, phis (stored at the end of each predecessor), values used
//     in another block (values defined in a read RISE with the RISE's torn
//     bit: load-to-persist), and the FASE's locals; loads of globals the
//     FASE does not write are repeated where used instead, since a pointer
//     into volatile memory does not survive a crash;
//  4. give each RISE its buoy store (read RISEs flip their torn bit
//     first) and its trailing fence, and calls the runtime needs to know
//     about (allocation, PM locks) their runtime versions;
//  5. clone the result as the recovery version, entered through a switch
//     on the resume point, and emit the FASE table and its constructor.
// Entry point: SSAPPPass::run. Run with
//   opt-16 -load-pass-plugin=pmkit-passes.so \
//     -passes=pmkit-annotations,pmkit-ssapp -pmkit-ssapp-report -S in.ll

#include "SSAPP/SSAPP.h"
#include "Common/Attributes.h"
#include "Common/CallEffects.h"
#include "Common/Diagnose.h"
#include "Common/Fase.h"
#include "Common/PersistOps.h"
#include "Common/SourceLoc.h"
#include "Common/Target.h"

#include "pmkit/abi.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/Statistic.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Analysis/AliasAnalysis.h"
#include "llvm/Analysis/MemoryLocation.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

#include <functional>
#include <string>
#include <vector>

using namespace llvm;

#define DEBUG_TYPE "pmkit-ssapp"

STATISTIC(NumFase, "FASEs instrumented");
STATISTIC(NumInlined, "Call sites inlined into FASEs");
STATISTIC(NumRises, "RISEs");
STATISTIC(NumReadRises, "Read RISEs (torn-bit checked after a crash)");
STATISTIC(NumTsaSlots, "Torn-bit slots (load-to-persist)");
STATISTIC(NumPlainSlots, "Frame slots without a torn bit");
STATISTIC(NumRemat, "Loads of globals repeated instead of kept in a slot");
STATISTIC(NumRmw, "Atomic read-modify-writes made detectable (tagged)");
STATISTIC(NumMasked, "Loads of words an RMW may tag, masked");
STATISTIC(NumFences, "Trailing fences (or compiler barriers) of RISEs");
STATISTIC(NumStripped, "Flushes and fences of the program removed from FASEs");

namespace {

enum class FenceKind { SFence, Compiler };
cl::opt<FenceKind> FenceOpt(
    "pmkit-ssapp-fence", cl::Hidden, cl::init(FenceKind::SFence),
    cl::desc("What ends a RISE"),
    cl::values(clEnumValN(FenceKind::SFence, "sfence",
                          "an sfence, as the SSAPP paper does (default)"),
               clEnumValN(FenceKind::Compiler, "compiler",
                          "a compiler barrier: enough on x86-TSO under eADR, "
                          "where stores persist in program order")));
enum class CrashPoints { None, Rise, Store };
cl::opt<CrashPoints>
    CrashOpt("pmkit-ssapp-crash-points", cl::Hidden,
             cl::init(CrashPoints::None),
             cl::desc("Crash points (PMKIT_CRASH_AT) in FASEs, for tests"),
             cl::values(clEnumValN(CrashPoints::None, "none", "none (default)"),
                        clEnumValN(CrashPoints::Rise, "rise",
                                   "at the start and end of every RISE"),
                        clEnumValN(CrashPoints::Store, "store",
                                   "also before every store and call")));
cl::list<std::string>
    AllowOpt("pmkit-ssapp-allow", cl::Hidden, cl::CommaSeparated,
             cl::desc("External functions a FASE may call: re-executing "
                      "them after a crash is harmless"));
cl::opt<bool> ReportOpt("pmkit-ssapp-report", cl::Hidden, cl::init(false),
                        cl::desc("Print each FASE's RISEs to stderr"));
cl::opt<bool> RmwIntsOpt(
    "pmkit-ssapp-rmw-ints", cl::Hidden, cl::init(false),
    cl::desc("Integers that FASEs update with atomic read-modify-writes stay "
             "below 2^48 (their words' top 16 bits are free for the tag)"));
cl::opt<bool> NoSplitOpt(
    "pmkit-ssapp-no-split", cl::Hidden, cl::init(false),
    cl::desc("Make each block one RISE that recovery always re-executes "
             "(tests: the crash checks must fail)"));
cl::opt<unsigned>
    InlineLimit("pmkit-ssapp-inline-limit", cl::Hidden, cl::init(50000),
                cl::desc("Instructions a FASE may grow to by inlining"));

// What a call left in a FASE is, after inlining.
enum class CallClass {
  Ignore,     // debug info, lifetime markers, assumptions: no effect
  Idempotent, // its own CALL RISE, re-executed after a crash
  Fence,      // ends the RISE; its own (write) RISE
  Copy,       // memcpy/memset: its own write RISE
  Move,       // memmove -> __pmkit_ssapp_copy_in + __pmkit_ssapp_copy_out
  Alloc,      // pmkit_alloc/zalloc -> __pmkit_ssapp_alloc
  Lock,       // PM lock acquire -> __pmkit_ssapp_lock
  Unlock,     // PM lock release -> __pmkit_ssapp_unlock
  Bad,        // reported
};

struct Rise {
  BasicBlock *BB;     // the RISE's block
  unsigned Kind;      // PMKIT_RISE_*
  BasicBlock *Tail;   // read RISEs: where recovery continues, or null
  unsigned Flip = 0;  // read RISEs: frame offset of the flipper
  Value *T = nullptr; // read RISEs: this execution's torn bit
  std::vector<unsigned> Slots;
  unsigned Line = 0;
};

// RISEs whose slots carry torn bits and that recovery may skip.
bool torn(unsigned K) { return K == PMKIT_RISE_READ || K == PMKIT_RISE_RMW; }

const char *kindName(unsigned K) {
  switch (K) {
  case PMKIT_RISE_READ:
    return "read";
  case PMKIT_RISE_WRITE:
    return "write";
  case PMKIT_RISE_CALL:
    return "call";
  case PMKIT_RISE_ALLOC:
    return "alloc";
  case PMKIT_RISE_RMW:
    return "rmw";
  }
  return "?";
}

class SSAPPInstrumenter {
public:
  SSAPPInstrumenter(Module &M, FunctionAnalysisManager &FAM)
      : M(M), FAM(FAM), Ctx(M.getContext()), DL(M.getDataLayout()),
        I64(Type::getInt64Ty(Ctx)), I32(Type::getInt32Ty(Ctx)),
        Ptr(PointerType::getUnqual(Ctx)) {
    for (const std::string &A : AllowOpt)
      Allowed.insert(A);
  }
  bool run();

private:
  CallClass classify(CallBase &CB, bool Report);
  bool check(Function &F);
  void rewriteCalls(Function &F);
  void rewriteRmws(Function &F);
  void split(Function &F);
  void demote(Function &F);
  void instrumentRises(Function &F);
  Function *makeRecover(Function &F);
  void emitTable();
  void report(Function &F);
  void diag(const Instruction *I, const Twine &Msg);

  unsigned slot(unsigned Bytes, unsigned Align = 8) {
    FrameBytes = alignTo(FrameBytes, std::max(Align, 8u));
    unsigned Off = FrameBytes;
    FrameBytes += alignTo(Bytes, 8);
    return Off;
  }
  Value *frameAt(IRBuilder<> &B, unsigned Off) {
    return Off ? B.CreateConstInBoundsGEP1_64(B.getInt8Ty(), Frame, Off)
               : Frame;
  }
  FunctionCallee rtFn(StringRef Name, Type *Ret, ArrayRef<Type *> Params) {
    return M.getOrInsertFunction(Name, FunctionType::get(Ret, Params, false));
  }
  void crashPoint(IRBuilder<> &B) {
    B.CreateCall(rtFn("__pmkit_crash_point", Type::getVoidTy(Ctx), {}));
  }
  void compilerBarrier(IRBuilder<> &B) {
    B.CreateFence(AtomicOrdering::SequentiallyConsistent,
                  SyncScope::SingleThread);
  }

  Module &M;
  FunctionAnalysisManager &FAM;
  LLVMContext &Ctx;
  const DataLayout &DL;
  Type *I64, *I32, *Ptr;
  StringSet<> Allowed;
  bool Failed = false;

  // Per FASE.
  BasicBlock *Entry = nullptr; // the frame set-up block
  Instruction *Frame = nullptr;
  Instruction *Begin = nullptr; // __pmkit_ssapp_begin in Entry
  unsigned FrameBytes = 0;
  std::vector<Rise> Rises;
  std::vector<unsigned> PtrSlots;          // offset | PMKIT_SSAPP_SLOT_TORN
  DenseMap<BasicBlock *, unsigned> RiseOf; // RISE block or tail -> index
  SmallPtrSet<BasicBlock *, 8> Tails;

  struct TableEntry {
    Function *Fase;
    Function *Recover;
    unsigned FrameBytes;
    std::vector<Rise> Rises;
    std::vector<unsigned> PtrSlots; // offset | PMKIT_SSAPP_SLOT_TORN
  };
  std::vector<TableEntry> Table;
};

void SSAPPInstrumenter::diag(const Instruction *I, const Twine &Msg) {
  Failed = true;
  if (I)
    pmkit::diagnoseAt(*I, "pmkit-ssapp: " + Msg, DS_Error);
  else
    pmkit::diagnoseModule(Ctx, "pmkit-ssapp: " + Msg, DS_Error);
}

CallClass SSAPPInstrumenter::classify(CallBase &CB, bool Report) {
  auto Bad = [&](const Twine &Why) {
    if (Report)
      diag(&CB, Why);
    return CallClass::Bad;
  };
  Function *Owner = CB.getFunction();
  if (isa<InvokeInst>(CB) || isa<CallBrInst>(CB))
    return Bad("FASE " + pmkit::displayName(*Owner) +
               " may throw or jump out of a call: exceptions and asm goto "
               "cannot be resumed");
  if (auto *II = dyn_cast<IntrinsicInst>(&CB)) {
    switch (II->getIntrinsicID()) {
    case Intrinsic::memcpy:
    case Intrinsic::memcpy_inline:
    case Intrinsic::memset:
    case Intrinsic::memset_inline:
      return CallClass::Copy;
    case Intrinsic::memmove:
      return CallClass::Move;
    case Intrinsic::x86_sse_sfence:
    case Intrinsic::x86_sse2_mfence:
      return CallClass::Fence;
    default:
      break;
    }
    if (II->isAssumeLikeIntrinsic() ||
        II->getIntrinsicID() == Intrinsic::lifetime_start ||
        II->getIntrinsicID() == Intrinsic::lifetime_end ||
        !II->mayReadOrWriteMemory())
      return CallClass::Ignore;
    return Bad("FASE " + pmkit::displayName(*Owner) + " uses intrinsic " +
               II->getCalledFunction()->getName() +
               ", which ssapp mode does not handle");
  }
  if (CB.isInlineAsm()) {
    auto *IA = cast<InlineAsm>(CB.getCalledOperand());
    pmkit::AsmEffect E = pmkit::asmEffect(IA->getAsmString());
    if (E.Fence || IA->getAsmString().empty())
      return CallClass::Fence; // a fence, or a compiler barrier
    return Bad("FASE " + pmkit::displayName(*Owner) +
               " contains inline assembly, whose effect on memory ssapp "
               "mode cannot know");
  }
  Function *G = CB.getCalledFunction();
  if (!G)
    return Bad("FASE " + pmkit::displayName(*Owner) +
               " makes an indirect call: ssapp mode must see every callee");
  StringRef N = G->getName();
  if (G == Owner)
    return Bad("FASE " + N +
               " calls itself: a recursive FASE cannot be "
               "inlined, and FASEs cannot nest");
  if (G->hasFnAttribute(Attribute::ReturnsTwice))
    return Bad("FASE " + pmkit::displayName(*Owner) + " calls " + N +
               " (setjmp-like): a second return cannot be resumed");
  if (G->isVarArg())
    return Bad("FASE " + pmkit::displayName(*Owner) +
               " calls variadic function " + N +
               ": its arguments cannot be kept across a crash");
  if (N == "pmkit_alloc" || N == "pmkit_zalloc")
    return CallClass::Alloc;
  if (N == "pmkit_mutex_lock" || N == "pmkit_rwlock_rdlock" ||
      N == "pmkit_rwlock_wrlock")
    return CallClass::Lock;
  if (N == "pmkit_mutex_unlock" || N == "pmkit_rwlock_unlock")
    return CallClass::Unlock;
  if (N == "pmkit_free")
    return CallClass::Idempotent; // -> __pmkit_ssapp_free
  if (N == "pmkit_mutex_trylock")
    return Bad("FASE " + pmkit::displayName(*Owner) +
               " calls pmkit_mutex_trylock: its outcome cannot be replayed "
               "after a crash; take the lock with pmkit_mutex_lock");
  if (pmkit::isLockAcquire(N) || pmkit::isLockRelease(N))
    return Bad("FASE " + pmkit::displayName(*Owner) +
               " uses a volatile lock (" + N +
               "): recovery resumes FASEs in the middle and must hold their "
               "locks again, so ssapp mode needs PM locks (pmkit_mutex, "
               "pmkit_rwlock) in the pool");
  if (N == "__pmkit_ssapp_copy_in")
    return CallClass::Move;
  if (N.startswith("__pmkit_ssapp_") || N == "__pmkit_crash_point")
    return CallClass::Idempotent;
  // Library functions that read at most what their arguments point to and
  // write nothing: calling them again after a crash gives the same result.
  if (pmkit::callEffects(N) &
      (pmkit::CE_READS_ARGS | pmkit::CE_QUERY | pmkit::CE_CRASH_POINT))
    return CallClass::Idempotent;
  if (Allowed.count(N) || G->onlyReadsMemory())
    return CallClass::Idempotent;
  return Bad("FASE " + pmkit::displayName(*Owner) + " calls " + N +
             ", whose effect on persistent memory is unknown: make its "
             "source visible to the pass, or allow it with "
             "-pmkit-ssapp-allow=" +
             N + " (pmkit cc --ssapp-allow=" + N +
             ") if calling it again after a crash is harmless");
}

// A 64-bit integer built from a pointer (C's atomics on pointers are
// integer RMWs in IR), perhaps with low tag bits or'ed in (a Harris list's
// mark), or a small constant (NULL): its top 16 bits are free.
static bool pointerDerived(const Value *V) {
  if (auto *C = dyn_cast<ConstantInt>(V))
    return C->getValue().getActiveBits() <= 48;
  if (isa<PtrToIntInst>(V) || isa<ConstantPointerNull>(V))
    return true;
  if (auto *BO = dyn_cast<BinaryOperator>(V)) {
    auto *C = dyn_cast<ConstantInt>(BO->getOperand(1));
    bool Small = C && C->getValue().getActiveBits() <= 16;
    switch (BO->getOpcode()) {
    case Instruction::Or:
    case Instruction::Xor:
    case Instruction::Add:
      return Small && pointerDerived(BO->getOperand(0));
    case Instruction::And:
      return pointerDerived(BO->getOperand(0)) ||
             (C && C->getValue().getActiveBits() <= 48);
    default:
      return false;
    }
  }
  if (auto *Sel = dyn_cast<SelectInst>(V))
    return pointerDerived(Sel->getTrueValue()) &&
           pointerDerived(Sel->getFalseValue());
  if (auto *Phi = dyn_cast<PHINode>(V)) {
    // (one level: a loop's phi of pointers)
    for (const Value *In : Phi->incoming_values())
      if (!isa<PtrToIntInst>(In) && !isa<ConstantInt>(In))
        return false;
    return true;
  }
  return false;
}

bool SSAPPInstrumenter::check(Function &F) {
  bool Ok = true;
  // Clobber mode's buffer annotations: ssapp re-executes from the thread's
  // persistent frame and keeps no copy of volatile buffers.
  if (F.hasFnAttribute(pmkit::AttrFaseBufs)) {
    diag(&*F.getEntryBlock().getFirstInsertionPt(),
         "FASE " + pmkit::displayName(F) +
             " declares PMKIT_FASE_IN or PMKIT_FASE_SCRATCH buffers, which "
             "only clobber mode copies: in ssapp mode every pointer a FASE "
             "is given must point into the pool (put the buffer in the "
             "pool, or build in clobber mode)");
    Ok = false;
  }
  for (Instruction &I : instructions(F)) {
    // A write to static or thread-local data: volatile memory, which a
    // crash loses while the FASE's re-execution goes on from after it.
    Value *Dst = nullptr;
    if (auto *SI = dyn_cast<StoreInst>(&I))
      Dst = SI->getPointerOperand();
    else if (auto *MI = dyn_cast<MemIntrinsic>(&I))
      Dst = MI->getRawDest();
    else if (auto *RMW = dyn_cast<AtomicRMWInst>(&I))
      Dst = RMW->getPointerOperand();
    else if (auto *CX = dyn_cast<AtomicCmpXchgInst>(&I))
      Dst = CX->getPointerOperand();
    if (Dst) {
      const Value *Obj = getUnderlyingObject(Dst, 12);
      if (auto *TLS = dyn_cast<IntrinsicInst>(Obj);
          TLS && TLS->getIntrinsicID() == Intrinsic::threadlocal_address)
        Obj = getUnderlyingObject(TLS->getArgOperand(0), 12);
      if (auto *G = dyn_cast<GlobalVariable>(Obj); G && !G->isConstant()) {
        diag(&I, "FASE " + pmkit::displayName(F) + " writes " +
                     (G->isThreadLocal() ? "the thread-local variable "
                                         : "the static variable ") +
                     llvm::demangle(G->getName().str()) +
                     ", which is volatile memory: a crash loses it, and "
                     "recovery resumes the FASE after the write. Keep it in "
                     "the pool, or make it a local of the FASE");
        Ok = false;
      }
    }

    if (auto *CB = dyn_cast<CallBase>(&I))
      Ok &= classify(*CB, true) != CallClass::Bad;
    else if (isa<AtomicRMWInst>(I) || isa<AtomicCmpXchgInst>(I)) {
      // The tag that tells recovery whether the RMW took effect takes the
      // word's top 16 bits: pointers leave them free (x86-64 user space);
      // integers only if the program says so.
      Type *T = isa<AtomicRMWInst>(I)
                    ? cast<AtomicRMWInst>(I).getValOperand()->getType()
                    : cast<AtomicCmpXchgInst>(I).getNewValOperand()->getType();
      auto *RMW = dyn_cast<AtomicRMWInst>(&I);
      if (RMW && (RMW->getOperation() == AtomicRMWInst::Nand ||
                  RMW->getOperation() > AtomicRMWInst::Xor)) {
        diag(&I, "FASE " + pmkit::displayName(F) + " uses atomic " +
                     AtomicRMWInst::getOperationName(RMW->getOperation()) +
                     ", which ssapp mode does not make detectable (it "
                     "supports compare-exchange, exchange, add, sub, and, "
                     "or and xor)");
        Ok = false;
      } else if (DL.getTypeSizeInBits(T) != 64) {
        diag(&I, "FASE " + pmkit::displayName(F) +
                     " makes an atomic read-modify-write of a " +
                     Twine(DL.getTypeSizeInBits(T).getFixedValue()) +
                     "-bit word: ssapp mode needs a spare bit in the word "
                     "to tell after a crash whether it took effect, and "
                     "only 64-bit words have them (their top 16 bits)");
        Ok = false;
      } else if (!T->isPointerTy() && !RmwIntsOpt &&
                 // what an exchange stores is its operand; arithmetic
                 // stores whatever the word held, changed
                 !((!RMW || RMW->getOperation() == AtomicRMWInst::Xchg) &&
                   pointerDerived(
                       RMW ? RMW->getValOperand()
                           : cast<AtomicCmpXchgInst>(I).getNewValOperand()))) {
        diag(&I, "FASE " + pmkit::displayName(F) +
                     " makes an atomic read-modify-write of a 64-bit "
                     "integer, which may use every bit: ssapp mode needs the "
                     "top 16 bits for its tag. If the integers stay below "
                     "2^48, say so with -pmkit-ssapp-rmw-ints (pmkit cc "
                     "--ssapp-rmw-ints)");
        Ok = false;
      }
    } else if (auto *AI = dyn_cast<AllocaInst>(&I)) {
      if (!AI->isStaticAlloca()) {
        diag(&I, "FASE " + pmkit::displayName(F) +
                     " allocates a variable-sized local: its frame must "
                     "have a fixed size");
        Ok = false;
      }
    }
  }
  return Ok;
}

// Calls the runtime must see: allocation and PM locks.
void SSAPPInstrumenter::rewriteCalls(Function &F) {
  std::vector<CallBase *> Calls;
  std::vector<MemMoveInst *> Moves;
  for (Instruction &I : instructions(F))
    if (auto *MM = dyn_cast<MemMoveInst>(&I))
      Moves.push_back(MM);
    else if (auto *CB = dyn_cast<CallBase>(&I))
      if (Function *G = CB->getCalledFunction(); G && !G->isIntrinsic())
        Calls.push_back(CB);
  // A memmove's ranges may overlap, so moving the bytes again after a crash
  // could move them twice: the bytes go through the thread's buffer, in a
  // read RISE (its slot and torn bit are filled in after the split) and a
  // write RISE.
  for (MemMoveInst *MM : Moves) {
    IRBuilder<> B(MM);
    Value *N = B.CreateZExtOrTrunc(MM->getLength(), I64);
    B.CreateCall(rtFn("__pmkit_ssapp_copy_in", Type::getVoidTy(Ctx),
                      {Ptr, I64, Ptr, I64}),
                 {MM->getRawSource(), N,
                  ConstantPointerNull::get(cast<PointerType>(Ptr)),
                  ConstantInt::get(I64, 0)})
        ->setDebugLoc(MM->getDebugLoc());
    B.CreateCall(
         rtFn("__pmkit_ssapp_copy_out", Type::getVoidTy(Ctx), {Ptr, I64}),
         {MM->getRawDest(), N})
        ->setDebugLoc(MM->getDebugLoc());
    MM->eraseFromParent();
  }
  for (CallBase *CB : Calls) {
    StringRef N = CB->getCalledFunction()->getName();
    IRBuilder<> B(CB);
    Value *New = nullptr;
    if (N == "pmkit_alloc" || N == "pmkit_zalloc") {
      New = B.CreateCall(
          rtFn("__pmkit_ssapp_alloc", I32, {Ptr, I64, Ptr, I32}),
          {CB->getArgOperand(0), B.CreateZExtOrTrunc(CB->getArgOperand(1), I64),
           CB->getArgOperand(2), ConstantInt::get(I32, N == "pmkit_zalloc")});
    } else if (N == "pmkit_free") {
      New = B.CreateCall(rtFn("__pmkit_ssapp_free", I32, {Ptr, Ptr}),
                         {CB->getArgOperand(0), CB->getArgOperand(1)});
    } else if (N == "pmkit_mutex_lock" || N == "pmkit_rwlock_rdlock" ||
               N == "pmkit_rwlock_wrlock") {
      unsigned K = N == "pmkit_mutex_lock"      ? PMKIT_SSAPP_LOCK_MUTEX
                   : N == "pmkit_rwlock_rdlock" ? PMKIT_SSAPP_LOCK_READ
                                                : PMKIT_SSAPP_LOCK_WRITE;
      New = B.CreateCall(
          rtFn("__pmkit_ssapp_lock", Type::getVoidTy(Ctx), {Ptr, I32}),
          {CB->getArgOperand(0), ConstantInt::get(I32, K)});
    } else if (N == "pmkit_mutex_unlock" || N == "pmkit_rwlock_unlock") {
      unsigned K = N == "pmkit_mutex_unlock" ? PMKIT_SSAPP_LOCK_MUTEX
                                             : PMKIT_SSAPP_LOCK_WRITE;
      New = B.CreateCall(
          rtFn("__pmkit_ssapp_unlock", Type::getVoidTy(Ctx), {Ptr, I32}),
          {CB->getArgOperand(0), ConstantInt::get(I32, K)});
    } else {
      continue;
    }
    cast<Instruction>(New)->setDebugLoc(CB->getDebugLoc());
    if (!CB->getType()->isVoidTy())
      CB->replaceAllUsesWith(New);
    CB->eraseFromParent();
  }
}

// Each atomic RMW becomes one call of the runtime, which tags the word so
// that recovery can tell whether it took effect; what the RMW returned is
// rebuilt after the call, so that the call's RISE keeps nothing but its
// result. Every atomic or pointer load in the FASE of a word an RMW may tag
// is masked.
void SSAPPInstrumenter::rewriteRmws(Function &F) {
  std::vector<Instruction *> Rmws;
  for (Instruction &I : instructions(F))
    if (isa<AtomicRMWInst>(I) || isa<AtomicCmpXchgInst>(I))
      Rmws.push_back(&I);
  if (Rmws.empty())
    return;
  FAM.invalidate(F, PreservedAnalyses::none());
  AAResults &AA = FAM.getResult<AAManager>(F);
  std::vector<MemoryLocation> Words;
  for (Instruction *I : Rmws)
    Words.push_back(MemoryLocation::getBeforeOrAfter(
        isa<AtomicRMWInst>(I)
            ? cast<AtomicRMWInst>(I)->getPointerOperand()
            : cast<AtomicCmpXchgInst>(I)->getPointerOperand()));
  std::vector<LoadInst *> Reads;
  for (Instruction &I : instructions(F))
    if (auto *LI = dyn_cast<LoadInst>(&I))
      // A word RMWs update is an atomic object, read with atomic loads; a
      // pointer has its top bits free, so masking one is harmless. Plain
      // integer loads are left alone: alias analysis cannot always tell a
      // node's key from its link, and a key may use every bit.
      if (DL.getTypeSizeInBits(LI->getType()) == 64 &&
          (LI->getType()->isPointerTy() ||
           (LI->getType()->isIntegerTy() && LI->isAtomic())) &&
          any_of(Words, [&](const MemoryLocation &W) {
            return AA.alias(MemoryLocation::get(LI), W) != AliasResult::NoAlias;
          }))
        Reads.push_back(LI);
  const uint64_t Mask = (1ull << 48) - 1;
  for (LoadInst *LI : Reads) {
    IRBuilder<> B(LI->getNextNode());
    Value *V;
    if (LI->getType()->isPointerTy())
      V = B.CreateIntrinsic(Intrinsic::ptrmask, {LI->getType(), I64},
                            {LI, ConstantInt::get(I64, Mask)});
    else
      V = B.CreateAnd(LI, Mask);
    LI->replaceUsesWithIf(V, [&](Use &U) { return U.getUser() != V; });
    ++NumMasked;
  }
  FunctionCallee Fn = rtFn("__pmkit_ssapp_rmw", I64, {Ptr, I32, I64, I64});
  for (Instruction *I : Rmws) {
    IRBuilder<> B(I);
    auto ToI64 = [&](Value *V) {
      return V->getType()->isPointerTy() ? B.CreatePtrToInt(V, I64) : V;
    };
    Value *Old;
    if (auto *X = dyn_cast<AtomicCmpXchgInst>(I)) {
      Value *E = ToI64(X->getCompareOperand());
      CallInst *C =
          B.CreateCall(Fn, {X->getPointerOperand(),
                            ConstantInt::get(I32, PMKIT_SSAPP_RMW_CAS),
                            ToI64(X->getNewValOperand()), E});
      C->setDebugLoc(X->getDebugLoc());
      Type *T = X->getNewValOperand()->getType();
      Old = T->isPointerTy() ? B.CreateIntToPtr(C, T) : (Value *)C;
      Value *Ok = B.CreateICmpEQ(C, E);
      Value *Pair = B.CreateInsertValue(
          B.CreateInsertValue(PoisonValue::get(X->getType()), Old, 0), Ok, 1);
      X->replaceAllUsesWith(Pair);
    } else {
      auto *R = cast<AtomicRMWInst>(I);
      unsigned Op;
      switch (R->getOperation()) {
      case AtomicRMWInst::Xchg:
        Op = PMKIT_SSAPP_RMW_XCHG;
        break;
      case AtomicRMWInst::Add:
        Op = PMKIT_SSAPP_RMW_ADD;
        break;
      case AtomicRMWInst::Sub:
        Op = PMKIT_SSAPP_RMW_SUB;
        break;
      case AtomicRMWInst::And:
        Op = PMKIT_SSAPP_RMW_AND;
        break;
      case AtomicRMWInst::Or:
        Op = PMKIT_SSAPP_RMW_OR;
        break;
      default:
        Op = PMKIT_SSAPP_RMW_XOR;
        break;
      }
      CallInst *C = B.CreateCall(
          Fn, {R->getPointerOperand(), ConstantInt::get(I32, Op),
               ToI64(R->getValOperand()), ConstantInt::get(I64, 0)});
      C->setDebugLoc(R->getDebugLoc());
      Type *T = R->getType();
      Old = T->isPointerTy() ? B.CreateIntToPtr(C, T) : (Value *)C;
      R->replaceAllUsesWith(Old);
    }
    I->eraseFromParent();
    ++NumRmw;
  }
}

// What an instruction is for cutting blocks into RISEs.
enum class Op { None, Read, Write, Alone };

// Cut every block (but the set-up block) into RISEs; fills Rises, RiseOf
// and Tails.
void SSAPPInstrumenter::split(Function &F) {
  std::vector<BasicBlock *> Blocks;
  for (BasicBlock &BB : F)
    if (&BB != Entry)
      Blocks.push_back(&BB);
  for (BasicBlock *BB : Blocks) {
    // Pieces: (first instruction, RISE kind). Instructions without memory
    // effects join the piece they are in.
    std::vector<std::pair<Instruction *, unsigned>> Pieces;
    Instruction *Start = &*BB->getFirstInsertionPt();
    unsigned Cur = 0; // the open piece's kind; 0: nothing in it yet
    auto Cut = [&](Instruction *At) {
      if (Cur) {
        Pieces.push_back({Start, Cur});
        Start = At;
      }
      Cur = 0;
    };
    for (Instruction &I : make_range(BB->getFirstInsertionPt(),
                                     BB->getTerminator()->getIterator())) {
      if (isa<LoadInst>(I)) {
        if (Cur != PMKIT_RISE_READ && Cur != 0)
          Cut(&I);
        Cur = PMKIT_RISE_READ;
        continue;
      }
      if (isa<StoreInst>(I)) {
        if (Cur != PMKIT_RISE_WRITE && Cur != 0)
          Cut(&I);
        Cur = PMKIT_RISE_WRITE;
        continue;
      }
      unsigned Alone;
      if (isa<FenceInst>(I)) {
        Alone = PMKIT_RISE_WRITE;
      } else if (auto *CB = dyn_cast<CallBase>(&I)) {
        CallClass C = classify(*CB, false);
        if (C == CallClass::Ignore)
          continue;
        Function *G = CB->getCalledFunction();
        if (C == CallClass::Fence || C == CallClass::Copy)
          Alone = PMKIT_RISE_WRITE;
        else if (C == CallClass::Move)
          Alone = PMKIT_RISE_READ; // copy_in: reads, fills a torn-bit slot
        else if (G && G->getName() == "__pmkit_ssapp_alloc")
          Alone = PMKIT_RISE_ALLOC;
        else if (G && G->getName() == "__pmkit_ssapp_rmw")
          Alone = PMKIT_RISE_RMW;
        else
          Alone = PMKIT_RISE_CALL;
      } else {
        continue;
      }
      Cut(&I);
      if (Alone == PMKIT_RISE_RMW && Start != &I) {
        // Nothing but the RMW: its RISE's only slot is its result, which
        // recovery can fill in when the RMW took effect.
        Pieces.push_back({Start, PMKIT_RISE_WRITE});
        Start = &I;
      }
      Cur = Alone;
      Cut(I.getNextNode());
    }
    if (Cur)
      Pieces.push_back({Start, Cur});
    else if (Pieces.empty() || Start != BB->getTerminator())
      Pieces.push_back({Start, PMKIT_RISE_WRITE}); // no memory access
    if (NoSplitOpt) { // the broken build of the tests
      Pieces.clear();
      Pieces.push_back({&*BB->getFirstInsertionPt(), PMKIT_RISE_WRITE});
    }
    // A block that loops to itself as one piece would load its phis' slots
    // and store them again in one RISE: re-executing it after the store
    // would see the next iteration's values. Its terminator gets a write
    // RISE of its own, where the phis' stores will go.
    bool SelfLoop = !BB->phis().empty() && is_contained(successors(BB), BB);
    if (SelfLoop && Pieces.size() == 1 && !torn(Pieces.back().second))
      Pieces.push_back({BB->getTerminator(), PMKIT_RISE_WRITE});
    // Cut, last piece first so the earlier instructions keep their block.
    std::vector<BasicBlock *> PieceBB(Pieces.size());
    for (size_t K = Pieces.size(); K-- > 1;)
      PieceBB[K] = SplitBlock(BB, Pieces[K].first);
    PieceBB[0] = BB;
    for (size_t K = 0; K < Pieces.size(); K++) {
      Rise R;
      R.BB = PieceBB[K];
      R.Kind = Pieces[K].second;
      R.Tail = nullptr;
      for (Instruction &I : *R.BB)
        if (const DebugLoc &L = I.getDebugLoc(); L && L.getLine()) {
          R.Line = L.getLine();
          break;
        }
      // A read RISE's successor must be a place to continue at: a block of
      // its own holding its terminator (and, later, its phi stores),
      // unless it simply branches to a block without phis.
      if (torn(R.Kind)) {
        auto *Br = dyn_cast<BranchInst>(R.BB->getTerminator());
        bool Plain = Br && Br->isUnconditional() &&
                     Br->getSuccessor(0)->phis().empty() &&
                     Br->getSuccessor(0) != R.BB;
        if (!Plain)
          R.Tail = SplitBlock(R.BB, R.BB->getTerminator());
      }
      RiseOf[R.BB] = Rises.size();
      if (R.Tail) {
        RiseOf[R.Tail] = Rises.size();
        Tails.insert(R.Tail);
      }
      Rises.push_back(R);
    }
  }
}

// Slots for what lives across blocks, and the frame for the locals.
void SSAPPInstrumenter::demote(Function &F) {
  // Locals: their place in the frame.
  std::vector<AllocaInst *> Allocas;
  for (Instruction &I : instructions(F))
    if (auto *AI = dyn_cast<AllocaInst>(&I))
      Allocas.push_back(AI);
  for (AllocaInst *AI : Allocas) {
    uint64_t Bytes = AI->getAllocationSize(DL).value_or(TypeSize::Fixed(8));
    unsigned Off = slot(Bytes, AI->getAlign().value());
    IRBuilder<> B(Entry->getTerminator());
    Value *At = frameAt(B, Off);
    for (User *U : make_early_inc_range(AI->users()))
      if (auto *II = dyn_cast<IntrinsicInst>(U))
        if (II->isLifetimeStartOrEnd())
          II->eraseFromParent();
    AI->replaceAllUsesWith(At);
    AI->eraseFromParent();
  }

  // Globals the FASE reads but never writes: each block loads them again.
  SmallPtrSet<const GlobalVariable *, 8> Written;
  for (Instruction &I : instructions(F))
    if (auto *SI = dyn_cast<StoreInst>(&I))
      if (auto *G = dyn_cast<GlobalVariable>(
              getUnderlyingObject(SI->getPointerOperand())))
        Written.insert(G);
  // Values a crash makes stale but each block can compute again: loads of
  // globals the FASE never writes (configuration, pointers to volatile
  // state), a pool's handle, and addresses computed from a global's (a
  // lock in a static array). Each block that uses one gets its own copy,
  // which after a crash reads, or computes, the new process's value.
  std::function<bool(Value *)> Remat = [&](Value *V) -> bool {
    auto *I = dyn_cast<Instruction>(V);
    if (!I || I->getParent() == Entry)
      return false;
    if (auto *CB = dyn_cast<CallBase>(I))
      return CB->getCalledFunction() &&
             CB->getCalledFunction()->getName() == "pmkit_pool_of";
    if (auto *LI = dyn_cast<LoadInst>(I)) {
      auto *G = dyn_cast<GlobalVariable>(LI->getPointerOperand());
      return !LI->isVolatile() && !LI->isAtomic() && G && !G->isThreadLocal() &&
             !Written.count(G);
    }
    if (isa<GetElementPtrInst>(I) || isa<CastInst>(I)) {
      Value *Base = I->getOperand(0);
      return isa<GlobalVariable>(Base) || Remat(Base);
    }
    return false;
  };
  // A copy of I in block UB (its own operands that are such values too).
  std::function<Value *(
      Instruction *, BasicBlock *,
      DenseMap<std::pair<Instruction *, BasicBlock *>, Instruction *> &)>
      CopyIn = [&](Instruction *I, BasicBlock *UB, auto &Done) -> Value * {
    Instruction *&C = Done[{I, UB}];
    if (C)
      return C;
    C = I->clone();
    C->insertBefore(&*UB->getFirstInsertionPt());
    for (Use &Op : C->operands())
      if (auto *OI = dyn_cast<Instruction>(Op.get());
          OI && OI->getParent() != UB && Remat(OI)) {
        Value *OC = CopyIn(OI, UB, Done);
        cast<Instruction>(OC)->moveBefore(C);
        Op.set(OC);
      }
    ++NumRemat;
    return C;
  };
  auto IsTsa = [&](BasicBlock *Def) {
    auto It = RiseOf.find(Def);
    return It != RiseOf.end() && !Tails.count(Def) &&
           torn(Rises[It->second].Kind);
  };
  // A value's slot(s): plain (its own type), or torn-bit slots of 32 bits
  // of value each.
  struct SlotOf {
    bool Tsa;
    unsigned Off; // first slot
  };
  // Torn-bit slots hold a value as 32-bit chunks of its bits.
  auto WidthOf = [&](Type *T) -> unsigned {
    if (!T->isIntOrIntVectorTy() && !T->isFPOrFPVectorTy() &&
        !T->isPtrOrPtrVectorTy())
      return 0;
    return DL.getTypeSizeInBits(T).getFixedValue();
  };
  auto ToBits = [&](IRBuilder<> &B, Value *V) -> Value * {
    Type *T = V->getType();
    Type *IntTy = B.getIntNTy(WidthOf(T));
    if (T->isPtrOrPtrVectorTy())
      V = B.CreatePtrToInt(
          V, T->isVectorTy() ? VectorType::get(I64, cast<VectorType>(T)) : I64);
    return B.CreateBitCast(V, IntTy);
  };
  auto FromBits = [&](IRBuilder<> &B, Value *Bits, Type *T) -> Value * {
    if (!T->isPtrOrPtrVectorTy())
      return B.CreateBitCast(Bits, T);
    if (!T->isVectorTy())
      return B.CreateIntToPtr(Bits, T);
    Value *Ints =
        B.CreateBitCast(Bits, VectorType::get(I64, cast<VectorType>(T)));
    return B.CreateIntToPtr(Ints, T);
  };
  auto Chunks = [&](Type *T) { return (WidthOf(T) + 31) / 32; };
  auto EncodeStore = [&](IRBuilder<> &B, Value *V, SlotOf S, Value *T) {
    if (!S.Tsa) { // slots are 8-aligned, whatever the value's type asks
      B.CreateAlignedStore(V, frameAt(B, S.Off), Align(8));
      return;
    }
    Value *Bits = ToBits(B, V);
    unsigned W = WidthOf(V->getType());
    for (unsigned K = 0; K < Chunks(V->getType()); K++) {
      Value *C = K ? B.CreateLShr(Bits, 32 * K) : Bits;
      C = B.CreateZExtOrTrunc(C, I32);
      if (W - 32 * K < 32)
        C = B.CreateAnd(C, (1ull << (W - 32 * K)) - 1);
      B.CreateStore(B.CreateOr(B.CreateZExt(C, I64), T),
                    frameAt(B, S.Off + 8 * K));
    }
  };
  auto DecodeLoad = [&](IRBuilder<> &B, Type *Ty, SlotOf S) -> Value * {
    if (!S.Tsa)
      return B.CreateAlignedLoad(Ty, frameAt(B, S.Off), Align(8));
    IntegerType *IntTy = B.getIntNTy(WidthOf(Ty));
    Value *Bits = nullptr;
    for (unsigned K = 0; K < Chunks(Ty); K++) {
      Value *C =
          B.CreateTrunc(B.CreateLoad(I64, frameAt(B, S.Off + 8 * K)), I32);
      C = B.CreateZExtOrTrunc(C, IntTy);
      if (K)
        C = B.CreateShl(C, 32 * K);
      Bits = Bits ? B.CreateOr(Bits, C) : C;
    }
    return FromBits(B, Bits, Ty);
  };

  // Phis: a slot each, stored at the end of every predecessor.
  std::vector<PHINode *> Phis;
  for (BasicBlock &BB : F)
    for (PHINode &P : BB.phis())
      Phis.push_back(&P);
  for (PHINode *P : Phis) {
    SlotOf S{false, slot(DL.getTypeStoreSize(P->getType()))};
    if (P->getType()->isPointerTy())
      PtrSlots.push_back(S.Off);
    ++NumPlainSlots;
    for (unsigned K = 0; K < P->getNumIncomingValues(); K++) {
      IRBuilder<> B(P->getIncomingBlock(K)->getTerminator());
      EncodeStore(B, P->getIncomingValue(K), S, nullptr);
    }
    IRBuilder<> B(&*P->getParent()->getFirstInsertionPt());
    Value *L = DecodeLoad(B, P->getType(), S);
    P->replaceAllUsesWith(L);
    P->eraseFromParent();
  }

  // Phis' stores are uses like any other now.
  std::vector<Instruction *> Work;
  for (Instruction &I : instructions(F))
    if (Remat(&I))
      Work.push_back(&I);
  DenseMap<std::pair<Instruction *, BasicBlock *>, Instruction *> Done;
  for (Instruction *I : Work)
    for (Use &U : make_early_inc_range(I->uses())) {
      auto *UI = cast<Instruction>(U.getUser());
      if (UI->getParent() != I->getParent())
        U.set(CopyIn(I, UI->getParent(), Done));
    }

  // Values used outside their block, arguments included.
  std::vector<Value *> Vals;
  for (Argument &A : F.args())
    Vals.push_back(&A);
  for (BasicBlock &BB : F)
    if (&BB != Entry)
      for (Instruction &I : BB)
        if (!I.getType()->isVoidTy())
          Vals.push_back(&I);
  for (Value *V : Vals) {
    BasicBlock *Def =
        isa<Instruction>(V) ? cast<Instruction>(V)->getParent() : Entry;
    SmallVector<Use *, 8> Far;
    for (Use &U : V->uses()) {
      auto *UI = cast<Instruction>(U.getUser());
      if (UI->getParent() != Def)
        Far.push_back(&U);
    }
    auto *CV = dyn_cast<CallInst>(V);
    bool RmwResult = CV && CV->getCalledFunction() &&
                     CV->getCalledFunction()->getName() == "__pmkit_ssapp_rmw";
    if (Far.empty() && !RmwResult) // an RMW's result: recovery's evidence
      continue;
    if (isa<Argument>(V) && all_of(Far, [&](Use *U) {
          return cast<Instruction>(U->getUser())->getParent() == Entry;
        }))
      continue;
    bool Tsa = IsTsa(Def);
    unsigned W = WidthOf(V->getType());
    if (Tsa && !W) {
      diag(cast<Instruction>(V),
           "a value of this type is read in one RISE and used in another; "
           "ssapp mode keeps only integers, floating point, pointers and "
           "vectors of them with torn bits");
      return;
    }
    unsigned N = Tsa ? Chunks(V->getType()) : 0;
    SlotOf S{Tsa, Tsa ? slot(8 * N) : slot(DL.getTypeStoreSize(V->getType()))};
    if (V->getType()->isPointerTy())
      PtrSlots.push_back(S.Off | (Tsa ? PMKIT_SSAPP_SLOT_TORN : 0));
    if (Tsa) {
      Rise &R = Rises[RiseOf[Def]];
      for (unsigned K = 0; K < N; K++)
        R.Slots.push_back(S.Off + 8 * K);
      NumTsaSlots += N;
    } else {
      ++NumPlainSlots;
    }
    {
      // Arguments are in the frame before the FASE begins.
      Instruction *After =
          isa<Instruction>(V) ? cast<Instruction>(V)->getNextNode() : Begin;
      IRBuilder<> B(After);
      Value *T = Tsa ? Rises[RiseOf[Def]].T : nullptr;
      EncodeStore(B, V, S, T);
    }
    DenseMap<BasicBlock *, Value *> Loaded;
    for (Use *U : Far) {
      BasicBlock *UB = cast<Instruction>(U->getUser())->getParent();
      if (UB == Entry)
        continue; // an argument's own checks
      Value *&L = Loaded[UB];
      if (!L) {
        IRBuilder<> B(&*UB->getFirstInsertionPt());
        L = DecodeLoad(B, V->getType(), S);
      }
      U->set(L);
    }
  }
}

// The buoy, torn bits and trailing fence of every RISE, and crash points.
void SSAPPInstrumenter::instrumentRises(Function &F) {
  for (unsigned K = 0; K < Rises.size(); K++) {
    Rise &R = Rises[K];
    unsigned Id = K + 1;
    BasicBlock *BB = R.BB;
    // The end: a fence unless the RISE ends with one.
    Instruction *Term = BB->getTerminator();
    Instruction *Last = Term->getPrevNode();
    bool HasFence =
        Last && (isa<FenceInst>(Last) ||
                 (isa<CallBase>(Last) &&
                  classify(*cast<CallBase>(Last), false) == CallClass::Fence));
    IRBuilder<> E(Term);
    if (CrashOpt != CrashPoints::None)
      crashPoint(E);
    if (!HasFence) {
      ++NumFences;
      if (FenceOpt == FenceKind::SFence)
        E.CreateCall(Intrinsic::getDeclaration(&M, Intrinsic::x86_sse_sfence));
      else
        compilerBarrier(E);
    }
    if (CrashOpt == CrashPoints::Store) {
      auto IsCrashPoint = [](Instruction &I) {
        auto *CB = dyn_cast<CallBase>(&I);
        return CB && CB->getCalledFunction() &&
               CB->getCalledFunction()->getName() == "__pmkit_crash_point";
      };
      for (BasicBlock *In : {R.BB, R.Tail})
        for (Instruction &I : make_early_inc_range(In ? *In : *R.BB))
          if (In && !IsCrashPoint(I) &&
              (isa<StoreInst>(I) || isa<MemIntrinsic>(I) ||
               (isa<CallBase>(I) && !isa<IntrinsicInst>(I)))) {
            IRBuilder<> B(&I);
            crashPoint(B);
          }
    }
    // The start: the buoy (read RISEs: after flipping the torn bit).
    IRBuilder<> B(&*BB->begin());
    if (CrashOpt != CrashPoints::None)
      crashPoint(B);
    Value *Buoy = ConstantInt::get(I64, Id);
    Value *T = nullptr;
    if (torn(R.Kind)) {
      // R.T already stands in the slot stores: define it here.
      Value *Flip = frameAt(B, R.Flip);
      auto *Old = B.CreateLoad(I64, Flip);
      Old->setVolatile(true);
      T = B.CreateAnd(B.CreateXor(Old, PMKIT_SSAPP_TORN), PMKIT_SSAPP_TORN);
      Buoy = B.CreateOr(Buoy, T);
      B.CreateStore(Buoy, Frame)->setVolatile(true);
      B.CreateStore(T, Flip)->setVolatile(true);
    } else {
      B.CreateStore(Buoy, Frame)->setVolatile(true);
    }
    // The RISE's own stores stay after the buoy.
    compilerBarrier(B);
    if (torn(R.Kind)) { // the stand-in goes (B stood before it)
      auto *Stand = cast<Instruction>(R.T);
      R.T = T;
      Stand->replaceAllUsesWith(T);
      Stand->eraseFromParent();
    }
  }
}

// The recovery version: a copy whose set-up block, instead of taking a
// frame and beginning, switches to the resume point.
Function *SSAPPInstrumenter::makeRecover(Function &F) {
  auto *FTy = FunctionType::get(Type::getVoidTy(Ctx), {Ptr, I64}, false);
  Function *RF = Function::Create(FTy, GlobalValue::InternalLinkage,
                                  F.getName() + ".ssapp.recover", M);
  ValueToValueMapTy VMap;
  for (Argument &A : F.args())
    VMap[&A] = PoisonValue::get(A.getType());
  SmallVector<ReturnInst *, 4> Rets;
  CloneFunctionInto(RF, &F, VMap, CloneFunctionChangeType::LocalChangesOnly,
                    Rets);
  RF->setLinkage(GlobalValue::InternalLinkage);
  RF->setName(F.getName() + ".ssapp.recover");
  // F's return and parameter attributes do not fit the new signature.
  RF->setAttributes(AttributeList::get(Ctx, F.getAttributes().getFnAttrs(),
                                       AttributeSet(), {}));
  RF->removeFnAttr(pmkit::AttrFase);
  RF->setCallingConv(CallingConv::C);
  for (ReturnInst *Ret : Rets) {
    ReturnInst::Create(Ctx, nullptr, Ret);
    Ret->eraseFromParent();
  }
  auto *NewEntry = cast<BasicBlock>(VMap[Entry]);
  auto *NewFrame = cast<Instruction>(VMap[Frame]);
  NewFrame->replaceAllUsesWith(RF->getArg(0));
  // Drop the set-up's calls and argument stores; keep the frame addresses.
  for (Instruction &I : make_early_inc_range(*NewEntry))
    if (isa<CallBase>(I) || isa<StoreInst>(I))
      I.eraseFromParent();
  NewEntry->getTerminator()->eraseFromParent();
  IRBuilder<> B(NewEntry);
  BasicBlock *Bad = BasicBlock::Create(Ctx, "ssapp.bad", RF);
  IRBuilder<>(Bad).CreateUnreachable();
  SwitchInst *SW = B.CreateSwitch(RF->getArg(1), Bad, 2 * Rises.size());
  for (unsigned K = 0; K < Rises.size(); K++) {
    const Rise &R = Rises[K];
    auto *At = cast<BasicBlock>(VMap[R.BB]);
    SW->addCase(ConstantInt::get(cast<IntegerType>(I64), 2 * (K + 1)), At);
    if (torn(R.Kind)) {
      BasicBlock *After =
          R.Tail ? R.Tail : R.BB->getTerminator()->getSuccessor(0);
      SW->addCase(ConstantInt::get(cast<IntegerType>(I64), 2 * (K + 1) + 1),
                  cast<BasicBlock>(VMap[After]));
    }
  }
  return RF;
}

void SSAPPInstrumenter::report(Function &F) {
  errs() << DEBUG_TYPE << ": FASE " << pmkit::displayName(F) << ": "
         << Rises.size() << " RISEs, frame " << FrameBytes << " bytes\n";
  for (unsigned K = 0; K < Rises.size(); K++) {
    const Rise &R = Rises[K];
    errs() << "  RISE " << K + 1 << " " << kindName(R.Kind);
    if (R.Line)
      errs() << " line " << R.Line;
    if (!R.Slots.empty())
      errs() << ", " << R.Slots.size() << " torn-bit slot"
             << (R.Slots.size() == 1 ? "" : "s");
    if (R.Tail)
      errs() << ", tail";
    errs() << '\n';
  }
}

void SSAPPInstrumenter::emitTable() {
  StructType *RiseTy = StructType::get(Ctx, {I32, I32, I32, I32});
  StructType *EntTy =
      StructType::get(Ctx, {I64, Ptr, Ptr, I32, I32, Ptr, Ptr, I32, I32, Ptr});
  uint32_t Flags =
      FenceOpt == FenceKind::Compiler ? PMKIT_SSAPP_COMPILER_FENCE : 0;
  std::vector<Constant *> Ents;
  for (const TableEntry &E : Table) {
    std::vector<Constant *> Rs, Ss;
    for (const Rise &R : E.Rises) {
      Rs.push_back(
          ConstantStruct::get(RiseTy, {ConstantInt::get(I32, R.Kind),
                                       ConstantInt::get(I32, Ss.size()),
                                       ConstantInt::get(I32, R.Slots.size()),
                                       ConstantInt::get(I32, R.Line)}));
      for (unsigned S : R.Slots)
        Ss.push_back(ConstantInt::get(I32, S));
    }
    auto *RArr = ArrayType::get(RiseTy, Rs.size());
    auto *RGV =
        new GlobalVariable(M, RArr, true, GlobalValue::PrivateLinkage,
                           ConstantArray::get(RArr, Rs), "__pmkit_ssapp_rises");
    if (Ss.empty())
      Ss.push_back(ConstantInt::get(I32, 0));
    auto *SArr = ArrayType::get(I32, Ss.size());
    auto *SGV =
        new GlobalVariable(M, SArr, true, GlobalValue::PrivateLinkage,
                           ConstantArray::get(SArr, Ss), "__pmkit_ssapp_slots");
    std::vector<Constant *> Ps;
    for (unsigned P : E.PtrSlots)
      Ps.push_back(ConstantInt::get(I32, P));
    if (Ps.empty())
      Ps.push_back(ConstantInt::get(I32, 0));
    auto *PArr = ArrayType::get(I32, Ps.size());
    auto *PGV =
        new GlobalVariable(M, PArr, true, GlobalValue::PrivateLinkage,
                           ConstantArray::get(PArr, Ps), "__pmkit_ssapp_ptrs");
    GlobalVariable *NameGV =
        pmkit::privateString(M, E.Fase->getName(), "__pmkit_ssapp_name");
    Ents.push_back(ConstantStruct::get(
        EntTy, {ConstantInt::get(I64, pmkit::faseId(*E.Fase)), NameGV,
                E.Recover, ConstantInt::get(I32, E.FrameBytes),
                ConstantInt::get(I32, E.Rises.size()), RGV, SGV,
                ConstantInt::get(I32, Flags),
                ConstantInt::get(I32, E.PtrSlots.size()), PGV}));
  }
  pmkit::emitFaseTable(M, EntTy, Ents, "__pmkit_ssapp");
}

bool SSAPPInstrumenter::run() {
  bool Changed = pmkit::stripFaseAnchors(M);
  SetVector<Function *> Fases =
      pmkit::collectFases(M, pmkit::SSAPPPass::PassName);
  if (Fases.empty())
    return Changed;
  if (auto Same = pmkit::sameFaseIds(Fases.getArrayRef())) {
    diag(Same->first, Same->second);
    return true;
  }
  for (Function *F : Fases) {
    NumInlined += pmkit::inlineCallees(*F, InlineLimit);
    NumStripped += pmkit::stripPersistOps(*F);
  }
  for (Function *F : Fases)
    check(*F);
  if (Failed)
    return true;
  for (Function *F : Fases) {
    Entry = nullptr;
    Frame = nullptr;
    FrameBytes = 16; // buoy, reserved
    Rises.clear();
    PtrSlots.clear();
    RiseOf.clear();
    Tails.clear();
    rewriteCalls(*F);
    rewriteRmws(*F);
    // Returns leave through the runtime (a call RISE of their own).
    for (BasicBlock &BB : *F)
      if (auto *Ret = dyn_cast<ReturnInst>(BB.getTerminator()))
        IRBuilder<>(Ret).CreateCall(
            rtFn("__pmkit_ssapp_exit", Type::getVoidTy(Ctx), {}));
    // The set-up block: frame, arguments (stored by demote), begin.
    BasicBlock *Old = &F->getEntryBlock();
    Entry = BasicBlock::Create(Ctx, "ssapp.entry", F, Old);
    IRBuilder<> B(Entry);
    Value *Anchor = ConstantPointerNull::get(cast<PointerType>(Ptr));
    for (Argument &A : F->args())
      if (A.getType()->isPointerTy()) {
        Anchor = &A;
        break;
      }
    Frame = B.CreateCall(rtFn("__pmkit_ssapp_enter", Ptr, {I64, Ptr}),
                         {ConstantInt::get(I64, pmkit::faseId(*F)), Anchor});
    for (Argument &A : F->args())
      if (A.getType()->isPointerTy())
        B.CreateCall(
            rtFn("__pmkit_ssapp_check_ptr", Type::getVoidTy(Ctx), {Ptr, I32}),
            {&A, ConstantInt::get(I32, A.getArgNo() + 1)});
    auto *BeginCall =
        B.CreateCall(rtFn("__pmkit_ssapp_begin", Type::getVoidTy(Ctx), {}));
    B.CreateBr(Old);
    // Allocas of the old entry move to the frame (demote); static ones are
    // all there.
    split(*F);
    // Each read RISE's flipper, and a stand-in for its torn bit that the
    // slot stores use until instrumentRises defines it.
    for (Rise &R : Rises)
      if (torn(R.Kind)) {
        R.Flip = slot(8);
        R.T = BinaryOperator::CreateAdd(ConstantInt::get(I64, 0),
                                        ConstantInt::get(I64, 0), "ssapp.t",
                                        &*R.BB->getFirstInsertionPt());
        ++NumReadRises;
      }
    // Each memmove's first half gets its checksum slot and torn bit.
    for (Rise &R : Rises)
      for (Instruction &I : *R.BB)
        if (auto *CB = dyn_cast<CallBase>(&I))
          if (CB->getCalledFunction() &&
              CB->getCalledFunction()->getName() == "__pmkit_ssapp_copy_in") {
            unsigned Off = slot(8);
            IRBuilder<> SB(CB);
            CB->setArgOperand(2, frameAt(SB, Off));
            if (R.Kind == PMKIT_RISE_READ) { // else -pmkit-ssapp-no-split
              CB->setArgOperand(3, R.T);
              R.Slots.push_back(Off | PMKIT_SSAPP_SLOT_SUM);
              ++NumTsaSlots;
            }
          }
    Begin = BeginCall;
    demote(*F);
    if (Failed)
      return true;
    instrumentRises(*F);
    NumRises += Rises.size();
    if (ReportOpt)
      report(*F);
    Function *RF = makeRecover(*F);
    // A mistake here would surface as a crash in code generation (clang
    // does not verify): say which FASE instead.
    if (verifyFunction(*F, &errs()) || verifyFunction(*RF, &errs())) {
      diag(nullptr,
           "internal error: invalid code for FASE " + pmkit::displayName(*F));
      return true;
    }
    LLVM_DEBUG(dbgs() << DEBUG_TYPE ": FASE " << F->getName() << ": "
                      << Rises.size() << " RISEs, frame " << FrameBytes
                      << " bytes, " << PtrSlots.size() << " pointer slots\n");
    Table.push_back(
        {F, RF, (unsigned)alignTo(FrameBytes, 64), Rises, PtrSlots});
    ++NumFase;
  }
  emitTable();
  return true;
}

} // namespace

PreservedAnalyses pmkit::SSAPPPass::run(Module &M, ModuleAnalysisManager &MAM) {
  if (!pmkit::targetSupported(M, PassName))
    return PreservedAnalyses::all();
  FunctionAnalysisManager &FAM =
      MAM.getResult<FunctionAnalysisManagerModuleProxy>(M).getManager();
  if (!SSAPPInstrumenter(M, FAM).run())
    return PreservedAnalyses::all();
  return PreservedAnalyses::none();
}
