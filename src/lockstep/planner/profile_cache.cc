// The JSON cache of `lockstep plan` (profile_cache.h): the profile as JSON
// (ComputeProfile::ToJson / FromJson) and the cache file it is kept in.
#include "lockstep/planner/profile_cache.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "lockstep/core/version.h"
#include "lockstep/planner/profile.h"

namespace lockstep::planner {
namespace {

nlohmann::json PieceJson(const PieceCost& c) {
  return {{"fwd_ms", c.fwd_ms},
          {"bwd_ms", c.bwd_ms},
          {"saved_bytes", c.saved_bytes},
          {"peak_bytes", c.peak_bytes},
          {"eval_peak_bytes", c.eval_peak_bytes},
          {"kernel_bytes", c.kernel_bytes},
          {"zero2_ns_per_element", c.zero_ns_per_element[0]},
          {"zero3_ns_per_element", c.zero_ns_per_element[1]},
          {"bf16_fwd_ms", c.bf16_fwd_ms},
          {"bf16_bwd_ms", c.bf16_bwd_ms},
          {"warm_fwd_ms", c.warm_fwd_ms},
          {"warm_bwd_ms", c.warm_bwd_ms},
          {"bf16_warm_fwd_ms", c.bf16_warm_fwd_ms},
          {"bf16_warm_bwd_ms", c.bf16_warm_bwd_ms},
          {"recompute_fwd_ms", c.recompute_fwd_ms},
          {"bf16_recompute_fwd_ms", c.bf16_recompute_fwd_ms},
          {"bf16_saved_bytes", c.bf16_saved_bytes},
          {"bf16_peak_bytes", c.bf16_peak_bytes},
          {"bf16_kernel_bytes", c.bf16_kernel_bytes}};
}
PieceCost PieceFromJson(const nlohmann::json& j) {
  PieceCost c;
  c.fwd_ms = j.at("fwd_ms").get<double>();
  c.bwd_ms = j.at("bwd_ms").get<double>();
  c.saved_bytes = j.at("saved_bytes").get<int64_t>();
  c.peak_bytes = j.at("peak_bytes").get<int64_t>();
  c.eval_peak_bytes = j.at("eval_peak_bytes").get<int64_t>();
  c.kernel_bytes = j.at("kernel_bytes").get<int64_t>();
  c.warm_fwd_ms = j.value("warm_fwd_ms", 0.0);
  c.warm_bwd_ms = j.value("warm_bwd_ms", 0.0);
  c.bf16_warm_fwd_ms = j.value("bf16_warm_fwd_ms", 0.0);
  c.bf16_warm_bwd_ms = j.value("bf16_warm_bwd_ms", 0.0);
  c.recompute_fwd_ms = j.value("recompute_fwd_ms", 0.0);
  c.bf16_recompute_fwd_ms = j.value("bf16_recompute_fwd_ms", 0.0);
  c.zero_ns_per_element[0] = j.value("zero2_ns_per_element", 0.0);
  c.zero_ns_per_element[1] = j.value("zero3_ns_per_element", 0.0);
  c.bf16_fwd_ms = j.value("bf16_fwd_ms", 0.0);
  c.bf16_bwd_ms = j.value("bf16_bwd_ms", 0.0);
  c.bf16_saved_bytes = j.value("bf16_saved_bytes", int64_t{0});
  c.bf16_peak_bytes = j.value("bf16_peak_bytes", int64_t{0});
  c.bf16_kernel_bytes = j.value("bf16_kernel_bytes", int64_t{0});
  return c;
}

nlohmann::json EmptyCache(const std::string& key) {
  return {{"key", key}, {"compute", nlohmann::json::object()}, {"comm", nlohmann::json::object()}};
}

nlohmann::json LoadCache(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  if (!in) return EmptyCache(key);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("key", "") != key || !j.contains("compute") || !j.contains("comm"))
    return EmptyCache(key);
  return j;
}

}  // namespace

// The profile's format in the key (2: pieces carry kernel_bytes; 3: times scaled to whole
// passes; 8: the optimizer measured on every worker at once; 9: whole models' warm passes).
std::string ProfileKey(const PlanSetup& s) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string model;
  if (s.gpt) {
    const nn::GptConfig& g = *s.gpt;
    char text[256];
    std::snprintf(text, sizeof(text), "gpt vocab %lld context %lld layers %lld heads %lld width %lld mlp %lld",
                  static_cast<long long>(g.vocab), static_cast<long long>(g.context), static_cast<long long>(g.layers),
                  static_cast<long long>(g.heads), static_cast<long long>(g.width),
                  static_cast<long long>(g.mlp_ratio));
    model = text;
  } else {
    // Any other model: every model.* key as the config gives it (llama-tiny shrunk with --set
    // is another model, whose measurements the full one's must not stand in for).
    model = "model";
    for (const std::string& k : s.config.Keys())
      if (k.rfind("model.", 0) == 0) {
        model += ' ';
        model += k.substr(6);
        model += ' ';
        model += s.config.ValueText(k);
      }
  }
  std::string key = "lockstep " LOCKSTEP_VERSION " profile 10 on ";
  key += host;
  key += ", ";
  key += model;
  key += ", optimizer ";
  key += optim::OptimizerName(s.optim.kind);
  return key;
}

ProfileCache OpenCache(const std::string& path, const std::string& key, bool fresh) {
  return {path, fresh ? EmptyCache(key) : LoadCache(path, key), false};
}

Status SaveCache(const ProfileCache& cache) {
  const std::string tmp = cache.path + ".tmp";
  {
    std::ofstream out(tmp);
    out << cache.json.dump(1) << "\n";
    if (!out) return Status::IoError("cannot write '" + tmp + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, cache.path, ec);
  if (ec) return Status::IoError("cannot rename '" + tmp + "': " + ec.message());
  return Status::Ok();
}

std::string ComputeSlot(int workers, int threads) {
  char slot[48];
  std::snprintf(slot, sizeof(slot), "w%d-t%d", workers, threads);
  return slot;
}

nlohmann::json ComputeProfile::ToJson() const {
  nlohmann::json g = nlohmann::json::array(), w = nlohmann::json::array();
  for (const auto& [k, c] : gpt)
    g.push_back({{"rows", k.first},
                 {"tp", k.second},
                 {"embedding", PieceJson(c.embedding)},
                 {"block", PieceJson(c.block)},
                 {"head", PieceJson(c.head)}});
  for (const auto& [rows, c] : whole) w.push_back({{"rows", rows}, {"model", PieceJson(c)}});
  return {{"workers", workers},
          {"threads_per_worker", threads_per_worker},
          {"optimizer_ns_per_element", optimizer_ns_per_element},
          {"gpt", g},
          {"whole", w}};
}

Result<ComputeProfile> ComputeProfile::FromJson(const nlohmann::json& j) {
  try {
    ComputeProfile p;
    p.workers = j.at("workers").get<int>();
    p.threads_per_worker = j.at("threads_per_worker").get<int>();
    p.optimizer_ns_per_element = j.at("optimizer_ns_per_element").get<double>();
    for (const nlohmann::json& e : j.at("gpt"))
      p.gpt[{e.at("rows").get<int64_t>(), e.at("tp").get<int>()}] = {
          PieceFromJson(e.at("embedding")), PieceFromJson(e.at("block")), PieceFromJson(e.at("head"))};
    for (const nlohmann::json& e : j.at("whole")) p.whole[e.at("rows").get<int64_t>()] = PieceFromJson(e.at("model"));
    return p;
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("plan profile cache: ") + e.what());
  }
}

}  // namespace lockstep::planner
