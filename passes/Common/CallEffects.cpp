// SPDX-License-Identifier: Apache-2.0
//
// CallEffects.cpp -- callEffects(): a look-up in CallEffects.def, built
// once into a map.

#include "Common/CallEffects.h"

#include "llvm/ADT/StringMap.h"

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
