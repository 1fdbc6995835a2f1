#include "lockstep/runtime/setup/run_setup.h"

#include "lockstep/interop/export.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "lockstep/data/distributed_sampler.h"
#include "lockstep/nn/llama.h"
#include "lockstep/nn/model.h"
#include "lockstep/runtime/setup/config_keys.h"
#include "lockstep/runtime/setup/rank_data.h"
#include "lockstep/runtime/setup/resume.h"
#include "lockstep/runtime/setup/slurm_env.h"
#include "lockstep/tensor/precision.h"

namespace lockstep::runtime {

namespace {

// The run directory holds checkpoints whose weights are executed when loaded: one made here is
// never writable by others, whatever the umask (docs/security.md). One that exists is left as
// it is (it may be a shared parent the user chose).
Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  const bool made = std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create directory '" + dir + "': " + ec.message());
  if (made)
    std::filesystem::permissions(dir, std::filesystem::perms::group_write | std::filesystem::perms::others_write,
                                 std::filesystem::perm_options::remove, ec);
  return Status::Ok();
}

// train.grad_compression = "powersgd" and train.sync = "diloco" against the layout, one at a
// time: PowerSGD on whole replicas of pure data parallelism (tp = pp = 1, no ZeRO), DiLoCo on
// replicas that may be tensor- and pipeline-parallel inside (no ZeRO). Keys
// of the option not chosen warn that they are ignored.
Status CheckCommunication(RunSetup& setup, const TrainOptions& options, const ModelShape& shape) {
  const TrainSection& t = setup.run.train;
  const parallel::ParallelDims& d = setup.layout.dims;
  auto set = [&](const char* key) { return setup.config.Has(key); };
  for (const char* key : {"train.diloco_inner_steps", "train.diloco_outer_lr", "train.diloco_outer_momentum",
                          "train.diloco_fragments", "train.diloco_outer_dtype", "train.diloco_overlap_steps",
                          "train.diloco_merge_alpha"})
    if (!t.diloco() && set(key))
      setup.config_warnings.push_back(std::string("config key '") + key + "' is ignored: train.sync is not \"diloco\"");
  for (const char* key : {"train.powersgd_rank", "train.powersgd_start_step"})
    if (!t.powersgd() && set(key))
      setup.config_warnings.push_back(std::string("config key '") + key +
                                      "' is ignored: train.grad_compression is not \"powersgd\"");
  if (!t.diloco() && !t.powersgd()) return Status::Ok();
  const std::string what = t.diloco() ? "train.sync = \"diloco\"" : "train.grad_compression = \"powersgd\"";
  if (t.diloco() && t.powersgd())
    return Status::InvalidArgument("train.sync = \"diloco\" and train.grad_compression = \"powersgd\" do not combine "
                                   "(DiLoCo sends no gradients); choose one");
  // DiLoCo's replicas are the dp groups and may be tensor- and pipeline-parallel inside (each
  // rank keeps the anchor of its own shard). ZeRO would shard the state over the dp group, which
  // here is the replicas themselves. PowerSGD compresses whole gradient matrices, so it needs
  // them unsplit.
  if (t.diloco() && options.zero > 0)
    return Status::InvalidArgument(what + " runs on data-parallel replicas that may be tensor- and pipeline-parallel "
                                   "inside (--layout dp=N,tp=T,pp=P), not ZeRO-sharded (the dp group is the "
                                   "replicas), got --zero " + std::to_string(options.zero));
  if (t.powersgd() && (d.tp > 1 || d.pp > 1 || options.zero > 0))
    return Status::InvalidArgument(what + " runs on whole data-parallel replicas for now: --layout dp=N (tp=1, pp=1) "
                                   "and --zero 0, got " + d.ToString() + " --zero " + std::to_string(options.zero));
  if (t.diloco()) {
    const int64_t blocks = shape.gpt ? shape.gpt->layers : shape.llama ? shape.llama->layers : 0;
    if (blocks > 0 && t.diloco_fragments > blocks)
      return Status::InvalidArgument("train.diloco_fragments = " + std::to_string(t.diloco_fragments) +
                                     " is more than the model's " + std::to_string(blocks) + " blocks");
    if (d.dp == 1)
      setup.config_warnings.push_back("train.sync = \"diloco\" with a single replica is plain training with an "
                                      "outer optimizer on top (no communication to save)");
    if (t.grad_dtype == "bf16")
      setup.config_warnings.push_back("train.grad_dtype = bf16 is ignored with train.sync = \"diloco\" (no gradient "
                                      "is reduced; train.diloco_outer_dtype sets what the outer step sends)");
  }
  if (t.powersgd() && t.grad_dtype == "bf16")
    return Status::InvalidArgument("train.grad_compression = \"powersgd\" and train.grad_dtype = bf16 do not "
                                   "combine; choose one");
  return Status::Ok();
}

}  // namespace

