#include "lockstep/core/config.h"

#include <toml++/toml.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "lockstep/core/hash.h"

namespace lockstep {
namespace {

// Splits "section.key" into its two parts; false when the key is not of that shape.
bool SplitKey(std::string_view key, std::string_view* section, std::string_view* name) {
  size_t dot = key.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 >= key.size()) return false;
  if (key.find('.', dot + 1) != std::string_view::npos) return false;
  *section = key.substr(0, dot);
  *name = key.substr(dot + 1);
  return true;
}

std::string TypeName(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date/time";
  }
}

Status WrongType(std::string_view key, const toml::node& n, std::string_view expected) {
  return Status::InvalidArgument("config key '" + std::string(key) + "' must be " + std::string(expected) + ", got " +
                                 TypeName(n));
}

// TOML text of a value, as --print-config shows it: shortest round-trip numbers.
std::string DoubleText(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string t(buf, r.ptr);
  if (std::isfinite(v) && t.find_first_of(".eE") == std::string::npos) t += ".0";
  return t;
}
std::string StringText(std::string_view v) {
  std::string t(1, '"');
  for (char c : v) {
    if (c == '"' || c == '\\') t += '\\';
    t += c;
  }
  t += '"';
  return t;
}
std::string NodeText(const toml::node& n) {
  if (auto v = n.value_exact<std::string>()) return StringText(*v);
  if (auto v = n.value_exact<int64_t>()) return std::to_string(*v);
  if (auto v = n.value_exact<double>()) return DoubleText(*v);
  if (auto v = n.value_exact<bool>()) return *v ? "true" : "false";
  std::ostringstream ss;
  if (const toml::array* a = n.as_array()) ss << toml::toml_formatter(*a, toml::format_flags::none);
  return ss.str();
}

}  // namespace

Config::Config() : root_(std::make_unique<toml::table>()) {}
Config::~Config() = default;
Config::Config(const Config& o)
    : root_(std::make_unique<toml::table>(*o.root_)), source_(o.source_), read_(o.read_), origin_(o.origin_) {}
Config& Config::operator=(const Config& o) {
  if (this != &o) {
    root_ = std::make_unique<toml::table>(*o.root_);
    source_ = o.source_;
    read_ = o.read_;
    origin_ = o.origin_;
  }
  return *this;
}
Config::Config(Config&&) noexcept = default;
Config& Config::operator=(Config&&) noexcept = default;

Result<Config> Config::Parse(std::string_view text, const std::string& source_name) {
  // Debian's toml++ is built with exceptions; they stop at this function.
  Config c;
  try {
    *c.root_ = toml::parse(text, source_name);
  } catch (const toml::parse_error& err) {
    std::ostringstream msg;
    msg << source_name << ":" << err.source().begin.line << ": " << err.description();
    return Status::InvalidArgument(msg.str());
  }
  c.source_ = source_name;
  // Only two levels exist: [section] key = value.
  for (auto& [section, node] : *c.root_) {
    if (!node.is_table())
      return Status::InvalidArgument(source_name + ": top-level key '" + std::string(section.str()) +
                                     "' must be inside a [section]");
    for (auto& [name, value] : *node.as_table())
      if (value.is_table())
        return Status::InvalidArgument(source_name + ": '" + std::string(section.str()) + "." +
                                       std::string(name.str()) + "' is a table; only section.key is allowed");
  }
  return c;
}

Result<Config> Config::LoadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot read config file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return Parse(ss.str(), path);
}

Result<Config> Config::LoadFile(const std::string& path, const std::vector<std::string>& overrides) {
  LS_ASSIGN_OR_RETURN(Config config, LoadFile(path));
  for (const std::string& o : overrides) LS_RETURN_IF_ERROR(config.Override(o));
  return config;
}

