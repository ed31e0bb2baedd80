// SPDX-License-Identifier: Apache-2.0
//
// PersistOps.h -- how pmkit's passes recognise the x86 persistence
// instructions a program already contains as inline asm: flushes (clflush,
// clflushopt, clwb) and fences (sfence, mfence, locked instructions, xchg
// with a memory operand), with their kinds taken from include/pmkit/pmkit.h
// (PMKIT_FLUSH_*) and include/pmkit/trace_format.h (PMKIT_FENCE_*).
// pmkit-trace reports them; pmkit-robust strips them with
// -pmkit-robust-strip-existing; the FASE passes treat them as fences.
//
// An asm statement is judged by its machine code, not its text: the
// template, with each operand replaced by a concrete register, memory
// operand or immediate of the kind its constraint asks for, is assembled
// with LLVM's x86-64 assembler and the bytes are decoded again. So
// ".byte 0x66; xsaveopt (%rax)" is the clwb it encodes, ".byte 0x66;
// clflush (%rax)" a clflushopt (not a clflush, which would persist at
// once), lfence nothing, and an xchg a fence only with a memory operand.
// Only a template the assembler rejects is read by the text rules of
// asmEffectText (counted by the statistic pmkit-asm.NumTextFallbacks).
// The assembler side is in AsmDecode.cpp.

#ifndef PMKIT_PASSES_COMMON_PERSISTOPS_H
#define PMKIT_PASSES_COMMON_PERSISTOPS_H

#include "pmkit/pmkit.h"
#include "pmkit/trace_format.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace llvm {
class CallBase;
} // namespace llvm

namespace pmkit {

// The kinds as the contracts number them: flushes as pmkit.h's
// PMKIT_FLUSH_*, fences as trace_format.h's PMKIT_FENCE_*.
enum : uint32_t {
  FlushClflush = PMKIT_FLUSH_CLFLUSH,
  FlushClflushopt = PMKIT_FLUSH_CLFLUSHOPT,
  FlushClwb = PMKIT_FLUSH_CLWB,
  FenceSfence = PMKIT_FENCE_SFENCE,
  FenceMfence = PMKIT_FENCE_MFENCE,
  FenceLocked = PMKIT_FENCE_LOCKED,
};

// One flush or fence of an asm statement, in the order it executes.
struct AsmOp {
  bool IsFlush = false;
  uint32_t Kind = 0; // FlushClwb... if IsFlush, else FenceSfence...
  // A flush's address: the value of call argument Arg (a pointer, or an
  // integer holding one) plus Disp. Arg is -1 when the address is not an
  // operand of the statement (a register the asm loads itself, RIP-relative,
  // an index register): such a flush cannot be placed.
  int Arg = -1;
  int64_t Disp = 0;
};

// A memory access of an asm statement's machine code: an instruction that
// reads or writes memory through an operand. Arg and Disp as for AsmOp (Arg
// -1: an address the statement computes itself). Size in bytes from the
// instruction (0: not known from the instruction alone).
struct AsmMem {
  bool Store = false;  // writes (a locked RMW and cmpxchg too); else reads
  bool Locked = false; // a lock prefix, or xchg with memory
  int Arg = -1;
  int64_t Disp = 0;
  uint32_t Size = 0;
};

// What an inline asm statement does to persistence.
struct AsmEffect {
  uint32_t Flush = 0; // the first flush's kind; 0 = none
  uint32_t Fence = 0; // the strongest fence: mfence, sfence, locked; 0 = none
  // True if the machine code was decoded: Ops holds every flush and fence
  // in execution order. False: the text rules decided Flush and Fence (the
  // template did not assemble) and Ops is empty.
  bool Decoded = false;
  llvm::SmallVector<AsmOp, 2> Ops;
  // Every memory read and write of the decoded machine code, in order (empty
  // when not Decoded): what robust mode writes back and the trace records.
  llvm::SmallVector<AsmMem, 2> Mem;
};

// Decodes the statement called by CB, with its operands chosen from its
// constraints and call arguments, so that each flush names the argument it
// flushes. Falls back to asmEffectText if the template does not assemble.
AsmEffect asmEffect(const llvm::CallBase &CB);

// The same from the template alone (callers that have only the text): each
// operand is tried as a register, then as a memory operand. Flush and Fence
// only; a flush's Arg is -1.
AsmEffect asmEffect(llvm::StringRef Template);

// A `lock` prefix as its own word ("lock; addl ...", "lock cmpxchg ...").
inline bool hasLockPrefix(llvm::StringRef S) {
  for (size_t P = S.find("lock"); P != llvm::StringRef::npos;
       P = S.find("lock", P + 1)) {
    bool Start = P == 0 || llvm::StringRef(" \t\n;").contains(S[P - 1]);
    bool End =
        P + 4 == S.size() || llvm::StringRef(" \t\n;").contains(S[P + 4]);
    if (Start && End)
      return true;
  }
  return false;
}

// The text rules, for templates the assembler rejects: mnemonics as words
// of the text, and the hand-encoded forms spelt as one .byte list
// (".byte 0x66, 0x0f, 0xae, 0x30" is clwb (%rax)): 0f ae with ModRM reg
// field 7 is clflush, or clflushopt after a 66 prefix; reg 6 after 66 is
// clwb. An xchg with a memory operand is not recognised here.
inline AsmEffect asmEffectText(llvm::StringRef Text) {
  AsmEffect E;
  std::string T = Text.lower();
  llvm::StringRef S(T);
  if (S.contains("clflushopt"))
    E.Flush = FlushClflushopt;
  else if (S.contains("clflush"))
    E.Flush = FlushClflush;
  else if (S.contains("clwb"))
    E.Flush = FlushClwb;
  if (S.contains("mfence"))
    E.Fence = FenceMfence;
  else if (S.contains("sfence"))
    E.Fence = FenceSfence;
  else if (hasLockPrefix(S))
    E.Fence = FenceLocked;
  if (E.Flush || !S.contains(".byte"))
    return E;
  llvm::SmallVector<unsigned, 8> Bytes;
  size_t P = 0;
  while ((P = S.find("0x", P)) != llvm::StringRef::npos) {
    unsigned V;
    llvm::StringRef Hex = S.substr(P + 2).take_while(llvm::isHexDigit);
    P += 2 + Hex.size();
    if (!Hex.getAsInteger(16, V))
      Bytes.push_back(V);
  }
  for (size_t I = 0; I + 2 < Bytes.size(); I++) {
    if (Bytes[I] != 0x0f || Bytes[I + 1] != 0xae)
      continue;
    unsigned Reg = (Bytes[I + 2] >> 3) & 7, Mod = Bytes[I + 2] >> 6;
    bool P66 = I > 0 && Bytes[I - 1] == 0x66;
    if (Mod == 3)
      continue; // register form: the fences (0f ae f8 is sfence)
    if (Reg == 7)
      E.Flush = P66 ? FlushClflushopt : FlushClflush;
    else if (Reg == 6 && P66)
      E.Flush = FlushClwb;
  }
  return E;
}

} // namespace pmkit

#endif // PMKIT_PASSES_COMMON_PERSISTOPS_H
