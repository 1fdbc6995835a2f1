// The text files a `--from-text PATH...` names: a file as it is, a directory as the files
// data.kind = "text" reads there (dot-less regular files, name-sorted), in the order given.
// Read in blocks cut after a newline, so a corpus larger than memory streams.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/core/result.h"

namespace lockstep::cli {

// Creates the folders above `path` (an --out file), so that `--out runs/bpe/tokenizer.json`
// works in a fresh checkout as `train --out` does.
Status MakeParentDirs(const std::string& path);

Result<std::vector<std::string>> ListTextFiles(const std::vector<std::string>& paths);

// Calls on_block(block, offset) for successive blocks of `path` (about `block_bytes` each,
// every block but the last ending just after a '\n', or at a UTF-8 character boundary for a
// line longer than a block); `offset` is the block's first byte in the file.
Status ForEachTextBlock(const std::string& path, int64_t block_bytes,
                        const std::function<Status(std::string_view block, int64_t offset)>& on_block);

}  // namespace lockstep::cli
