// SPDX-License-Identifier: Apache-2.0
//
// CallEffects.cpp -- callEffects(): a look-up in CallEffects.def, built
// once into a map.

#include "Common/CallEffects.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/InstrTypes.h"

using namespace llvm;

unsigned pmkit::callEffects(StringRef Name) {
  static const StringMap<unsigned> Table = [] {
    StringMap<unsigned> T;
#define PMK_CALL(NAME, FLAGS) T[NAME] = (FLAGS);
#include "Common/CallEffects.def"
#undef PMK_CALL
    return T;
  }();
  auto It = Table.find(Name);
  return It == Table.end() ? 0 : It->second;
}

bool pmkit::formatStores(const CallBase &CB, unsigned Effects,
                         SmallVectorImpl<unsigned> &Out) {
  int A = formatArgument(Effects);
  if (A < 0 || (unsigned)A >= CB.arg_size())
    return true;
  StringRef F;
  if (!getConstantStringInfo(CB.getArgOperand(A), F))
    return false;
  // A conversion is '%', an optional position "N$", then flags, width,
  // precision (a '*' takes an argument) and length modifiers (glibc's Z
  // and I, C23's wN among them), then its letter; "%%" prints a '%' and
  // glibc's %m takes no argument.
  unsigned Next = A + 1;
  for (size_t I = 0; I < F.size(); ++I) {
    if (F[I] != '%')
      continue;
    size_t J = I + 1, K = J;
    unsigned Pos = 0;
    while (K < F.size() && isDigit(F[K]))
      Pos = Pos * 10 + (F[K++] - '0');
    bool Positional = K > J && K < F.size() && F[K] == '$';
    if (Positional)
      J = K + 1;
    while (J < F.size() &&
           StringRef("-+ #0'123456789.*$hlLqjztZIw").contains(F[J])) {
      if (F[J] == '*' && !Positional)
        ++Next;
      ++J;
    }
    if (J >= F.size())
      break;
    if (F[J] == 'n')
      Out.push_back(Positional ? A + Pos : Next);
    if (F[J] != '%' && F[J] != 'm')
      ++Next;
    I = J;
  }
  return true;
}
