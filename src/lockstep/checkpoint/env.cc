// Env helpers composed from the primitives (so a FaultInjectionEnv sees each step).
#include "lockstep/checkpoint/env.h"

#include <algorithm>

namespace lockstep::checkpoint {

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (!out.empty() && out.back() != '/') out += '/';
  out += name;
  return out;
}

Status CreateDirs(Env* env, const std::string& dir) {
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  if (d.empty() || env->IsDirectory(d)) return Status::Ok();
  size_t slash = d.find_last_of('/');
  if (slash != std::string::npos && slash > 0) LS_RETURN_IF_ERROR(CreateDirs(env, d.substr(0, slash)));
  return env->CreateDir(d);
}

Status RemoveDirRecursive(Env* env, const std::string& dir) {
  if (!env->FileExists(dir)) return Status::Ok();
  if (!env->IsDirectory(dir)) return env->RemoveFile(dir);
  LS_ASSIGN_OR_RETURN(std::vector<std::string> children, env->GetChildren(dir));
  for (const std::string& c : children) {
    std::string path = JoinPath(dir, c);
    if (env->IsDirectory(path)) {
      LS_RETURN_IF_ERROR(RemoveDirRecursive(env, path));
    } else {
      LS_RETURN_IF_ERROR(env->RemoveFile(path));
    }
  }
  return env->RemoveDir(dir);
}

Status ReadExactly(const RandomAccessFile& file, const std::string& path, uint64_t offset, size_t n, void* out) {
  LS_ASSIGN_OR_RETURN(size_t got, file.Read(offset, n, out));
  if (got != n) {
    return Status::Corruption(path + ": truncated: file ends at byte " + std::to_string(offset + got) +
                              ", needed bytes up to " + std::to_string(offset + n));
  }
  return Status::Ok();
}

Result<std::string> ReadFileToString(Env* env, const std::string& path, uint64_t max_bytes) {
  LS_ASSIGN_OR_RETURN(uint64_t size, env->GetFileSize(path));
  if (size > max_bytes) {
    return Status::Corruption(path + ": size " + std::to_string(size) + " bytes exceeds the limit of " +
                              std::to_string(max_bytes));
  }
  LS_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(path));
  std::string data(size, '\0');
  LS_ASSIGN_OR_RETURN(size_t got, file->Read(0, size, data.data()));
  data.resize(got);  // the file may have shrunk since stat; callers validate the content
  return data;
}

Status WriteFileDurably(Env* env, const std::string& path, std::string_view data) {
  LS_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(path));
  LS_RETURN_IF_ERROR(file->Append(data.data(), data.size()));
  LS_RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

}  // namespace lockstep::checkpoint
