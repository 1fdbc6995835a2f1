#include "lockstep/cli/export_command.h"

#include "lockstep/core/config.h"

namespace lockstep::cli {

CLI::App* AddExportCommand(CLI::App& app, ExportArgs* a) {
  interop::ExportOptions& o = a->options;
  CLI::App* c = app.add_subcommand(
      "export", "write a checkpoint as Hugging Face files (GPT2LMHeadModel, LlamaForCausalLM) or a GPT as llm.c files");
  c->add_option("CHECKPOINT", o.checkpoint, "a checkpoint: step dir, checkpoints root, latest file or run dir")
      ->required();
  c->add_option("--format", o.format, "hf (a directory) or llm.c (a file)")
      ->required()
      ->check(CLI::IsMember({"hf", "llmc"}));
  c->add_option("--out", o.out, "output directory (hf) or file (llmc)")->required();
  c->add_option("--dtype", o.dtype, "f32 (default) or bf16")->check(CLI::IsMember({"f32", "bf16"}));
  c->add_option("--max-shard-size", a->max_shard_size, "hf: split model.safetensors above this size (default 5G)");
  c->add_option("--config", o.config_path, "the run's config (checkpoints that do not describe their model)");
  c->add_option("--set", o.overrides, "override a config key of --config");
  return c;
}

Status RunExportCommand(ExportArgs a) {
  if (!a.max_shard_size.empty()) {
    LS_ASSIGN_OR_RETURN(a.options.max_shard_bytes, ParseSize(a.max_shard_size, "--max-shard-size"));
    if (a.options.max_shard_bytes <= 0) return Status::InvalidArgument("--max-shard-size: expected > 0");
  }
  return interop::RunExport(a.options);
}

}  // namespace lockstep::cli
