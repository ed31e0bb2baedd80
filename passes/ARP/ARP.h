// SPDX-License-Identifier: Apache-2.0
//
// ARP.h -- the pmkit-arp module pass (arp mode, after Kolli et al.,
// ISCA'17): lowers acquire-release persistency to x86. Programs order
// persists with pmkit::atomic and pmkit::sequence_point
// (include/pmkit/arp.hpp), which call __pmkit_arp_release, _acquire and
// _seqpoint; the pass writes back every store that may reach PM (PMAlias)
// and replaces those calls with the fences of one of three lowerings
// (-pmkit-arp-lowering):
//   arp    clwb after each PM store, not waited for; an sfence at each
//          persistent release (before its store) and sequence point;
//          nothing at acquires (x86-TSO keeps a load before later stores)
//          or at volatile syncs
//   scp    clwb + sfence after each PM store (sequentially consistent
//          persists); nothing at syncs
//   epoch  clwb after each PM store; an mfence at every sync access and
//          sequence point, volatile or not (RCBSP's full fences)
// With -pmkit-trace the calls stay, after the fences, so that
// libpmkit-trace records them. Entry point: pmkit::ARPPass::run. Run with
//   opt-16 -load-pass-plugin=pmkit-passes.so -passes=pmkit-arp \
//     -pmkit-arp-lowering=arp -S in.ll
// or through clang: pmkit c++ --mode=arp [--arp-lowering=L].

#ifndef PMKIT_PASSES_ARP_H
#define PMKIT_PASSES_ARP_H

#include "llvm/IR/PassManager.h"

namespace pmkit {

class ARPPass : public llvm::PassInfoMixin<ARPPass> {
public:
  // The -passes= name; also this pass's DEBUG_TYPE and option prefix.
  static constexpr llvm::StringLiteral PassName = "pmkit-arp";

  llvm::PreservedAnalyses run(llvm::Module &M,
                              llvm::ModuleAnalysisManager &MAM);
  static bool isRequired() { return true; }
};

} // namespace pmkit

#endif // PMKIT_PASSES_ARP_H
