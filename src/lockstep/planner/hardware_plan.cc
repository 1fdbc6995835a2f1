// `lockstep plan --hardware FILE` (hardware.h): every layout of the described machine as a
// Candidate, its LayoutInput (DescribedLayoutInput), its prediction through the one step model
// (PredictRow, as the measured path's), then Decide, the table and plan.json.
#include <algorithm>
#include <cstdio>

#include "lockstep/planner/hardware.h"
#include "lockstep/runtime/setup/config_keys.h"

namespace lockstep::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The layouts of `workers` devices: tp up to a node's devices (a power of two dividing the heads
// and key/value heads), pp dividing the layers, dp the rest; micro-batches of 1, 2, 4, ... rows;
// interleaving v = 1..4; ZeRO 0, 1 and 3 (FSDP); the shape's recompute policies; bf16.
std::vector<Candidate> Layouts(const Hardware& hw, const ModelShape& m, int64_t global_batch, int n) {
  std::vector<Candidate> out;
  std::vector<std::string> recomputes = {"none", "selective", "full"};
  if (m.llama) recomputes = {"none", "op", "full"};
  for (int tp = 1; tp <= std::min(n, hw.devices_per_node); tp *= 2) {
    if (n % tp || m.heads % tp || m.kv_heads % tp) continue;
    for (int pp = 1; pp <= n / tp; ++pp) {
      if ((n / tp) % pp || m.layers % pp) continue;
      const int dp = n / tp / pp;
      if (global_batch % dp) continue;
      const int64_t local = global_batch / dp;
      for (int64_t rows_per_micro = 1; rows_per_micro <= local; rows_per_micro *= 2) {
        if (local % rows_per_micro) continue;
        const int64_t micros = local / rows_per_micro;
        for (int v = 1; v <= (pp > 1 ? 4 : 1); ++v) {
          if (v > 1 && ((m.layers / pp) % v || micros % pp)) continue;
          for (int zero : {0, 1, 3}) {
            if (zero > 0 && dp == 1) continue;
            for (const std::string& r : recomputes) {
              Candidate c;
              c.dims.dp = dp;
              c.dims.tp = tp;
              c.dims.pp = pp;
              c.zero = zero;
              c.micros = static_cast<int>(micros);
              c.precision = "bf16";
              c.recompute = r;
              c.interleave = v;
              c.micro_rows = rows_per_micro;
              out.push_back(std::move(c));
            }
          }
        }
      }
    }
  }
  return out;
}

// Every layout's row, predicted as the measured path predicts its candidates.
std::vector<PlanRow> Predict(const Hardware& hw, const ModelShape& m, int64_t global_batch, int workers,
                             bool clips_gradients) {
  std::vector<PlanRow> rows;
  const double tokens = static_cast<double>(global_batch * m.context);
  for (const Candidate& c : Layouts(hw, m, global_batch, workers)) {
    Result<LayoutInput> in = DescribedLayoutInput(hw, m, c, workers, clips_gradients);
    if (!in.ok()) continue;
    Result<PlanRow> row = PredictRow(c, *in, CommTable(), tokens);
    if (row.ok()) rows.push_back(std::move(*row));
  }
  return rows;
}

}  // namespace

Result<PlanResult> PlanForHardware(const Hardware& hw, const ModelShape& m, int64_t global_batch, int workers,
                                   int64_t mem_limit, bool clips_gradients) {
  const int64_t limit = mem_limit > 0 ? mem_limit : static_cast<int64_t>(hw.memory_gib * kGiB);
  std::vector<PlanRow> rows = Predict(hw, m, global_batch, workers, clips_gradients);
  if (rows.empty())
    return Status::InvalidArgument("--nproc " + std::to_string(workers) + ": no layout of " + std::to_string(workers) +
                                   " devices splits this model (heads, layers) and train.batch_size " +
                                   std::to_string(global_batch));
  std::vector<PlanRow> one = workers > 1 ? Predict(hw, m, global_batch, 1, clips_gradients) : std::vector<PlanRow>();
  return Decide(workers, true, limit, limit, std::move(rows), one);
}

Status RunHardwarePlan(const PlanOptions& o) {
  LS_ASSIGN_OR_RETURN(Config config, Config::LoadFile(o.config_path, o.overrides));
  LS_ASSIGN_OR_RETURN(ModelShape shape, ReadModelShape(config));
  LS_ASSIGN_OR_RETURN(int64_t batch, config.GetInt("train.batch_size", 16));
  if (batch < 1) return Status::InvalidArgument("train.batch_size must be at least 1");
  LS_RETURN_IF_ERROR(runtime::CheckConfigKeys(config).status());
  // The described frameworks' data parallelism is DDP's or FSDP's: planning DiLoCo or PowerSGD
  // with it would print their rows as if every step allreduced the whole gradient.
  LS_ASSIGN_OR_RETURN(std::string sync, config.GetString("train.sync", "every_step"));
  LS_ASSIGN_OR_RETURN(std::string compression, config.GetString("train.grad_compression", "none"));
  if (sync == "diloco" || compression == "powersgd")
    return Status::InvalidArgument(
        std::string("--hardware models DDP and FSDP only, not ") +
        (sync == "diloco" ? "train.sync = \"diloco\"" : "train.grad_compression = \"powersgd\"") +
        ": plan it on a measured machine (without --hardware)");
  LS_ASSIGN_OR_RETURN(Hardware hw, ReadHardware(o.hardware_path));
  LS_ASSIGN_OR_RETURN(double clip, config.GetDouble("optim.grad_clip", 0.0));
  LS_ASSIGN_OR_RETURN(PlanResult r, PlanForHardware(hw, shape, batch, o.nproc, o.mem_limit, clip > 0));
  std::printf("%s, %.2fB parameters, %d devices of %s, global batch %lld x %lld tokens\n\n",
              shape.llama ? "llama" : "gpt", static_cast<double>(shape.TotalParams()) * 1e-9, o.nproc, hw.name.c_str(),
              static_cast<long long>(batch), static_cast<long long>(shape.context));
  // The table lists the best 40; plan.json has them all.
  PlanResult shown = r;
  if (shown.rows.size() > 40) shown.rows.resize(40);
  PrintPlan(shown, stdout);
  return WritePlanJson(r, o.json_path);
}

}  // namespace lockstep::planner