#include "lockstep/data/token_corpus.h"

#include <glob.h>

#include <algorithm>

#include "lockstep/data/byte_corpus.h"

namespace lockstep::data {

Result<std::vector<std::string>> ExpandTokenPaths(const std::string& pattern, const std::string& key) {
  if (pattern.empty()) return Status::InvalidArgument(key + ": expected a token file path or glob, got \"\"");
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);  // an unreadable directory: no match
  std::vector<std::string> paths;
  for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && paths.empty()))
    return Status::NotFound(key + ": no token file matches \"" + pattern + "\"");
  if (rc != 0) return Status::InvalidArgument(key + ": cannot list the files of \"" + pattern + "\"");
  // Byte order, whatever the locale: shard 000010 after 000009.
  std::sort(paths.begin(), paths.end());
  return paths;
}

namespace {

Result<std::vector<std::shared_ptr<const TokenFile>>> OpenAll(const std::string& pattern, const std::string& key,
                                                              const TokenCorpusOptions& o) {
  LS_ASSIGN_OR_RETURN(std::vector<std::string> paths, ExpandTokenPaths(pattern, key));
  std::vector<std::shared_ptr<const TokenFile>> files;
  for (const std::string& path : paths) {
    LS_ASSIGN_OR_RETURN(TokenFile f, TokenFile::Open(path, o.format));
    if (f.is_mask())
      return Status::InvalidArgument("token file " + path + " is a loss mask, not tokens (name the token file beside it)");
    const TokenFile::MaxTokenAt mx = f.MaxToken();
    if (mx.value >= o.vocab)
      return Status::InvalidArgument("token file " + path + " holds token " + std::to_string(mx.value) +
                                     " at position " + std::to_string(mx.index) +
                                     ", not below model.vocab = " + std::to_string(o.vocab));
    files.push_back(std::make_shared<const TokenFile>(std::move(f)));
  }
  return files;
}

// The loss masks beside `files` (data.loss_mask), each checked against its token file.
Result<std::vector<std::shared_ptr<const TokenFile>>> OpenMasks(const std::vector<std::shared_ptr<const TokenFile>>& files,
                                                                const TokenCorpusOptions& o) {
  std::vector<std::shared_ptr<const TokenFile>> masks;
  if (!o.loss_mask) return masks;
  for (const auto& f : files) {
    const std::string path = f->path() + ".mask";
    Result<TokenFile> opened = TokenFile::Open(path, TokenFormat::kLlmc);
    if (!opened.ok()) {
      if (opened.status().code() == StatusCode::kNotFound)
        return Status::InvalidArgument("data.loss_mask: " + path + " does not exist (lockstep tokens --prompt-key ... writes it)");
      return opened.status();
    }
    auto m = std::make_shared<const TokenFile>(std::move(opened).value());
    if (!m->is_mask()) return Status::InvalidArgument("data.loss_mask: " + path + " is not a loss mask");
    if (m->size() != f->size())
      return Status::InvalidArgument("data.loss_mask: " + path + " has " + std::to_string(m->size()) + " values for the " +
                                     std::to_string(f->size()) + " tokens of " + f->path());
    if (m->MaxToken().value > 1) return Status::InvalidArgument("data.loss_mask: " + path + " holds a value other than 0 and 1");
    masks.push_back(std::move(m));
  }
  return masks;
}

int64_t Total(const std::vector<std::shared_ptr<const TokenFile>>& files) {
  int64_t n = 0;
  for (const auto& f : files) n += f->size();
  return n;
}

std::string Describe(const std::string& pattern, size_t files) {
  return pattern + (files == 1 ? "" : " (" + std::to_string(files) + " files)");
}

}  // namespace

Result<TokenCorpus> TokenCorpus::Load(const TokenCorpusOptions& o) {
  if (o.context < 1) return Status::InvalidArgument("the context length must be >= 1");
  LS_ASSIGN_OR_RETURN(auto train_files, OpenAll(o.train, "data.train", o));
  LS_ASSIGN_OR_RETURN(auto train_masks, OpenMasks(train_files, o));
  const int64_t total = Total(train_files);
  TokenCorpus c;
  std::string train_name = Describe(o.train, train_files.size());
  if (o.val.empty()) {
    const int64_t split = ByteCorpus::SplitPoint(total);
    c.val_ = std::make_shared<const TokenStream>(train_files, split, total - split, train_name + " (its last 10%)",
                                                 train_masks);
    c.train_ = std::make_shared<const TokenStream>(std::move(train_files), 0, split, train_name + " (its first 90%)",
                                                   std::move(train_masks));
  } else {
    LS_ASSIGN_OR_RETURN(auto val_files, OpenAll(o.val, "data.val", o));
    LS_ASSIGN_OR_RETURN(auto val_masks, OpenMasks(val_files, o));
    const int64_t val_total = Total(val_files);
    std::string val_name = Describe(o.val, val_files.size());
    c.train_ = std::make_shared<const TokenStream>(std::move(train_files), 0, total, train_name, std::move(train_masks));
    c.val_ = std::make_shared<const TokenStream>(std::move(val_files), 0, val_total, val_name, std::move(val_masks));
  }
  const int64_t T = o.context;
  if (c.train_->size() < 2 * T)
    return Status::InvalidArgument("data.train " + c.train_->name() + " has " + std::to_string(c.train_->size()) +
                                   " tokens, too few for context " + std::to_string(T) + " (need at least " +
                                   std::to_string(2 * T) + ")");
  if (c.val_->size() < T + 1)
    return Status::InvalidArgument("data.val " + c.val_->name() + " has " + std::to_string(c.val_->size()) +
                                   " tokens, too few for context " + std::to_string(T) + " (need at least " +
                                   std::to_string(T + 1) + ")");
  return c;
}

}  // namespace lockstep::data
