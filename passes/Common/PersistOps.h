// SPDX-License-Identifier: Apache-2.0
//
// PersistOps.h -- how pmkit's passes recognise the x86 persistence
// instructions a program already contains: flushes and fences written as
// inline asm (by mnemonic, or hand-encoded with .byte) and their kinds,
// taken from include/pmkit/pmkit.h (PMKIT_FLUSH_*) and
// include/pmkit/trace_format.h (PMKIT_FENCE_*). pmkit-trace reports them;
// pmkit-robust strips them with -pmkit-robust-strip-existing. Header only.

#ifndef PMKIT_PASSES_COMMON_PERSISTOPS_H
#define PMKIT_PASSES_COMMON_PERSISTOPS_H

#include "pmkit/pmkit.h"
#include "pmkit/trace_format.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

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

// What an inline asm statement does to persistence, read from its text.
struct AsmEffect {
  uint32_t Flush = 0; // FlushClwb...; 0 = none
  uint32_t Fence = 0; // FenceSfence...; 0 = none
};

// A `lock` prefix as its own word ("lock; addl ...", "lock cmpxchg ...").
// xchg with a memory operand is locked too, but its operand is a template
// placeholder here, so it cannot be told from the register form (cpuid.h
// uses one): such asm is not counted as a fence.
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

// Recognises the mnemonics and the hand-encoded forms that code written
// for assemblers without clwb uses (".byte 0x66, 0x0f, 0xae, 0x30" is
// clwb (%rax)): 0f ae with ModRM reg field 7 is clflush, or clflushopt after
// a 66 prefix; reg 6 after 66 is clwb.
inline AsmEffect asmEffect(llvm::StringRef Text) {
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
