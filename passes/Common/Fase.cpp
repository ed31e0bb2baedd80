// SPDX-License-Identifier: Apache-2.0
//
// Fase.cpp -- helpers of the failure-atomic modes' passes (Fase.h).

#include "Common/Fase.h"
#include "Common/Attributes.h"
#include "Common/CallEffects.h"
#include "Common/Diagnose.h"
#include "Common/PersistOps.h"
#include "Common/SourceLoc.h"
#include "Common/Target.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

#include <vector>

using namespace llvm;

StringRef pmkit::faseName(const Function &F) {
  StringRef Name = F.getName();
  if (F.hasLocalLinkage()) {
    auto [Base, Suffix] = Name.rsplit('.');
    if (!Suffix.empty() && Suffix != Name &&
        all_of(Suffix, [](char C) { return isDigit(C); }))
      return Base;
  }
  return Name;
}

uint64_t pmkit::faseId(const Function &F) {
  StringRef Name = faseName(F);
  uint64_t H = 0xcbf29ce484222325ull;
  for (unsigned char C : Name)
    H = (H ^ C) * 0x100000001b3ull;
  return H;
}

unsigned pmkit::inlineCallees(Function &F, unsigned Limit) {
  unsigned Size = F.getInstructionCount(), N = 0;
  SmallPtrSet<Function *, 4> Refused;
  for (bool Progress = true; Progress;) {
    Progress = false;
    std::vector<CallBase *> Calls;
    for (Instruction &I : instructions(F))
      if (auto *CB = dyn_cast<CallBase>(&I))
        if (Function *Callee = CB->getCalledFunction())
          if (!Callee->isDeclaration() && Callee != &F &&
              !Callee->isIntrinsic() && !Callee->isVarArg() &&
              !Callee->doesNotReturn()) {
            // A naked callee is its own assembly, return included: inlined,
            // it would end the FASE in the middle; called, its writes
            // escape the mode. Either way no failure atomicity.
            if (StringRef Why = mustNotInstrument(*Callee); !Why.empty()) {
              if (Refused.insert(Callee).second)
                diagnose(F,
                         ("FASE " + displayName(F) + " calls " +
                          displayName(*Callee) + ", which is " + Why +
                          ": it cannot be made failure-atomic")
                             .str(),
                         DS_Error);
              continue;
            }
            Calls.push_back(CB);
          }
    for (CallBase *CB : Calls) {
      Function *Callee = CB->getCalledFunction();
      unsigned Add = Callee->getInstructionCount();
      if (Size + Add > Limit)
        continue;
      InlineFunctionInfo IFI;
      if (InlineFunction(*CB, IFI).isSuccess()) {
        ++N;
        Size += Add;
        Progress = true;
      }
    }
  }
  return N;
}

unsigned pmkit::stripPersistOps(Function &F) {
  SmallVector<CallBase *, 8> Dead;
  for (Instruction &I : instructions(F)) {
    auto *CB = dyn_cast<CallBase>(&I);
    if (!CB || !CB->use_empty() || isa<InvokeInst>(CB))
      continue;
    if (CB->isInlineAsm()) {
      AsmEffect E =
          asmEffect(cast<InlineAsm>(CB->getCalledOperand())->getAsmString());
      if (E.Flush || E.Fence == FenceSfence)
        Dead.push_back(CB);
      continue;
    }
    Function *G = CB->getCalledFunction();
    if (G && (G->getName() == "pmkit_flush" || G->getName() == "pmkit_fence" ||
              G->getName() == "pmkit_persist"))
      Dead.push_back(CB);
  }
  for (CallBase *CB : Dead)
    CB->eraseFromParent();
  return Dead.size();
}

bool pmkit::isLockAcquire(StringRef N) {
  return callEffects(N) & CE_LOCK_ACQUIRE;
}

bool pmkit::isLockRelease(StringRef N) {
  return callEffects(N) & CE_LOCK_RELEASE;
}

bool pmkit::stripFaseAnchors(Module &M) {
  Function *Keep = M.getFunction(FaseKeepFn);
  if (!Keep)
    return false;
  for (User *U : make_early_inc_range(Keep->users()))
    if (auto *CB = dyn_cast<CallBase>(U))
      CB->eraseFromParent();
  if (Keep->use_empty())
    Keep->eraseFromParent();
  return true;
}

std::optional<std::pair<const Instruction *, std::string>>
pmkit::sameFaseIds(ArrayRef<Function *> Fases) {
  DenseMap<uint64_t, const Function *> Seen;
  for (const Function *F : Fases) {
    auto [It, New] = Seen.try_emplace(faseId(*F), F);
    if (New)
      continue;
    const Instruction *A = &It->second->getEntryBlock().front();
    const Instruction *B = &F->getEntryBlock().front();
    return std::make_pair(
        B, "FASEs " + faseName(*It->second).str() + " (" + sourceLoc(A) +
               ") and " + faseName(*F).str() + " (" + sourceLoc(B) +
               ") have the same id (two functions of one name, each local "
               "to its file): recovery would take one for the other; "
               "rename one");
  }
  return std::nullopt;
}

SetVector<Function *> pmkit::collectFases(Module &M, StringRef Pass) {
  SetVector<Function *> Fases;
  for (Function &F : M) {
    if (F.isDeclaration() || !F.hasFnAttribute(pmkit::AttrFase))
      continue;
    if (StringRef Why = mustNotInstrument(F); !Why.empty())
      diagnose(F,
               (Pass + ": FASE " + displayName(F) + " is " + Why +
                ": it cannot be made failure-atomic")
                   .str(),
               DS_Error);
    else
      Fases.insert(&F);
  }
  return Fases;
}

GlobalVariable *pmkit::privateString(Module &M, StringRef S,
                                     const Twine &Name) {
  Constant *Str = ConstantDataArray::getString(M.getContext(), S);
  return new GlobalVariable(M, Str->getType(), true,
                            GlobalValue::PrivateLinkage, Str, Name);
}

void pmkit::emitFaseTable(Module &M, StructType *EntTy,
                          ArrayRef<Constant *> Entries, StringRef Prefix) {
  LLVMContext &Ctx = M.getContext();
  Type *Ptr = PointerType::getUnqual(Ctx);
  Type *I32 = Type::getInt32Ty(Ctx);
  Type *Void = Type::getVoidTy(Ctx);
  auto *ArrTy = ArrayType::get(EntTy, Entries.size());
  auto *Table =
      new GlobalVariable(M, ArrTy, true, GlobalValue::InternalLinkage,
                         ConstantArray::get(ArrTy, Entries), Prefix + "_table");
  Function *Ctor =
      Function::Create(FunctionType::get(Void, false),
                       GlobalValue::InternalLinkage, Prefix + "_ctor", M);
  IRBuilder<> B(BasicBlock::Create(Ctx, "", Ctor));
  FunctionCallee Register = M.getOrInsertFunction(
      (Prefix + "_register").str(), FunctionType::get(Void, {Ptr, I32}, false));
  B.CreateCall(Register, {Table, ConstantInt::get(I32, Entries.size())});
  B.CreateRetVoid();
  appendToGlobalCtors(M, Ctor, 65535);
}
