// Job: what a run trains — how to build the model and where its samples come from. The
// trainer behind `lockstep train` and the library's lockstep::Train() take one; the command's
// built-in GPT, Llama and CNN are BuiltinJob() (builtin_job.h), a program's own model is a Job of its
// own. Public API (docs/api.md).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/core/config.h"
#include "lockstep/core/result.h"
#include "lockstep/data/data_source.h"
#include "lockstep/data/distributed_sampler.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/nn/llama.h"
#include "lockstep/nn/model.h"

namespace lockstep {

struct DataSources {
  std::shared_ptr<const data::DataSource> train;  // sampled, shuffled each epoch
  std::shared_ptr<const data::DataSource> val;    // validated in order (eval.every, the end)
  // Validation's last partial batch: kMask evaluates every sample exactly once; kDrop
  // evaluates whole batches only (the built-in text split, as its PyTorch peer does).
  data::FinalBatch val_final_batch = data::FinalBatch::kMask;
};

// A config key a job reads beyond lockstep's own (runtime/setup/config_keys.h): declared so
// that it is not rejected as unknown, and listed by --print-config.
struct JobConfigKey {
  std::string name;           // "section.key"
  std::string type;           // int, float, bool, string, size
  std::string default_value;  // as TOML text
  std::string meaning;
};

struct Job {
  // Builds the whole model from the run's config (after --set and flags). Called on each
  // worker's own thread (a model is used by one thread), and once more to validate the
  // config before any worker starts.
  std::function<Result<std::unique_ptr<nn::Model>>(const Config& config)> model;
  // Loads the training and validation sources, once per process; the workers of a process
  // share them (DataSource::Read is called concurrently).
  std::function<Result<DataSources>(const Config& config)> data;
  // Optional: the model is lockstep's GPT with this shape. Only such a model can be split
  // over tensor- and pipeline-parallel ranks (--layout tp=,pp=); any model trains
  // data-parallel and with ZeRO. Unset or nullopt: the model trains whole on every replica.
  std::function<Result<std::optional<nn::GptConfig>>(const Config& config)> gpt;
  // Optional, the same for lockstep's Llama (nn/llama.h): split over tp and pp ranks too.
  std::function<Result<std::optional<nn::LlamaConfig>>(const Config& config)> llama;
  std::vector<JobConfigKey> config_keys;
};

}  // namespace lockstep
