// FaultInjectionEnv: an Env wrapper for tests that fails the N-th file-system mutation and,
// in crash mode, every mutation after it (the process "died" there), and can then model a
// power loss by undoing what was not made durable.
//
// Mutations counted, one each: NewWritableFile, Append, Sync, Close, CreateDir, RemoveFile,
// RemoveDir, RenameFile, ExchangePaths, TruncateFile, SyncDir. Reads are never failed.
// A failed Append first writes half of its bytes (a torn write).
//
// What a power loss keeps (DropUnsyncedData(), called after the "crash"), after the rules a
// POSIX file system promises and no more:
// - A file's bytes are durable up to its last Sync.
// - A name is durable only once its directory has been synced: a file created, renamed or
//   exchanged is pending until SyncDir of the directory it is in (for a rename, of both
//   directories). The power loss undoes pending names newest first: a created file is
//   removed, a rename moved back (with the file or empty directory it replaced restored), an
//   exchange swapped back.
// - Removals (RemoveFile, RemoveDir) and CreateDir are kept as done. That is the harsher
//   choice for a checkpoint: a directory whose rename to ".trash" is lost but whose contents'
//   removal is kept comes back half-empty under its complete-looking name.
//
// Thread-safe. Test-only: it lives beside the tests, not in the installed library.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/checkpoint/env.h"

namespace lockstep::checkpoint {

class FaultInjectionEnv final : public Env {
 public:
  explicit FaultInjectionEnv(Env* base) : base_(base) {}
  ~FaultInjectionEnv() override;

  // The n-th mutation from now on (1-based) fails with IoError "injected fault"; with crash,
  // every later one fails too. n = 0 disables injection.
  void FailAt(int64_t n, bool crash = true);
  int64_t mutations() const;  // mutations attempted so far (failed ones included)
  bool fault_hit() const;
  std::vector<std::string> log() const;  // one line per mutation, e.g. "12 sync /x/manifest.json"
  // Names created, renamed or exchanged whose directory has not been synced since.
  int64_t pending_names() const;
  Status DropUnsyncedData();

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override {
    return base_->NewRandomAccessFile(path);
  }
  Result<uint64_t> GetFileSize(const std::string& path) override { return base_->GetFileSize(path); }
  bool FileExists(const std::string& path) override { return base_->FileExists(path); }
  bool IsDirectory(const std::string& path) override { return base_->IsDirectory(path); }
  Result<std::vector<std::string>> GetChildren(const std::string& dir) override { return base_->GetChildren(dir); }
  Status CreateDir(const std::string& dir) override;
  Status RemoveFile(const std::string& path) override;
  Status RemoveDir(const std::string& dir) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status ExchangePaths(const std::string& a, const std::string& b) override;
  Status TruncateFile(const std::string& path, uint64_t size) override;
  Status SyncDir(const std::string& dir) override;

 private:
  friend class FaultWritableFile;
  struct FileState {
    uint64_t size = 0;
    uint64_t synced_size = 0;
  };
  // A name change, with its paths as they were when it was made. Names made durable stay in
  // the list (marked so): later names are found where they are now by replaying the renames
  // after them (Current).
  struct PendingName {
    enum Kind { kCreate, kRename, kExchange };
    PendingName(Kind k, std::string path_a, std::string path_b = "")
        : kind(k), a(std::move(path_a)), b(std::move(path_b)) {}
    Kind kind;
    std::string a;  // created path; rename source; one side of an exchange
    std::string b;  // rename target; the other side of an exchange
    bool a_synced = false, b_synced = false;  // its directories synced since
    bool durable = false;
    // What the rename replaced at b, put back when it is undone.
    enum Replaced { kNothing, kFile, kEmptyDir } replaced = kNothing;
    std::string stash;  // a copy of the replaced file's bytes
    bool replaced_tracked = false;
    FileState replaced_state;
  };

  // Counts one mutation; returns the injected error when this one must fail.
  Status Tick(const char* op, const std::string& path);
  void OnAppend(const std::string& path, uint64_t n);
  void OnSync(const std::string& path);
  // Where path p, as it was when pending_[i] was made, is now: the renames and exchanges after
  // it replayed (only the durable ones: what stands once the pending ones are undone). "" when
  // a later rename replaced the entry. Caller holds mu_.
  std::string Current(size_t i, std::string p, bool durable_only) const;
  // Moves the data state of `from` and everything under it to `to`. Caller holds mu_.
  void MoveFiles(const std::string& from, const std::string& to);
  // Undoes pending_[i] on the base Env, the names after it already undone. Caller holds mu_.
  Status Undo(size_t i);
  Result<std::string> StashCopy(const std::string& path);  // caller holds mu_

  Env* base_;
  mutable std::mutex mu_;
  int64_t count_ = 0;
  int64_t fail_at_ = 0;  // absolute mutation number; 0 = never
  bool crash_ = true;
  bool hit_ = false;
  std::vector<std::string> log_;
  std::map<std::string, FileState> files_;  // files written through this Env, by current path
  std::vector<PendingName> pending_;        // every name change since the last power loss, oldest first
  std::string stash_dir_;                   // made on first use, removed with the Env
  int64_t stashed_ = 0;
};

}  // namespace lockstep::checkpoint
