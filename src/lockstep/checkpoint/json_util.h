// Strict JSON helpers for the checkpoint readers: a parse that bounds nesting depth and never
// throws, typed field getters whose errors name the field, and quoting for one-line messages.
// Internal to the checkpoint layer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/core/result.h"

namespace lockstep::checkpoint::internal {

using nlohmann::json;

// Parses text; Corruption "bad JSON: ..." (one line) on a syntax error, invalid UTF-8 or nesting
// deeper than max_depth.
Result<json> ParseJson(std::string_view text, int max_depth);

// 'text' with control and non-ASCII bytes escaped as \xNN, cut to max_len bytes: safe to embed in
// a one-line message whatever a corrupt file contains.
std::string Quote(std::string_view text, size_t max_len = 120);
// The same without the quotes.
std::string Printable(std::string_view text, size_t max_len = 120);

// An integer JSON value that fits int64_t (floats, bools and out-of-range values: nullopt).
std::optional<int64_t> AsInt64(const json& v);

// Field getters: Corruption "<where>: field 'key' missing" / "... is not a <type>".
Status GetObject(const json& obj, const char* key, std::string_view where, const json** out);
Status GetArray(const json& obj, const char* key, std::string_view where, const json** out);
Status GetString(const json& obj, const char* key, std::string_view where, std::string* out);
Status GetInt(const json& obj, const char* key, std::string_view where, int64_t* out);
// An array of non-negative integers (a shape).
Status GetDims(const json& obj, const char* key, std::string_view where, std::vector<int64_t>* out);

// Strict decimal parse of a non-negative integer without sign or spaces (at most 18 digits).
std::optional<int64_t> ParseDecimal(std::string_view s);
// "4,8" <-> {4, 8}; "" is the empty list (a scalar's shape).
std::string JoinInts(const std::vector<int64_t>& v);
std::optional<std::vector<int64_t>> SplitInts(std::string_view s);
// 16 lowercase hex digits -> value.
std::optional<uint64_t> ParseHex64(std::string_view s);
// Product of dims; nullopt when a dim is negative or the product (times elem_size) overflows.
std::optional<int64_t> NumElements(const std::vector<int64_t>& dims, int64_t elem_size);
// "[4, 8]" for messages.
std::string ShapeString(const std::vector<int64_t>& dims);

}  // namespace lockstep::checkpoint::internal
