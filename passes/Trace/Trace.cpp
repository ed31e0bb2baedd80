// SPDX-License-Identifier: Apache-2.0
//
// Trace.cpp -- the pmkit-trace module pass. Each plain access whose address
// may be in a pool gets an inline bounding-box test (__pmkit_pool_lo/hi of
// abi.h) guarding a call to the recorder, so DRAM accesses cost two loads
// and two compares; accesses the pass can prove are to the stack or to a
// global are not instrumented at all. Atomic accesses are bracketed by
// __pmkit_trace_atomic_begin/end so that their records come in the order
// the accesses took effect; flushes and fences are always reported. A module
// constructor registers the module's source locations ("file:line:col",
// id = 32-bit FNV-1a of the text). Entry point: TracePass::run. Run with
//   opt-16 -load-pass-plugin=pmkit-passes.so -passes=pmkit-trace -S in.ll

#include "Trace/Trace.h"

#include "Common/PersistOps.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Statistic.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Constants.h"
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
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/LowerAtomic.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

#include <string>

using namespace llvm;
using namespace pmkit;

#define DEBUG_TYPE "pmkit-trace"

STATISTIC(NumStores, "Stores instrumented");
STATISTIC(NumNTStores, "Non-temporal stores instrumented");
STATISTIC(NumWideStores, "Stores wider than 8 bytes instrumented as writes");
STATISTIC(NumAtomics, "Atomic stores, RMWs and cmpxchgs instrumented");
STATISTIC(NumMemIntrinsics, "memcpy/memmove/memset instrumented");
STATISTIC(NumFlushes, "Flushes instrumented (intrinsics and inline asm)");
STATISTIC(NumFences, "Fences instrumented (sfence, mfence, seq_cst, lock)");
STATISTIC(NumLoads, "Loads instrumented (-pmkit-trace-loads)");
STATISTIC(NumSkippedLocal,
          "Accesses skipped: to the stack or a global, never PM");
STATISTIC(NumSkippedUnsupported,
          "Accesses skipped: atomic wider than 8 bytes (not traceable)");

static cl::opt<bool> TraceOpt("pmkit-trace", cl::Hidden, cl::init(false),
                              cl::desc("Run pmkit-trace last in the pipeline"));
static cl::opt<bool>
    TraceLoads("pmkit-trace-loads", cl::Hidden, cl::init(false),
               cl::desc("pmkit-trace: also report loads from PM"));

bool pmkit::traceEnabled() { return TraceOpt; }

namespace {

// Event kinds of the trace contract (include/pmkit/trace_format.h).
enum : uint32_t {
  EvStore = PMKIT_EV_STORE,
  EvRMW = PMKIT_EV_RMW,
  EvFence = PMKIT_EV_FENCE,
};

uint32_t fnv1a32(StringRef S) {
  uint32_t H = 2166136261u;
  for (unsigned char C : S) {
    H ^= C;
    H *= 16777619u;
  }
  return H ? H : 1;
}

class Tracer {
public:
  explicit Tracer(Module &M)
      : M(M), Ctx(M.getContext()), DL(M.getDataLayout()) {
    I8 = Type::getInt8Ty(Ctx);
    I16 = Type::getInt16Ty(Ctx);
    I32 = Type::getInt32Ty(Ctx);
    I64 = Type::getInt64Ty(Ctx);
    Ptr = PointerType::getUnqual(Ctx);
    Void = Type::getVoidTy(Ctx);
    IntPtr = DL.getIntPtrType(Ctx);
  }

  bool run();

private:
  Module &M;
  LLVMContext &Ctx;
  const DataLayout &DL;
  Type *I8, *I16, *I32, *I64, *Ptr, *Void, *IntPtr;
  FunctionCallee FStore, FNTStore, FWrite, FMemset, FLoad, FRead, FFlush,
      FFence, FAtomicBegin, FAtomicEnd, FLocs;
  GlobalVariable *Lo = nullptr, *Hi = nullptr;
  // Locations of this module: id -> text, in first-use order.
  SmallVector<std::pair<uint32_t, std::string>, 64> Locs;
  DenseMap<uint32_t, unsigned> LocIndex;

