// SPDX-License-Identifier: Apache-2.0
//
// PMAlias.cpp -- the PM pointer analysis (see PMAlias.h). Constraints are
// generated once per module (PMAliasSolver's constructor) and solved by a
// difference-propagation worklist: each node -- an SSA value, or the content
// of one abstract location (object, byte offset) -- has a points-to set of
// locations; copy edges carry a byte offset (GEPs), and loads and stores add
// copy edges from and to location contents as the address's set grows. An
// access at an offset the analysis cannot follow (a variable index, integer
// arithmetic) collapses its object into one cell. What the module cannot
// see is one "unknown" object that may be PM: parameters of functions
// callable from outside, results of unknown external calls and indirect
// calls, integers turned into pointers, and memory written by unknown code.
// So the answer is sound for a single translation unit; whole-program builds
// (pmkit cc links the bitcode first) make it precise. Entry points:
// PMAliasAnalysis::run and PMAliasPrinterPass::run. Run the printer with
//   opt-16 -load-pass-plugin=pmkit-passes.so -passes=pmkit-pmalias \
//     -disable-output in.ll

#include "PMAlias/PMAlias.h"
#include "Common/Attributes.h"

#include "Common/Access.h"
#include "Common/CallEffects.h"
#include "Common/SourceLoc.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SparseBitVector.h"
#include "llvm/ADT/Statistic.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DataLayout.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Operator.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/LineIterator.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <climits>
#include <vector>

using namespace llvm;

#define DEBUG_TYPE "pmkit-pmalias"

STATISTIC(NumPMSites, "PM allocation sites found");
STATISTIC(NumNodes, "Constraint nodes");
STATISTIC(NumCollapsed, "Objects collapsed to one cell (unknown offsets)");

static cl::opt<std::string> ConfigFile(
    "pmkit-pmalias-config", cl::Hidden,
    cl::desc("pmkit-pmalias: file listing PM allocators, one per line: "
             "'<function> return' or '<function> out <argument index>'"));

namespace pmkit {

namespace {

// A set's members, copied so that the set may change while they are used.
SmallVector<unsigned, 8> members(const SparseBitVector<> &S) {
  SmallVector<unsigned, 8> V;
  for (unsigned X : S)
    V.push_back(X);
  return V;
}

using NodeId = uint32_t;
using LocId = uint32_t;
using ObjId = uint32_t;
constexpr int64_t AnyOff = INT64_MIN;

enum class ObjKind { Unknown, Stack, Global, Heap, PM, Func };

struct Obj {
  ObjKind Kind;
  std::string Why; // for reports: what made it
  bool Collapsed = false;
};

struct CopyEdge {
  NodeId To;
  int64_t Delta; // AnyOff: to some offset of the same object
};

struct Node {
  SparseBitVector<> Pts, Done; // Done: the part already propagated
  SmallVector<CopyEdge, 2> Copies;
  SmallVector<NodeId, 1> LoadDsts;  // this node is the address of loads
  SmallVector<NodeId, 1> StoreSrcs; // ... and of stores of these values
};

// How an external function makes PM: its return value, or the pointer it
// stores through argument Out.
struct PMAllocator {
  bool Return = true;
  unsigned Out = 0;
};

// Built-in PM allocators: pmkit's pool API, libpmem, libpmem2, libpmemobj.
const struct {
  const char *Name;
  PMAllocator How;
} BuiltinAllocators[] = {
    {"pmkit_alloc", {false, 2}},   {"pmkit_zalloc", {false, 2}},
    {"pmkit_root", {false, 2}},    {"pmkit_pool_base", {true, 0}},
    {"pmkit_ptr", {true, 0}},      {"pmem_map_file", {true, 0}},
    {"pmemobj_direct", {true, 0}}, {"pmem2_map_get_address", {true, 0}},
};

// Adds the allocators of -pmkit-pmalias-config to `Out`; a file that
// cannot be read or a malformed line is an error on M's context.
void readAllocatorConfig(Module &M, StringMap<PMAllocator> &Out) {
  if (ConfigFile.empty())
    return;
  auto Buf = MemoryBuffer::getFile(ConfigFile);
  if (!Buf) {
    M.getContext().emitError("pmkit-pmalias: cannot read " + ConfigFile + ": " +
                             Buf.getError().message());
    return;
  }
  for (line_iterator L(**Buf, /*SkipBlanks=*/true, '#'); !L.is_at_end(); ++L) {
    SmallVector<StringRef, 3> F;
    L->split(F, ' ', -1, false);
    unsigned Arg = 0;
    if (F.size() == 2 && F[1] == "return")
      Out[F[0]] = {true, 0};
    else if (F.size() == 3 && F[1] == "out" && !F[2].getAsInteger(10, Arg))
      Out[F[0]] = {false, Arg};
    else
      M.getContext().emitError(
          "pmkit-pmalias: " + ConfigFile + ":" + Twine(L.line_number()) +
          ": expected '<function> return' or '<function> out <index>', "
          "found '" +
          *L + "'");
  }
}

bool carriesPointers(Type *T) {
  if (T->isPointerTy())
    return true;
  if (auto *IT = dyn_cast<IntegerType>(T)) // i128: two pointers copied at once
    return IT->getBitWidth() >= 64;
  if (auto *ST = dyn_cast<StructType>(T))
    return any_of(ST->elements(), carriesPointers);
  if (auto *AT = dyn_cast<ArrayType>(T))
    return carriesPointers(AT->getElementType());
  if (auto *VT = dyn_cast<VectorType>(T))
    return carriesPointers(VT->getElementType());
  return false;
}

} // namespace

class PMAliasSolver {
public:
  explicit PMAliasSolver(Module &M);
  bool mayBePM(const Value *V) const;
  std::string pmSource(const Value *V) const;

private:
  Module &M;
  const DataLayout &DL;
  std::vector<Obj> Objs;
  std::vector<std::pair<ObjId, int64_t>> Locs;
  DenseMap<std::pair<ObjId, int64_t>, LocId> LocIndex;
  DenseMap<ObjId, SmallVector<LocId, 4>> ObjLocs;
  std::vector<Node> Nodes;
  DenseMap<const Value *, NodeId> ValueNodes;
  DenseMap<LocId, NodeId> Contents;
  DenseMap<const Value *, ObjId> SiteObjs;
  StringMap<PMAllocator> Allocators;
  std::vector<NodeId> Work;
  ObjId Unknown = 0;
  // Calls through pointers, resolved as the callee's set grows: the node of
  // the called value -> (call, index of its first argument passed on).
  DenseMap<NodeId, SmallVector<std::pair<CallBase *, unsigned>, 1>> Indirect;
  DenseSet<std::pair<CallBase *, Function *>> Connected;
  DenseSet<CallBase *> UnknownCalls;
  DenseMap<ObjId, Function *> FuncOf;
  DenseSet<Function *> OpenFuncs; // callable with arguments we cannot see
  NodeId EscapeSink = 0;          // what unknown code is given

