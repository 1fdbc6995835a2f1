// The registry of every config key lockstep knows: its type, default and meaning. A key that
// no option anywhere has is an error (a typo must never be a silently ignored setting); a
// known key that the chosen options do not read (optim.min_lr with optim.schedule =
// "constant", model.width for the CNN) is one warning line. `lockstep train --print-config`
// prints every key with its effective value and where that came from.
//
// The layers read their keys with their own defaults (nn::ReadGptConfig, optim::ReadOptimConfig,
// data::ReadDataConfig, ReadRunConfig); a test checks that this table states the same defaults.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "lockstep/core/config.h"
#include "lockstep/core/result.h"
#include "lockstep/job.h"

namespace lockstep::runtime {

struct ConfigKey {
  const char* name;           // "section.key"
  const char* type;           // int, float, bool, string, size
  const char* default_value;  // as TOML text; "" when it depends on other keys (said in meaning)
  const char* meaning;
};

std::span<const ConfigKey> AllConfigKeys();
const ConfigKey* FindConfigKey(std::string_view name);

// After every component has read its keys: InvalidArgument naming the first key no option
// knows (with the nearest known key when one is close); the known keys this run ignores are
// returned, for one warning line each from the process that reports.
// `extra`: the keys a job declares (Job::config_keys) are known too.
Result<std::vector<std::string>> CheckConfigKeys(const Config& config, std::span<const JobConfigKey> extra = {});

// Every known key, one line each: name, effective value, origin (default, file, --set,
// flag), and "unused" for keys this run does not read.
std::string DescribeConfig(const Config& config, std::span<const JobConfigKey> extra = {});

}  // namespace lockstep::runtime