  void declareRuntime();
  uint32_t locOf(Instruction *I);
  bool neverPM(Value *Addr);
  Instruction *guard(Instruction *Before, Value *Addr);
  Value *toI64(IRBuilder<> &B, Value *V);
  bool valueFitsI64(Type *T);
  void instrumentStore(StoreInst *SI);
  void instrumentLoad(LoadInst *LI);
  void instrumentAtomic(Instruction *I, Value *Addr);
  void instrumentMem(CallBase *CB);
  void instrumentRead(CallBase *CB, Value *Ptr, Value *Len);
  void instrumentFlush(CallBase *CB, Value *Addr, uint32_t Kind);
  void instrumentFence(Instruction *I, uint32_t Kind, bool After);
  void emitLocTable();
};

void Tracer::declareRuntime() {
  FStore =
      M.getOrInsertFunction("__pmkit_trace_store", Void, Ptr, I64, I32, I32);
  FNTStore =
      M.getOrInsertFunction("__pmkit_trace_ntstore", Void, Ptr, I64, I32, I32);
  FWrite =
      M.getOrInsertFunction("__pmkit_trace_write", Void, Ptr, Ptr, I64, I32);
  FMemset =
      M.getOrInsertFunction("__pmkit_trace_memset", Void, Ptr, I32, I64, I32);
  FLoad = M.getOrInsertFunction("__pmkit_trace_load", Void, Ptr, I64, I32, I32);
  FRead = M.getOrInsertFunction("__pmkit_trace_read", Void, Ptr, I64, I32);
  FFlush = M.getOrInsertFunction("__pmkit_trace_flush", Void, Ptr, I32, I32);
  FFence = M.getOrInsertFunction("__pmkit_trace_fence", Void, I32, I32);
  FAtomicBegin = M.getOrInsertFunction("__pmkit_trace_atomic_begin", I32, Ptr);
  FAtomicEnd = M.getOrInsertFunction("__pmkit_trace_atomic_end", Void, I32, Ptr,
                                     I64, I32, I32, I32);
  FLocs = M.getOrInsertFunction("__pmkit_trace_locs", Void, Ptr, I32);
  auto Box = [&](StringRef Name) {
    GlobalVariable *G = M.getGlobalVariable(Name);
    if (!G)
      G = new GlobalVariable(M, IntPtr, false, GlobalValue::ExternalLinkage,
                             nullptr, Name);
    return G;
  };
  Lo = Box("__pmkit_pool_lo");
  Hi = Box("__pmkit_pool_hi");
}

uint32_t Tracer::locOf(Instruction *I) {
  std::string Text;
  if (const DILocation *L = I->getDebugLoc().get()) {
    StringRef File = L->getFilename();
    Text = (File.empty() ? StringRef("?") : File).str() + ":" +
           std::to_string(L->getLine()) + ":" + std::to_string(L->getColumn());
  } else {
    Text = I->getFunction()->getName().str() + ":?";
  }
  uint32_t Id = fnv1a32(Text);
  if (LocIndex.try_emplace(Id, Locs.size()).second)
    Locs.push_back({Id, std::move(Text)});
  return Id;
}

// The stack and globals are never in a pool: skip them without a test.
bool Tracer::neverPM(Value *Addr) {
  const Value *Obj = getUnderlyingObject(Addr, 12);
  return isa<AllocaInst>(Obj) || isa<GlobalVariable>(Obj);
}

// Splits before `Before` and returns the terminator of a new block that runs
// only when Addr is inside [__pmkit_pool_lo, __pmkit_pool_hi).
Instruction *Tracer::guard(Instruction *Before, Value *Addr) {
  IRBuilder<> B(Before);
  Value *A = B.CreatePtrToInt(Addr, IntPtr);
  Value *L = B.CreateLoad(IntPtr, Lo, "pmkit.lo");
  Value *H = B.CreateLoad(IntPtr, Hi, "pmkit.hi");
  Value *In = B.CreateAnd(B.CreateICmpUGE(A, L), B.CreateICmpULT(A, H));
  return SplitBlockAndInsertIfThen(In, Before, false);
}

bool Tracer::valueFitsI64(Type *T) {
  if (!(T->isIntegerTy() || T->isPointerTy() || T->isFloatingPointTy() ||
        T->isVectorTy()))
    return false;
  uint64_t Bits = DL.getTypeSizeInBits(T).getFixedValue();
  if (T->isIntegerTy())
    return Bits <= 64;
  return Bits == 8 || Bits == 16 || Bits == 32 || Bits == 64;
}

Value *Tracer::toI64(IRBuilder<> &B, Value *V) {
  Type *T = V->getType();
  if (T->isPointerTy())
    return B.CreatePtrToInt(V, I64);
  if (!T->isIntegerTy())
    V = B.CreateBitCast(
        V, IntegerType::get(Ctx, DL.getTypeSizeInBits(T).getFixedValue()));
  return B.CreateZExtOrTrunc(V, I64);
}

void Tracer::instrumentStore(StoreInst *SI) {
  Value *Addr = SI->getPointerOperand();
  if (neverPM(Addr)) {
    ++NumSkippedLocal;
    return;
  }
  if (SI->isAtomic()) {
    instrumentAtomic(SI, Addr);
    return;
  }
  Value *V = SI->getValueOperand();
  uint64_t Size = DL.getTypeStoreSize(V->getType()).getFixedValue();
  bool NT = SI->getMetadata(LLVMContext::MD_nontemporal) != nullptr;
  uint32_t Loc = locOf(SI);
  Instruction *Then = guard(SI, Addr);
  IRBuilder<> B(Then);
  if ((Size == 1 || Size == 2 || Size == 4 || Size == 8) &&
      valueFitsI64(V->getType())) {
    B.CreateCall(NT ? FNTStore : FStore,
                 {Addr, toI64(B, V), B.getInt32(Size), B.getInt32(Loc)});
    ++(NT ? NumNTStores : NumStores);
    return;
  }
  // Wider (vectors, aggregates, i128): spill the value and report its bytes.
  IRBuilder<> EB(&*SI->getFunction()->getEntryBlock().getFirstInsertionPt());
  AllocaInst *Tmp = EB.CreateAlloca(V->getType(), nullptr, "pmkit.wide");
  B.CreateStore(V, Tmp);
  B.CreateCall(FWrite, {Addr, Tmp, B.getInt64(Size), B.getInt32(Loc)});
  ++NumWideStores;
}

void Tracer::instrumentLoad(LoadInst *LI) {
  Value *Addr = LI->getPointerOperand();
  if (neverPM(Addr)) {
    ++NumSkippedLocal;
    return;
  }
  uint64_t Size = DL.getTypeStoreSize(LI->getType()).getFixedValue();
  if (!(Size == 1 || Size == 2 || Size == 4 || Size == 8) ||
      !valueFitsI64(LI->getType()))
    return;
  uint32_t Loc = locOf(LI);
  Instruction *Next = LI->getNextNode();
  Instruction *Then = guard(Next, Addr);
  IRBuilder<> B(Then);
  B.CreateCall(FLoad, {Addr, toI64(B, LI), B.getInt32(Size), B.getInt32(Loc)});
  ++NumLoads;
}

// Atomic store, atomicrmw or cmpxchg: begin before, end after with what it
// wrote. Always called (the runtime tests the address): a locked
// instruction fences even on DRAM.
void Tracer::instrumentAtomic(Instruction *I, Value *Addr) {
  Type *VT = nullptr;
  if (auto *SI = dyn_cast<StoreInst>(I))
    VT = SI->getValueOperand()->getType();
  else if (auto *RMW = dyn_cast<AtomicRMWInst>(I))
    VT = RMW->getValOperand()->getType();
  else
    VT = cast<AtomicCmpXchgInst>(I)->getNewValOperand()->getType();
  uint64_t Size = DL.getTypeStoreSize(VT).getFixedValue();
  if (Size > 8 || !valueFitsI64(VT)) {
    ++NumSkippedUnsupported;
    return;
  }
  uint32_t Loc = locOf(I);
  IRBuilder<> B(I);
  Value *Tok = B.CreateCall(FAtomicBegin, {Addr});
  B.SetInsertPoint(I->getNextNode());
  Value *NewV, *Kind;
  if (auto *SI = dyn_cast<StoreInst>(I)) {
    NewV = toI64(B, SI->getValueOperand());
    // A seq_cst store is an xchg on x86: a locked instruction.
    Kind = B.getInt32(
        SI->getOrdering() == AtomicOrdering::SequentiallyConsistent ? EvRMW
                                                                    : EvStore);
  } else if (auto *RMW = dyn_cast<AtomicRMWInst>(I)) {
    NewV = toI64(B, buildAtomicRMWValue(RMW->getOperation(), B, RMW,
                                        RMW->getValOperand()));
    Kind = B.getInt32(EvRMW);
  } else {
    auto *CX = cast<AtomicCmpXchgInst>(I);
    NewV = toI64(B, CX->getNewValOperand());
    Value *Ok = B.CreateExtractValue(CX, 1);
    Kind = B.CreateSelect(Ok, B.getInt32(EvRMW), B.getInt32(EvFence));
  }
  B.CreateCall(FAtomicEnd,
               {Tok, Addr, NewV, B.getInt32(Size), Kind, B.getInt32(Loc)});
  ++NumAtomics;
}

void Tracer::instrumentMem(CallBase *CB) {
  Value *Dst = CB->getArgOperand(0);
  if (neverPM(Dst)) {
    ++NumSkippedLocal;
    return;
  }
  uint32_t Loc = locOf(CB);
  Instruction *Then = guard(CB, Dst);
  IRBuilder<> B(Then);
  Value *Len = B.CreateZExtOrTrunc(CB->getArgOperand(2), I64);
  if (auto *MS = dyn_cast<MemSetInst>(CB))
    B.CreateCall(FMemset, {Dst, B.CreateZExt(MS->getValue(), I32), Len,
                           B.getInt32(Loc)});
  else if (isa<MemIntrinsic>(CB))
    B.CreateCall(FWrite, {Dst, CB->getArgOperand(1), Len, B.getInt32(Loc)});
  else if (CB->getCalledFunction()->getName() == "memset")
    B.CreateCall(FMemset, {Dst, B.CreateZExtOrTrunc(CB->getArgOperand(1), I32),
                           Len, B.getInt32(Loc)});
  else
    B.CreateCall(FWrite, {Dst, CB->getArgOperand(1), Len, B.getInt32(Loc)});
  ++NumMemIntrinsics;
}

// A read done by a library call (memcmp, strcmp, the source of memcpy):
// Len bytes, or a NUL-terminated string if Len is null.
void Tracer::instrumentRead(CallBase *CB, Value *P, Value *Len) {
  if (neverPM(P))
    return;
  uint32_t Loc = locOf(CB);
  Instruction *Then = guard(CB, P);
  IRBuilder<> B(Then);
  B.CreateCall(FRead, {P, Len ? B.CreateZExtOrTrunc(Len, I64) : B.getInt64(0),
                       B.getInt32(Loc)});
  ++NumLoads;
}

void Tracer::instrumentFlush(CallBase *CB, Value *Addr, uint32_t Kind) {
  IRBuilder<> B(CB);
  B.CreateCall(FFlush, {Addr, B.getInt32(Kind), B.getInt32(locOf(CB))});
  ++NumFlushes;
}

// Reported before the fence, or after a locked instruction (which must
// have happened for its ordering to count).
void Tracer::instrumentFence(Instruction *I, uint32_t Kind, bool After) {
  IRBuilder<> B(After ? I->getNextNode() : I);
  B.CreateCall(FFence, {B.getInt32(Kind), B.getInt32(locOf(I))});
  ++NumFences;
}

void Tracer::emitLocTable() {
  if (Locs.empty())
    return;
  StructType *Entry = StructType::get(Ctx, {I32, Ptr});
  SmallVector<Constant *, 64> Elems;
  for (auto &[Id, Text] : Locs) {
    Constant *Str = ConstantDataArray::getString(Ctx, Text);
    auto *G =
        new GlobalVariable(M, Str->getType(), true, GlobalValue::PrivateLinkage,
                           Str, "pmkit.trace.loc.str");
    G->setUnnamedAddr(GlobalValue::UnnamedAddr::Global);
    Elems.push_back(
        ConstantStruct::get(Entry, {ConstantInt::get(I32, Id),
                                    ConstantExpr::getPointerCast(G, Ptr)}));
  }
  ArrayType *AT = ArrayType::get(Entry, Elems.size());
  auto *Table =
      new GlobalVariable(M, AT, true, GlobalValue::PrivateLinkage,
                         ConstantArray::get(AT, Elems), "pmkit.trace.locs");
  Function *Ctor =
      Function::Create(FunctionType::get(Void, false),
                       GlobalValue::InternalLinkage, "pmkit.trace.ctor", M);
  IRBuilder<> B(BasicBlock::Create(Ctx, "", Ctor));
  B.CreateCall(FLocs, {Table, B.getInt32(Elems.size())});
  B.CreateRetVoid();
  appendToGlobalCtors(M, Ctor, 0);
}

bool Tracer::run() {
  declareRuntime();
  bool Changed = false;
  for (Function &F : M) {
    if (F.isDeclaration() || F.getName().startswith("__pmkit_trace_") ||
        F.getName().startswith("pmkit.trace."))
      continue;
    SmallVector<Instruction *, 64> Work;
    for (Instruction &I : instructions(F))
      if (isa<StoreInst>(I) || isa<LoadInst>(I) || isa<AtomicRMWInst>(I) ||
          isa<AtomicCmpXchgInst>(I) || isa<FenceInst>(I) || isa<CallBase>(I))
        Work.push_back(&I);
    for (Instruction *I : Work) {
      if (auto *SI = dyn_cast<StoreInst>(I)) {
        instrumentStore(SI);
      } else if (auto *LI = dyn_cast<LoadInst>(I)) {
        if (TraceLoads && !LI->isVolatile())
          instrumentLoad(LI);
      } else if (auto *RMW = dyn_cast<AtomicRMWInst>(I)) {
        instrumentAtomic(RMW, RMW->getPointerOperand());
      } else if (auto *CX = dyn_cast<AtomicCmpXchgInst>(I)) {
        instrumentAtomic(CX, CX->getPointerOperand());
      } else if (auto *FI = dyn_cast<FenceInst>(I)) {
        // Only a seq_cst fence is an instruction (mfence) on x86.
        if (FI->getOrdering() == AtomicOrdering::SequentiallyConsistent &&
            FI->getSyncScopeID() != SyncScope::SingleThread)
          instrumentFence(FI, FenceMfence, false);
      } else if (auto *CB = dyn_cast<CallBase>(I)) {
        if (auto *IA = dyn_cast<InlineAsm>(CB->getCalledOperand())) {
          AsmEffect E = asmEffect(IA->getAsmString());
          if (E.Flush) {
            Value *Addr = nullptr;
            for (Value *A : CB->args())
              if (A->getType()->isPointerTy()) {
                Addr = A;
                break;
              }
            if (Addr)
              instrumentFlush(CB, Addr, E.Flush);
          }
          if (E.Fence)
            instrumentFence(CB, E.Fence, E.Fence == FenceLocked);
          continue;
        }
        Function *Callee = CB->getCalledFunction();
        if (!Callee)
          continue;
        switch (Callee->getIntrinsicID()) {
        case Intrinsic::memcpy:
        case Intrinsic::memcpy_inline:
        case Intrinsic::memmove:
          if (TraceLoads)
            instrumentRead(CB, CB->getArgOperand(1), CB->getArgOperand(2));
          instrumentMem(CB);
          continue;
        case Intrinsic::memset:
        case Intrinsic::memset_inline:
          instrumentMem(CB);
          continue;
        case Intrinsic::x86_clwb:
          instrumentFlush(CB, CB->getArgOperand(0), FlushClwb);
          continue;
        case Intrinsic::x86_clflushopt:
          instrumentFlush(CB, CB->getArgOperand(0), FlushClflushopt);
          continue;
        case Intrinsic::x86_sse2_clflush:
          instrumentFlush(CB, CB->getArgOperand(0), FlushClflush);
          continue;
        case Intrinsic::x86_sse_sfence:
          instrumentFence(CB, FenceSfence, false);
          continue;
        case Intrinsic::x86_sse2_mfence:
          instrumentFence(CB, FenceMfence, false);
          continue;
        case Intrinsic::not_intrinsic:
          break;
        default:
          continue;
        }
        StringRef N = Callee->getName();
        if ((N == "memcpy" || N == "memmove" || N == "memset") &&
            CB->arg_size() == 3) {
          if (TraceLoads && N != "memset")
            instrumentRead(CB, CB->getArgOperand(1), CB->getArgOperand(2));
          instrumentMem(CB);
        } else if (TraceLoads) {
          // Library functions that read PM the pass cannot see into.
          if ((N == "memcmp" || N == "bcmp") && CB->arg_size() == 3) {
            instrumentRead(CB, CB->getArgOperand(0), CB->getArgOperand(2));
            instrumentRead(CB, CB->getArgOperand(1), CB->getArgOperand(2));
          } else if (N == "strncmp" && CB->arg_size() == 3) {
            instrumentRead(CB, CB->getArgOperand(0), nullptr);
            instrumentRead(CB, CB->getArgOperand(1), nullptr);
          } else if (N == "strcmp" && CB->arg_size() == 2) {
            instrumentRead(CB, CB->getArgOperand(0), nullptr);
            instrumentRead(CB, CB->getArgOperand(1), nullptr);
          } else if ((N == "strlen" || N == "strdup") && CB->arg_size() == 1) {
            instrumentRead(CB, CB->getArgOperand(0), nullptr);
          } else if ((N == "strcpy" || N == "stpcpy") && CB->arg_size() == 2) {
            instrumentRead(CB, CB->getArgOperand(1), nullptr);
          }
        }
        continue;
      } else {
        continue;
      }
      Changed = true;
    }
    Changed |= !Work.empty();
  }
  emitLocTable();
  return Changed || !Locs.empty();
}

} // namespace

PreservedAnalyses pmkit::TracePass::run(Module &M, ModuleAnalysisManager &) {
  if (!Tracer(M).run())
    return PreservedAnalyses::all();
  return PreservedAnalyses::none();
}
