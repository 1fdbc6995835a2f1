#include "lockstep/parallel/canonical.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "lockstep/core/hash.h"

namespace lockstep::parallel {

std::vector<LocalPiece> PiecesOf(const StageModel& m, const float* values, int64_t values_begin, optim::FlatRange range,
                                 int tp_rank, bool reading) {
  std::vector<LocalPiece> pieces;
  const nn::ParameterStore& ps = m.params();
  for (int i = 0; i < ps.size(); ++i) {
    const TensorPlacement& p = m.placements()[i];
    if (p.tp_replicated && tp_rank != 0) continue;
    if (p.tied_copy && !reading) continue;
    const nn::ParamInfo& info = ps.info(i);
    const int64_t lo = std::max(range.begin, info.offset), hi = std::min(range.end, info.offset + info.numel);
    if (lo >= hi) continue;
    for (const ElementRun& r : p.RunsWithin(lo - info.offset, hi - info.offset))
      pieces.push_back({p.name, p.global_shape, r.global, r.count, values + (info.offset + r.local - values_begin)});
  }
  return pieces;
}

namespace {

nlohmann::json Header(const std::vector<LocalPiece>& pieces) {
  nlohmann::json h = nlohmann::json::array();
  for (const LocalPiece& p : pieces) h.push_back({p.name, p.global_shape, p.global_begin, p.count});
  return h;
}

void Place(CanonicalTensors* out, const std::string& name, const tensor::Shape& shape, int64_t begin, int64_t count,
           const float* data) {
  std::vector<float>& t = (*out)[name];
  t.resize(static_cast<size_t>(tensor::NumElements(shape)), 0.0f);
  std::memcpy(t.data() + begin, data, static_cast<size_t>(count) * sizeof(float));
}

}  // namespace

Result<CanonicalTensors> GatherCanonical(comm::Communicator& world, const std::vector<LocalPiece>& mine) {
  CanonicalTensors out;
  if (world.rank() != 0) {
    const std::string header = Header(mine).dump();
    std::vector<float> values;
    for (const LocalPiece& p : mine) values.insert(values.end(), p.data, p.data + p.count);
    const int64_t sizes[2] = {static_cast<int64_t>(header.size()), static_cast<int64_t>(values.size())};
    LS_RETURN_IF_ERROR(world.Send(sizes, 2, comm::DType::kI64, 0, 21)->Wait());
    LS_RETURN_IF_ERROR(world.Send(header.data(), header.size(), comm::DType::kU8, 0, 22)->Wait());
    LS_RETURN_IF_ERROR(world.Send(values.data(), values.size(), comm::DType::kF32, 0, 23)->Wait());
    return out;
  }
  for (const LocalPiece& p : mine) Place(&out, p.name, p.global_shape, p.global_begin, p.count, p.data);
  for (int r = 1; r < world.size(); ++r) {
    int64_t sizes[2];
    LS_RETURN_IF_ERROR(world.Recv(sizes, 2, comm::DType::kI64, r, 21)->Wait());
    std::string header(static_cast<size_t>(sizes[0]), '\0');
    std::vector<float> values(static_cast<size_t>(sizes[1]));
    LS_RETURN_IF_ERROR(world.Recv(header.data(), header.size(), comm::DType::kU8, r, 22)->Wait());
    LS_RETURN_IF_ERROR(world.Recv(values.data(), values.size(), comm::DType::kF32, r, 23)->Wait());
    int64_t at = 0;
    for (const nlohmann::json& e : nlohmann::json::parse(header)) {
      const int64_t count = e[3].get<int64_t>();
      Place(&out, e[0].get<std::string>(), e[1].get<tensor::Shape>(), e[2].get<int64_t>(), count, values.data() + at);
      at += count;
    }
  }
  return out;
}

std::string CanonicalXxh64(const CanonicalTensors& tensors) {
  Xxh64Stream h;
  for (const auto& [name, values] : tensors) h.Update(values.data(), values.size() * sizeof(float));
  return HexU64(h.Digest());
}

}  // namespace lockstep::parallel
