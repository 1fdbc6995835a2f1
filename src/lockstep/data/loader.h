// The loader interface the trainer pulls batches from, and the batch types of the two
// reference workloads. A loader hands each rank its share of the next global batch; its
// position is a LoaderState that a checkpoint stores and Restore() resumes from.
#pragma once

#include <cstdint>
#include <vector>

#include "lockstep/core/status.h"
#include "lockstep/data/loader_state.h"

namespace lockstep::data {

// Targets/labels with this value are padding (FinalBatch::kMask): the loss and accuracy must
// skip them (PyTorch's ignore_index). Padding inputs are zero.
inline constexpr int32_t kIgnoreTarget = -1;

// B windows of T bytes, row-major [B, T]: y[b, t] = x[b, t + 1] in the corpus (next byte).
struct TextBatch {
  std::vector<int32_t> x;
  std::vector<int32_t> y;
  int64_t B = 0;
  int64_t T = 0;
  int64_t valid = 0;  // rows that are real samples (the rest have y == kIgnoreTarget)
};

// B images, NCHW with C = 1, pixels as float in [0, 1] (byte / 255, as torchvision's
// ToTensor), labels in [0, classes) or kIgnoreTarget for padding.
struct ImageBatch {
  std::vector<float> images;
  std::vector<int32_t> labels;
  int64_t B = 0;
  int64_t C = 1;
  int64_t H = 0;
  int64_t W = 0;
  int64_t valid = 0;
};

template <typename BatchT>
class Loader {
 public:
  virtual ~Loader() = default;
  // Fills `batch` with this rank's share of the next global batch (buffers are reused).
  virtual Status Next(BatchT* batch) = 0;
  // The position of the next batch (after the last batch of an epoch: the next epoch, 0).
  virtual LoaderState State() const = 0;
  virtual Status Restore(const LoaderState& state) = 0;
  // Global batches (= optimizer steps without accumulation) per epoch; the same on all ranks.
  virtual int64_t StepsPerEpoch() const = 0;
};

using TextLoader = Loader<TextBatch>;
using ImageLoader = Loader<ImageBatch>;

}  // namespace lockstep::data
