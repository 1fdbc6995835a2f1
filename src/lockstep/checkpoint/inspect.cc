#include "lockstep/checkpoint/inspect.h"

#include <algorithm>
#include <iomanip>
#include <vector>

#include "lockstep/checkpoint/json_util.h"
#include "lockstep/checkpoint/reader.h"

namespace lockstep::checkpoint {
namespace {

// A JSON value, cut to max characters, for the one-line extra summary.
std::string Brief(const nlohmann::json& v, size_t max = 60) {
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.size() > max) s = s.substr(0, max - 3) + "...";
  return s;
}

// "ok", or e.g. "BAD 1/3: rank-00001.safetensors [16, 32)".
std::string ChecksumCell(const TensorInfo& t, const std::vector<Status>& st) {
  std::vector<std::string> bad;
  for (size_t i = 0; i < st.size(); ++i) {
    if (!st[i].ok()) {
      bad.push_back(t.shards[i].file + " [" + std::to_string(t.shards[i].begin) + ", " +
                    std::to_string(t.shards[i].end) + ")");
    }
  }
  if (bad.empty()) return "ok";
  std::string out = "BAD " + std::to_string(bad.size()) + "/" + std::to_string(st.size()) + ":";
  for (size_t i = 0; i < bad.size() && i < 3; ++i) out += " " + bad[i];
  if (bad.size() > 3) out += " ...";
  return out;
}

}  // namespace

Status InspectToStream(const std::string& dir, std::ostream& os, Env* env) {
  Result<Checkpoint> opened = Checkpoint::Open(dir, env);
  if (!opened.ok()) {
    os << "error: " << opened.status().message() << "\n";
    return opened.status();
  }
  const Checkpoint& c = *opened;
  os << "checkpoint " << dir << ": format_version " << c.format_version() << ", step " << c.step() << ", written by "
     << c.world() << (c.world() == 1 ? " rank" : " ranks") << "\n";
  struct Row {
    std::string name, dtype, shape, shards, bytes, checksum;
  };
  std::vector<Row> rows = {{"tensor", "dtype", "shape", "shards", "bytes", "checksum"}};
  std::vector<Status> errors;
  int64_t total_bytes = 0;
  size_t ok_pieces = 0, all_pieces = 0;
  for (size_t i = 0; i < c.tensors().size(); ++i) {
    const TensorInfo& t = c.tensors()[i];
    std::vector<Status> st = c.CheckShards(i);
    for (const Status& s : st) {
      ++all_pieces;
      if (s.ok())
        ++ok_pieces;
      else
        errors.push_back(s);
    }
    total_bytes += t.bytes();
    rows.push_back({internal::Printable(t.name, 60), StoredDTypeName(t.dtype), internal::ShapeString(t.shape),
                    std::to_string(t.shards.size()), std::to_string(t.bytes()), ChecksumCell(t, st)});
  }
  size_t w[5] = {0, 0, 0, 0, 0};
  for (const Row& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.dtype.size());
    w[2] = std::max(w[2], r.shape.size());
    w[3] = std::max(w[3], r.shards.size());
    w[4] = std::max(w[4], r.bytes.size());
  }
  for (const Row& r : rows) {
    os << std::left << std::setw(static_cast<int>(w[0])) << r.name << "  " << std::setw(static_cast<int>(w[1]))
       << r.dtype << "  " << std::setw(static_cast<int>(w[2])) << r.shape << "  " << std::right
       << std::setw(static_cast<int>(w[3])) << r.shards << "  " << std::setw(static_cast<int>(w[4])) << r.bytes << "  "
       << r.checksum << "\n";
  }
  uint64_t file_bytes = 0;
  for (const FileInfo& f : c.files()) file_bytes += f.bytes;
  os << "total: " << c.tensors().size() << " tensors, " << total_bytes << " bytes of data in " << c.files().size()
     << " files (" << file_bytes << " bytes on disk); checksums: " << ok_pieces << "/" << all_pieces << " shards ok\n";
  os << "extra:";
  if (c.extra().empty()) os << " (none)";
  for (auto it = c.extra().begin(); it != c.extra().end(); ++it) {
    os << " " << it.key() << "=" << Brief(it.value());
  }
  os << "\n";
  for (const Status& s : errors) os << "error: " << s.message() << "\n";
  if (errors.empty()) return Status::Ok();
  return Status::Corruption(
      errors.front().message() +
      (errors.size() > 1 ? " (and " + std::to_string(errors.size() - 1) + " more bad pieces)" : ""));
}

}  // namespace lockstep::checkpoint
