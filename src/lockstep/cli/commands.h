#pragma once

namespace lockstep::cli {

// Parses argv and runs the chosen subcommand; returns the process exit status.
int Main(int argc, char** argv);

}  // namespace lockstep::cli
