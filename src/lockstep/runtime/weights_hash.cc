#include "lockstep/runtime/weights_hash.h"

#include <algorithm>
#include <vector>

#include "lockstep/core/hash.h"

namespace lockstep::runtime {

std::string WeightsXxh64(const nn::ParameterStore& params) {
  std::vector<const nn::ParamInfo*> order;
  for (const nn::ParamInfo& p : params) order.push_back(&p);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->name < b->name; });
  Xxh64Stream h;
  // x86-64 is little-endian, so the in-memory floats are already the canonical bytes.
  for (const nn::ParamInfo* p : order)
    h.Update(params.flat_params() + p->offset, static_cast<size_t>(p->numel) * sizeof(float));
  return HexU64(h.Digest());
}

}  // namespace lockstep::runtime
