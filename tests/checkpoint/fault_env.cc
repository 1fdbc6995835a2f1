#include "lockstep/checkpoint/fault_env.h"

namespace lockstep::checkpoint {
namespace {

std::string ParentDir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultInjectionEnv* env, std::string path, std::unique_ptr<WritableFile> base)
      : env_(env), path_(std::move(path)), base_(std::move(base)) {}
  Status Append(const void* data, size_t n) override {
    Status s = env_->Tick("append", path_);
    if (!s.ok()) {
      size_t half = n / 2;  // torn write: part of the data reaches the file
      if (half > 0 && base_->Append(data, half).ok()) env_->OnAppend(path_, half);
      return s;
    }
    LS_RETURN_IF_ERROR(base_->Append(data, n));
    env_->OnAppend(path_, n);
    return Status::Ok();
  }
  Status Sync() override {
    LS_RETURN_IF_ERROR(env_->Tick("sync", path_));
    LS_RETURN_IF_ERROR(base_->Sync());
    env_->OnSync(path_);
    return Status::Ok();
  }
  Status Close() override {
    Status s = env_->Tick("close", path_);
    Status c = base_->Close();  // the descriptor is released either way
    return s.ok() ? c : s;
  }

 private:
  FaultInjectionEnv* env_;
  std::string path_;
  std::unique_ptr<WritableFile> base_;
};

void FaultInjectionEnv::FailAt(int64_t n, bool crash) {
  std::lock_guard<std::mutex> l(mu_);
  fail_at_ = n == 0 ? 0 : count_ + n;
  crash_ = crash;
  hit_ = false;
}

int64_t FaultInjectionEnv::mutations() const {
  std::lock_guard<std::mutex> l(mu_);
  return count_;
}

bool FaultInjectionEnv::fault_hit() const {
  std::lock_guard<std::mutex> l(mu_);
  return hit_;
}

std::vector<std::string> FaultInjectionEnv::log() const {
  std::lock_guard<std::mutex> l(mu_);
  return log_;
}

Status FaultInjectionEnv::Tick(const char* op, const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  ++count_;
  log_.push_back(std::to_string(count_) + " " + op + " " + path);
  bool fail = fail_at_ != 0 && (count_ == fail_at_ || (crash_ && count_ > fail_at_));
  if (!fail) return Status::Ok();
  hit_ = true;
  return Status::IoError(path + ": injected fault at " + op + " (mutation " + std::to_string(count_) + ")");
}

void FaultInjectionEnv::OnAppend(const std::string& path, uint64_t n) {
  std::lock_guard<std::mutex> l(mu_);
  files_[path].size += n;
}

void FaultInjectionEnv::OnSync(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  FileState& f = files_[path];
  f.synced_size = f.size;
}

bool FaultInjectionEnv::EntryDurable(const std::string& path) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = files_.find(path);
    if (it != files_.end()) return it->second.entry_durable;
  }
  return base_->FileExists(path);
}

void FaultInjectionEnv::MovePaths(const std::string& from, const std::string& to, bool target_durable) {
  std::lock_guard<std::mutex> l(mu_);
  std::map<std::string, FileState> moved;
  for (auto it = files_.begin(); it != files_.end();) {
    const std::string& p = it->first;
    if (p == from || (p.size() > from.size() && p.compare(0, from.size(), from) == 0 && p[from.size()] == '/')) {
      moved[to + p.substr(from.size())] = it->second;
      it = files_.erase(it);
    } else {
      ++it;
    }
  }
  files_.erase(to);
  for (auto& [p, f] : moved) {
    if (p == to && target_durable) f.entry_durable = true;
    files_[p] = f;
  }
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewWritableFile(const std::string& path) {
  LS_RETURN_IF_ERROR(Tick("create", path));
  LS_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> base, base_->NewWritableFile(path));
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = files_.find(path);
    bool existed_durably = it != files_.end() ? it->second.entry_durable : false;
    files_[path] = FileState{0, 0, existed_durably};
  }
  return std::unique_ptr<WritableFile>(new FaultWritableFile(this, path, std::move(base)));
}

Status FaultInjectionEnv::CreateDir(const std::string& dir) {
  LS_RETURN_IF_ERROR(Tick("mkdir", dir));
  return base_->CreateDir(dir);
}

Status FaultInjectionEnv::RemoveFile(const std::string& path) {
  LS_RETURN_IF_ERROR(Tick("unlink", path));
  LS_RETURN_IF_ERROR(base_->RemoveFile(path));
  std::lock_guard<std::mutex> l(mu_);
  files_.erase(path);
  return Status::Ok();
}

Status FaultInjectionEnv::RemoveDir(const std::string& dir) {
  LS_RETURN_IF_ERROR(Tick("rmdir", dir));
  return base_->RemoveDir(dir);
}

Status FaultInjectionEnv::RenameFile(const std::string& from, const std::string& to) {
  LS_RETURN_IF_ERROR(Tick("rename", from + " -> " + to));
  const bool target_durable = EntryDurable(to);
  LS_RETURN_IF_ERROR(base_->RenameFile(from, to));
  MovePaths(from, to, target_durable);
  return Status::Ok();
}

Status FaultInjectionEnv::ExchangePaths(const std::string& a, const std::string& b) {
  LS_RETURN_IF_ERROR(Tick("exchange", a + " <-> " + b));
  LS_RETURN_IF_ERROR(base_->ExchangePaths(a, b));
  const std::string swap = a + ".fault-env-swap";
  MovePaths(a, swap, false);
  MovePaths(b, a, false);
  MovePaths(swap, b, false);
  return Status::Ok();
}

Status FaultInjectionEnv::TruncateFile(const std::string& path, uint64_t size) {
  LS_RETURN_IF_ERROR(Tick("truncate", path));
  return base_->TruncateFile(path, size);
}

Status FaultInjectionEnv::SyncDir(const std::string& dir_in) {
  LS_RETURN_IF_ERROR(Tick("syncdir", dir_in));
  LS_RETURN_IF_ERROR(base_->SyncDir(dir_in));
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [p, f] : files_) {
    if (ParentDir(p) == dir) f.entry_durable = true;
  }
  return Status::Ok();
}

Status FaultInjectionEnv::DropUnsyncedData() {
  std::map<std::string, FileState> files;
  {
    std::lock_guard<std::mutex> l(mu_);
    files.swap(files_);
  }
  for (const auto& [path, f] : files) {
    if (!base_->FileExists(path)) continue;
    if (!f.entry_durable) {
      LS_RETURN_IF_ERROR(base_->RemoveFile(path));
    } else if (f.synced_size < f.size) {
      LS_RETURN_IF_ERROR(base_->TruncateFile(path, f.synced_size));
    }
  }
  return Status::Ok();
}

}  // namespace lockstep::checkpoint