Status Config::Override(std::string_view assignment) {
  size_t eq = assignment.find('=');
  std::string_view key = assignment.substr(0, eq), section, name;
  if (eq == std::string_view::npos || !SplitKey(key, &section, &name))
    return Status::InvalidArgument("--set expects section.key=value, got '" + std::string(assignment) + "'");
  std::string value(assignment.substr(eq + 1));
  std::optional<toml::table> parsed;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    // Not a TOML value: taken as a bare string below.
  }
  toml::table* sec = (*root_)[section].as_table();
  if (sec == nullptr) {
    root_->insert(section, toml::table{});
    sec = (*root_)[section].as_table();
  }
  if (parsed && parsed->contains("v")) {
    sec->insert_or_assign(name, *parsed->get("v"));
  } else {
    sec->insert_or_assign(name, value);
  }
  origin_[std::string(key)] = "--set";
  return Status::Ok();
}

bool Config::Has(std::string_view key) const {
  std::string_view section, name;
  if (!SplitKey(key, &section, &name)) return false;
  return (*root_)[section][name].node() != nullptr;
}

Result<double> Config::GetDouble(std::string_view key, double def) const {
  std::string_view section, name;
  if (!SplitKey(key, &section, &name)) return Status::Internal("bad config key " + std::string(key));
  const toml::node* n = (*root_)[section][name].node();
  double v = def;
  if (n == nullptr) {
  } else if (auto d = n->value_exact<double>()) {
    v = *d;
  } else if (auto i = n->value_exact<int64_t>()) {
    v = static_cast<double>(*i);
  } else {
    NoteRead(key, NodeText(*n));
    return WrongType(key, *n, "a number");
  }
  NoteRead(key, DoubleText(v));
  return v;
}

Result<int64_t> Config::GetInt(std::string_view key, int64_t def) const {
  std::string_view section, name;
  if (!SplitKey(key, &section, &name)) return Status::Internal("bad config key " + std::string(key));
  const toml::node* n = (*root_)[section][name].node();
  int64_t v = def;
  if (n == nullptr) {
  } else if (auto i = n->value_exact<int64_t>()) {
    v = *i;
  } else if (auto d = n->value_exact<double>();
             d && std::isfinite(*d) && std::floor(*d) == *d && std::fabs(*d) < 9e15) {
    v = static_cast<int64_t>(*d);
  } else {
    NoteRead(key, NodeText(*n));
    return WrongType(key, *n, "an integer");
  }
  NoteRead(key, std::to_string(v));
  return v;
}

Result<bool> Config::GetBool(std::string_view key, bool def) const {
  std::string_view section, name;
  if (!SplitKey(key, &section, &name)) return Status::Internal("bad config key " + std::string(key));
  const toml::node* n = (*root_)[section][name].node();
  bool v = def;
  if (n == nullptr) {
  } else if (auto b = n->value_exact<bool>()) {
    v = *b;
  } else {
    NoteRead(key, NodeText(*n));
    return WrongType(key, *n, "true or false");
  }
  NoteRead(key, v ? "true" : "false");
  return v;
}

Result<std::string> Config::GetString(std::string_view key, const std::string& def) const {
  std::string_view section, name;
  if (!SplitKey(key, &section, &name)) return Status::Internal("bad config key " + std::string(key));
  const toml::node* n = (*root_)[section][name].node();
  std::string v = def;
  if (n == nullptr) {
  } else if (auto str = n->value_exact<std::string>()) {
    v = *str;
  } else {
    NoteRead(key, NodeText(*n));
    return WrongType(key, *n, "a string");
  }
  NoteRead(key, StringText(v));
  return v;
}

Result<int64_t> Config::GetSize(std::string_view key, int64_t def) const {
  std::string_view section, name;
  if (!SplitKey(key, &section, &name)) return Status::Internal("bad config key " + std::string(key));
  const toml::node* n = (*root_)[section][name].node();
  int64_t v = def;
  if (n != nullptr) NoteRead(key, NodeText(*n));
  if (n == nullptr) {
  } else if (auto i = n->value_exact<int64_t>()) {
    v = *i;
  } else if (auto str = n->value_exact<std::string>()) {
    LS_ASSIGN_OR_RETURN(v, ParseSize(*str, "config key '" + std::string(key) + "'"));
  } else {
    return WrongType(key, *n, "a size such as 25M");
  }
  NoteRead(key, std::to_string(v));
  return v;
}

