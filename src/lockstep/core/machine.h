// What machine a run or benchmark ran on, for the lines that report it (the run's start row in
// metrics.jsonl, the report's header).
#pragma once

#include <cstdint>
#include <string>

namespace lockstep {

// "<model name from /proc/cpuinfo>, <N> cores" ("unknown processor" where it cannot be read).
std::string ProcessorDescription();

// This machine's host name ("?" where it cannot be read).
std::string HostName();

// The process's resident set now, and its peak so far (getrusage), in bytes; 0 where they
// cannot be read. Process-wide: rank threads of one process share them.
int64_t ResidentBytes();
int64_t PeakResidentBytes();

}  // namespace lockstep
