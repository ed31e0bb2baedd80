// SPDX-License-Identifier: Apache-2.0
//
// RobustOpt.h -- the planner of pmkit-robust's `opt` and `flit` settings:
// an escape analysis (is a fresh PM object still captured, or has it
// escaped?) and a persistency-state analysis (which escaped locations are
// written back but not yet fenced), run as a forward dataflow over each
// function with one summary per function for calls, and turned into a list
// of actions: write back after an access, fence before a violation point,
// write back a fresh object before it escapes, FliT counters around atomics.
// RobustPass applies the actions (Robust.cpp); this file decides them.

#ifndef PMKIT_PASSES_ROBUSTOPT_H
#define PMKIT_PASSES_ROBUSTOPT_H

#include "Common/Access.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Support/Alignment.h"

#include <string>
#include <vector>

namespace llvm {
class Instruction;
class Value;
class DataLayout;
} // namespace llvm

namespace pmkit {

class PMAliasInfo;

struct RobustAction {
  enum Kind {
    WriteBackAfter,    // write back what At accessed (no fence)
    FenceBefore,       // sfence before At
    FlushObjectBefore, // write back [Obj, Obj+ObjSize) before At
    FlitStore,         // FliT counter up before At; write back, down after
    FlitLoad,          // after At: write back and fence if the counter is up
    RedirectCall,      // call Obj (a context clone) from the call At
  };
  Kind K;
  llvm::Instruction *At;
  // FlushObjectBefore: the object's start, or (ObjFromSlot) the stack slot
  // the allocator wrote it to; its size. RedirectCall: the clone.
  llvm::Value *Obj = nullptr;
  bool ObjFromSlot = false;
  llvm::Value *ObjSize = nullptr;
  std::string Why; // for -pmkit-robust-report
};

struct RobustOptStats {
  unsigned Functions = 0, FreshObjects = 0, Deferred = 0, Restarts = 0;
  unsigned Clones = 0, Plans = 0;
};

// Plans the module. Ignored(I) is true inside PMKIT_ROBUST_IGNORE regions;
// SkipFn(F) for functions the pass leaves alone. Flit selects the FliT
// treatment of atomic accesses. Adds the context clones the plan calls
// (internal copies of a function for calls that pass it objects still
// captured); the actions refer to them.
std::vector<RobustAction>
planRobustOpt(llvm::Module &M, const PMAliasInfo &PA,
              llvm::FunctionAnalysisManager &FAM,
              llvm::function_ref<bool(const llvm::Instruction &)> Ignored,
              llvm::function_ref<bool(const llvm::Function &)> SkipFn,
              bool Flit, RobustOptStats &Stats);

} // namespace pmkit

#endif // PMKIT_PASSES_ROBUSTOPT_H
