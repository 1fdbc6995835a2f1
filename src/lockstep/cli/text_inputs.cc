#include "lockstep/cli/text_inputs.h"

#include <cstdio>
#include <filesystem>
#include <algorithm>
#include <memory>

#include "lockstep/data/byte_corpus.h"

namespace lockstep::cli {

namespace fs = std::filesystem;

Status MakeParentDirs(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) return Status::Ok();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return Status::InvalidArgument("--out " + path + ": cannot create " + parent.string() + ": " + ec.message());
  return Status::Ok();
}

Result<std::vector<std::string>> ListTextFiles(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      LS_ASSIGN_OR_RETURN(std::vector<data::CorpusFile> in_dir, data::ByteCorpus::SelectFiles(p));
      for (const data::CorpusFile& f : in_dir) files.push_back((fs::path(p) / f.name).string());
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      return Status::NotFound("--from-text " + p + ": no such file or directory");
    }
  }
  return files;
}

Status ForEachTextBlock(const std::string& path, int64_t block_bytes,
                        const std::function<Status(std::string_view, int64_t)>& on_block) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Status::NotFound(path + ": cannot open it");
  std::string buf;
  int64_t offset = 0;  // of buf[0] in the file
  // A small file needs no block-sized buffer (zeroing 64 MiB per file of a corpus of small
  // files costs more than reading them).
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  const int64_t want = ec ? block_bytes : std::min<int64_t>(block_bytes, static_cast<int64_t>(size) + 1);
  std::vector<char> chunk(static_cast<size_t>(std::max<int64_t>(want, 1)));
  bool eof = false;
  while (!eof || !buf.empty()) {
    if (!eof) {
      const size_t n = std::fread(chunk.data(), 1, chunk.size(), f.get());
      if (n < chunk.size()) {
        if (std::ferror(f.get())) return Status::IoError(path + ": read failed");
        eof = true;
      }
      buf.append(chunk.data(), n);
      if (!eof && buf.size() < chunk.size()) continue;
    }
    size_t cut = buf.size();
    if (!eof) {
      const size_t nl = buf.rfind('\n');
      if (nl != std::string::npos) {
        cut = nl + 1;
      } else {
        // One line longer than a block: cut before a UTF-8 lead byte.
        cut = buf.size();
        while (cut > 0 && (static_cast<unsigned char>(buf[cut - 1]) & 0xC0) == 0x80) --cut;
        if (cut > 0) --cut;
        if (cut == 0) cut = buf.size();
      }
    }
    LS_RETURN_IF_ERROR(on_block(std::string_view(buf).substr(0, cut), offset));
    offset += static_cast<int64_t>(cut);
    buf.erase(0, cut);
  }
  return Status::Ok();
}

}  // namespace lockstep::cli
