#include "lockstep/tensor/dnnl_context.h"

#include <vector>

namespace lockstep::tensor {

dnnl::engine& DnnlEngine() {
  static dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);  // thread-safe, shared
  return *e;
}

dnnl::stream& DnnlStream() {
  thread_local dnnl::stream s(DnnlEngine());
  return s;
}

void* DnnlScratchpad(size_t bytes) {
  thread_local std::vector<float> buf;
  const size_t n = (bytes + sizeof(float) - 1) / sizeof(float);
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace lockstep::tensor
