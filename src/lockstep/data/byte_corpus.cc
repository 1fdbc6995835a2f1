#include "lockstep/data/byte_corpus.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace lockstep::data {
namespace fs = std::filesystem;

namespace {

// Reads exactly `size` bytes of `path` and appends them; a file that changes size while being
// read is reported rather than silently truncated.
Status AppendFile(const std::string& path, int64_t size, std::vector<uint8_t>* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::InvalidArgument("cannot read corpus file " + path + ": " + std::strerror(errno));
  size_t start = out->size();
  out->resize(start + static_cast<size_t>(size));
  int64_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd, out->data() + start + got, static_cast<size_t>(size - got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = n < 0 ? std::strerror(errno) : "file shrank while being read";
      ::close(fd);
      return Status::InvalidArgument("cannot read corpus file " + path + ": " + why);
    }
    got += n;
  }
  ::close(fd);
  return Status::Ok();
}

}  // namespace

int64_t ByteCorpus::SplitPoint(int64_t total) { return static_cast<int64_t>(static_cast<double>(total) * 0.9); }

Result<std::vector<CorpusFile>> ByteCorpus::SelectFiles(const std::string& dir) {
  std::error_code ec;
  fs::file_status st = fs::status(dir, ec);
  if (ec || !fs::exists(st)) {
    return Status::NotFound("corpus directory " + dir +
                            " does not exist (the default corpus is in the Debian package "
                            "'fortunes')");
  }
  if (!fs::is_directory(st)) return Status::InvalidArgument("corpus path " + dir + " is not a directory");
  fs::directory_iterator it(dir, ec);
  if (ec) return Status::InvalidArgument("cannot list corpus directory " + dir + ": " + ec.message());

  std::vector<CorpusFile> files;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return Status::InvalidArgument("cannot list corpus directory " + dir + ": " + ec.message());
    std::string name = it->path().filename().string();
    if (name.find('.') != std::string::npos) continue;
    // symlink_status: look at the entry itself, so a link to a regular file is still skipped.
    fs::file_status ls = it->symlink_status(ec);
    if (ec || fs::is_symlink(ls) || !fs::is_regular_file(ls)) continue;
    struct stat sb;
    if (::stat(it->path().c_str(), &sb) != 0) {
      return Status::InvalidArgument("cannot read corpus file " + it->path().string() + ": " + std::strerror(errno));
    }
    files.push_back({name, static_cast<int64_t>(sb.st_size)});
  }
  // std::string's operator< compares chars as unsigned bytes: the same order as Python's
  // sorted() on the peer's UTF-8 names.
  std::sort(files.begin(), files.end(), [](const CorpusFile& a, const CorpusFile& b) { return a.name < b.name; });
  if (files.empty()) {
    return Status::NotFound("corpus directory " + dir +
                            " has no regular files without a '.' in their name (symlinks are skipped)");
  }
  return files;
}

Result<ByteCorpus> ByteCorpus::Load(const std::string& dir, int64_t context) {
  LS_ASSIGN_OR_RETURN(std::vector<CorpusFile> files, SelectFiles(dir));
  ByteCorpus c;
  int64_t total = 0;
  for (const CorpusFile& f : files) total += f.size;
  c.bytes_.reserve(static_cast<size_t>(total));
  for (CorpusFile& f : files) {
    size_t before = c.bytes_.size();
    LS_RETURN_IF_ERROR(AppendFile((fs::path(dir) / f.name).string(), f.size, &c.bytes_));
    f.size = static_cast<int64_t>(c.bytes_.size() - before);
  }
  c.split_ = static_cast<size_t>(SplitPoint(static_cast<int64_t>(c.bytes_.size())));
  c.files_ = std::move(files);
  c.dir_ = dir;
  LS_RETURN_IF_ERROR(CheckCorpusFitsContext(c, context));
  return c;
}

ByteCorpus ByteCorpus::FromBytes(std::vector<uint8_t> bytes, std::string name) {
  ByteCorpus c;
  c.files_.push_back({name, static_cast<int64_t>(bytes.size())});
  c.bytes_ = std::move(bytes);
  c.split_ = static_cast<size_t>(SplitPoint(static_cast<int64_t>(c.bytes_.size())));
  c.dir_ = std::move(name);
  return c;
}

Status CheckCorpusFitsContext(const ByteCorpus& c, int64_t context) {
  if (context < 1) return Status::InvalidArgument("the context length must be >= 1, got " + std::to_string(context));
  const int64_t train = static_cast<int64_t>(c.train().size()), val = static_cast<int64_t>(c.val().size());
  if (train < 2 * context || val < context + 1) {
    return Status::InvalidArgument("corpus " + c.dir() + " is too small for context " + std::to_string(context) + ": " +
                                   std::to_string(train) + " training and " + std::to_string(val) +
                                   " validation bytes, need at least " + std::to_string(2 * context) + " and " +
                                   std::to_string(context + 1));
  }
  return Status::Ok();
}

}  // namespace lockstep::data
