// Config: the TOML configuration tree of a run (toml++), with `--set section.key=value`
// overrides and typed getters.
//
// Every getter records the key it read and the value it returned (the default when the key
// is absent), and every key remembers where it came from (the file, --set, a flag). The
// runtime's registry of known keys (runtime/setup/config_keys.h) uses both: a key no option
// knows is an error, a known key this run did not read is a warning, and --print-config shows
// every key's effective value and origin. Not thread-safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/core/result.h"

namespace toml {
inline namespace v3 {
class table;
}
}  // namespace toml

namespace lockstep {

class Config {
 public:
  Config();
  ~Config();
  Config(const Config& other);
  Config& operator=(const Config& other);
  Config(Config&&) noexcept;
  Config& operator=(Config&&) noexcept;

  static Result<Config> LoadFile(const std::string& path);
  // The file, then each "section.key=value" of `overrides` in order (--set on the command line).
  static Result<Config> LoadFile(const std::string& path, const std::vector<std::string>& overrides);
  static Result<Config> Parse(std::string_view text, const std::string& source_name);

  // Applies "section.key=value". The value is read as a TOML value (number, bool, quoted
  // string, array); anything else is taken as a bare string.
  Status Override(std::string_view assignment);

  // Typed getters. A missing key yields `def`; a present key of the wrong type is an
  // InvalidArgument naming the key and the expected type.
  Result<double> GetDouble(std::string_view key, double def) const;
  Result<int64_t> GetInt(std::string_view key, int64_t def) const;
  Result<bool> GetBool(std::string_view key, bool def) const;
  Result<std::string> GetString(std::string_view key, const std::string& def) const;
  // Sizes: an integer, or a string with a K/M/G suffix (powers of 1024): "25M".
  Result<int64_t> GetSize(std::string_view key, int64_t def) const;
  bool Has(std::string_view key) const;

  // Sets a key programmatically (used by CLI flags such as --steps).
  void SetInt(std::string_view key, int64_t value);
  void SetString(std::string_view key, const std::string& value);

  // Every key present (file, --set, flags), sorted.
  std::vector<std::string> Keys() const;
  // Keys some getter has read (present or not), sorted.
  std::vector<std::string> ReadKeys() const;
  // Keys present that no getter has read.
  std::vector<std::string> UnreadKeys() const;
  // The value a getter returned for `key` as TOML text (the default if the key is absent), or
  // nullptr when no getter read it.
  const std::string* EffectiveValue(std::string_view key) const;
  // The present value of `key` as TOML text; "" when absent.
  std::string ValueText(std::string_view key) const;
  // Where a present key's value came from: "file", "--set" or "flag"; "default" if absent.
  std::string Origin(std::string_view key) const;

  // Canonical TOML text of the whole tree (sorted keys), and its xxh64: the config hash
  // stored in checkpoints.
  std::string ToToml() const;
  uint64_t Hash() const;
  // The hash of the tree without some entries: "section.key" drops one key, "section" a
  // whole section. Checkpoints use it to tell a foreign run from one resumed with other
  // thread counts, step counts or output settings.
  uint64_t HashWithout(std::initializer_list<std::string_view> entries) const;

  const std::string& source() const { return source_; }

 private:
  // Records that `key` was read and returned `value_text`.
  void NoteRead(std::string_view key, std::string value_text) const;

  std::unique_ptr<toml::table> root_;
  std::string source_;
  mutable std::map<std::string, std::string, std::less<>> read_;  // key -> effective value (TOML text)
  std::map<std::string, std::string, std::less<>> origin_;        // key -> "--set" | "flag"
};

// Parses "123", "64K", "25M", "2G" (powers of 1024). Error names `what`.
Result<int64_t> ParseSize(std::string_view text, std::string_view what);

}  // namespace lockstep
