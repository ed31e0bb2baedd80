// SPDX-License-Identifier: Apache-2.0
//
// Access.cpp -- accessOf(): the bytes an instruction writes (or an atomic
// or volatile load reads), for robust mode's and arp mode's write-backs.

#include "Common/Access.h"
#include "Common/CallEffects.h"
#include "Common/PersistOps.h"

#include "llvm/IR/DataLayout.h"
#include "llvm/IR/InlineAsm.h"

using namespace llvm;
using namespace pmkit;

PMAccess pmkit::accessOf(Instruction &I, const DataLayout &DL) {
  PMAccess R;
  if (auto *SI = dyn_cast<StoreInst>(&I)) {
    R.Addr = SI->getPointerOperand();
    R.Size = DL.getTypeStoreSize(SI->getValueOperand()->getType());
    R.A = SI->getAlign();
    R.What = SI->isAtomic()     ? "atomic store to PM"
             : SI->isVolatile() ? "volatile store to PM"
                                : "store to PM";
  } else if (auto *LI = dyn_cast<LoadInst>(&I)) {
    // A volatile load counts as an atomic one: lock-free code written before
    // C11 atomics (and atomics libraries built on compiler builtins, such as
    // Concurrency Kit's) reads shared words with volatile loads, so one may
    // return another thread's store that has not persisted yet.
    if (LI->isAtomic() || LI->isVolatile()) {
      R.Addr = LI->getPointerOperand();
      R.Size = DL.getTypeStoreSize(LI->getType());
      R.A = LI->getAlign();
      R.What = LI->isAtomic() ? "atomic load from PM" : "volatile load from PM";
    }
  } else if (auto *RMW = dyn_cast<AtomicRMWInst>(&I)) {
    R.Addr = RMW->getPointerOperand();
    R.Size = DL.getTypeStoreSize(RMW->getValOperand()->getType());
    R.A = RMW->getAlign();
    R.What = "atomic RMW on PM";
  } else if (auto *CX = dyn_cast<AtomicCmpXchgInst>(&I)) {
    R.Addr = CX->getPointerOperand();
    R.Size = DL.getTypeStoreSize(CX->getNewValOperand()->getType());
    R.A = CX->getAlign();
    R.What = "compare-and-swap on PM";
  } else if (auto *MI = dyn_cast<AnyMemIntrinsic>(&I)) {
    // (Element-wise atomic memcpy/memset included.)
    R.Addr = MI->getRawDest();
    R.Len = MI->getLength();
    R.A = Align(1);
    R.What = isa<AnyMemSetInst>(MI) ? "memset into PM" : "memcpy into PM";
  } else if (auto *CB = dyn_cast<CallInst>(&I); CB && CB->isInlineAsm()) {
    // The statement's first write to memory an operand names (else its
    // first such read, which counts as an atomic load): what the machine
    // code decoded to, from the operand's address to the end of the access.
    AsmEffect E = asmEffect(*CB);
    const AsmMem *Pick = nullptr;
    for (const AsmMem &Mm : E.Mem)
      if (Mm.Arg >= 0 && Mm.Disp >= 0 &&
          CB->getArgOperand(Mm.Arg)->getType()->isPointerTy() &&
          (!Pick || (Mm.Store && !Pick->Store)))
        Pick = &Mm;
    if (Pick) {
      R.Addr = CB->getArgOperand(Pick->Arg);
      uint64_t Size = Pick->Size;
      if (!Size)
        if (Type *T = CB->getParamElementType(Pick->Arg))
          Size = DL.getTypeStoreSize(T);
      R.Size = Pick->Disp + (Size ? Size : 8);
      R.A = Align(1);
      R.What = Pick->Store ? "inline asm writing PM" : "inline asm reading PM";
      R.AsmStore = Pick->Store;
    }
  } else if (auto *II = dyn_cast<IntrinsicInst>(&I);
             II && II->getIntrinsicID() == Intrinsic::masked_store) {
    // The whole vector's range: a superset of the lanes written.
    R.Addr = II->getArgOperand(1);
    R.Size = DL.getTypeStoreSize(II->getArgOperand(0)->getType());
    R.A = Align(1);
    R.What = "masked store to PM";
  }
  return R;
}

PMAccess pmkit::outParamAccess(Instruction &I) {
  PMAccess R;
  auto *CB = dyn_cast<CallBase>(&I);
  const Function *G = CB ? CB->getCalledFunction() : nullptr;
  if (G && CB->arg_size() >= 3 && (callEffects(G->getName()) & CE_OUT_ARG2)) {
    R.Addr = CB->getArgOperand(2);
    R.Size = 8;
    R.A = Align(1);
    R.What = "pointer stored by the allocator";
  }
  return R;
}
