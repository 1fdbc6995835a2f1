#include "checkpoint/fault_env.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>

namespace lockstep::checkpoint {
namespace {

std::string ParentDir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool Under(const std::string& p, const std::string& dir) {
  return p == dir || (p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/');
}

std::string Rebase(const std::string& p, const std::string& from, const std::string& to) {
  return to + p.substr(from.size());
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
  std::string path_;  // where it was opened: the tests never rename a file while it is open
  std::unique_ptr<WritableFile> base_;
};

FaultInjectionEnv::~FaultInjectionEnv() {
  if (!stash_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(stash_dir_, ec);
  }
}

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

int64_t FaultInjectionEnv::pending_names() const {
  std::lock_guard<std::mutex> l(mu_);
  int64_t n = 0;
  for (const PendingName& p : pending_) n += !p.durable;
  return n;
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

std::string FaultInjectionEnv::Current(size_t i, std::string p, bool durable_only) const {
  for (size_t j = i + 1; j < pending_.size() && !p.empty(); ++j) {
    const PendingName& op = pending_[j];
    if (durable_only && !op.durable) continue;
    if (op.kind == PendingName::kRename) {
      if (p == op.b) return "";  // replaced by op j: the entry it named is gone
      if (Under(p, op.a)) p = Rebase(p, op.a, op.b);
    } else if (op.kind == PendingName::kExchange) {
      if (Under(p, op.a)) {
        p = Rebase(p, op.a, op.b);
      } else if (Under(p, op.b)) {
        p = Rebase(p, op.b, op.a);
      }
    }
  }
  return p;
}

void FaultInjectionEnv::MoveFiles(const std::string& from, const std::string& to) {
  std::map<std::string, FileState> moved;
  for (auto it = files_.begin(); it != files_.end();) {
    if (Under(it->first, from)) {
      moved[Rebase(it->first, from, to)] = it->second;
      it = files_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [p, f] : moved) files_[p] = f;
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewWritableFile(const std::string& path) {
  LS_RETURN_IF_ERROR(Tick("create", path));
  const bool existed = base_->FileExists(path);
  LS_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> base, base_->NewWritableFile(path));
  {
    std::lock_guard<std::mutex> l(mu_);
    files_[path] = FileState{};  // created or truncated: nothing of it is durable yet
    if (!existed) pending_.push_back(PendingName(PendingName::kCreate, path));
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

Result<std::string> FaultInjectionEnv::StashCopy(const std::string& path) {
  if (stash_dir_.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fault-env-stash-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return Status::IoError("fault env: cannot make a stash directory");
    stash_dir_ = tmpl;
  }
  const std::string copy = stash_dir_ + "/" + std::to_string(stashed_++);
  std::error_code ec;
  std::filesystem::copy_file(path, copy, ec);
  if (ec) return Status::IoError("fault env: cannot stash " + path + ": " + ec.message());
  return copy;
}

Status FaultInjectionEnv::RenameFile(const std::string& from, const std::string& to) {
  LS_RETURN_IF_ERROR(Tick("rename", from + " -> " + to));
  std::lock_guard<std::mutex> l(mu_);
  PendingName op(PendingName::kRename, from, to);
  if (base_->IsDirectory(to)) {
    op.replaced = PendingName::kEmptyDir;  // rename(2) replaces only an empty directory
  } else if (base_->FileExists(to)) {
    op.replaced = PendingName::kFile;
    LS_ASSIGN_OR_RETURN(op.stash, StashCopy(to));
    if (auto it = files_.find(to); it != files_.end()) {
      op.replaced_tracked = true;
      op.replaced_state = it->second;
    }
  }
  LS_RETURN_IF_ERROR(base_->RenameFile(from, to));
  files_.erase(to);
  MoveFiles(from, to);
  pending_.push_back(std::move(op));
  return Status::Ok();
}

Status FaultInjectionEnv::ExchangePaths(const std::string& a, const std::string& b) {
  LS_RETURN_IF_ERROR(Tick("exchange", a + " <-> " + b));
  LS_RETURN_IF_ERROR(base_->ExchangePaths(a, b));
  std::lock_guard<std::mutex> l(mu_);
  const std::string swap = a + ".fault-env-swap";
  MoveFiles(a, swap);
  MoveFiles(b, a);
  MoveFiles(swap, b);
  pending_.push_back(PendingName(PendingName::kExchange, a, b));
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
  // Each pending name is judged where its entries are now (later renames moved them).
  for (size_t i = 0; i < pending_.size(); ++i) {
    PendingName& op = pending_[i];
    if (op.durable) continue;
    if (op.kind == PendingName::kCreate) {
      const std::string now = Current(i, op.a, /*durable_only=*/false);
      op.durable = !now.empty() && ParentDir(now) == dir;
      continue;
    }
    // A rename is durable once the directory it left and the one it entered are both synced.
    const std::string a_dir = op.kind == PendingName::kRename ? Current(i, ParentDir(op.a), false)
                                                              : ParentDir(Current(i, op.a, false));
    const std::string b_now = Current(i, op.b, false);
    op.a_synced = op.a_synced || a_dir == dir;
    op.b_synced = op.b_synced || (!b_now.empty() && ParentDir(b_now) == dir);
    op.durable = op.a_synced && op.b_synced;
  }
  return Status::Ok();
}

Status FaultInjectionEnv::Undo(size_t i) {
  const PendingName& op = pending_[i];
  const std::string a = Current(i, op.a, /*durable_only=*/true);
  const std::string b = op.kind == PendingName::kCreate ? "" : Current(i, op.b, true);
  switch (op.kind) {
    case PendingName::kCreate:
      if (!a.empty() && base_->FileExists(a) && !base_->IsDirectory(a)) {
        LS_RETURN_IF_ERROR(base_->RemoveFile(a));
        files_.erase(a);
      }
      return Status::Ok();
    case PendingName::kRename:
      if (b.empty() || !base_->FileExists(b)) return Status::Ok();  // removed since: gone for good
      if (a.empty() || base_->FileExists(a))
        return Status::Internal("fault env: cannot undo the rename " + op.a + " -> " + op.b + ": " + a +
                                " is taken");
      LS_RETURN_IF_ERROR(base_->RenameFile(b, a));
      MoveFiles(b, a);
      if (op.replaced == PendingName::kEmptyDir) {
        LS_RETURN_IF_ERROR(base_->CreateDir(b));
      } else if (op.replaced == PendingName::kFile) {
        std::error_code ec;
        std::filesystem::copy_file(op.stash, b, ec);
        if (ec) return Status::IoError("fault env: cannot restore " + b + ": " + ec.message());
        if (op.replaced_tracked) files_[b] = op.replaced_state;
      }
      return Status::Ok();
    case PendingName::kExchange:
      if (a.empty() || b.empty() || !base_->FileExists(a) || !base_->FileExists(b)) return Status::Ok();
      LS_RETURN_IF_ERROR(base_->ExchangePaths(a, b));
      MoveFiles(a, a + ".fault-env-swap");
      MoveFiles(b, a);
      MoveFiles(a + ".fault-env-swap", b);
      return Status::Ok();
  }
  return Status::Ok();
}

Status FaultInjectionEnv::DropUnsyncedData() {
  std::lock_guard<std::mutex> l(mu_);
  // Names first, newest first, each back where the one before it left things; then bytes.
  for (size_t i = pending_.size(); i-- > 0;) {
    if (!pending_[i].durable) LS_RETURN_IF_ERROR(Undo(i));
  }
  pending_.clear();
  std::map<std::string, FileState> files;
  files.swap(files_);
  for (const auto& [path, f] : files) {
    if (f.synced_size < f.size && base_->FileExists(path)) LS_RETURN_IF_ERROR(base_->TruncateFile(path, f.synced_size));
  }
  return Status::Ok();
}

}  // namespace lockstep::checkpoint
