#include "lockstep/cli/sample_command.h"

namespace lockstep::cli {

CLI::App* AddSampleCommand(CLI::App& app, SampleOptions* o) {
  CLI::App* c = app.add_subcommand("sample", "generate from a checkpoint (text for byte-level models, else token ids)");
  c->add_option("--checkpoint", o->checkpoint, "a checkpoint: step dir, checkpoints root, latest file or run dir")
      ->required();
  auto* text = c->add_option("--prompt", o->prompt, "prompt text (byte-level models)");
  c->add_option("--prompt-tokens", o->prompt_tokens, "prompt token ids, comma-separated")->excludes(text);
  c->add_option("--tokens", o->tokens, "tokens to generate (default 200)")->check(CLI::Range(0, 1 << 20));
  c->add_option("--temperature", o->temperature, "softmax temperature; 0: greedy (default 0.8)")
      ->check(CLI::Range(0.0, 100.0));
  c->add_option("--top-k", o->top_k, "sample among the k most likely tokens (0: all)")->check(CLI::Range(0, 1 << 24));
  c->add_option("--seed", o->seed, "sampling seed (default 1234)");
  c->add_option("--config", o->config_path, "the run's config (checkpoints that do not describe their model)");
  c->add_option("--set", o->overrides, "override a config key of --config");
  return c;
}

Status RunSampleCommand(const SampleOptions& options) { return RunSample(options); }

}  // namespace lockstep::cli
