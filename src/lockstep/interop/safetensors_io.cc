#include "lockstep/interop/safetensors_io.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "lockstep/core/bf16.h"

namespace lockstep::interop {

Result<StDType> ParseStDType(const std::string& text) {
  if (text == "f32") return StDType::kF32;
  if (text == "bf16") return StDType::kBF16;
  return Status::InvalidArgument("--dtype: expected f32 or bf16, got \"" + text + "\"");
}

const char* StDTypeName(StDType d) { return d == StDType::kF32 ? "F32" : "BF16"; }
int64_t StDTypeSize(StDType d) { return d == StDType::kF32 ? 4 : 2; }

namespace {

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// IEEE half to float (F16 files are accepted on import).
float HalfToFloat(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(frac), -24);
  else if (exp == 31)
    v = frac ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(frac | 0x400), exp - 25);
  return sign ? -v : v;
}

}  // namespace

int64_t SafetensorsDataBytes(const std::vector<StTensorOut>& tensors, StDType dtype) {
  int64_t bytes = 0;
  for (const StTensorOut& t : tensors) bytes += Numel(t.shape) * StDTypeSize(dtype);
  return bytes;
}

Status WriteSafetensors(const std::string& path, const std::vector<StTensorOut>& tensors, StDType dtype,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = metadata;
  int64_t at = 0;
  for (const StTensorOut& t : tensors) {
    const int64_t bytes = Numel(t.shape) * StDTypeSize(dtype);
    header[t.name] = {{"dtype", StDTypeName(dtype)}, {"shape", t.shape}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Status::InvalidArgument("cannot write " + tmp + ": " + std::strerror(errno));
  const uint64_t n = text.size();
  bool ok = std::fwrite(&n, 8, 1, f) == 1 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  std::vector<uint16_t> half;
  for (const StTensorOut& t : tensors) {
    const size_t count = static_cast<size_t>(Numel(t.shape));
    if (dtype == StDType::kF32) {
      ok = ok && std::fwrite(t.data, sizeof(float), count, f) == count;
    } else {
      half.resize(count);
      F32ToBf16(t.data, half.data(), count);
      ok = ok && std::fwrite(half.data(), sizeof(uint16_t), count, f) == count;
    }
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::IoError("cannot write " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Result<std::map<std::string, StTensorIn>> ReadSafetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + " does not exist or cannot be read");
  in.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(in.tellg());
  in.seekg(0);
  uint64_t n = 0;
  if (size < 8 || !in.read(reinterpret_cast<char*>(&n), 8))
    return Status::InvalidArgument(path + ": not a safetensors file (shorter than its 8-byte header length)");
  if (n > static_cast<uint64_t>(size - 8) || n > (100ull << 20))
    return Status::InvalidArgument(path + ": safetensors header length " + std::to_string(n) + " exceeds the file");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  nlohmann::json header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return Status::InvalidArgument(path + ": the safetensors header is not a JSON object");
  const int64_t data_start = 8 + static_cast<int64_t>(n), data_bytes = size - data_start;
  std::map<std::string, StTensorIn> out;
  std::vector<char> raw;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      const std::string dtype = e.at("dtype").get<std::string>();
      const int64_t width = dtype == "F32" ? 4 : (dtype == "BF16" || dtype == "F16") ? 2 : 0;
      if (width == 0)
        return Status::InvalidArgument(path + ": tensor '" + name + "' has dtype " + dtype + " (not F32/BF16/F16)");
      StTensorIn t;
      t.shape = e.at("shape").get<std::vector<int64_t>>();
      const auto offsets = e.at("data_offsets").get<std::vector<int64_t>>();
      const int64_t count = Numel(t.shape);
      if (offsets.size() != 2 || offsets[0] < 0 || offsets[1] > data_bytes || offsets[1] - offsets[0] != count * width)
        return Status::InvalidArgument(path + ": tensor '" + name +
                                       "' data_offsets disagree with its shape or the file");
      raw.resize(static_cast<size_t>(count * width));
      in.seekg(data_start + offsets[0]);
      if (!in.read(raw.data(), static_cast<std::streamsize>(raw.size())))
        return Status::InvalidArgument(path + ": tensor '" + name + "' is truncated");
      t.values.resize(static_cast<size_t>(count));
      if (width == 4) {
        std::memcpy(t.values.data(), raw.data(), raw.size());
      } else {
        const auto* h = reinterpret_cast<const uint16_t*>(raw.data());
        for (int64_t i = 0; i < count; ++i) t.values[i] = dtype == "BF16" ? Bf16ToF32(h[i]) : HalfToFloat(h[i]);
      }
      out.emplace(name, std::move(t));
    } catch (const nlohmann::json::exception& ex) {
      return Status::InvalidArgument(path + ": tensor '" + name + "': " + ex.what());
    }
  }
  return out;
}

}  // namespace lockstep::interop
