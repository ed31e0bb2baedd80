// SPDX-License-Identifier: Apache-2.0
//
// Trace.cpp -- the pmkit-trace module pass. Each plain access whose address
// may be in a pool gets an inline bounding-box test (__pmkit_pool_lo/hi of
// abi.h) guarding a call to the recorder, so DRAM accesses cost two loads
// and two compares; accesses the pass can prove are to the stack or to a
// global are not instrumented at all. Atomic accesses are bracketed by
// __pmkit_trace_atomic_begin/end so that their records come in the order
// the accesses took effect; flushes and fences are always reported, a
// locked atomic as a fence wherever it is, inline asm by what its machine
// code does (Common/PersistOps.h). Buffers that read, fread, clock_gettime
// and the like fill are recorded after the call; other calls to declared
// functions report the pool pointers they are given (CALL events). A module
// constructor registers the module's source locations ("file:line:col",
// id = 32-bit FNV-1a of the text). Entry point: TracePass::run. Run with
//   opt-16 -load-pass-plugin=pmkit-passes.so -passes=pmkit-trace -S in.ll

#include "Trace/Trace.h"

#include "Common/Diagnose.h"
#include "Common/PersistOps.h"
#include "Common/SourceLoc.h"
#include "Common/Target.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Statistic.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/BinaryFormat/Dwarf.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DebugInfo.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Operator.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Debug.h"
#include "llvm/TargetParser/Triple.h"
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
STATISTIC(NumAsmWrites, "Inline asm writes through an operand instrumented");
STATISTIC(NumUnplacedAsmWrites,
          "Inline asm writes at an address no operand names (not recorded)");
STATISTIC(NumMemIntrinsics, "memcpy/memmove/memset instrumented");
STATISTIC(NumFlushes, "Flushes instrumented (intrinsics and inline asm)");
STATISTIC(NumFences, "Fences instrumented (sfence, mfence, seq_cst, lock)");
STATISTIC(NumLoads, "Loads instrumented (-pmkit-trace-loads)");
STATISTIC(NumSkippedLocal,
          "Accesses skipped: to the stack or a global, never PM");
STATISTIC(NumSkippedUnsupported,
          "Accesses skipped: atomic wider than 8 bytes (not traceable)");
STATISTIC(NumUnplacedFlushes,
          "Flushes in inline asm skipped: address not an operand");
STATISTIC(NumLibWrites, "Library calls recorded as writes after they return");
STATISTIC(NumCalls, "Pointers given to uninstrumented calls (CALL events)");

static cl::opt<bool>
    TraceLoads("pmkit-trace-loads", cl::Hidden, cl::init(false),
               cl::desc("pmkit-trace: also report loads from PM"));

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
      FFence, FAtomicBegin, FAtomicEnd, FLocs, FCall, FStrnlen, FEnter, FLeave,
      FDepth;
  GlobalVariable *Lo = nullptr, *Hi = nullptr;
  // Locations of this module: id -> text, in first-use order.
  SmallVector<std::pair<uint32_t, std::string>, 64> Locs;
  DenseMap<uint32_t, unsigned> LocIndex;

  void declareRuntime();
  uint32_t locOf(Instruction *I, Value *Addr = nullptr);
  std::string fieldOf(Value *Addr);
  StringMap<const DICompositeType *> DIStructs; // by name, from debug info
  bool DIStructsRead = false;
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
  void instrumentAsm(CallBase *CB);
  bool instrumentAsmStores(CallBase *CB, const AsmEffect &E, uint32_t Loc,
                           Instruction *&Last);
  const Value *instrumentLibWrite(CallBase *CB);
  void instrumentCall(CallBase *CB, const Value *Recorded);
  void emitLocTable();
  bool mayReachTraced(CallBase *CB, const TargetLibraryInfo &TLI);
  void bracketCalls(Function &F, ArrayRef<CallBase *> Calls);
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
  FCall = M.getOrInsertFunction("__pmkit_trace_call", Void, Ptr, I32);
  FEnter = M.getOrInsertFunction("__pmkit_trace_enter", I32, I32);
  FLeave = M.getOrInsertFunction("__pmkit_trace_leave", Void, I32);
  FDepth = M.getOrInsertFunction("__pmkit_trace_depth", I32);
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

