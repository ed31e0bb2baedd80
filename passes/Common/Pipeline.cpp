// SPDX-License-Identifier: Apache-2.0
//
// Pipeline.cpp -- the -pmkit-trace option (Pipeline.h).

#include "Common/Pipeline.h"

#include "llvm/Support/CommandLine.h"

using namespace llvm;

static cl::opt<bool> TraceOpt("pmkit-trace", cl::Hidden, cl::init(false),
                              cl::desc("Run pmkit-trace last in the pipeline"));

bool pmkit::traceEnabled() { return TraceOpt; }
