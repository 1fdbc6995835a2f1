#include "lockstep/runtime/setup/run_config.h"

namespace lockstep::runtime {
namespace {

Status Positive(const char* key, double v) {
  if (v > 0) return Status::Ok();
  return Status::InvalidArgument(std::string("config key '") + key + "' must be > 0, got " + std::to_string(v));
}
Status NonNegative(const char* key, double v) {
  if (v >= 0) return Status::Ok();
  return Status::InvalidArgument(std::string("config key '") + key + "' must be >= 0, got " + std::to_string(v));
}
Status OneOf(const char* key, const std::string& v, std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return Status::Ok();
    list += list.empty() ? a : std::string(", ") + a;
  }
  return Status::InvalidArgument(std::string("config key '") + key + "' must be one of " + list + ", got '" + v + "'");
}

// train.grad_compression, train.powersgd_*, train.sync and train.diloco_*.
Status ReadCommunication(const Config& c, TrainSection* t) {
  LS_ASSIGN_OR_RETURN(t->grad_compression, c.GetString("train.grad_compression", t->grad_compression));
  LS_RETURN_IF_ERROR(OneOf("train.grad_compression", t->grad_compression, {"none", "bf16", "powersgd"}));
  if (t->grad_compression == "bf16") t->grad_dtype = "bf16";  // the same thing under its older key
  LS_ASSIGN_OR_RETURN(t->powersgd_rank, c.GetInt("train.powersgd_rank", t->powersgd_rank));
  if (t->powersgd_rank < 1)
    return Status::InvalidArgument("config key 'train.powersgd_rank' must be >= 1, got " +
                                   std::to_string(t->powersgd_rank));
  LS_ASSIGN_OR_RETURN(t->powersgd_start_step, c.GetInt("train.powersgd_start_step", t->powersgd_start_step));
  LS_RETURN_IF_ERROR(NonNegative("train.powersgd_start_step", static_cast<double>(t->powersgd_start_step)));
  LS_ASSIGN_OR_RETURN(t->sync, c.GetString("train.sync", t->sync));
  LS_RETURN_IF_ERROR(OneOf("train.sync", t->sync, {"every_step", "diloco"}));
  LS_ASSIGN_OR_RETURN(t->diloco_inner_steps, c.GetInt("train.diloco_inner_steps", t->diloco_inner_steps));
  if (t->diloco_inner_steps < 1)
    return Status::InvalidArgument("config key 'train.diloco_inner_steps' must be >= 1, got " +
                                   std::to_string(t->diloco_inner_steps));
  LS_ASSIGN_OR_RETURN(t->diloco_outer_lr, c.GetDouble("train.diloco_outer_lr", t->diloco_outer_lr));
  LS_RETURN_IF_ERROR(Positive("train.diloco_outer_lr", t->diloco_outer_lr));
  LS_ASSIGN_OR_RETURN(t->diloco_outer_momentum, c.GetDouble("train.diloco_outer_momentum", t->diloco_outer_momentum));
  if (!(t->diloco_outer_momentum >= 0 && t->diloco_outer_momentum < 1))
    return Status::InvalidArgument("config key 'train.diloco_outer_momentum' must be in [0, 1), got " +
                                   std::to_string(t->diloco_outer_momentum));
  LS_ASSIGN_OR_RETURN(t->diloco_fragments, c.GetInt("train.diloco_fragments", t->diloco_fragments));
  LS_RETURN_IF_ERROR(Positive("train.diloco_fragments", static_cast<double>(t->diloco_fragments)));
  LS_ASSIGN_OR_RETURN(t->diloco_outer_dtype, c.GetString("train.diloco_outer_dtype", t->diloco_outer_dtype));
  LS_RETURN_IF_ERROR(OneOf("train.diloco_outer_dtype", t->diloco_outer_dtype, {"fp32", "bf16"}));
  LS_ASSIGN_OR_RETURN(t->diloco_overlap_steps, c.GetInt("train.diloco_overlap_steps", t->diloco_overlap_steps));
  if (t->diloco_overlap_steps < 0 || t->diloco_overlap_steps >= t->diloco_inner_steps)
    return Status::InvalidArgument("config key 'train.diloco_overlap_steps' must be in [0, diloco_inner_steps - 1 = " +
                                   std::to_string(t->diloco_inner_steps - 1) + "], got " +
                                   std::to_string(t->diloco_overlap_steps));
  LS_ASSIGN_OR_RETURN(t->diloco_merge_alpha, c.GetDouble("train.diloco_merge_alpha", t->diloco_merge_alpha));
  if (!(t->diloco_merge_alpha >= 0 && t->diloco_merge_alpha <= 1))
    return Status::InvalidArgument("config key 'train.diloco_merge_alpha' must be in [0, 1], got " +
                                   std::to_string(t->diloco_merge_alpha));
  return Status::Ok();
}

}  // namespace