// The debug-info type behind T: typedefs, const and volatile removed.
const DIType *plainType(const DIType *T) {
  while (auto *D = dyn_cast_or_null<DIDerivedType>(T)) {
    unsigned Tag = D->getTag();
    if (Tag != dwarf::DW_TAG_typedef && Tag != dwarf::DW_TAG_const_type &&
        Tag != dwarf::DW_TAG_volatile_type && Tag != dwarf::DW_TAG_atomic_type)
      break;
    T = D->getBaseType();
  }
  return T;
}

// The struct field an access address names, as the debug info spells it
// (`rec.pair[1]`, `log.entry[?][0]` for an index only known at run time):
// from a GEP into a named struct with constant field indices; "" when
// there is none or no debug info describes the struct.
std::string Tracer::fieldOf(Value *Addr) {
  auto *G =
      dyn_cast_or_null<GEPOperator>(Addr ? Addr->stripPointerCasts() : nullptr);
  if (!G || G->getNumIndices() < 2)
    return "";
  auto *ST = dyn_cast<StructType>(G->getSourceElementType());
  if (!ST || !ST->hasName())
    return "";
  if (!DIStructsRead) {
    DIStructsRead = true;
    DebugInfoFinder F;
    F.processModule(M);
    for (const DIType *T : F.types())
      if (auto *C = dyn_cast<DICompositeType>(T))
        if (!C->getName().empty() && !C->isForwardDecl() &&
            (C->getTag() == dwarf::DW_TAG_structure_type ||
             C->getTag() == dwarf::DW_TAG_class_type))
          DIStructs.try_emplace(C->getName(), C);
  }
  StringRef Name = ST->getName();
  for (StringRef Pre : {"struct.", "class.", "union."})
    Name.consume_front(Pre);
  Name = Name.split(".").first; // a renamed duplicate: struct.rec.12
  auto It = DIStructs.find(Name);
  if (It == DIStructs.end())
    return "";
  const DIType *DT = It->second;
  std::string Out = Name.str();
  Type *T = ST;
  for (auto Idx = G->idx_begin() + 1; Idx != G->idx_end(); ++Idx) {
    auto *CI = dyn_cast<ConstantInt>(*Idx);
    if (auto *S = dyn_cast<StructType>(T)) {
      auto *C = dyn_cast_or_null<DICompositeType>(DT);
      if (!CI || !C)
        break;
      uint64_t K = CI->getZExtValue();
      uint64_t Bits = DL.getStructLayout(S)->getElementOffsetInBits(K);
      const DIDerivedType *Member = nullptr;
      for (const DINode *E : C->getElements())
        if (auto *D = dyn_cast<DIDerivedType>(E))
          if (D->getTag() == dwarf::DW_TAG_member && !D->isStaticMember() &&
              D->getOffsetInBits() <= Bits &&
              Bits < D->getOffsetInBits() +
                         std::max<uint64_t>(D->getSizeInBits(), 1)) {
            Member = D;
            break;
          }
      if (!Member || Member->getName().empty())
        break;
      Out += "." + Member->getName().str();
      T = S->getElementType((unsigned)K);
      DT = plainType(Member->getBaseType());
    } else if (auto *A = dyn_cast<ArrayType>(T)) {
      Out += CI ? "[" + std::to_string(CI->getZExtValue()) + "]" : "[?]";
      T = A->getElementType();
      // A C array's debug type is one node for all its dimensions: the
      // element's composite type, if any, is past them.
      if (auto *C = dyn_cast_or_null<DICompositeType>(DT);
          C && C->getTag() == dwarf::DW_TAG_array_type && !T->isArrayTy())
        DT = plainType(C->getBaseType());
    } else {
      break;
    }
  }
  return Out == Name ? "" : Out;
}

// "file:line:col" of a debug location; "file:? in f" for line 0, a place
// the compiler merged from several lines (two identical calls).
static std::string placeOf(const DILocation *L) {
  StringRef File = L->getFilename();
  std::string Text = (File.empty() ? StringRef("?") : File).str() + ":";
  if (!L->getLine()) {
    const DISubprogram *SP = L->getScope()->getSubprogram();
    return Text + "? in " + (SP ? SP->getName().str() : std::string("?"));
  }
  return Text + std::to_string(L->getLine()) + ":" +
         std::to_string(L->getColumn());
}

