// `lockstep export CHECKPOINT --format hf|llmc --out PATH [--dtype f32|bf16]
// [--max-shard-size S]` (interop/export.h).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "lockstep/core/status.h"
#include "lockstep/interop/export.h"

namespace lockstep::cli {

struct ExportArgs {
  interop::ExportOptions options;
  std::string max_shard_size;  // K/M/G suffixes
};

CLI::App* AddExportCommand(CLI::App& app, ExportArgs* args);
Status RunExportCommand(ExportArgs args);

}  // namespace lockstep::cli
