#include "lockstep/data/window_source.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace lockstep::data {
namespace {

// An internal invariant (the loaders only ask for windows inside the stream): a bug if broken.
void Require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "lockstep: internal error: %s\n", what);
  std::abort();
}

}  // namespace

TokenStream::TokenStream(std::vector<std::shared_ptr<const TokenFile>> files, int64_t begin, int64_t size,
                         std::string name, std::vector<std::shared_ptr<const TokenFile>> masks)
    : files_(std::move(files)), masks_(std::move(masks)), begin_(begin), size_(size), name_(std::move(name)) {
  int64_t at = 0;
  for (size_t i = 0; i < files_.size(); ++i) {
    starts_.push_back(at);
    at += files_[i]->size();
    Require(masks_.empty() || (masks_.size() == files_.size() && masks_[i]->size() == files_[i]->size()),
            "TokenStream masks do not match its files");
  }
  Require(begin_ >= 0 && size_ >= 0 && begin_ + size_ <= at, "TokenStream range outside its files");
}

void TokenStream::ReadFrom(const std::vector<std::shared_ptr<const TokenFile>>& files, int64_t begin, int64_t n,
                           int32_t* out) const {
  Require(begin >= 0 && n >= 0 && begin + n <= size_, "TokenStream::Read outside the stream");
  int64_t pos = begin_ + begin;
  // The file holding `pos`: the last one starting at or before it.
  size_t f = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), pos) - starts_.begin()) - 1;
  while (n > 0) {
    const TokenFile& file = *files[f];
    const int64_t local = pos - starts_[f];
    const int64_t take = std::min(n, file.size() - local);
    file.Copy(local, take, out);
    file.Release(local, local + take);
    out += take;
    pos += take;
    n -= take;
    ++f;
  }
}

}  // namespace lockstep::data
