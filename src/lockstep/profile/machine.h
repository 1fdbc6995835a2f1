// What machine a run or benchmark ran on, for the lines that report it (the run's start row in
// metrics.jsonl, the report's header).
#pragma once

#include <string>

namespace lockstep::profile {

// "<model name from /proc/cpuinfo>, <N> cores" ("unknown processor" where it cannot be read).
std::string ProcessorDescription();

// This machine's host name ("?" where it cannot be read).
std::string HostName();

}  // namespace lockstep::profile
