// Names inside a checkpoint root (<out>/checkpoints):
//   step-00001200/            a complete checkpoint (8+ digits, zero-padded)
//   step-00001200.tmp/        one being written
//   step-00001200.trash/      one being deleted (renamed first, so a half-deleted
//                             checkpoint never looks complete)
//   latest, latest.tmp        the name of the newest complete checkpoint, one line
// and inside a checkpoint: manifest.json, rank-00000.safetensors ...
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lockstep::checkpoint {

inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kLatestFile = "latest";
inline constexpr uint64_t kMaxManifestBytes = 1ull << 30;

std::string StepDirName(int64_t step);    // "step-00001200"
std::string ShardFileName(int64_t rank);  // "rank-00003.safetensors"
// The step of a canonical "step-XXXXXXXX" name (as StepDirName writes it); nullopt otherwise.
std::optional<int64_t> ParseStepDirName(std::string_view name);
// For "step-XXXXXXXX<suffix>" (suffix ".tmp" or ".trash"): the step; nullopt otherwise.
std::optional<int64_t> ParseStepDirNameWithSuffix(std::string_view name, std::string_view suffix);

}  // namespace lockstep::checkpoint
