#include "lockstep/checkpoint/paths.h"

#include <cstdio>

#include "lockstep/checkpoint/json_util.h"

namespace lockstep::checkpoint {

std::string StepDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%08lld", static_cast<long long>(step));
  return buf;
}

std::string ShardFileName(int64_t rank) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "rank-%05lld.safetensors", static_cast<long long>(rank));
  return buf;
}

std::optional<int64_t> ParseStepDirName(std::string_view name) {
  if (name.size() < 13 || name.substr(0, 5) != "step-") return std::nullopt;
  std::string_view digits = name.substr(5);
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  size_t first = digits.find_first_not_of('0');
  std::optional<int64_t> v = first == std::string_view::npos ? 0 : internal::ParseDecimal(digits.substr(first));
  if (!v || StepDirName(*v) != name) return std::nullopt;  // canonical spelling only
  return v;
}

std::optional<int64_t> ParseStepDirNameWithSuffix(std::string_view name, std::string_view suffix) {
  if (name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix) return std::nullopt;
  return ParseStepDirName(name.substr(0, name.size() - suffix.size()));
}

}  // namespace lockstep::checkpoint
