// SPDX-License-Identifier: Apache-2.0
//
// Fase.h -- what the passes of the failure-atomic modes (pmkit-clobber,
// pmkit-ssapp) share about a function marked PMKIT_FASE: its id, inlining
// its callees into it, removing the program's own flushes and fences from
// it, the names of lock functions, and the parameter anchors of
// pmkit-annotations, which must go once the optimizer has run.
#ifndef PMKIT_PASSES_COMMON_FASE_H
#define PMKIT_PASSES_COMMON_FASE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/Module.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace pmkit {

// A FASE's id in the runtime's tables: 64-bit FNV-1a of its symbol name,
// for a function local to its file without the ".N" a whole-program link
// adds to tell two of one name apart (so the id does not depend on the
// order of the link: sameFaseIds below refuses the pair instead).
uint64_t faseId(const llvm::Function &F);
// The name that id is made of.
llvm::StringRef faseName(const llvm::Function &F);

// If two FASEs among `Fases` have the same id (recovery would take one for
// the other): where to report it (the second's entry) and the message.
std::optional<std::pair<const llvm::Instruction *, std::string>>
sameFaseIds(llvm::ArrayRef<llvm::Function *> Fases);

// Inline every call with a body into F, breadth first, while F stays under
// Limit instructions; the number of call sites inlined.
unsigned inlineCallees(llvm::Function &F, unsigned Limit);

// Remove the program's flushes and fences from F (pmkit_flush, pmkit_fence,
// pmkit_persist, clwb/clflush/sfence as inline asm): the modes persist what
// a FASE writes themselves. mfence and locked instructions stay. The number
// removed.
unsigned stripPersistOps(llvm::Function &F);

// Lock acquire and release functions (pthread and pmkit), by name.
bool isLockAcquire(llvm::StringRef N);
bool isLockRelease(llvm::StringRef N);

// Remove the calls to the parameter anchor (pmkit-annotations'
// FaseKeepFn); true if there were any.
bool stripFaseAnchors(llvm::Module &M);

// The module's FASEs (functions marked PMKIT_FASE) that the pass `Pass`
// can make failure-atomic; one that must not be instrumented (naked,
// disable_sanitizer_instrumentation) gets an error naming it instead.
llvm::SetVector<llvm::Function *> collectFases(llvm::Module &M,
                                               llvm::StringRef Pass);

// A private constant global holding the C string S (a FASE's name in a
// table), named Name.
llvm::GlobalVariable *privateString(llvm::Module &M, llvm::StringRef S,
                                    const llvm::Twine &Name);

// The module's FASE table for a failure-atomic runtime: an internal constant
// array <Prefix>_table of Entries (each of type EntTy), which a constructor
// <Prefix>_ctor registers at load by calling <Prefix>_register(table,
// count) (the runtime's, e.g. __pmkit_clobber_register).
void emitFaseTable(llvm::Module &M, llvm::StructType *EntTy,
                   llvm::ArrayRef<llvm::Constant *> Entries,
                   llvm::StringRef Prefix);

} // namespace pmkit

#endif // PMKIT_PASSES_COMMON_FASE_H