void Config::SetInt(std::string_view key, int64_t value) {
  std::string_view section, name;
  if (!SplitKey(key, &section, &name)) return;
  if (!(*root_)[section].as_table()) root_->insert(section, toml::table{});
  (*root_)[section].as_table()->insert_or_assign(name, value);
  origin_[std::string(key)] = "flag";
}

void Config::SetString(std::string_view key, const std::string& value) {
  std::string_view section, name;
  if (!SplitKey(key, &section, &name)) return;
  if (!(*root_)[section].as_table()) root_->insert(section, toml::table{});
  (*root_)[section].as_table()->insert_or_assign(name, value);
  origin_[std::string(key)] = "flag";
}

void Config::NoteRead(std::string_view key, std::string value_text) const {
  auto it = read_.find(key);
  if (it == read_.end()) {
    read_.emplace(std::string(key), std::move(value_text));
  } else {
    it->second = std::move(value_text);
  }
}

std::vector<std::string> Config::Keys() const {
  std::vector<std::string> keys;
  for (const auto& [section, node] : *root_)
    for (const auto& [name, value] : *node.as_table())
      keys.push_back(std::string(section.str()) + "." + std::string(name.str()));
  return keys;  // toml::table keeps its keys sorted
}

std::vector<std::string> Config::ReadKeys() const {
  std::vector<std::string> keys;
  for (const auto& [key, value] : read_) keys.push_back(key);
  return keys;
}

std::vector<std::string> Config::UnreadKeys() const {
  std::vector<std::string> unread;
  for (std::string& key : Keys())
    if (read_.find(key) == read_.end()) unread.push_back(std::move(key));
  return unread;
}

const std::string* Config::EffectiveValue(std::string_view key) const {
  auto it = read_.find(key);
  return it == read_.end() ? nullptr : &it->second;
}

std::string Config::ValueText(std::string_view key) const {
  std::string_view section, name;
  if (!SplitKey(key, &section, &name)) return "";
  const toml::node* n = (*root_)[section][name].node();
  return n == nullptr ? "" : NodeText(*n);
}

std::string Config::Origin(std::string_view key) const {
  if (!Has(key)) return "default";
  auto it = origin_.find(key);
  return it == origin_.end() ? "file" : it->second;
}

std::string Config::ToToml() const {
  std::ostringstream ss;
  // toml::table keeps keys in a sorted map, so equal trees print equal text.
  ss << toml::toml_formatter(*root_, toml::format_flags::none);
  return ss.str();
}

uint64_t Config::Hash() const {
  std::string text = ToToml();
  return Xxh64(text.data(), text.size());
}

uint64_t Config::HashWithout(std::initializer_list<std::string_view> entries) const {
  Config copy(*this);
  for (std::string_view entry : entries) {
    std::string_view section, name;
    if (!SplitKey(entry, &section, &name)) {
      copy.root_->erase(entry);
    } else if (toml::table* t = (*copy.root_)[section].as_table()) {
      t->erase(name);
    }
  }
  return copy.Hash();
}

Result<int64_t> ParseSize(std::string_view text, std::string_view what) {
  std::string s(text);
  auto bad = [&] {
    return Status::InvalidArgument(std::string(what) + ": expected a size such as 4096, 64K, 25M or 1G, got '" + s +
                                   "'");
  };
  if (s.empty()) return bad();
  int64_t mult = 1;
  char last = s.back();
  if (last == 'K' || last == 'k')
    mult = 1024;
  else if (last == 'M' || last == 'm')
    mult = 1024 * 1024;
  else if (last == 'G' || last == 'g')
    mult = 1024LL * 1024 * 1024;
  if (mult != 1) s.pop_back();
  if (s.empty()) return bad();
  for (char c : s)
    if (c < '0' || c > '9') return bad();
  errno = 0;
  long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno != 0 || v > (1LL << 50) / mult) return bad();
  s = std::string(text);
  return static_cast<int64_t>(v) * mult;
}

}  // namespace lockstep
