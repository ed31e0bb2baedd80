// SPDX-License-Identifier: Apache-2.0
//
// Attributes.h -- the names of the function attributes that carry a
// program's pmkit annotations into the passes: the pmkit-annotations pass
// (passes/Annotations) writes them from @llvm.global.annotations, the mode
// passes and the shared code in passes/Common read them. The vocabulary
// lives here, below both, so that no mode and nothing in Common includes
// another pass's header for it.

#ifndef PMKIT_PASSES_COMMON_ATTRIBUTES_H
#define PMKIT_PASSES_COMMON_ATTRIBUTES_H

#include "llvm/ADT/StringRef.h"

namespace pmkit {

// The function attributes the annotations pass attaches; each equals the
// annotation string that include/pmkit/annotations.h emits.
inline constexpr llvm::StringLiteral AttrFase = "pmkit.fase";
inline constexpr llvm::StringLiteral AttrPMAllocator = "pmkit.pm_allocator";
inline constexpr llvm::StringLiteral AttrRobustIgnore = "pmkit.robust_ignore";
// A FASE's volatile buffer parameters: the value lists "in:P:N" and
// "scratch:P:N" items, comma-separated (parameter P, 1-based, points to the
// number of bytes held by parameter N), from PMKIT_FASE_IN/_SCRATCH.
inline constexpr llvm::StringLiteral AttrFaseBufs = "pmkit.fase_bufs";
// Clobber mode's anchor: a call at a FASE's entry that takes every
// parameter, so that interprocedural optimisation (IPSCCP, dead-argument
// elimination) cannot replace what a caller passes with poison before the
// clobber pass records the arguments. It accesses no memory the program
// can see; the clobber pass removes it.
inline constexpr llvm::StringLiteral FaseKeepFn = "__pmkit_fase_keep";

} // namespace pmkit

#endif // PMKIT_PASSES_COMMON_ATTRIBUTES_H
