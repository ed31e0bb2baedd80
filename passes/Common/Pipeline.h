// SPDX-License-Identifier: Apache-2.0
//
// Pipeline.h -- what the build asked of the pipeline beyond a mode, for
// every pass to see: whether pmkit-trace runs last (-pmkit-trace, given by
// `pmkit cc --trace`), so that a pass can keep what the trace must record.

#ifndef PMKIT_PASSES_COMMON_PIPELINE_H
#define PMKIT_PASSES_COMMON_PIPELINE_H

namespace pmkit {

// True if -pmkit-trace was given (clang adds the pass at OptimizerLast).
bool traceEnabled();

} // namespace pmkit

#endif // PMKIT_PASSES_COMMON_PIPELINE_H
