#include "lockstep/checkpoint/json_util.h"

#include <cstdio>
#include <limits>

namespace lockstep::checkpoint::internal {
namespace {

// Deepest [ / { nesting outside strings. nlohmann's parser itself is iterative, but bounding
// depth keeps every later recursive walk (dump, destruction, our validators) shallow.
bool DepthWithin(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

std::string OneLine(std::string_view s) {
  std::string out;
  for (char c : s) out += (c == '\n' || c == '\r') ? ' ' : c;
  return out;
}

}  // namespace

Result<json> ParseJson(std::string_view text, int max_depth) {
  if (!DepthWithin(text, max_depth)) {
    return Status::Corruption("bad JSON: nested deeper than " + std::to_string(max_depth) + " levels");
  }
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return Status::Corruption("bad JSON: " + Quote(OneLine(e.what()), 200));
  }
}

// Appends instead of "'" + ...: GCC 12's -Wrestrict misfires on operator+(const char*, string&&).
std::string Quote(std::string_view text, size_t max_len) {
  std::string out(1, '\'');
  out += Printable(text, max_len);
  out += '\'';
  return out;
}

std::string Printable(std::string_view text, size_t max_len) {
  std::string out;
  size_t n = 0;
  for (unsigned char c : text) {
    if (++n > max_len) {
      out += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

std::optional<int64_t> AsInt64(const json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

namespace {
Status Missing(std::string_view where, const char* key) {
  return Status::Corruption(std::string(where) + ": field '" + key + "' missing");
}
Status WrongType(std::string_view where, const char* key, const char* type) {
  return Status::Corruption(std::string(where) + ": field '" + key + "' is not " + type);
}
const json* Field(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}
}  // namespace

Status GetObject(const json& obj, const char* key, std::string_view where, const json** out) {
  const json* f = Field(obj, key);
  if (f == nullptr) return Missing(where, key);
  if (!f->is_object()) return WrongType(where, key, "an object");
  *out = f;
  return Status::Ok();
}

Status GetArray(const json& obj, const char* key, std::string_view where, const json** out) {
  const json* f = Field(obj, key);
  if (f == nullptr) return Missing(where, key);
  if (!f->is_array()) return WrongType(where, key, "an array");
  *out = f;
  return Status::Ok();
}

Status GetString(const json& obj, const char* key, std::string_view where, std::string* out) {
  const json* f = Field(obj, key);
  if (f == nullptr) return Missing(where, key);
  if (!f->is_string()) return WrongType(where, key, "a string");
  *out = f->get<std::string>();
  return Status::Ok();
}

Status GetInt(const json& obj, const char* key, std::string_view where, int64_t* out) {
  const json* f = Field(obj, key);
  if (f == nullptr) return Missing(where, key);
  std::optional<int64_t> v = AsInt64(*f);
  if (!v) return WrongType(where, key, "a 64-bit integer");
  *out = *v;
  return Status::Ok();
}

Status GetDims(const json& obj, const char* key, std::string_view where, std::vector<int64_t>* out) {
  const json* a = nullptr;
  LS_RETURN_IF_ERROR(GetArray(obj, key, where, &a));
  if (a->size() > 16) return WrongType(where, key, "a shape of at most 16 dimensions");
  out->clear();
  for (const json& d : *a) {
    std::optional<int64_t> v = AsInt64(d);
    if (!v || *v < 0) return WrongType(where, key, "an array of non-negative integers");
    out->push_back(*v);
  }
  return Status::Ok();
}

std::optional<int64_t> ParseDecimal(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (s.size() > 1 && s[0] == '0') return std::nullopt;  // one spelling per number
  return v;
}

std::string JoinInts(const std::vector<int64_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  return out;
}

std::optional<std::vector<int64_t>> SplitInts(std::string_view s) {
  std::vector<int64_t> out;
  if (s.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    std::optional<int64_t> v = ParseDecimal(s.substr(start, comma == std::string_view::npos ? s.npos : comma - start));
    if (!v || out.size() >= 16) return std::nullopt;
    out.push_back(*v);
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

std::optional<uint64_t> ParseHex64(std::string_view s) {
  if (s.size() != 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else
      return std::nullopt;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

std::optional<int64_t> NumElements(const std::vector<int64_t>& dims, int64_t elem_size) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  int64_t bytes;
  if (__builtin_mul_overflow(n, elem_size, &bytes)) return std::nullopt;
  return n;
}

std::string ShapeString(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

}  // namespace lockstep::checkpoint::internal
