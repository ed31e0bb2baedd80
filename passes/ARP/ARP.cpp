// SPDX-License-Identifier: Apache-2.0
//
// ARP.cpp -- the pmkit-arp module pass (see ARP.h). For every function it
// writes back each store, atomic RMW, compare-and-swap and memory
// intrinsic that PMAlias says may touch PM (a clwb per line it wrote, the
// runtime's range write-back for intrinsics; followed by an sfence under
// the scp lowering), then lowers each call of __pmkit_arp_release,
// _acquire and _seqpoint to its lowering's fence: an sfence before a
// persistent release or sequence point (arp), an mfence at any of them
// (epoch), nothing (scp). The calls are removed unless the program is
// traced. The pass runs after the optimizer, so it writes back the stores
// that remain and nothing moves them afterwards. Run with
//   opt-16 -load-pass-plugin=pmkit-passes.so -passes=pmkit-arp \
//     -pmkit-arp-lowering=arp -S in.ll

#include "ARP/ARP.h"

#include "Common/Access.h"
#include "Common/Diagnose.h"
#include "Common/Pipeline.h"
#include "Common/SourceLoc.h"
#include "Common/Target.h"
#include "Common/WriteBack.h"
#include "PMAlias/PMAlias.h"
#include "pmkit/trace_format.h"

#include "llvm/ADT/Statistic.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Debug.h"

#include <vector>

using namespace llvm;
using namespace pmkit;

#define DEBUG_TYPE "pmkit-arp"

STATISTIC(NumWriteBacks, "PM writes written back");
STATISTIC(NumLines, "Line write-backs inserted (clwb)");
STATISTIC(NumRanges, "Range write-backs inserted (memcpy/memset)");
STATISTIC(NumDRAM, "Writes left alone: the analysis proved them DRAM");
STATISTIC(NumSfences, "sfences inserted");
STATISTIC(NumMfences, "mfences inserted");
STATISTIC(NumSyncs, "pmkit::atomic syncs and sequence points lowered");
STATISTIC(NumVolatile, "Syncs left without a fence: volatile or acquire");

namespace {

enum class Lowering { ARP, SCP, Epoch };

cl::opt<Lowering> LoweringOpt(
    "pmkit-arp-lowering", cl::Hidden, cl::init(Lowering::ARP),
    cl::desc("pmkit-arp: how persist order is enforced on x86"),
    cl::values(clEnumValN(Lowering::ARP, "arp",
                          "sfence at persistent releases and sequence points"),
               clEnumValN(Lowering::SCP, "scp",
                          "clwb + sfence after every PM write"),
               clEnumValN(Lowering::Epoch, "epoch",
                          "mfence at every sync access and sequence point")));

enum class Sync { None, Release, Acquire, SeqPoint };

Sync syncOf(const CallBase &CB, uint32_t &Flags) {
  const Function *F = CB.getCalledFunction();
  if (!F)
    return Sync::None;
  StringRef N = F->getName();
  Sync S = N == "__pmkit_arp_release"    ? Sync::Release
           : N == "__pmkit_arp_acquire"  ? Sync::Acquire
           : N == "__pmkit_arp_seqpoint" ? Sync::SeqPoint
                                         : Sync::None;
  if (S == Sync::None)
    return S;
  // The flags are the last argument; unknown flags count as persistent.
  Flags = 0;
  if (auto *C = dyn_cast<ConstantInt>(CB.getArgOperand(CB.arg_size() - 1)))
    Flags = (uint32_t)C->getZExtValue();
  return S;
}

class Lowerer {
public:
  Lowerer(Module &M, const PMAliasInfo &PA)
      : M(M), PA(PA), DL(M.getDataLayout()), FlushRange(flushRangeFn(M)) {}
  bool run();

private:
  Module &M;
  const PMAliasInfo &PA;
  const DataLayout &DL;
  FunctionCallee FlushRange;
  // The lowering writes lines back with clwb, the instruction the ARP
  // paper's x86 mapping names.
  const FlushChoice Flush = flushIntrinsic(FlushInsn::Clwb);