  ObjId newObj(ObjKind K, std::string Why);
  ObjId siteObj(const Value *Site, ObjKind K, std::string Why);
  LocId loc(ObjId O, int64_t Off);
  void collapse(ObjId O);
  NodeId newNode();
  NodeId node(const Value *V);
  NodeId content(LocId L);
  void addPts(NodeId N, LocId L);
  void addCopy(NodeId From, NodeId To, int64_t Delta);
  void addLoad(NodeId Addr, NodeId Dst);
  void addStore(NodeId Addr, NodeId Src);
  NodeId offsetNode(NodeId From, int64_t Delta);
  LocId shift(LocId L, int64_t Delta);

  void readConfig();
  void constrainGlobals();
  void constrainFunction(Function &F);
  void constrainInstruction(Instruction &I);
  void constrainCall(CallBase &CB);
  bool constrainKnownExternal(CallBase &CB, Function &Callee);
  void constrainDefinedAllocator(CallBase &CB, Function &F);
  void constrainConstant(const Constant *C, NodeId N, int64_t Off);
  void initFromConstant(LocId Base, const Constant *C);
  void solve();
  void connectCall(CallBase &CB, unsigned First, Function &F);
  void unknownCall(CallBase &CB);
  void open(Function &F);
  void openReferencedFunctions(const Constant *C,
                               SmallPtrSetImpl<const Constant *> &Seen);
};

PMAliasSolver::PMAliasSolver(Module &M) : M(M), DL(M.getDataLayout()) {
  Unknown = newObj(ObjKind::Unknown, "unknown memory");
  Objs[Unknown].Collapsed = true;
  EscapeSink = newNode();
  // Whatever is loaded from memory nobody can see is unknown too, and what
  // is stored there is given to unknown code.
  addPts(content(loc(Unknown, AnyOff)), loc(Unknown, AnyOff));
  addCopy(content(loc(Unknown, AnyOff)), EscapeSink, 0);
  for (const auto &A : BuiltinAllocators)
    Allocators[A.Name] = A.How;
  readConfig();
  constrainGlobals();
  for (Function &F : M)
    if (!F.isDeclaration())
      constrainFunction(F);
  solve();
  NumNodes += Nodes.size();
}

void PMAliasSolver::readConfig() { readAllocatorConfig(M, Allocators); }

ObjId PMAliasSolver::newObj(ObjKind K, std::string Why) {
  Objs.push_back({K, std::move(Why)});
  if (K == ObjKind::PM)
    ++NumPMSites;
  return Objs.size() - 1;
}

ObjId PMAliasSolver::siteObj(const Value *Site, ObjKind K, std::string Why) {
  auto It = SiteObjs.find(Site);
  if (It != SiteObjs.end())
    return It->second;
  ObjId O = newObj(K, std::move(Why));
  SiteObjs[Site] = O;
  return O;
}

LocId PMAliasSolver::loc(ObjId O, int64_t Off) {
  if (Objs[O].Collapsed)
    Off = AnyOff;
  else if (Off == AnyOff)
    collapse(O);
  auto Key = std::make_pair(O, Off);
  auto It = LocIndex.find(Key);
  if (It != LocIndex.end())
    return It->second;
  LocId L = Locs.size();
  Locs.push_back(Key);
  LocIndex[Key] = L;
  ObjLocs[O].push_back(L);
  return L;
}

// From now on the object is one cell: every offset's content and the
// whole object's content are kept equal by copy edges both ways.
void PMAliasSolver::collapse(ObjId O) {
  if (Objs[O].Collapsed)
    return;
  Objs[O].Collapsed = true;
  ++NumCollapsed;
  LocId Whole = loc(O, AnyOff);
  NodeId W = content(Whole);
  SmallVector<LocId, 4> Cells = ObjLocs[O];
  for (LocId L : Cells)
    if (L != Whole) {
      addCopy(content(L), W, 0);
      addCopy(W, content(L), 0);
    }
}

NodeId PMAliasSolver::newNode() {
  Nodes.emplace_back();
  return Nodes.size() - 1;
}

NodeId PMAliasSolver::content(LocId L) {
  auto It = Contents.find(L);
  if (It != Contents.end())
    return It->second;
  NodeId N = newNode();
  Contents[L] = N;
  return N;
}

// The node of a value; a constant's node holds what it points to.
NodeId PMAliasSolver::node(const Value *V) {
  auto It = ValueNodes.find(V);
  if (It != ValueNodes.end())
    return It->second;
  NodeId N = newNode();
  ValueNodes[V] = N;
  if (auto *C = dyn_cast<Constant>(V))
    constrainConstant(C, N, 0);
  return N;
}

void PMAliasSolver::constrainConstant(const Constant *C, NodeId N,
                                      int64_t Off) {
  if (auto *F = dyn_cast<Function>(C)) {
    ObjId O = siteObj(const_cast<Function *>(F), ObjKind::Func,
                      "function " + F->getName().str());
    FuncOf[O] = const_cast<Function *>(F);
    addPts(N, loc(O, Off));
  } else if (auto *GA = dyn_cast<GlobalAlias>(C)) {
    // An alias is its aliasee (C++ complete-object constructors are
    // aliases of the base-object ones: -mconstructor-aliases).
    constrainConstant(GA->getAliasee(), N, Off);
  } else if (auto *GV = dyn_cast<GlobalValue>(C)) {
    addPts(N, loc(siteObj(GV, ObjKind::Global, "global " + GV->getName().str()),
                  Off));
  } else if (auto *CE = dyn_cast<ConstantExpr>(C)) {
    if (auto *GEP = dyn_cast<GEPOperator>(CE)) {
      APInt Delta(DL.getIndexTypeSizeInBits(GEP->getType()), 0);
      bool Known = GEP->accumulateConstantOffset(DL, Delta);
      constrainConstant(cast<Constant>(GEP->getPointerOperand()), N,
                        Known && Off != AnyOff ? Off + Delta.getSExtValue()
                                               : AnyOff);
    } else if (CE->getOpcode() == Instruction::IntToPtr) {
      addPts(N, loc(Unknown, AnyOff));
    } else {
      for (const Use &U : CE->operands())
        constrainConstant(cast<Constant>(U.get()), N,
                          CE->isCast() ? Off : AnyOff);
    }
  } else if (isa<ConstantAggregate>(C)) {
    for (const Use &U : C->operands())
      constrainConstant(cast<Constant>(U.get()), N, AnyOff);
  }
}

void PMAliasSolver::addPts(NodeId N, LocId L) {
  if (Nodes[N].Pts.test_and_set(L))
    Work.push_back(N);
}

LocId PMAliasSolver::shift(LocId L, int64_t Delta) {
  auto [O, Off] = Locs[L];
  if (Delta == 0)
    return L;
  if (Delta == AnyOff || Off == AnyOff || Objs[O].Collapsed)
    return loc(O, AnyOff);
  return loc(O, Off + Delta);
}

void PMAliasSolver::addCopy(NodeId From, NodeId To, int64_t Delta) {
  for (const CopyEdge &E : Nodes[From].Copies)
    if (E.To == To && E.Delta == Delta)
      return;
  Nodes[From].Copies.push_back({To, Delta});
  SmallVector<LocId, 8> Have = members(Nodes[From].Done);
  for (LocId L : Have)
    addPts(To, shift(L, Delta));
}

void PMAliasSolver::addLoad(NodeId Addr, NodeId Dst) {
  Nodes[Addr].LoadDsts.push_back(Dst);
  SmallVector<LocId, 8> Have = members(Nodes[Addr].Done);
  for (LocId L : Have)
    addCopy(content(L), Dst, 0);
}

void PMAliasSolver::addStore(NodeId Addr, NodeId Src) {
  Nodes[Addr].StoreSrcs.push_back(Src);
  SmallVector<LocId, 8> Have = members(Nodes[Addr].Done);
  for (LocId L : Have)
    addCopy(Src, content(L), 0);
}

// A node pointing where From points, moved by Delta.
NodeId PMAliasSolver::offsetNode(NodeId From, int64_t Delta) {
  NodeId N = newNode();
  addCopy(From, N, Delta);
  return N;
}

void PMAliasSolver::initFromConstant(LocId Base, const Constant *C) {
  if (!carriesPointers(C->getType()) && !isa<ConstantAggregate>(C))
    return;
  auto [O, Off] = Locs[Base];
  if (auto *CS = dyn_cast<ConstantStruct>(C)) {
    const StructLayout *SL = DL.getStructLayout(CS->getType());
    for (unsigned I = 0; I < CS->getNumOperands(); I++)
      initFromConstant(Off == AnyOff ? Base
                                     : loc(O, Off + SL->getElementOffset(I)),
                       CS->getOperand(I));
  } else if (auto *CA = dyn_cast<ConstantArray>(C)) {
    uint64_t Size = DL.getTypeAllocSize(CA->getType()->getElementType());
    for (unsigned I = 0; I < CA->getNumOperands(); I++)
      initFromConstant(Off == AnyOff ? Base : loc(O, Off + I * Size),
                       CA->getOperand(I));
  } else {
    constrainConstant(C, content(Base), 0);
  }
}

void PMAliasSolver::constrainGlobals() {
  for (GlobalVariable &G : M.globals()) {
    if (G.getName().startswith("llvm."))
      continue; // metadata tables: annotations, llvm.used
    ObjId O = siteObj(&G, ObjKind::Global, "global " + G.getName().str());
    if (G.hasInitializer()) {
      initFromConstant(loc(O, 0), G.getInitializer());
      // Other units can read it, and call what it leads to.
      SmallPtrSet<const Constant *, 16> Seen;
      if (!G.hasLocalLinkage())
        openReferencedFunctions(G.getInitializer(), Seen);
    }
    // Other translation units may store anything into it.
    if (!G.isConstant() && (G.isDeclaration() || !G.hasLocalLinkage()))
      addPts(content(loc(O, AnyOff)), loc(Unknown, AnyOff));
  }
}

void PMAliasSolver::constrainFunction(Function &F) {
  // Callers the module cannot see may pass anything. A function whose
  // address is taken is opened when the address reaches unknown code.
  if (!F.hasLocalLinkage())
    open(F);
  if (F.hasFnAttribute(AttrPMAllocator))
    for (Instruction &I : instructions(F))
      if (auto *RI = dyn_cast<ReturnInst>(&I))
        if (Value *RV = RI->getReturnValue())
          addPts(node(RV), loc(siteObj(RI, ObjKind::PM,
                                       "PM allocator " + F.getName().str()),
                               0));
  for (Instruction &I : instructions(F))
    constrainInstruction(I);
}

void PMAliasSolver::constrainInstruction(Instruction &I) {
  if (auto *AI = dyn_cast<AllocaInst>(&I)) {
    addPts(node(AI), loc(siteObj(AI, ObjKind::Stack, "stack"), 0));
  } else if (auto *LI = dyn_cast<LoadInst>(&I)) {
    NodeId Addr = node(LI->getPointerOperand()); // queried later
    if (carriesPointers(LI->getType()))
      addLoad(Addr, node(LI));
  } else if (auto *SI = dyn_cast<StoreInst>(&I)) {
    NodeId Addr = node(SI->getPointerOperand());
    if (carriesPointers(SI->getValueOperand()->getType()))
      addStore(Addr, node(SI->getValueOperand()));
  } else if (auto *GEP = dyn_cast<GetElementPtrInst>(&I)) {
    APInt Delta(DL.getIndexTypeSizeInBits(GEP->getType()), 0);
    bool Known = GEP->accumulateConstantOffset(DL, Delta);
    addCopy(node(GEP->getPointerOperand()), node(GEP),
            Known ? Delta.getSExtValue() : AnyOff);
  } else if (isa<IntToPtrInst>(I)) {
    // An integer may have been computed from any address.
    addCopy(node(I.getOperand(0)), node(&I), AnyOff);
    addPts(node(&I), loc(Unknown, AnyOff));
  } else if (auto *CI = dyn_cast<CastInst>(&I)) {
    if (carriesPointers(CI->getType()) &&
        carriesPointers(CI->getOperand(0)->getType()))
      addCopy(node(CI->getOperand(0)), node(CI), 0);
  } else if (auto *BO = dyn_cast<BinaryOperator>(&I)) {
    if (carriesPointers(BO->getType()))
      for (Value *Op : BO->operands())
        addCopy(node(Op), node(BO), AnyOff);
  } else if (auto *PN = dyn_cast<PHINode>(&I)) {
    if (carriesPointers(PN->getType()))
      for (Value *In : PN->incoming_values())
        addCopy(node(In), node(PN), 0);
  } else if (auto *Sel = dyn_cast<SelectInst>(&I)) {
    if (carriesPointers(Sel->getType())) {
      addCopy(node(Sel->getTrueValue()), node(Sel), 0);
      addCopy(node(Sel->getFalseValue()), node(Sel), 0);
    }
  } else if (isa<ExtractValueInst>(I) || isa<InsertValueInst>(I) ||
             isa<ExtractElementInst>(I) || isa<InsertElementInst>(I) ||
             isa<ShuffleVectorInst>(I) || isa<FreezeInst>(I)) {
    if (carriesPointers(I.getType()))
      for (Value *Op : I.operands())
        if (carriesPointers(Op->getType()))
          addCopy(node(Op), node(&I), 0);
  } else if (auto *CX = dyn_cast<AtomicCmpXchgInst>(&I)) {
    NodeId Addr = node(CX->getPointerOperand());
    if (carriesPointers(CX->getNewValOperand()->getType())) {
      addStore(Addr, node(CX->getNewValOperand()));
      addLoad(Addr, node(CX));
    }
  } else if (auto *RMW = dyn_cast<AtomicRMWInst>(&I)) {
    NodeId Addr = node(RMW->getPointerOperand());
    if (carriesPointers(RMW->getValOperand()->getType())) {
      addStore(Addr, node(RMW->getValOperand()));
      addLoad(Addr, node(RMW));
    }
  } else if (isa<VAArgInst>(I)) {
    addPts(node(&I), loc(Unknown, AnyOff));
  } else if (auto *CB = dyn_cast<CallBase>(&I)) {
    constrainCall(*CB);
  }
}

// The function a call calls, through an alias too; null for an indirect
// call. (A call of an alias left as an unresolved indirect call gave the
// callee's parameters no source: a constructor called through its alias
// took `this` for DRAM.)
static Function *calledFunction(CallBase &CB) {
  Value *V = CB.getCalledOperand()->stripPointerCasts();
  if (auto *GA = dyn_cast<GlobalAlias>(V))
    V = GA->getAliaseeObject();
  return dyn_cast_or_null<Function>(V);
}

void PMAliasSolver::constrainCall(CallBase &CB) {
  NodeId Ret = carriesPointers(CB.getType()) ? node(&CB) : 0;
  bool HasRet = carriesPointers(CB.getType());
  if (auto *MI = dyn_cast<MemIntrinsic>(&CB))
    node(MI->getRawDest()); // queried later
  if (auto *MT = dyn_cast<MemTransferInst>(&CB)) {
    // Copies whatever the source held, at offsets it does not follow.
    NodeId T = newNode();
    addLoad(offsetNode(node(MT->getRawSource()), AnyOff), T);
    addStore(offsetNode(node(MT->getRawDest()), AnyOff), T);
    return;
  }
  if (auto *II = dyn_cast<IntrinsicInst>(&CB)) {
    if (II->getIntrinsicID() == Intrinsic::ptrmask ||
        II->getIntrinsicID() == Intrinsic::threadlocal_address)
      addCopy(node(II->getArgOperand(0)), Ret, 0); // this thread's copy
    else if (HasRet)
      addPts(Ret, loc(Unknown, AnyOff));
    return;
  }
  Function *Callee = calledFunction(CB);
  if (Callee && !Callee->isDeclaration()) {
    constrainDefinedAllocator(CB, *Callee);
    for (unsigned I = 0; I < CB.arg_size() && I < Callee->arg_size(); I++)
      if (carriesPointers(CB.getArgOperand(I)->getType()))
        addCopy(node(CB.getArgOperand(I)), node(Callee->getArg(I)), 0);
    if (HasRet)
      for (Instruction &I : instructions(*Callee))
        if (auto *RI = dyn_cast<ReturnInst>(&I))
          if (Value *RV = RI->getReturnValue())
            addCopy(node(RV), Ret, 0);
    return;
  }
  if (!Callee) {
    // Resolved by what the called pointer may point to (solve()).
    Indirect[node(CB.getCalledOperand())].push_back({&CB, 0});
    return;
  }
  if (Callee->getName() == "pthread_create" && CB.arg_size() == 4) {
    // start(arg) on a new thread: an indirect call with one argument.
    Indirect[node(CB.getArgOperand(2))].push_back({&CB, 3});
    return;
  }
  if (constrainKnownExternal(CB, *Callee))
    return;
  unknownCall(CB);
}

// Unknown code: it may return any pointer, store any pointer through the
// pointers it is given, and call any function it is given.
void PMAliasSolver::unknownCall(CallBase &CB) {
  if (!UnknownCalls.insert(&CB).second)
    return;
  if (carriesPointers(CB.getType()))
    addPts(node(&CB), loc(Unknown, AnyOff));
  NodeId Any = newNode();
  addPts(Any, loc(Unknown, AnyOff));
  for (Value *A : CB.args())
    if (A->getType()->isPointerTy()) {
      NodeId Pointee = offsetNode(node(A), AnyOff);
      addStore(Pointee, Any);
      addCopy(node(A), EscapeSink, 0);
      addLoad(Pointee, EscapeSink); // a struct of callbacks, one level deep
    }
}

void PMAliasSolver::connectCall(CallBase &CB, unsigned First, Function &F) {
  if (!Connected.insert({&CB, &F}).second)
    return;
  if (F.isDeclaration()) {
    if (First == 0 && !constrainKnownExternal(CB, F))
      unknownCall(CB);
    return;
  }
  if (First == 0)
    constrainDefinedAllocator(CB, F);
  for (unsigned I = First, P = 0; I < CB.arg_size() && P < F.arg_size();
       I++, P++)
    if (carriesPointers(CB.getArgOperand(I)->getType()))
      addCopy(node(CB.getArgOperand(I)), node(F.getArg(P)), 0);
  if (First == 0 && carriesPointers(CB.getType()))
    for (Instruction &I : instructions(F))
      if (auto *RI = dyn_cast<ReturnInst>(&I))
        if (Value *RV = RI->getReturnValue())
          addCopy(node(RV), node(&CB), 0);
}

void PMAliasSolver::open(Function &F) {
  if (!OpenFuncs.insert(&F).second)
    return;
  for (Argument &A : F.args())
    if (carriesPointers(A.getType()))
      addPts(node(&A), loc(Unknown, AnyOff));
}

void PMAliasSolver::openReferencedFunctions(
    const Constant *C, SmallPtrSetImpl<const Constant *> &Seen) {
  if (!Seen.insert(C).second)
    return;
  if (auto *F = dyn_cast<Function>(C)) {
    if (!F->isDeclaration())
      open(*const_cast<Function *>(F));
    return;
  }
  if (auto *GV = dyn_cast<GlobalVariable>(C)) {
    if (GV->hasInitializer())
      openReferencedFunctions(GV->getInitializer(), Seen);
    return;
  }
  for (const Use &U : C->operands())
    if (auto *Op = dyn_cast<Constant>(U.get()))
      openReferencedFunctions(Op, Seen);
}

// A configured PM allocator the module defines makes PM, whatever its body
// shows: the user's word, added to what the body makes. (An annotated one
// makes PM at its returns.)
void PMAliasSolver::constrainDefinedAllocator(CallBase &CB, Function &F) {
  if (Allocators.count(F.getName()) &&
      !llvm::any_of(BuiltinAllocators,
                    [&](const auto &A) { return F.getName() == A.Name; }))
    constrainKnownExternal(CB, F);
}

bool PMAliasSolver::constrainKnownExternal(CallBase &CB, Function &Callee) {
  StringRef Name = Callee.getName();
  auto Alloc = Allocators.find(Name);
  if (Alloc != Allocators.end() || Callee.hasFnAttribute(AttrPMAllocator)) {
    PMAllocator How =
        Alloc != Allocators.end() ? Alloc->second : PMAllocator{true, 0};
    LocId PM =
        loc(siteObj(&CB, ObjKind::PM, Name.str() + " at " + sourceLoc(&CB)), 0);
    if (How.Return) {
      addPts(node(&CB), PM);
    } else if (How.Out < CB.arg_size()) {
      NodeId P = newNode();
      addPts(P, PM);
      addStore(node(CB.getArgOperand(How.Out)), P);
    }
    return true;
  }
  if (Name == "mmap" || Name == "mmap64") {
    // A mapping of a file may be PM; an anonymous one is DRAM.
    auto *Flags = dyn_cast<ConstantInt>(CB.getArgOperand(3));
    bool Anon = Flags && (Flags->getZExtValue() & 0x20 /* MAP_ANONYMOUS */);
    addPts(node(&CB),
           loc(siteObj(&CB, Anon ? ObjKind::Heap : ObjKind::PM,
                       (Anon ? "anonymous mmap at " : "mmap of a file at ") +
                           sourceLoc(&CB)),
               0));
    return true;
  }
  static const StringRef Heap[] = {"malloc", "calloc",  "aligned_alloc",
                                   "strdup", "strndup", "_Znwm",
                                   "_Znam",  "valloc",  "memalign"};
  if (is_contained(Heap, Name)) {
    addPts(node(&CB),
           loc(siteObj(&CB, ObjKind::Heap, "heap at " + sourceLoc(&CB)), 0));
    return true;
  }
  if (Name == "realloc") {
    addPts(node(&CB),
           loc(siteObj(&CB, ObjKind::Heap, "heap at " + sourceLoc(&CB)), 0));
    addCopy(node(CB.getArgOperand(0)), node(&CB), 0);
    return true;
  }
  if (Name == "__errno_location") {
    addPts(node(&CB), loc(siteObj(&CB, ObjKind::Heap, "errno"), 0));
    return true;
  }
  if (Name == "posix_memalign") {
    NodeId P = newNode();
    addPts(P, loc(siteObj(&CB, ObjKind::Heap, "heap at " + sourceLoc(&CB)), 0));
    addStore(node(CB.getArgOperand(0)), P);
    return true;
  }
  if (Name == "pmkit_pool_create" || Name == "pmkit_pool_open") {
    NodeId P = newNode(); // the handle is the runtime's DRAM
    addPts(P, loc(siteObj(&CB, ObjKind::Heap, "pool handle"), 0));
    addStore(node(CB.getArgOperand(CB.arg_size() - 1)), P);
    return true;
  }
  unsigned E = callEffects(Name);
  // strtol's family: *endptr points into the string. (Taken for unknown
  // code before, it made what the string and the end pointer lead to
  // unknown -- in the benchmarks' driver, every value buffer.)
  if ((E & CE_END_POINTER) && CB.arg_size() >= 2) {
    addStore(node(CB.getArgOperand(1)),
             offsetNode(node(CB.getArgOperand(0)), AnyOff));
    return true;
  }
  return (E & CE_NO_POINTER) != 0;
}

void PMAliasSolver::solve() {
  while (!Work.empty()) {
    NodeId N = Work.back();
    Work.pop_back();
    SparseBitVector<> New = Nodes[N].Pts;
    New.intersectWithComplement(Nodes[N].Done);
    if (New.empty())
      continue;
    Nodes[N].Done |= New;
    SmallVector<LocId, 8> Delta = members(New);
    // Edges may be added while iterating: index, do not hold references.
    for (size_t E = 0; E < Nodes[N].Copies.size(); E++) {
      CopyEdge C = Nodes[N].Copies[E];
      for (LocId L : Delta)
        addPts(C.To, shift(L, C.Delta));
    }
    for (size_t D = 0; D < Nodes[N].LoadDsts.size(); D++)
      for (LocId L : Delta)
        addCopy(content(L), Nodes[N].LoadDsts[D], 0);
    for (size_t S = 0; S < Nodes[N].StoreSrcs.size(); S++)
      for (LocId L : Delta)
        addCopy(Nodes[N].StoreSrcs[S], content(L), 0);
    for (LocId L : Delta) {
      ObjId O = Locs[L].first;
      auto F = FuncOf.find(O);
      if (N == EscapeSink && F != FuncOf.end() && !F->second->isDeclaration())
        open(*F->second); // unknown code may call it with anything
      // Unknown code can follow every pointer in what it is given: an
      // object's content escapes with it (a vtable and its functions too).
      if (N == EscapeSink && O != Unknown && F == FuncOf.end())
        addCopy(content(shift(L, AnyOff)), EscapeSink, 0);
      auto It = Indirect.find(N);
      if (It == Indirect.end())
        continue;
      SmallVector<std::pair<CallBase *, unsigned>, 1> Calls = It->second;
      for (auto [CB, First] : Calls) {
        if (F != FuncOf.end())
          connectCall(*CB, First, *F->second);
        else if (O == Unknown)
          unknownCall(*CB); // a function pointer from unknown code
      }
    }
  }
}

bool PMAliasSolver::mayBePM(const Value *V) const {
  auto It = ValueNodes.find(V->stripPointerCasts());
  if (It == ValueNodes.end())
    It = ValueNodes.find(V);
  if (It == ValueNodes.end())
    return !isa<AllocaInst>(V->stripPointerCasts()) &&
           !isa<GlobalValue>(V->stripPointerCasts()); // not analysed
  const SparseBitVector<> &Pts = Nodes[It->second].Pts;
  // No source at all: the analysis lost track of this pointer (or it is
  // null, and the access never runs). Losing track must not make DRAM.
  if (Pts.empty())
    return !isa<ConstantPointerNull, UndefValue>(V->stripPointerCasts());
  for (LocId L : Pts) {
    ObjKind K = Objs[Locs[L].first].Kind;
    if (K == ObjKind::PM || K == ObjKind::Unknown)
      return true;
  }
  return false;
}

std::string PMAliasSolver::pmSource(const Value *V) const {
  auto It = ValueNodes.find(V);
  if (It == ValueNodes.end())
    return mayBePM(V) ? "not analysed" : "";
  if (Nodes[It->second].Pts.empty())
    return mayBePM(V) ? "unknown memory (no source found for the pointer)" : "";
  std::string Unknown;
  for (LocId L : Nodes[It->second].Pts) {
    const Obj &O = Objs[Locs[L].first];
    if (O.Kind == ObjKind::PM)
      return O.Why; // a definite PM source reads better than "unknown"
    if (O.Kind == ObjKind::Unknown)
      Unknown = O.Why;
  }
  return Unknown;
}

PMAliasInfo::PMAliasInfo(std::unique_ptr<PMAliasSolver> S) : S(std::move(S)) {}
PMAliasInfo::PMAliasInfo(PMAliasInfo &&) = default;
PMAliasInfo::~PMAliasInfo() = default;

bool PMAliasInfo::mayBePM(const Value *V) const { return S->mayBePM(V); }
std::string PMAliasInfo::pmSource(const Value *V) const {
  return S->pmSource(V);
}

AnalysisKey PMAliasAnalysis::Key;

PMAliasInfo PMAliasAnalysis::run(Module &M, ModuleAnalysisManager &) {
  return PMAliasInfo(std::make_unique<PMAliasSolver>(M));
}

PreservedAnalyses PMAliasPrinterPass::run(Module &M,
                                          ModuleAnalysisManager &MAM) {
  const PMAliasInfo &PA = MAM.getResult<PMAliasAnalysis>(M);
  for (Function &F : M)
    for (Instruction &I : instructions(F)) {
      const Value *A = pmkit::accessedAddress(I);
      if (!A)
        continue;
      bool PM = PA.mayBePM(A);
      outs() << F.getName() << ": " << (PM ? "PM  " : "DRAM") << I;
      if (PM)
        outs() << "  ; " << PA.pmSource(A);
      outs() << '\n';
    }
  return PreservedAnalyses::all();
}

bool keepAllocatorCalls(Module &M) {
  StringMap<PMAllocator> Configured;
  readAllocatorConfig(M, Configured);
  bool Changed = false;
  for (Function &F : M) {
    if (F.isDeclaration() || F.hasFnAttribute(Attribute::NoInline) ||
        (!F.hasFnAttribute(AttrPMAllocator) && !Configured.count(F.getName())))
      continue;
    F.removeFnAttr(Attribute::AlwaysInline);
    F.addFnAttr(Attribute::NoInline);
    Changed = true;
  }
  return Changed;
}

} // namespace pmkit
