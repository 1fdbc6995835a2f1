// IdxDataset: images and labels in the IDX format of (Fashion-)MNIST, read from gzip files
// (zlib's gzread also reads uncompressed files transparently).
//
// IDX: a big-endian header — magic 0x00000803 (unsigned bytes, 3 dimensions: count, rows,
// cols) for images, 0x00000801 (1 dimension: count) for labels — followed by exactly
// count*rows*cols (or count) bytes. Every check that can fail — missing file, bad gzip data,
// wrong magic, zero or absurd dimensions, truncated payload, trailing bytes, image/label
// counts that differ, labels outside [0, classes) — is a one-line Status naming the file and
// what is wrong (NotFound for a missing file, InvalidArgument otherwise).
//
// Pixels stay bytes in memory (4x smaller than float: ranks running as threads each hold a
// dataset) and become float / 255 when a batch is assembled.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lockstep/core/result.h"

namespace lockstep::data {

inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;

// The raw content of one IDX file of unsigned bytes.
struct IdxArray {
  std::vector<int64_t> dims;   // e.g. {60000, 28, 28}
  std::vector<uint8_t> bytes;  // product(dims) bytes, row-major
};

// Reads an IDX file whose magic must be `expected_magic` (which also fixes the number of
// dimensions: its low byte).
Result<IdxArray> ReadIdxFile(const std::string& path, uint32_t expected_magic);

enum class FashionMnistSplit { kTrain, kTest };

class IdxDataset {
 public:
  static Result<IdxDataset> Load(const std::string& images_path, const std::string& labels_path,
                                 int32_t num_classes = 10);
  // {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz under `dir`.
  static Result<IdxDataset> LoadFashionMnist(const std::string& dir, FashionMnistSplit split);
  static std::string ImagesPath(const std::string& dir, FashionMnistSplit split);
  static std::string LabelsPath(const std::string& dir, FashionMnistSplit split);

  int64_t size() const { return count_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t pixels_per_image() const { return rows_ * cols_; }
  int32_t num_classes() const { return num_classes_; }

  const uint8_t* image_bytes(int64_t i) const { return pixels_.data() + i * pixels_per_image(); }
  int32_t label(int64_t i) const { return labels_[static_cast<size_t>(i)]; }
  // rows*cols floats, byte / 255.
  void CopyImage(int64_t i, float* out) const;

 private:
  int64_t count_ = 0, rows_ = 0, cols_ = 0;
  int32_t num_classes_ = 0;
  std::vector<uint8_t> pixels_;
  std::vector<int32_t> labels_;
};

}  // namespace lockstep::data
