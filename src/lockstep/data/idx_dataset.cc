#include "lockstep/data/idx_dataset.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace lockstep::data {
namespace {

// Above any real IDX dataset by far, small enough that a corrupt header cannot make us try to
// allocate terabytes.
constexpr int64_t kMaxIdxBytes = int64_t{1} << 34;

struct GzFile {
  gzFile f = nullptr;
  ~GzFile() {
    if (f) gzclose(f);
  }
};

// Reads up to `n` bytes; returns how many arrived, or an error for a corrupt stream (zlib
// reports a stream cut short as "unexpected end of file").
Result<int64_t> ReadUpTo(gzFile f, const std::string& path, uint8_t* out, int64_t n) {
  int64_t got = 0;
  while (got < n) {
    unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - got, 1 << 30));
    int r = gzread(f, out + got, chunk);
    if (r < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      return Status::InvalidArgument(path + ": corrupt gzip data (" + (msg ? msg : "unknown zlib error") + ")");
    }
    if (r == 0) break;
    got += r;
  }
  int code = 0;
  const char* msg = gzerror(f, &code);
  if (code != Z_OK && code != Z_STREAM_END) {
    return Status::InvalidArgument(path + ": corrupt gzip data (" + (msg ? msg : "unknown zlib error") + ")");
  }
  return got;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

}  // namespace

Result<IdxArray> ReadIdxFile(const std::string& path, uint32_t expected_magic) {
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) {
    return Status::NotFound(path + ": " + std::strerror(errno) +
                            " (Fashion-MNIST is in the Debian package 'dataset-fashion-mnist')");
  }
  if (!S_ISREG(sb.st_mode)) return Status::InvalidArgument(path + ": not a regular file");
  GzFile gz;
  gz.f = gzopen(path.c_str(), "rb");
  if (gz.f == nullptr) return Status::InvalidArgument(path + ": cannot open: " + std::strerror(errno));

  const int ndims = static_cast<int>(expected_magic & 0xff);
  const char* what = expected_magic == kIdxImagesMagic ? "images" : "labels";
  uint8_t header[4 + 4 * 4];
  const int64_t header_size = 4 + 4 * ndims;
  LS_ASSIGN_OR_RETURN(int64_t got, ReadUpTo(gz.f, path, header, header_size));
  if (got < 4) return Status::InvalidArgument(path + ": truncated: the IDX header is missing");
  uint32_t magic = BigEndian32(header);
  if (magic != expected_magic) {
    return Status::InvalidArgument(path + ": bad magic number " + Hex(magic) + ", expected " + Hex(expected_magic) +
                                   " (IDX " + what + ")");
  }
  if (got < header_size) return Status::InvalidArgument(path + ": truncated inside the IDX header");

  IdxArray out;
  int64_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    int64_t dim = BigEndian32(header + 4 + 4 * d);
    if (dim == 0) return Status::InvalidArgument(path + ": dimension " + std::to_string(d) + " is 0");
    // Checked before multiplying: two 32-bit dimensions can overflow int64.
    if (dim > kMaxIdxBytes / total) return Status::InvalidArgument(path + ": header dimensions are implausibly large");
    total *= dim;
    out.dims.push_back(dim);
  }
  out.bytes.resize(static_cast<size_t>(total));
  LS_ASSIGN_OR_RETURN(got, ReadUpTo(gz.f, path, out.bytes.data(), total));
  if (got < total) {
    return Status::InvalidArgument(path + ": truncated: the header promises " + std::to_string(total) +
                                   " data bytes, the file has " + std::to_string(got));
  }
  uint8_t extra;
  LS_ASSIGN_OR_RETURN(got, ReadUpTo(gz.f, path, &extra, 1));
  if (got != 0) {
    return Status::InvalidArgument(path + ": unexpected data after the " + std::to_string(total) +
                                   " bytes the header promises");
  }
  return out;
}

std::string IdxDataset::ImagesPath(const std::string& dir, FashionMnistSplit split) {
  return dir + (split == FashionMnistSplit::kTrain ? "/train" : "/t10k") + "-images-idx3-ubyte.gz";
}
std::string IdxDataset::LabelsPath(const std::string& dir, FashionMnistSplit split) {
  return dir + (split == FashionMnistSplit::kTrain ? "/train" : "/t10k") + "-labels-idx1-ubyte.gz";
}

Result<IdxDataset> IdxDataset::LoadFashionMnist(const std::string& dir, FashionMnistSplit split) {
  return Load(ImagesPath(dir, split), LabelsPath(dir, split), 10);
}

Result<IdxDataset> IdxDataset::Load(const std::string& images_path, const std::string& labels_path,
                                    int32_t num_classes) {
  LS_ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path, kIdxImagesMagic));
  LS_ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path, kIdxLabelsMagic));
  if (images.dims[0] != labels.dims[0]) {
    return Status::InvalidArgument(labels_path + ": has " + std::to_string(labels.dims[0]) + " labels but " +
                                   images_path + " has " + std::to_string(images.dims[0]) + " images");
  }
  IdxDataset d;
  d.count_ = images.dims[0];
  d.rows_ = images.dims[1];
  d.cols_ = images.dims[2];
  d.num_classes_ = num_classes;
  d.labels_.resize(labels.bytes.size());
  for (size_t i = 0; i < labels.bytes.size(); ++i) {
    int32_t l = labels.bytes[i];
    if (l >= num_classes) {
      return Status::InvalidArgument(labels_path + ": label " + std::to_string(l) + " of sample " + std::to_string(i) +
                                     " is outside [0, " + std::to_string(num_classes) + ")");
    }
    d.labels_[i] = l;
  }
  d.pixels_ = std::move(images.bytes);
  return d;
}

void IdxDataset::CopyImage(int64_t i, float* out) const {
  const uint8_t* p = image_bytes(i);
  const int64_t n = pixels_per_image();
  for (int64_t k = 0; k < n; ++k) out[k] = static_cast<float>(p[k]) / 255.0f;
}

}  // namespace lockstep::data
