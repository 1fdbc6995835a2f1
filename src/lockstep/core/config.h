// Config: the TOML configuration tree of a run (toml++), with `--set section.key=value`
// overrides and typed getters.
//
// Unknown keys are found without a separate schema: every getter records the key it read,
// and once all components have read their sections, CheckAllKeysKnown() reports any key
// nobody asked for. A typo in a config file or in --set is therefore an error, never a
// silently ignored setting. Not thread-safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <string_view>

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

  Status CheckAllKeysKnown() const;

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
  std::unique_ptr<toml::table> root_;
  std::string source_;
  mutable std::set<std::string, std::less<>> read_keys_;
};

// Parses "123", "64K", "25M", "2G" (powers of 1024). Error names `what`.
Result<int64_t> ParseSize(std::string_view text, std::string_view what);

}  // namespace lockstep