uint32_t Tracer::locOf(Instruction *I, Value *Addr) {
  std::string Text;
  if (const DILocation *L = I->getDebugLoc().get()) {
    Text = placeOf(L);
    if (std::string Field = fieldOf(Addr); !Field.empty())
      Text += " " + Field;
    // Code inlined here: where it was inlined, innermost first.
    for (const DILocation *At = L->getInlinedAt(); At; At = At->getInlinedAt())
      Text += " <- " + placeOf(At);
  } else {
    Text = I->getFunction()->getName().str() + ":?";
    if (std::string Field = fieldOf(Addr); !Field.empty())
      Text += " " + Field;
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
  if (SI->isAtomic()) { // a seq_cst one fences wherever it stores
    instrumentAtomic(SI, Addr);
    return;
  }
  if (neverPM(Addr)) {
    ++NumSkippedLocal;
    return;
  }
  Value *V = SI->getValueOperand();
  uint64_t Size = DL.getTypeStoreSize(V->getType()).getFixedValue();
  bool NT = SI->getMetadata(LLVMContext::MD_nontemporal) != nullptr;
  uint32_t Loc = locOf(SI, Addr);
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
  uint32_t Loc = locOf(LI, Addr);
  Instruction *Next = LI->getNextNode();
  Instruction *Then = guard(Next, Addr);
  IRBuilder<> B(Then);
  B.CreateCall(FLoad, {Addr, toI64(B, LI), B.getInt32(Size), B.getInt32(Loc)});
  ++NumLoads;
}

// Whether x86-64 runs an atomic access as a locked instruction, a fence
// for persistence: every atomicrmw and cmpxchg (lock xadd, lock cmpxchg,
// xchg, a cmpxchg loop) and seq_cst store (xchg), and every atomic wider
// than 8 bytes (cmpxchg16b, or a libcall that takes a lock) -- except an
// `atomicrmw or 0` whose result is unused, for which the backend emits
// nothing unless it is seq_cst and not single-thread (then a locked or on
// the stack).
static bool isLocked(Instruction *I, uint64_t Size) {
  if (auto *SI = dyn_cast<StoreInst>(I))
    return Size > 8 ||
           SI->getOrdering() == AtomicOrdering::SequentiallyConsistent;
  if (auto *RMW = dyn_cast<AtomicRMWInst>(I)) {
    auto *K = dyn_cast<ConstantInt>(RMW->getValOperand());
    if (RMW->getOperation() == AtomicRMWInst::Or && K && K->isZero() &&
        RMW->use_empty())
      return RMW->getOrdering() == AtomicOrdering::SequentiallyConsistent &&
             RMW->getSyncScopeID() != SyncScope::SingleThread;
  }
  return true;
}

// Atomic store, atomicrmw or cmpxchg: begin before, end after with what it
// wrote (the runtime tests the address: on DRAM a locked instruction is
// still a fence). One that can only be on the stack or a global is not
// bracketed: if it is locked, only end is called after it, with token -1
// (not in a pool), and records the fence.
void Tracer::instrumentAtomic(Instruction *I, Value *Addr) {
  Type *VT = nullptr;
  if (auto *SI = dyn_cast<StoreInst>(I))
    VT = SI->getValueOperand()->getType();
  else if (auto *RMW = dyn_cast<AtomicRMWInst>(I))
    VT = RMW->getValOperand()->getType();
  else
    VT = cast<AtomicCmpXchgInst>(I)->getNewValOperand()->getType();
  uint64_t Size = DL.getTypeStoreSize(VT).getFixedValue();
  bool Locked = isLocked(I, Size);
  auto *RMW = dyn_cast<AtomicRMWInst>(I);
  if (RMW && !Locked) // the `or 0` the backend drops: no store, no fence
    return;
  bool Local = neverPM(Addr);
  if (Local || Size > 8 || !valueFitsI64(VT)) {
    ++(Local ? NumSkippedLocal : NumSkippedUnsupported);
    if (Locked) {
      IRBuilder<> B(I->getNextNode());
      B.CreateCall(FAtomicEnd,
                   {B.getInt32(-1), Addr, B.getInt64(0), B.getInt32(0),
                    B.getInt32(EvRMW), B.getInt32(locOf(I))});
      ++NumFences;
    }
    return;
  }
  uint32_t Loc = locOf(I, Addr);
  IRBuilder<> B(I);
  Value *Tok = B.CreateCall(FAtomicBegin, {Addr});
  B.SetInsertPoint(I->getNextNode());
  Value *NewV, *Kind;
  if (auto *SI = dyn_cast<StoreInst>(I)) {
    NewV = toI64(B, SI->getValueOperand());
    // A seq_cst store is an xchg on x86: a locked instruction.
    Kind = B.getInt32(Locked ? EvRMW : EvStore);
  } else if (RMW) {
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
  uint32_t Loc = locOf(CB, Dst);
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

// Inline asm, judged by its machine code (Common/PersistOps.h): its
// flushes and fences in the order they execute, each flush at the address
// its operand holds. They are reported before the statement, or after it if
// it holds a locked instruction (which must have happened for its ordering
// to count). A flush whose address is no operand is not reported: a missing
// flush can only add crash images, a wrong one could hide some.
// The writes an asm statement makes through its operands (AsmDecode),
// recorded once it has run with what the memory then holds: a locked write
// of at most 8 bytes as an atomic RMW (bracketed like an IR atomic, so no
// other thread's event is recorded between the write and its record; a
// cmpxchg that failed is recorded as a write of the value that was there),
// anything else as a write of the bytes. Returns whether a locked write was
// recorded (its event stands for the statement's locked fence).
bool Tracer::instrumentAsmStores(CallBase *CB, const AsmEffect &E, uint32_t Loc,
                                 Instruction *&Last) {
  bool Locked = false;
  for (const AsmMem &Mm : E.Mem) {
    if (!Mm.Store)
      continue;
    if (Mm.Arg < 0) {
      ++NumUnplacedAsmWrites;
      pmkit::diagnoseAt(
          *CB,
          Twine(DEBUG_TYPE) +
              ": inline asm writes memory at an address no operand "
              "names: the trace does not record that write (if it "
              "may be PM, pass the address as an operand)",
          DS_Warning);
      continue;
    }
    Value *A = CB->getArgOperand(Mm.Arg);
    if (A->getType()->isIntegerTy()) {
      IRBuilder<> B(CB);
      A = B.CreateIntToPtr(B.CreateZExtOrTrunc(A, IntPtr), Ptr);
    }
    if (!A->getType()->isPointerTy() || neverPM(A))
      continue;
    uint64_t Size = Mm.Size;
    if (!Size)
      if (Type *T = CB->getParamElementType(Mm.Arg))
        Size = DL.getTypeStoreSize(T);
    if (!Size)
      Size = 8;
    IRBuilder<> B(CB);
    if (Mm.Disp)
      A = B.CreateGEP(I8, A, B.getInt64(Mm.Disp));
    // Every record after the statement goes after the last one made (Last):
    // nothing of this thread may be recorded between an atomic's begin and
    // end, whose number is taken at the begin.
    if (Mm.Locked && Size <= 8 && !Locked) {
      Value *Tok = B.CreateCall(FAtomicBegin, {A});
      B.SetInsertPoint(Last->getNextNode());
      Value *V = B.CreateAlignedLoad(B.getIntNTy(8 * Size), A, Align(1));
      Last = B.CreateCall(FAtomicEnd,
                          {Tok, A, B.CreateZExt(V, I64), B.getInt32(Size),
                           B.getInt32(EvRMW), B.getInt32(Loc)});
      Locked = true;
    } else {
      B.SetInsertPoint(Last->getNextNode());
      Last = B.CreateCall(FWrite, {A, A, B.getInt64(Size), B.getInt32(Loc)});
    }
    ++NumAsmWrites;
  }
  return Locked;
}

void Tracer::instrumentAsm(CallBase *CB) {
  AsmEffect E = asmEffect(*CB);
  if (!E.Decoded) { // the text rules: the first pointer operand
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
      instrumentFence(CB, E.Fence,
                      E.Fence == FenceLocked && !CB->isTerminator());
    return;
  }
  bool After = !CB->isTerminator() && any_of(E.Ops, [](const AsmOp &Op) {
    return !Op.IsFlush && Op.Kind == FenceLocked;
  });
  uint32_t Loc = locOf(CB);
  Instruction *Last = CB;
  bool LockedStore =
      !CB->isTerminator() && instrumentAsmStores(CB, E, Loc, Last);
  IRBuilder<> B(After ? Last->getNextNode() : CB);
  for (const AsmOp &Op : E.Ops) {
    if (!Op.IsFlush && Op.Kind == FenceLocked && LockedStore)
      continue; // the locked write's event is the fence
    if (!Op.IsFlush) {
      B.CreateCall(FFence, {B.getInt32(Op.Kind), B.getInt32(Loc)});
      ++NumFences;
      continue;
    }
    Value *A = Op.Arg >= 0 ? CB->getArgOperand(Op.Arg) : nullptr;
    if (A && A->getType()->isIntegerTy())
      A = B.CreateIntToPtr(B.CreateZExtOrTrunc(A, IntPtr), Ptr);
    if (!A || !A->getType()->isPointerTy()) {
      ++NumUnplacedFlushes;
      continue;
    }
    if (Op.Disp)
      A = B.CreateGEP(I8, A, B.getInt64(Op.Disp));
    B.CreateCall(FFlush, {A, B.getInt32(Op.Kind), B.getInt32(Loc)});
    ++NumFlushes;
  }
}

namespace {
// Library calls that write into a buffer they are given, recorded as a
// write of that buffer once they return: argument Dst, with a length
//   Ret       the call's result, if positive (read, recv, getrandom);
//   Items     (result + 1) * argument A, at most argument A * argument B
//             (fread: a partial item may have been written too);
//   String    up to the NUL, at most argument A bytes (fgets);
//   Fixed     Bytes (a struct the call fills; x86-64 glibc sizes).
// A buffer recorded longer than the call wrote costs nothing: bytes it left
// alone are recorded with the value they hold.
enum class LenFrom { Ret, Items, String, Fixed };
struct LibWriter {
  const char *Name;
  unsigned NArgs, Dst;
  LenFrom How;
  unsigned A = 0, B = 0;
  uint64_t Bytes = 0;
};
const LibWriter LibWriters[] = {
    {"read", 3, 1, LenFrom::Ret},
    {"__read_chk", 4, 1, LenFrom::Ret},
    {"pread", 4, 1, LenFrom::Ret},
    {"pread64", 4, 1, LenFrom::Ret},
    {"__pread_chk", 5, 1, LenFrom::Ret},
    {"__pread64_chk", 5, 1, LenFrom::Ret},
    {"recv", 4, 1, LenFrom::Ret},
    {"__recv_chk", 5, 1, LenFrom::Ret},
    {"recvfrom", 6, 1, LenFrom::Ret},
    {"__recvfrom_chk", 7, 1, LenFrom::Ret},
    {"getrandom", 3, 0, LenFrom::Ret},
    {"fread", 4, 0, LenFrom::Items, 1, 2},
    {"fread_unlocked", 4, 0, LenFrom::Items, 1, 2},
    {"__fread_chk", 5, 0, LenFrom::Items, 2, 3},
    {"fgets", 3, 0, LenFrom::String, 1},
    {"fgets_unlocked", 3, 0, LenFrom::String, 1},
    {"__fgets_chk", 4, 0, LenFrom::String, 2},
    {"clock_gettime", 2, 1, LenFrom::Fixed, 0, 0, 16}, // struct timespec
    {"gettimeofday", 2, 0, LenFrom::Fixed, 0, 0, 16},  // struct timeval
    {"time", 1, 0, LenFrom::Fixed, 0, 0, 8},           // time_t
    {"localtime_r", 2, 1, LenFrom::Fixed, 0, 0, 56},   // struct tm
    {"gmtime_r", 2, 1, LenFrom::Fixed, 0, 0, 56},
};
} // namespace

// A call of LibWriters: after it returns, the bytes it wrote into a pool
// are recorded as a write. Returns the buffer so recorded, or null.
const Value *Tracer::instrumentLibWrite(CallBase *CB) {
  // An invoke returns to another block; a musttail call must stay last.
  auto *CI = dyn_cast<CallInst>(CB);
  if (!CI || CI->isMustTailCall())
    return nullptr;
  StringRef N = CI->getCalledFunction()->getName();
  const LibWriter *W =
      find_if(LibWriters, [&](const LibWriter &L) { return N == L.Name; });
  if (W == std::end(LibWriters) || CI->arg_size() != W->NArgs)
    return nullptr;
  Value *Dst = CI->getArgOperand(W->Dst);
  bool RetInt = CI->getType()->isIntegerTy();
  auto IntArg = [&](unsigned I) {
    return CI->getArgOperand(I)->getType()->isIntegerTy();
  };
  if (!Dst->getType()->isPointerTy() ||
      ((W->How == LenFrom::Ret || W->How == LenFrom::Items) && !RetInt) ||
      (W->How == LenFrom::Items && !(IntArg(W->A) && IntArg(W->B))) ||
      (W->How == LenFrom::String && !IntArg(W->A)))
    return nullptr;
  if (neverPM(Dst))
    return Dst;
  uint32_t Loc = locOf(CI);
  Instruction *Then = guard(CI->getNextNode(), Dst);
  IRBuilder<> B(Then);
  Value *Len = nullptr, *Zero = B.getInt64(0);
  switch (W->How) {
  case LenFrom::Ret: {
    Value *R = B.CreateSExtOrTrunc(CI, I64);
    Len = B.CreateSelect(B.CreateICmpSGT(R, Zero), R, Zero);
    break;
  }
  case LenFrom::Items: {
    Value *Size = B.CreateZExtOrTrunc(CI->getArgOperand(W->A), I64);
    Value *Max =
        B.CreateMul(Size, B.CreateZExtOrTrunc(CI->getArgOperand(W->B), I64));
    Value *Got = B.CreateMul(
        Size, B.CreateAdd(B.CreateZExtOrTrunc(CI, I64), B.getInt64(1)));
    Len = B.CreateSelect(B.CreateICmpULT(Got, Max), Got, Max);
    break;
  }
  case LenFrom::String: {
    if (!FStrnlen)
      FStrnlen = M.getOrInsertFunction("strnlen", I64, Ptr, I64);
    Value *Cap = B.CreateSExtOrTrunc(CI->getArgOperand(W->A), I64);
    Cap = B.CreateSelect(B.CreateICmpSGT(Cap, Zero), Cap, Zero);
    Value *S = B.CreateAdd(B.CreateCall(FStrnlen, {Dst, Cap}), B.getInt64(1));
    Len = B.CreateSelect(B.CreateICmpULT(S, Cap), S, Cap);
    break;
  }
  case LenFrom::Fixed:
    Len = B.getInt64(W->Bytes);
    break;
  }
  B.CreateCall(FWrite, {Dst, Dst, Len, B.getInt32(Loc)});
  ++NumLibWrites;
  return Dst;
}

// A call to a function only declared here (the C library, another module):
// a CALL event for each pointer into a pool it is given, before the call,
// except the buffer recorded as its write and pointers it may only read.
// The pmkit runtime's functions (pmkit_*, its internal pmk_*, pmkit::) are
// traced themselves.
void Tracer::instrumentCall(CallBase *CB, const Value *Recorded) {
  StringRef N = CB->getCalledFunction()->getName();
  if (N.startswith("pmkit_") || N.startswith("pmk_") ||
      N.startswith("__pmkit_") || N.startswith("_ZN5pmkit") ||
      CB->onlyReadsMemory())
    return;
  SmallPtrSet<const Value *, 4> Seen;
  for (unsigned I = 0; I < CB->arg_size(); I++) {
    Value *A = CB->getArgOperand(I);
    if (!A->getType()->isPointerTy() || A == Recorded ||
        isa<ConstantPointerNull>(A) || isa<UndefValue>(A) ||
        CB->onlyReadsMemory(I) || !Seen.insert(A).second || neverPM(A))
      continue;
    uint32_t Loc = locOf(CB);
    Instruction *Then = guard(CB, A);
    IRBuilder<> B(Then);
    B.CreateCall(FCall, {A, B.getInt32(Loc)});
    ++NumCalls;
  }
}

// Whether a call may run instrumented code, so that events under it need
// its call site in their stack: not an intrinsic, inline asm, a recorder
// hook or a C library function (those run nothing traced; a callback
// they make, qsort's comparator, loses the call site).
bool Tracer::mayReachTraced(CallBase *CB, const TargetLibraryInfo &TLI) {
  if (CB->isInlineAsm() || isa<CallBrInst>(CB))
    return false;
  if (auto *CI = dyn_cast<CallInst>(CB); CI && CI->isMustTailCall())
    return false; // nothing may follow it
  Function *Callee = CB->getCalledFunction();
  if (!Callee)
    return true; // through a pointer: anything
  LibFunc LF;
  StringRef N = Callee->getName();
  return !Callee->isIntrinsic() && !N.startswith("__pmkit_") &&
         !N.startswith("pmkit.trace.") && !N.startswith("__cxa_") &&
         !N.startswith("_Unwind_") && !TLI.getLibFunc(*Callee, LF) &&
         none_of(LibWriters, [&](const LibWriter &L) { return N == L.Name; });
}

// The call stack of abi.h: each call brackets as
//   d = __pmkit_trace_enter(site); call; __pmkit_trace_leave(d)
// A function with invokes takes d = __pmkit_trace_depth() once on entry and
// also leaves to it in every landing pad: an exception that unwound frames
// that never left finds the stack as deep as the frame that caught it.
void Tracer::bracketCalls(Function &F, ArrayRef<CallBase *> Calls) {
  if (Calls.empty())
    return;
  Value *Base = nullptr;
  if (any_of(Calls, [](CallBase *CB) { return isa<InvokeInst>(CB); })) {
    IRBuilder<> B(&*F.getEntryBlock().getFirstInsertionPt());
    Base = B.CreateCall(FDepth, {}, "pmkit.depth");
  }
  SmallPtrSet<BasicBlock *, 8> Done;
  for (CallBase *CB : Calls) {
    IRBuilder<> B(CB);
    Value *D = B.CreateCall(FEnter, {B.getInt32(locOf(CB))});
    if (Base)
      D = Base;
    if (auto *II = dyn_cast<InvokeInst>(CB)) {
      for (BasicBlock *BB : {II->getNormalDest(), II->getUnwindDest()})
        if (Done.insert(BB).second && BB->getFirstInsertionPt() != BB->end()) {
          IRBuilder<> A(&*BB->getFirstInsertionPt());
          A.CreateCall(FLeave, {Base});
        }
    } else {
      IRBuilder<> A(CB->getNextNode());
      A.CreateCall(FLeave, {D});
    }
  }
}

// Registers the module's locations with a constructor -- also when it has
// none, so that the runtime knows an instrumented module is in the process
// (PMKIT_CRASH_POINTS=stores needs one).
void Tracer::emitLocTable() {
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
  TargetLibraryInfoImpl TLII(Triple(M.getTargetTriple()));
  bool Changed = false;
  for (Function &F : M) {
    // (A function the pass may not change goes untraced; its writes to a
    // pool, if any, show as writes the trace missed, and the explorer
    // gives no verdict.)
    if (F.isDeclaration() || F.getName().startswith("__pmkit_trace_") ||
        F.getName().startswith("pmkit.trace.") ||
        !pmkit::mustNotInstrument(F).empty())
      continue;
    SmallVector<Instruction *, 64> Work;
    SmallVector<CallBase *, 16> Calls;
    TargetLibraryInfo TLI(TLII, &F);
    for (Instruction &I : instructions(F)) {
      if (isa<StoreInst>(I) || isa<LoadInst>(I) || isa<AtomicRMWInst>(I) ||
          isa<AtomicCmpXchgInst>(I) || isa<FenceInst>(I) || isa<CallBase>(I))
        Work.push_back(&I);
      if (auto *CB = dyn_cast<CallBase>(&I); CB && mayReachTraced(CB, TLI))
        Calls.push_back(CB);
    }
    LLVM_DEBUG(dbgs() << DEBUG_TYPE ": " << F.getName() << ": " << Work.size()
                      << " accesses and calls to trace\n");
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
        if (isa<InlineAsm>(CB->getCalledOperand())) {
          instrumentAsm(CB);
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
          continue;
        }
        if (Callee->isDeclaration())
          instrumentCall(CB, instrumentLibWrite(CB));
        if (TraceLoads) {
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
    bracketCalls(F, Calls);
    Changed |= !Work.empty();
  }
  emitLocTable();
  return Changed || !Locs.empty();
}

} // namespace

PreservedAnalyses pmkit::TracePass::run(Module &M, ModuleAnalysisManager &) {
  if (!pmkit::targetSupported(M, PassName))
    return PreservedAnalyses::all();
  if (!Tracer(M).run())
    return PreservedAnalyses::all();
  return PreservedAnalyses::none();
}