Result<Config> LoadTrainConfig(const TrainOptions& options) {
  if (!options.config_path.empty()) return Config::LoadFile(options.config_path, options.overrides);
  LS_ASSIGN_OR_RETURN(Config config, Config::Parse(options.config_toml, "config_toml"));
  for (const std::string& o : options.overrides) LS_RETURN_IF_ERROR(config.Override(o));
  return config;
}

std::string OutDirFor(const TrainOptions& options) {
  if (!options.out_dir.empty()) return options.out_dir;
  if (options.config_path.empty()) return "runs/train";
  return "runs/" + std::filesystem::path(options.config_path).stem().string();
}

Result<RunSetup> SetUpRun(const Job& job, const TrainOptions& options, int world) {
  if (!job.model || !job.data) return Status::InvalidArgument("the job needs a model and a data function");
  RunSetup setup;
  setup.options = options;
  setup.world = world;
  setup.job = job;
  LS_ASSIGN_OR_RETURN(setup.config, LoadTrainConfig(options));
  // Flags win over the file: --steps/--epochs replace each other's config value.
  if (options.steps == 0) return Status::InvalidArgument("--steps 0: a run trains at least one step");
  if (options.epochs == 0) return Status::InvalidArgument("--epochs 0: a run trains at least one step");
  if (options.steps > 0) {
    setup.config.SetInt("train.steps", options.steps);
    setup.config.SetInt("train.epochs", 0);
  } else if (options.epochs > 0) {
    setup.config.SetInt("train.steps", 0);
    if (!setup.config.Override("train.epochs=" + std::to_string(options.epochs)).ok())
      return Status::InvalidArgument("--epochs: bad value");
  }
  LS_ASSIGN_OR_RETURN(setup.run, ReadRunConfig(setup.config, /*builtin_data=*/false));

  // Validates the model before any thread starts (a GPT only by its keys: building a large
  // one here would cost the memory a sharded run exists to avoid).
  ModelShape shape;
  if (job.gpt) {
    LS_ASSIGN_OR_RETURN(shape.gpt, job.gpt(setup.config));
  }
  if (!shape.gpt && job.llama) {
    LS_ASSIGN_OR_RETURN(shape.llama, job.llama(setup.config));
  }
  std::unique_ptr<nn::Model> probe;
  if (!shape.gpt && !shape.llama) {
    LS_ASSIGN_OR_RETURN(probe, job.model(setup.config));
    if (probe == nullptr) return Status::InvalidArgument("the job's model function returned no model");
  }
  if (!shape.gpt && !shape.llama && setup.run.train.recompute != "none")
    return Status::InvalidArgument("config key 'train.recompute' = \"" + setup.run.train.recompute +
                                   "\" needs model.kind = \"gpt\" or \"llama\" (their transformer blocks are what is "
                                   "recomputed)");
  shape.name = probe ? probe->name() : shape.gpt ? "gpt" : "llama";
  LS_ASSIGN_OR_RETURN(setup.layout, ResolveLayout(options, setup.run, world, shape));
  const int dp = setup.layout.dims.dp;
  const TrainSection& t = setup.run.train;

  LS_ASSIGN_OR_RETURN(setup.data, job.data(setup.config));
  if (!setup.data.train || !setup.data.val)
    return Status::InvalidArgument("the job's data function returned no training or validation source");
  const SampleLayout layout = setup.data.train->layout();
  LS_RETURN_IF_ERROR(shape.gpt     ? nn::CheckGptLayout(*shape.gpt, layout)
                     : shape.llama ? nn::CheckLlamaLayout(*shape.llama, layout)
                                   : probe->CheckLayout(layout));
  probe.reset();

  // Steps per epoch come from the sampler's view of the dataset (the same for every rank).
  LS_ASSIGN_OR_RETURN(auto probe_data, RankData::Create(setup.data, setup.run, 0, dp));
  setup.steps_per_epoch = probe_data->StepsPerEpoch();
  if (setup.steps_per_epoch <= 0)
    return Status::InvalidArgument("the dataset holds less than one global batch of train.batch_size=" +
                                   std::to_string(t.batch_size));
  setup.total_steps = t.steps > 0 ? t.steps : static_cast<int64_t>(std::llround(t.epochs * setup.steps_per_epoch));
  if (setup.total_steps <= 0) return Status::InvalidArgument("the run would train 0 steps");
  setup.eval_every = setup.run.eval.every > 0 ? setup.run.eval.every : (t.steps > 0 ? 0 : setup.steps_per_epoch);

  LS_ASSIGN_OR_RETURN(setup.optim, optim::ReadOptimConfig(setup.config, setup.total_steps));
  LS_ASSIGN_OR_RETURN(setup.config_warnings, CheckConfigKeys(setup.config, job.config_keys));
  if (t.precision == "bf16" && !tensor::Bf16Warning().empty()) setup.config_warnings.push_back(tensor::Bf16Warning());
  if (t.grad_dtype == "bf16" && options.zero >= 2 && !options.deterministic)
    setup.config_warnings.push_back("train.grad_dtype = bf16 is ignored with --zero " + std::to_string(options.zero) +
                                    ": ZeRO-2/3 reduce their gradient shards in fp32");

  LS_RETURN_IF_ERROR(CheckCommunication(setup, options, shape));

  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  // Cores are shared by the workers on this machine only: under mpirun that is the local
  // rank count, not the world size (two 64-core hosts with one rank each get 64 threads).
  // hier: each process runs world / (processes) workers as threads.
  int process_workers = world;  // the workers of this process
  int local_workers = world;
  if (comm::InsideMpirun()) {
    process_workers = options.backend == "hier" ? std::max(1, world / comm::MpiJobProcesses()) : 1;
    local_workers = LocalMpiProcesses() * process_workers;
  }
  int threads = std::max(1, static_cast<int>(cores) / local_workers);
  if (const int slurm = SlurmThreadsPerWorker(process_workers); slurm > 0) threads = slurm;
  setup.threads_per_worker = t.threads > 0 ? t.threads : threads;

  setup.config_name =
      options.config_path.empty() ? "train" : std::filesystem::path(options.config_path).stem().string();
  setup.out_dir = OutDirFor(options);
  LS_ASSIGN_OR_RETURN(setup.fault, ParseFaultSpec(options.inject_fault, world, setup.total_steps));
  if (!options.init_from.empty()) {
    parallel::CanonicalTensors w;
    if (setup.layout.gpt) {
      LS_ASSIGN_OR_RETURN(w, interop::LoadInitWeights(options.init_from, *setup.layout.gpt));
    } else if (setup.layout.llama) {
      LS_ASSIGN_OR_RETURN(w, interop::LoadInitWeights(options.init_from, *setup.layout.llama));
    } else {
      return Status::InvalidArgument(
          "--init-from: only a GPT or a Llama (model.kind = \"gpt\" or \"llama\") can "
          "start from other weights");
    }
    setup.init_weights = std::make_shared<const parallel::CanonicalTensors>(std::move(w));
  }
  if (options.print_config) return setup;  // nothing is written
  LS_RETURN_IF_ERROR(MakeDirs(setup.out_dir));
  LS_ASSIGN_OR_RETURN(setup.resume_dir, ResolveResume(options.resume, setup.out_dir));
  return setup;
}

}  // namespace lockstep::runtime
