#include "lockstep/planner/candidates.h"

#include <map>
#include <tuple>

#include "lockstep/comm/threads/threads_world.h"
#include "lockstep/planner/host_placement.h"
#include "lockstep/nn/model.h"
#include "lockstep/parallel/gpt_shard.h"
#include "lockstep/parallel/stage_model.h"
#include "lockstep/runtime/setup/config_keys.h"
#include "lockstep/runtime/setup/run_setup.h"

namespace lockstep::planner {
namespace {

// Parameter layouts of the stages, built once per (tp, stage range).
class StageLayouts {
 public:
  explicit StageLayouts(const PlanSetup& s) : s_(s) {}

  Result<StageLayout> Get(int tp, int first, int end, bool embedding, bool head) {
    const auto key = std::make_tuple(tp, first, end, embedding, head);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    StageLayout out;
    out.has_embedding = embedding;
    out.has_head = head;
    out.blocks = end - first;
    if (s_.gpt) {
      comm::ThreadsWorld world(tp);  // rank 0's view of a tp group; a dry shard never communicates
      parallel::TpContext ctx(world.Rank(0), tp, false);
      parallel::GptShardOptions o;
      o.model = *s_.gpt;
      o.first_layer = first;
      o.end_layer = end;
      o.has_embedding = embedding;
      o.has_head = head;
      o.flat_params = o.flat_grads = false;
      LS_ASSIGN_OR_RETURN(std::unique_ptr<parallel::GptShard> dry, parallel::GptShard::Create(o, &ctx));
      Fill(dry->params(), dry->units(), &out);
    } else {
      LS_ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> model, nn::MakeModel(s_.config));
      Fill(model->params(), {{0, model->params().size()}}, &out);
    }
    cache_[key] = out;
    return out;
  }

 private:
  static void Fill(const nn::ParameterStore& ps, const std::vector<parallel::ParamUnit>& units, StageLayout* out) {
    for (int i = 0; i < ps.size(); ++i) {
      out->param_numels.push_back(ps.info(i).numel);
      out->param_shapes.push_back(ps.info(i).shape);
    }
    for (const parallel::ParamUnit& u : units) out->units.push_back({u.first_param, u.end_param});
  }
  const PlanSetup& s_;
  std::map<std::tuple<int, int, int, bool, bool>, StageLayout> cache_;
};

std::vector<parallel::ParallelDims> Factorisations(int world, bool gpt) {
  std::vector<parallel::ParallelDims> out;
  for (int tp = 1; tp <= world; ++tp) {
    if (world % tp != 0) continue;
    for (int pp = 1; pp <= world / tp; ++pp) {
      if ((world / tp) % pp != 0) continue;
      if (!gpt && (tp > 1 || pp > 1)) continue;
      parallel::ParallelDims d;
      d.dp = world / tp / pp;
      d.tp = tp;
      d.pp = pp;
      out.push_back(d);
    }
  }
  return out;
}

Result<std::vector<Candidate>> Enumerate(const PlanSetup& s, int world, bool one_worker) {
  StageLayouts layouts(s);
  std::vector<Candidate> out;
  std::string first_error;
  std::vector<std::string> precisions = {"fp32"}, recomputes = {"none"};
  if (!one_worker && s.knows_precision) precisions.push_back("bf16");
  if (!one_worker && s.knows_recompute && s.gpt) recomputes.push_back("block");
  Result<std::string> kind_read = s.config.GetString("model.kind", "");
  const std::string kind = kind_read.ok() ? *kind_read : "";
  for (const parallel::ParallelDims& d : Factorisations(world, s.gpt.has_value())) {
    const int base = d.pp > 1 ? d.pp : 1;
    // PowerSGD trains whole replicas of pure data parallelism; DiLoCo's replicas may be tensor-
    // and pipeline-parallel inside; neither takes ZeRO (run_setup.cc).
    const bool replicas_only = s.run.train.powersgd() || s.run.train.diloco();
    if (s.run.train.powersgd() && (d.tp > 1 || d.pp > 1)) continue;
    if (!one_worker && !TpInsideHosts(d, s.workers_per_host)) {  // train refuses a tp group across hosts
      if (first_error.empty()) first_error = "tp=" + std::to_string(d.tp) + " would cross hosts of " +
                                             std::to_string(s.workers_per_host) + " workers";
      continue;
    }
    for (int zero = 0; zero <= (d.dp > 1 && !one_worker && !replicas_only ? 3 : 0); ++zero) {
      for (int factor : {1, 2, 4}) {
        TrainOptions o;
        o.layout = d.ToString();
        o.zero = zero;
        runtime::RunConfig run = s.run;
        const int micros = base * factor;
        if (d.pp > 1) {
          run.train.pp_microbatches = micros;
          run.train.accum_steps = 1;
        } else {
          run.train.accum_steps = micros;
        }
        Result<runtime::RunLayout> lp = runtime::ResolveLayout(o, run, world, runtime::ModelShape{s.gpt, std::nullopt, kind});
        if (!lp.ok()) {
          if (first_error.empty()) first_error = d.ToString() + ": " + lp.status().message();
          continue;
        }
        Candidate c;
        c.dims = lp->dims;
        c.zero = zero;
        c.micros = micros;
        c.schedule = lp->schedule;
        c.micro_rows = run.train.batch_size / d.dp / micros;
        for (int st = 0; st < d.pp; ++st) {
          const int first = s.gpt ? lp->partition.begin[st] : 0, end = s.gpt ? lp->partition.begin[st + 1] : 0;
          LS_ASSIGN_OR_RETURN(StageLayout sl, layouts.Get(d.tp, first, end, st == 0, st == d.pp - 1));
          c.stages.push_back(std::move(sl));
        }
        for (const std::string& p : precisions)
          for (const std::string& r : recomputes) {
            c.precision = p;
            c.recompute = r;
            out.push_back(c);
          }
      }
    }
  }
  if (out.empty())
    return Status::InvalidArgument("--nproc " + std::to_string(world) + ": no layout of " + std::to_string(world) +
                                   " workers is valid for this config (" + first_error + ")");
  return out;
}

}  // namespace

Result<PlanSetup> ReadPlanSetup(const std::string& config_path, const std::vector<std::string>& overrides, int world) {
  PlanSetup s;
  s.world = world;
  LS_ASSIGN_OR_RETURN(s.config, Config::LoadFile(config_path, overrides));
  LS_ASSIGN_OR_RETURN(s.run, runtime::ReadRunConfig(s.config));
  LS_ASSIGN_OR_RETURN(std::string kind, s.config.GetString("model.kind", ""));
  if (kind == "gpt") {
    LS_ASSIGN_OR_RETURN(nn::GptConfig g, nn::ReadGptConfig(s.config));
    s.gpt = g;
  } else {
    LS_RETURN_IF_ERROR(nn::MakeModel(s.config).status());
  }
  const int64_t steps = s.run.train.steps > 0 ? s.run.train.steps : 1000;
  LS_ASSIGN_OR_RETURN(s.optim, optim::ReadOptimConfig(s.config, steps));
  s.knows_precision = runtime::FindConfigKey("train.precision") != nullptr;
  s.knows_recompute = runtime::FindConfigKey("train.recompute") != nullptr;
  LS_RETURN_IF_ERROR(runtime::CheckConfigKeys(s.config).status());
  return s;
}

Result<std::vector<Candidate>> EnumerateCandidates(const PlanSetup& setup) {
  return Enumerate(setup, setup.world, false);
}

Result<std::vector<Candidate>> OneWorkerCandidates(const PlanSetup& setup) { return Enumerate(setup, 1, true); }

}  // namespace lockstep::planner
