// DataSource: a data set as the trainer reads it — a number of samples and a function that
// writes sample i into caller-owned buffers. Everything else is the trainer's: the
// DistributedSampler decides which global sample index each rank reads at each step, so the
// sample order, --deterministic (bit-identical at any worker count) and exact --resume (the
// loader position is three numbers in the checkpoint) hold for any source.
//
// Read() must be a pure function of (index, epoch, seed) and thread-safe: ranks running as
// threads share one source and call it concurrently. Sources that vary a sample per epoch
// (augmentation, the text corpus's per-epoch window offset) use `epoch` and `seed`.
// Public API (docs/api.md).
#pragma once

#include <cstdint>

#include "lockstep/core/sample_layout.h"
#include "lockstep/core/status.h"

namespace lockstep::data {

// Which sample to read: its index in [0, size()), the epoch (pass over the data) it is read
// in, and the run's data seed (derived from train.seed).
struct SampleKey {
  int64_t index = 0;
  int64_t epoch = 0;
  uint64_t seed = 0;
};

// Where one sample goes; the pointers the layout declares are set, the others are null.
struct SampleSlot {
  int32_t* tokens = nullptr;   // [seq] input tokens
  int32_t* targets = nullptr;  // [seq] target tokens (< 0: ignored by the loss)
  float* features = nullptr;   // [features]
  int32_t* label = nullptr;    // one class index
  float* values = nullptr;     // [values] regression targets
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual int64_t size() const = 0;
  virtual SampleLayout layout() const = 0;
  // Writes sample key.index into `out`. A failure (a bad file row) stops the run with its
  // message; it must not depend on which rank asks.
  virtual Status Read(const SampleKey& key, const SampleSlot& out) const = 0;
};

}  // namespace lockstep::data
