// lockstep: the command-line entry point. Dispatches to subcommands; the only place that
// turns a Status into an exit code (2 for bad input, 1 for failures at run time).
#include <cstdio>
#include <string>

#include "lockstep/cli/commands.h"

int main(int argc, char** argv) { return lockstep::cli::Main(argc, argv); }
