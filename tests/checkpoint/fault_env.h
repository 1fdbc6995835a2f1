// FaultInjectionEnv: an Env wrapper for tests that fails the N-th file-system mutation and,
// in crash mode, every mutation after it (the process "died" there), and can then model a
// power loss by dropping what was not made durable.
//
// Mutations counted, one each: NewWritableFile, Append, Sync, Close, CreateDir, RemoveFile,
// RemoveDir, RenameFile, ExchangePaths, TruncateFile, SyncDir. Reads are never failed.
// A failed Append first writes half of its bytes (a torn write).
//
// DropUnsyncedData() (call after the "crash"): every file written through this Env is cut
// back to the size it had at its last Sync, and a file created since the last SyncDir of its
// directory is deleted. Renames are never rolled back: a file renamed over one that existed
// durably counts as durable (on a journaling file system the rename is atomic, and Commit
// fsyncs the directory after each rename anyway).
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "lockstep/checkpoint/env.h"

namespace lockstep::checkpoint {

class FaultInjectionEnv final : public Env {
 public:
  explicit FaultInjectionEnv(Env* base) : base_(base) {}

  // The n-th mutation from now on (1-based) fails with IoError "injected fault"; with crash,
  // every later one fails too. n = 0 disables injection.
  void FailAt(int64_t n, bool crash = true);
  int64_t mutations() const;  // mutations attempted so far (failed ones included)
  bool fault_hit() const;
  std::vector<std::string> log() const;  // one line per mutation, e.g. "12 sync /x/manifest.json"
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
    bool entry_durable = false;  // its directory was synced since the file was created
  };
  // Counts one mutation; returns the injected error when this one must fail.
  Status Tick(const char* op, const std::string& path);
  void OnAppend(const std::string& path, uint64_t n);
  void OnSync(const std::string& path);
  void MovePaths(const std::string& from, const std::string& to, bool target_durable);
  bool EntryDurable(const std::string& path);  // untracked existing files count as durable

  Env* base_;
  mutable std::mutex mu_;
  int64_t count_ = 0;
  int64_t fail_at_ = 0;  // absolute mutation number; 0 = never
  bool crash_ = true;
  bool hit_ = false;
  std::vector<std::string> log_;
  std::map<std::string, FileState> files_;
};

}  // namespace lockstep::checkpoint