Result<RunConfig> ReadRunConfig(const Config& c, bool builtin_data) {
  RunConfig r;
  TrainSection& t = r.train;
  LS_ASSIGN_OR_RETURN(t.batch_size, c.GetInt("train.batch_size", t.batch_size));
  LS_ASSIGN_OR_RETURN(int64_t seed, c.GetInt("train.seed", static_cast<int64_t>(t.seed)));
  t.seed = static_cast<uint64_t>(seed);
  LS_ASSIGN_OR_RETURN(t.steps, c.GetInt("train.steps", t.steps));
  LS_ASSIGN_OR_RETURN(t.epochs, c.GetDouble("train.epochs", t.epochs));
  LS_ASSIGN_OR_RETURN(int64_t threads, c.GetInt("train.threads", t.threads));
  t.threads = static_cast<int>(threads);
  LS_ASSIGN_OR_RETURN(t.log_every, c.GetInt("train.log_every", t.log_every));
  LS_ASSIGN_OR_RETURN(t.accum_steps, c.GetInt("train.accum_steps", t.accum_steps));
  LS_ASSIGN_OR_RETURN(t.det_shards, c.GetInt("train.det_shards", t.det_shards));
  LS_ASSIGN_OR_RETURN(t.bucket_bytes, c.GetSize("train.bucket_bytes", t.bucket_bytes));
  LS_ASSIGN_OR_RETURN(t.det_tp_slices, c.GetInt("train.det_tp_slices", t.det_tp_slices));
  LS_ASSIGN_OR_RETURN(t.pp_microbatches, c.GetInt("train.pp_microbatches", t.pp_microbatches));
  LS_ASSIGN_OR_RETURN(t.pp_schedule, c.GetString("train.pp_schedule", t.pp_schedule));
  LS_ASSIGN_OR_RETURN(t.skip_nonfinite, c.GetBool("train.skip_nonfinite", t.skip_nonfinite));
  LS_ASSIGN_OR_RETURN(t.max_skipped, c.GetInt("train.max_skipped", t.max_skipped));
  LS_RETURN_IF_ERROR(NonNegative("train.max_skipped", t.max_skipped));
  LS_ASSIGN_OR_RETURN(t.recompute, c.GetString("train.recompute", t.recompute));
  LS_RETURN_IF_ERROR(OneOf("train.recompute", t.recompute, {"none", "block"}));
  LS_ASSIGN_OR_RETURN(t.precision, c.GetString("train.precision", t.precision));
  LS_RETURN_IF_ERROR(OneOf("train.precision", t.precision, {"fp32", "bf16"}));
  LS_ASSIGN_OR_RETURN(t.grad_dtype, c.GetString("train.grad_dtype", t.grad_dtype));
  LS_RETURN_IF_ERROR(OneOf("train.grad_dtype", t.grad_dtype, {"fp32", "bf16"}));
  LS_RETURN_IF_ERROR(ReadCommunication(c, &t));
  LS_ASSIGN_OR_RETURN(t.straggler_ratio, c.GetDouble("train.straggler_ratio", t.straggler_ratio));
  LS_ASSIGN_OR_RETURN(t.straggler_steps, c.GetInt("train.straggler_steps", t.straggler_steps));
  if (!(t.straggler_ratio > 1.0))
    return Status::InvalidArgument("config key 'train.straggler_ratio' must be greater than 1, got " +
                                   std::to_string(t.straggler_ratio));
  LS_RETURN_IF_ERROR(Positive("train.straggler_steps", t.straggler_steps));
  LS_RETURN_IF_ERROR(NonNegative("train.pp_microbatches", t.pp_microbatches));
  LS_RETURN_IF_ERROR(OneOf("train.pp_schedule", t.pp_schedule, {"gpipe", "1f1b"}));
  if (t.det_tp_slices < 0 || (t.det_tp_slices & (t.det_tp_slices - 1)) != 0)
    return Status::InvalidArgument("config key 'train.det_tp_slices' must be 0 (auto) or a power of two, got " +
                                   std::to_string(t.det_tp_slices));
  LS_RETURN_IF_ERROR(Positive("train.batch_size", t.batch_size));
  LS_RETURN_IF_ERROR(NonNegative("train.steps", t.steps));
  LS_RETURN_IF_ERROR(NonNegative("train.epochs", t.epochs));
  LS_RETURN_IF_ERROR(NonNegative("train.threads", t.threads));
  LS_RETURN_IF_ERROR(Positive("train.log_every", t.log_every));
  LS_RETURN_IF_ERROR(Positive("train.accum_steps", t.accum_steps));
  LS_RETURN_IF_ERROR(Positive("train.bucket_bytes", t.bucket_bytes));
  if (t.det_shards <= 0 || (t.det_shards & (t.det_shards - 1)) != 0)
    return Status::InvalidArgument("config key 'train.det_shards' must be a power of two, got " +
                                   std::to_string(t.det_shards));
  if (t.steps == 0 && t.epochs == 0)
    return Status::InvalidArgument("config sets neither 'train.steps' nor 'train.epochs' (or pass --steps/--epochs)");

  LS_ASSIGN_OR_RETURN(r.eval.every, c.GetInt("eval.every", r.eval.every));
  LS_RETURN_IF_ERROR(NonNegative("eval.every", r.eval.every));

  LS_ASSIGN_OR_RETURN(r.checkpoint.every, c.GetInt("checkpoint.every", r.checkpoint.every));
  LS_ASSIGN_OR_RETURN(r.checkpoint.keep, c.GetInt("checkpoint.keep", r.checkpoint.keep));
  LS_ASSIGN_OR_RETURN(r.checkpoint.async, c.GetBool("checkpoint.async", r.checkpoint.async));
  LS_RETURN_IF_ERROR(NonNegative("checkpoint.every", r.checkpoint.every));
  LS_RETURN_IF_ERROR(Positive("checkpoint.keep", r.checkpoint.keep));

  data::DatasetKind kind = data::DatasetKind::kCustom;
  if (builtin_data) {
    LS_ASSIGN_OR_RETURN(std::string name, c.GetString("data.kind", ""));
    LS_RETURN_IF_ERROR(OneOf("data.kind", name, {"text", "fashion-mnist", "tokens"}));
    kind = name == "text"     ? data::DatasetKind::kText
           : name == "tokens" ? data::DatasetKind::kTokens
                              : data::DatasetKind::kFashionMnist;
  }
  LS_ASSIGN_OR_RETURN(r.data, data::ReadDataConfig(c, kind, t.batch_size));
  if (builtin_data && kind != data::DatasetKind::kTokens && c.Has("data.tokenizer"))
    return Status::InvalidArgument("data.tokenizer goes with data.kind = \"tokens\" (token files made with it)");
  if (builtin_data && kind != data::DatasetKind::kTokens && c.Has("data.loss_mask"))
    return Status::InvalidArgument("data.loss_mask goes with data.kind = \"tokens\" (a .mask beside each token file)");
  if (r.data.tokenizer) {
    LS_ASSIGN_OR_RETURN(const int64_t vocab, c.GetInt("model.vocab", 0));
    if (vocab > 0 && r.data.tokenizer_vocab > vocab)
      return Status::InvalidArgument("data.tokenizer " + r.data.tokenizer_path + " has " +
                                     std::to_string(r.data.tokenizer_vocab) + " ids, more than model.vocab = " +
                                     std::to_string(vocab));
  }
  return r;
}

}  // namespace lockstep::runtime
