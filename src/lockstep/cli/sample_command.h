// `lockstep sample --checkpoint DIR [--prompt TEXT | --prompt-tokens 1,2,3] [--tokens N]
// [--temperature T] [--top-k K] [--seed S]` (cli/sample.h).
#pragma once

#include <CLI/CLI.hpp>

#include "lockstep/core/status.h"
#include "lockstep/cli/sample.h"

namespace lockstep::cli {

CLI::App* AddSampleCommand(CLI::App& app, SampleOptions* options);
Status RunSampleCommand(const SampleOptions& options);

}  // namespace lockstep::cli
