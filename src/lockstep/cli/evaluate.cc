#include "lockstep/cli/evaluate.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "lockstep/checkpoint/resolve.h"
#include "lockstep/core/log.h"
#include "lockstep/nn/model.h"
#include "lockstep/optim/optim_config.h"
#include "lockstep/runtime/recovery/checkpointing.h"
#include "lockstep/builtin_job.h"
#include "lockstep/runtime/setup/config_keys.h"
#include "lockstep/runtime/setup/rank_data.h"
#include "lockstep/runtime/setup/run_config.h"
#include "lockstep/runtime/setup/run_setup.h"
#include "lockstep/runtime/training/eval_loop.h"

namespace lockstep::cli {

using runtime::EvalSums;
using runtime::RankData;
using runtime::RunConfig;

Status RunEvaluate(const EvalOptions& options) {
  LS_ASSIGN_OR_RETURN(Config config, Config::LoadFile(options.config_path, options.overrides));
  LS_ASSIGN_OR_RETURN(RunConfig run, runtime::ReadRunConfig(config));
  LS_ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> model, nn::MakeModel(config));
  // Optimizer keys are not used here, but reading them keeps typo detection consistent with train.
  LS_RETURN_IF_ERROR(optim::ReadOptimConfig(config, int64_t{1} << 40).status());
  LS_ASSIGN_OR_RETURN(std::vector<std::string> ignored, runtime::CheckConfigKeys(config));
  for (const std::string& line : ignored) LS_LOG(WARN) << line;
  LS_ASSIGN_OR_RETURN(const std::string dir, checkpoint::ResolveCheckpointPath(options.checkpoint_dir));
  LS_ASSIGN_OR_RETURN(nlohmann::json extra, runtime::LoadParameters(dir, &model->params()));
  LS_ASSIGN_OR_RETURN(DataSources sources, BuiltinData(config));
  LS_RETURN_IF_ERROR(model->CheckLayout(sources.val->layout()));
  LS_ASSIGN_OR_RETURN(auto data, RankData::Create(sources, run, 0, 1));
  LS_ASSIGN_OR_RETURN(EvalSums sums,
                      runtime::EvaluateLocal(*data, [&](const nn::ModelInput& rows) -> Result<nn::EvalResult> {
                        return model->Evaluate(rows);
                      }));
  if (sums.count == 0) return Status::InvalidArgument("the validation set is empty");
  nlohmann::json out = {{"checkpoint", dir},
                        {"step", extra.value("step", nlohmann::json(nullptr))},
                        {"val_loss", sums.loss_sum / static_cast<double>(sums.count)},
                        {"count", sums.count}};
  if (data->is_classifier()) out["val_acc"] = static_cast<double>(sums.correct) / static_cast<double>(sums.count);
  std::printf("%s\n", out.dump().c_str());
  return Status::Ok();
}

}  // namespace lockstep::cli