  void fence(IRBuilder<> &B, Intrinsic::ID ID) {
    B.CreateCall(Intrinsic::getDeclaration(&M, ID));
    ++(ID == Intrinsic::x86_sse_sfence ? NumSfences : NumMfences);
  }
  bool lower(Function &F);
};

bool Lowerer::lower(Function &F) {
  std::vector<std::pair<Instruction *, PMAccess>> Writes;
  std::vector<std::pair<CallBase *, Sync>> Syncs;
  std::vector<uint32_t> SyncFlags;
  for (Instruction &I : instructions(F)) {
    if (auto *CB = dyn_cast<CallBase>(&I)) {
      uint32_t Flags = 0;
      Sync S = syncOf(*CB, Flags);
      if (S != Sync::None) {
        Syncs.push_back({CB, S});
        SyncFlags.push_back(Flags);
        continue;
      }
    }
    if (isa<LoadInst>(I))
      continue; // accessOf also reports atomic loads; nothing to persist
    PMAccess X = accessOf(I, DL);
    if (!X.Addr)
      continue;
    if (!PA.mayBePM(X.Addr)) {
      ++NumDRAM;
      continue;
    }
    Writes.push_back({&I, X});
  }
  for (auto &[I, X] : Writes) {
    IRBuilder<> B(I->getNextNode());
    B.SetCurrentDebugLocation(I->getDebugLoc());
    NumLines +=
        emitWriteBack(B, Flush.ID, FlushRange, X.Addr, X.Size, X.A, X.Len);
    NumRanges += X.Len != nullptr;
    ++NumWriteBacks;
    if (LoweringOpt == Lowering::SCP)
      fence(B, Intrinsic::x86_sse_sfence);
  }
  bool Keep = traceEnabled();
  for (size_t K = 0; K < Syncs.size(); K++) {
    auto [CB, S] = Syncs[K];
    bool Persistent = !(SyncFlags[K] & PMKIT_SYNC_VOLATILE);
    if (SyncFlags[K] & PMKIT_SYNC_FAILED) // news for the trace, not a sync
      S = Sync::None;
    IRBuilder<> B(CB);
    B.SetCurrentDebugLocation(CB->getDebugLoc());
    ++NumSyncs;
    switch (LoweringOpt) {
    case Lowering::ARP:
      if (Persistent && (S == Sync::Release || S == Sync::SeqPoint))
        fence(B, Intrinsic::x86_sse_sfence);
      else
        ++NumVolatile;
      break;
    case Lowering::Epoch:
      if (S != Sync::None)
        fence(B, Intrinsic::x86_sse2_mfence);
      break;
    case Lowering::SCP:
      break;
    }
    if (Keep)
      continue;
    if (auto *II = dyn_cast<InvokeInst>(CB)) // a caller that may throw
      BranchInst::Create(II->getNormalDest(), II);
    CB->eraseFromParent();
  }
  if (!Writes.empty())
    addTargetFeature(F, Flush.Feature);
  return !Writes.empty() || !Syncs.empty();
}

bool Lowerer::run() {
  bool Changed = false;
  for (Function &F : M) {
    if (F.isDeclaration())
      continue;
    if (StringRef Why = pmkit::mustNotInstrument(F); !Why.empty()) {
      // Never silently: its persistency goes unlowered.
      pmkit::diagnose(F,
                      (ARPPass::PassName + ": " + pmkit::displayName(F) +
                       " is " + Why +
                       ": its pmkit::atomic operations are not lowered and "
                       "its stores to PM not written back")
                          .str(),
                      DS_Warning);
      continue;
    }
    bool Lowered = lower(F);
    LLVM_DEBUG(if (Lowered) dbgs()
               << DEBUG_TYPE ": lowered the syncs of " << F.getName() << "\n");
    Changed |= Lowered;
  }
  return Changed;
}

} // namespace

PreservedAnalyses ARPPass::run(Module &M, ModuleAnalysisManager &MAM) {
  if (!pmkit::targetSupported(M, PassName))
    return PreservedAnalyses::all();
  const PMAliasInfo &PA = MAM.getResult<PMAliasAnalysis>(M);
  if (!Lowerer(M, PA).run())
    return PreservedAnalyses::all();
  PreservedAnalyses P = PreservedAnalyses::none();
  P.preserve<PMAliasAnalysis>();
  return P;
}
