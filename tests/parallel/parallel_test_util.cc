#include "parallel/parallel_test_util.h"

#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>

#include "lockstep/comm/threads/threads_world.h"
#include "lockstep/core/rng.h"

namespace lockstep::parallel::testing {

void RunRanks(int world_size, const std::function<void(std::shared_ptr<comm::Communicator>)>& fn) {
  comm::ThreadsWorld world(world_size);
  std::vector<std::thread> threads;
  std::exception_ptr first;
  std::mutex mu;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(world.Rank(r));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

nn::GptConfig TinyGpt() {
  nn::GptConfig c;
  c.vocab = 64;
  c.context = 16;
  c.layers = 2;
  c.heads = 4;
  c.width = 32;
  c.mlp_ratio = 4;
  return c;
}

nn::ModelInput TokenBatch::input() const {
  nn::ModelInput in;
  in.tokens = tokens.data();
  in.targets = targets.data();
  in.batch = B;
  in.seq = T;
  return in;
}

TokenBatch RandomTokens(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  TokenBatch b;
  b.B = B;
  b.T = T;
  Rng rng(seed, 3);
  for (int64_t i = 0; i < B * T; ++i) {
    b.tokens.push_back(static_cast<int32_t>(rng.NextU32() % vocab));
    b.targets.push_back(static_cast<int32_t>(rng.NextU32() % vocab));
  }
  b.targets[1] = -1;  // one ignored row
  return b;
}

void AddToCanonical(const StageModel& m, const float* flat, Canonical* out) {
  for (int i = 0; i < m.params().size(); ++i) {
    const TensorPlacement& p = m.placements()[i];
    std::vector<float>& full = (*out)[p.name];
    full.resize(static_cast<size_t>(tensor::NumElements(p.global_shape)), 0.0f);
    const float* local = flat + m.params().info(i).offset;
    for (const ElementRun& r : p.Runs())
      std::memcpy(full.data() + r.global, local + r.local, static_cast<size_t>(r.count) * sizeof(float));
  }
}

void LoadCanonical(const Canonical& c, StageModel& m) {
  for (int i = 0; i < m.params().size(); ++i) {
    const TensorPlacement& p = m.placements()[i];
    const std::vector<float>& full = c.at(p.name);
    float* local = m.params().flat_params() + m.params().info(i).offset;
    for (const ElementRun& r : p.Runs())
      std::memcpy(local + r.local, full.data() + r.global, static_cast<size_t>(r.count) * sizeof(float));
  }
}

Canonical RandomCanonical(const nn::GptConfig& c, uint64_t seed) {
  nn::Gpt gpt(c);  // for the names and shapes
  Canonical out;
  for (const nn::ParamInfo& p : gpt.params()) {
    std::vector<float>& v = out[p.name];
    v.resize(static_cast<size_t>(p.numel));
    const bool ln_weight = p.name.find("ln") != std::string::npos && p.name.find(".weight") != std::string::npos;
    nn::InitValues(v.data(), p.numel, nn::Init::Uniform(ln_weight ? 0.3f : 0.5f), p.name, seed);
    if (ln_weight)
      for (float& x : v) x += 1.0f;
  }
  return out;
}

Canonical RandomCanonical(const nn::LlamaConfig& c, uint64_t seed) {
  nn::Llama llama(c, nn::Llama::InferenceOnly{});  // for the names and shapes
  Canonical out;
  for (const nn::ParamInfo& p : llama.params()) {
    std::vector<float>& v = out[p.name];
    v.resize(static_cast<size_t>(p.numel));
    const bool norm = p.name.find("norm") != std::string::npos;
    nn::InitValues(v.data(), p.numel, nn::Init::Uniform(norm ? 0.3f : 0.5f), p.name, seed);
    if (norm)
      for (float& x : v) x += 1.0f;
  }
  return out;
}

void RankMerge::Add(const StageModel& m, const float* flat) {
  for (int i = 0; i < m.params().size(); ++i) {
    const TensorPlacement& p = m.placements()[i];
    const size_t n = static_cast<size_t>(tensor::NumElements(p.global_shape));
    std::vector<float>& full = values_[p.name];
    std::vector<char>& held = held_[p.name];
    full.resize(n, 0.0f);
    held.resize(n, 0);
    const float* local = flat + m.params().info(i).offset;
    for (const ElementRun& r : p.Runs()) {
      for (int64_t k = 0; k < r.count; ++k) {
        const float v = local[r.local + k];
        float& slot = full[static_cast<size_t>(r.global + k)];
        char& h = held[static_cast<size_t>(r.global + k)];
        if (h && std::memcmp(&slot, &v, sizeof v) != 0 && conflict_.empty())
          conflict_ = p.name + "[" + std::to_string(r.global + k) + "]: ranks disagree, " + std::to_string(slot) +
                      " vs " + std::to_string(v);
        slot = v;
        h = 1;
      }
    }
  }
}

std::string RankMerge::Problems() const {
  if (!conflict_.empty()) return conflict_;
  for (const auto& [name, held] : held_)
    for (size_t i = 0; i < held.size(); ++i)
      if (!held[i]) return name + "[" + std::to_string(i) + "]: no rank holds it";
  return "";
}

std::string CompareBits(const Canonical& a, const Canonical& b) {
  for (const auto& [name, vb] : b)
    if (a.find(name) == a.end()) return name + ": only in the second";
  for (const auto& [name, va] : a) {
    auto it = b.find(name);
    if (it == b.end()) return name + ": only in the first";
    const std::vector<float>& vb = it->second;
    if (va.size() != vb.size()) return name + ": sizes differ";
    for (size_t i = 0; i < va.size(); ++i) {
      if (std::memcmp(&va[i], &vb[i], sizeof(float)) != 0)
        return name + "[" + std::to_string(i) + "]: " + std::to_string(va[i]) + " vs " + std::to_string(vb[i]);
    }
  }
  return "";
}

double MaxRelativeDifference(const Canonical& a, const Canonical& b) {
  double worst = 0;
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  for (const auto& [name, va] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.size() != va.size()) return std::numeric_limits<double>::infinity();
    double scale = 1e-12, diff = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      scale = std::max(scale, static_cast<double>(std::fabs(va[i])));
      diff = std::max(diff, static_cast<double>(std::fabs(va[i] - it->second[i])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

}  // namespace lockstep::parallel::testing
