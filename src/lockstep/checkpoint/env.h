// Env: every file-system operation the checkpoint layer performs goes through this
// interface (leveldb's Env is the model), so tests can substitute FaultInjectionEnv and
// fail or "crash" at any single write, fsync, rename or removal.
//
// Thread-safety: Env::Default() and its files may be used from any number of threads,
// except that one WritableFile must not be used by two threads at once.
// RandomAccessFile::Read is safe to call concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/core/result.h"
#include "lockstep/core/status.h"

namespace lockstep::checkpoint {

// A file opened for sequential writing. Append writes straight through to the OS (no user-space
// buffering: the checkpoint writer hands it large pieces). Durable only after Sync().
class WritableFile {
 public:
  virtual ~WritableFile() = default;  // closes the file if Close() was not called
  virtual Status Append(const void* data, size_t n) = 0;
  virtual Status Sync() = 0;  // fsync: data and size are on stable storage when it returns ok
  virtual Status Close() = 0;
};

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to n bytes at offset into out; returns the count read, which is less than n
  // only when the file ends first.
  virtual Result<size_t> Read(uint64_t offset, size_t n, void* out) const = 0;
};

class Env {
 public:
  virtual ~Env() = default;
  // The POSIX implementation; a process-wide singleton, never destroyed.
  static Env* Default();

  // Creates the file, or truncates an existing one.
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  virtual Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) = 0;
  // NotFound when the path does not exist.
  virtual Result<uint64_t> GetFileSize(const std::string& path) = 0;
  virtual bool FileExists(const std::string& path) = 0;  // any kind of entry
  virtual bool IsDirectory(const std::string& path) = 0;
  // Names in dir, without "." and "..", in no particular order.
  virtual Result<std::vector<std::string>> GetChildren(const std::string& dir) = 0;
  virtual Status CreateDir(const std::string& dir) = 0;  // ok when it already is a directory
  virtual Status RemoveFile(const std::string& path) = 0;
  virtual Status RemoveDir(const std::string& dir) = 0;  // the directory must be empty
  // rename(2): atomically replaces `to` when it is a file (or an empty directory).
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  // Atomically swaps two existing paths (renameat2 RENAME_EXCHANGE); Unimplemented where the
  // file system cannot.
  virtual Status ExchangePaths(const std::string& a, const std::string& b) = 0;
  virtual Status TruncateFile(const std::string& path, uint64_t size) = 0;
  // fsync of a directory: makes the entries created, removed or renamed in it durable.
  virtual Status SyncDir(const std::string& dir) = 0;
};

// Helpers built only from Env primitives, so fault injection sees every step.
std::string JoinPath(std::string_view dir, std::string_view name);
Status CreateDirs(Env* env, const std::string& dir);  // mkdir -p
// Removes a directory tree; ok when it does not exist.
Status RemoveDirRecursive(Env* env, const std::string& dir);
// Reads a whole file; Corruption naming the file when it is larger than max_bytes.
Result<std::string> ReadFileToString(Env* env, const std::string& path, uint64_t max_bytes);
// Reads exactly n bytes at offset; Corruption "truncated" naming the file when it ends first.
Status ReadExactly(const RandomAccessFile& file, const std::string& path, uint64_t offset, size_t n, void* out);
// Creates (truncating) path, writes data, fsyncs and closes it.
Status WriteFileDurably(Env* env, const std::string& path, std::string_view data);

}  // namespace lockstep::checkpoint
