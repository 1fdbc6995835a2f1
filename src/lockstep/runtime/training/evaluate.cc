#include "lockstep/runtime/training/evaluate.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "lockstep/checkpoint/resolve.h"
#include "lockstep/core/log.h"
#include "lockstep/nn/model.h"
#include "lockstep/optim/optim_config.h"
#include "lockstep/runtime/launch/config_keys.h"
#include "lockstep/runtime/launch/run_config.h"
#include "lockstep/runtime/launch/train_plan.h"
#include "lockstep/runtime/recovery/checkpointing.h"
#include "lockstep/runtime/training/eval_loop.h"
#include "lockstep/runtime/training/shared_data.h"

namespace lockstep::runtime {

Status RunEvaluate(const EvalOptions& options) {
  LS_ASSIGN_OR_RETURN(Config config, LoadConfigWithOverrides(options.config_path, options.overrides));
  LS_ASSIGN_OR_RETURN(RunConfig run, ReadRunConfig(config));
  LS_ASSIGN_OR_RETURN(std::unique_ptr<nn::Model> model, nn::MakeModel(config));
  // Optimizer keys are not used here, but reading them keeps typo detection consistent with train.
  LS_RETURN_IF_ERROR(optim::ReadOptimConfig(config, int64_t{1} << 40).status());
  LS_ASSIGN_OR_RETURN(std::vector<std::string> ignored, CheckConfigKeys(config));
  for (const std::string& line : ignored) LS_LOG(WARN) << line;
  LS_ASSIGN_OR_RETURN(int64_t context, config.GetInt("model.context", 128));
  LS_ASSIGN_OR_RETURN(const std::string dir, checkpoint::ResolveCheckpointPath(options.checkpoint_dir));
  LS_ASSIGN_OR_RETURN(nlohmann::json extra, LoadParameters(dir, &model->params()));
  LS_ASSIGN_OR_RETURN(int64_t vocab, config.GetInt("model.vocab", 256));
  LS_ASSIGN_OR_RETURN(auto shared, LoadSharedData(run, context, vocab));
  LS_ASSIGN_OR_RETURN(auto data, RankData::Create(shared, run, 0, 1));
  LS_ASSIGN_OR_RETURN(EvalSums sums, EvaluateLocal(*data, [&](const nn::ModelInput& rows) -> Result<nn::EvalResult> {
                        return model->Evaluate(rows);
                      }));
  if (sums.count == 0) return Status::InvalidArgument("the validation set is empty");
  nlohmann::json out = {{"checkpoint", dir},
                        {"step", extra.value("step", nlohmann::json(nullptr))},
                        {"val_loss", sums.loss_sum / static_cast<double>(sums.count)},
                        {"count", sums.count}};
  if (!data->is_text()) out["val_acc"] = static_cast<double>(sums.correct) / static_cast<double>(sums.count);
  std::printf("%s\n", out.dump().c_str());
  return Status::Ok();
}

}  // namespace lockstep::runtime
