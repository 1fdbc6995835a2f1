#include "lockstep/data/idx_dataset.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "data/data_test_util.h"
#include "test_env.h"

namespace lockstep::data {
namespace {

using testing::IdxBytes;
using testing::TempDir;
using testing::WriteFile;
using testing::WriteGzip;

// Three 2x3 images whose pixels are 10*image + position, labels 7, 0, 9.
std::vector<uint8_t> Pixels() {
  std::vector<uint8_t> p;
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 6; ++k) p.push_back(static_cast<uint8_t>(10 * i + k));
  p[17] = 255;
  return p;
}
const std::vector<uint8_t> kLabels = {7, 0, 9};

struct Files {
  TempDir dir;
  std::string images = dir / "images.gz";
  std::string labels = dir / "labels.gz";
  Files() {
    WriteGzip(images, IdxBytes(kIdxImagesMagic, {3, 2, 3}, Pixels()));
    WriteGzip(labels, IdxBytes(kIdxLabelsMagic, {3}, kLabels));
  }
};

TEST(IdxDataset, ReadsValidFiles) {
  Files f;
  auto d = IdxDataset::Load(f.images, f.labels);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->size(), 3);
  EXPECT_EQ(d->rows(), 2);
  EXPECT_EQ(d->cols(), 3);
  EXPECT_EQ(d->label(0), 7);
  EXPECT_EQ(d->label(2), 9);
  float img[6];
  d->CopyImage(1, img);
  EXPECT_EQ(img[0], 10.0f / 255.0f);
  EXPECT_EQ(img[5], 15.0f / 255.0f);
  d->CopyImage(2, img);
  EXPECT_EQ(img[5], 1.0f);
}

TEST(IdxDataset, UncompressedFilesAreReadToo) {
  TempDir dir;
  WriteFile(dir / "i", IdxBytes(kIdxImagesMagic, {3, 2, 3}, Pixels()));
  WriteFile(dir / "l", IdxBytes(kIdxLabelsMagic, {3}, kLabels));
  EXPECT_TRUE(IdxDataset::Load(dir / "i", dir / "l").ok());
}

// Each corruption: which file is broken, how, and a phrase the one-line message must contain.
void ExpectError(const std::string& images, const std::string& labels, const std::string& named,
                 const std::string& phrase, StatusCode code = StatusCode::kInvalidArgument) {
  auto d = IdxDataset::Load(images, labels);
  ASSERT_FALSE(d.ok()) << phrase;
  const std::string& m = d.status().message();
  EXPECT_EQ(d.status().code(), code) << m;
  EXPECT_NE(m.find(named), std::string::npos) << m;
  EXPECT_NE(m.find(phrase), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

TEST(IdxDataset, EachCorruptionIsNamed) {
  Files f;
  const std::string bad = f.dir / "bad.gz";
  ExpectError(f.dir / "missing.gz", f.labels, f.dir / "missing.gz", "No such file", StatusCode::kNotFound);

  // Labels file given as images: magic 0x801 where 0x803 is expected.
  ExpectError(f.labels, f.labels, f.labels, "bad magic number 0x00000801, expected 0x00000803");
  ExpectError(f.images, f.images, f.images, "bad magic number 0x00000803, expected 0x00000801");

  WriteGzip(bad, {0x00, 0x00});
  ExpectError(bad, f.labels, bad, "IDX header is missing");

  WriteGzip(bad, IdxBytes(kIdxImagesMagic, {3, 2}, {}));
  ExpectError(bad, f.labels, bad, "truncated inside the IDX header");

  WriteGzip(bad, IdxBytes(kIdxImagesMagic, {3, 0, 3}, {}));
  ExpectError(bad, f.labels, bad, "dimension 1 is 0");

  WriteGzip(bad, IdxBytes(kIdxImagesMagic, {0xffffffffu, 0xffffffffu, 28}, {}));
  ExpectError(bad, f.labels, bad, "implausibly large");

  std::vector<uint8_t> short_pixels = Pixels();
  short_pixels.resize(10);
  WriteGzip(bad, IdxBytes(kIdxImagesMagic, {3, 2, 3}, short_pixels));
  ExpectError(bad, f.labels, bad, "truncated: the header promises 18 data bytes, the file has 10");

  std::vector<uint8_t> long_labels = kLabels;
  long_labels.push_back(1);
  WriteGzip(bad, IdxBytes(kIdxLabelsMagic, {3}, long_labels));
  ExpectError(f.images, bad, bad, "unexpected data after the 3 bytes");

  WriteGzip(bad, IdxBytes(kIdxLabelsMagic, {2}, {1, 2}));
  ExpectError(f.images, bad, bad, "has 2 labels but");

  WriteGzip(bad, IdxBytes(kIdxLabelsMagic, {3}, {1, 10, 2}));
  ExpectError(f.images, bad, bad, "label 10 of sample 1 is outside [0, 10)");

  // A gzip stream cut in the middle: zlib notices the missing end.
  std::vector<uint8_t> gz = testing::ReadFileBytes(f.images);
  gz.resize(gz.size() - 12);
  WriteFile(bad, gz);
  ExpectError(bad, f.labels, bad, "corrupt gzip data");

  std::filesystem::create_directory(f.dir / "dir.gz");
  ExpectError(f.dir / "dir.gz", f.labels, f.dir / "dir.gz", "not a regular file");
}

TEST(IdxDataset, RealFashionMnistHeaders) {
  const std::string dir = kDefaultFashionMnistDir;
  if (!std::filesystem::exists(IdxDataset::ImagesPath(dir, FashionMnistSplit::kTest))) {
    LOCKSTEP_SKIP_OUTSIDE_CI(dir << " not installed (Debian package 'dataset-fashion-mnist')");
  }
  for (auto [split, count] :
       {std::pair{FashionMnistSplit::kTrain, 60000}, std::pair{FashionMnistSplit::kTest, 10000}}) {
    auto d = IdxDataset::LoadFashionMnist(dir, split);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->size(), count);
    EXPECT_EQ(d->rows(), 28);
    EXPECT_EQ(d->cols(), 28);
    // Fashion-MNIST is balanced: every class has exactly a tenth of each split.
    std::vector<int> per_class(10);
    for (int64_t i = 0; i < d->size(); ++i) ++per_class[static_cast<size_t>(d->label(i))];
    for (int c : per_class) EXPECT_EQ(c, count / 10);
  }
}

}  // namespace
}  // namespace lockstep::data
