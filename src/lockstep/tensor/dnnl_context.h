// The oneDNN engine, streams and scratchpads that every primitive of tensor/ runs on
// (convolutions in conv_plan.cc, bf16 products in gemm_bf16.cc): one engine per process, one
// stream and one scratchpad per thread. Internal to tensor/.
#pragma once

#include <cstddef>
#include <oneapi/dnnl/dnnl.hpp>

namespace lockstep::tensor {

// The CPU engine, shared by every thread (created on first use, never destroyed).
dnnl::engine& DnnlEngine();

// This thread's stream (a rank thread or an OpenMP worker each get their own).
dnnl::stream& DnnlStream();

// This thread's user scratchpad of at least `bytes`, grown on demand. Primitives are made with
// scratchpad_mode::user so that one primitive may execute on several threads at once; the
// buffer serves one execution at a time, so it is valid until this thread's next call.
void* DnnlScratchpad(size_t bytes);

}  // namespace lockstep::tensor
