// `lockstep sample --checkpoint DIR [--prompt TEXT | --prompt-tokens 1,2,3] [--tokens N]
// [--temperature T] [--top-k K] [--seed S]` (runtime/interop/sample.h).
#pragma once

#include <CLI/CLI.hpp>

#include "lockstep/core/status.h"
#include "lockstep/runtime/interop/sample.h"

namespace lockstep::cli {

CLI::App* AddSampleCommand(CLI::App& app, runtime::SampleOptions* options);
Status RunSampleCommand(const runtime::SampleOptions& options);

}  // namespace lockstep::cli
