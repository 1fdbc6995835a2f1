#include "lockstep/checkpoint/resolve.h"

#include <algorithm>

#include "lockstep/checkpoint/json_util.h"
#include "lockstep/checkpoint/paths.h"
#include "lockstep/checkpoint/reader.h"
#include "lockstep/core/log.h"

namespace lockstep::checkpoint {

Result<std::vector<std::pair<int64_t, std::string>>> ListCheckpoints(const std::string& root, Env* env) {
  if (env == nullptr) env = Env::Default();
  LS_ASSIGN_OR_RETURN(std::vector<std::string> children, env->GetChildren(root));
  std::vector<std::pair<int64_t, std::string>> out;
  for (const std::string& c : children) {
    std::optional<int64_t> step = ParseStepDirName(c);
    const std::string path = JoinPath(root, c);
    if (step && env->IsDirectory(path)) out.emplace_back(*step, path);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::string> ResolveLatest(const std::string& root, Env* env) {
  if (env == nullptr) env = Env::Default();
  const std::string path = JoinPath(root, kLatestFile);
  LS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(env, path, 4096));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (!ParseStepDirName(text)) {
    return Status::Corruption(path + ": names " + internal::Quote(text) + ", not a step-XXXXXXXX directory");
  }
  const std::string dir = JoinPath(root, text);
  if (!env->IsDirectory(dir)) return Status::NotFound(path + ": names " + text + ", which does not exist");
  return dir;
}

Result<std::string> ResolveCheckpointPath(const std::string& path, Env* env) {
  if (env == nullptr) env = Env::Default();
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  const std::string base = slash == std::string::npos ? p : p.substr(slash + 1);
  if (base == kLatestFile && !env->IsDirectory(p))  // the latest file: its root's checkpoint
    return ResolveLatest(slash == std::string::npos ? "." : p.substr(0, slash == 0 ? 1 : slash), env);
  if (env->FileExists(JoinPath(p, kLatestFile))) return ResolveLatest(p, env);  // a checkpoints root
  const std::string run_root = JoinPath(p, "checkpoints");
  if (env->FileExists(JoinPath(run_root, kLatestFile))) return ResolveLatest(run_root, env);  // a run directory
  return p;
}

Result<std::string> FindNewestValid(const std::string& root, std::vector<std::string>* skipped_warnings, Env* env) {
  if (env == nullptr) env = Env::Default();
  LS_ASSIGN_OR_RETURN(auto all, ListCheckpoints(root, env));
  size_t skipped = 0;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    Result<Checkpoint> ckpt = Checkpoint::Open(it->second, env);
    Status s = ckpt.ok() ? ckpt->Verify() : ckpt.status();
    if (s.ok()) return it->second;
    ++skipped;
    std::string line = "skipping checkpoint " + it->second + ": " + s.message();
    LS_LOG(WARN) << line;
    if (skipped_warnings != nullptr) skipped_warnings->push_back(std::move(line));
  }
  return Status::NotFound("no valid checkpoint under " + root + " (" + std::to_string(skipped) +
                          " skipped as invalid)");
}

}  // namespace lockstep::checkpoint
