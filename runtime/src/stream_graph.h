// Graph capture on a CUDA stream (OperationSet::beginGraphCapture for sets that queue their work
// on a stream of their own): the stream records instead of running, and the recording becomes a
// CUDA graph launched on that stream. Runtime sources built with CUDA only.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "ree/runtime/operation_set.h"

namespace ree {

// Starts recording `stream`. Thread-local mode: only the calling thread is held to the rules of
// capture (no work on other streams, no synchronising call), so other threads of the process
// (logits hashing, transports) go on as before.
Status beginStreamCapture(cudaStream_t stream, const char* owner);

// Ends the recording of `stream` and instantiates it as a graph launched on `stream`. The stream
// stops recording even when this fails (a capture invalidated by a call that is not allowed
// while recording: the error names it).
Status endStreamCapture(cudaStream_t stream, const char* owner,
                        std::unique_ptr<OperationGraph>* out);

}  // namespace ree
