#include "lockstep/cli/commands.h"

#include <CLI/CLI.hpp>

#include <cstdio>

namespace lockstep::cli {

int Main(int argc, char** argv) {
  CLI::App app{"lockstep: distributed training for C++"};
  app.require_subcommand(1);
  CLI::App* train = app.add_subcommand("train", "train a model from a config file");
  std::string config;
  train->add_option("--config", config, "TOML config file")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "lockstep: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr, "lockstep: train is not built yet\n");
  return 1;
}

}  // namespace lockstep::cli
