// SampleLayout: what one training sample holds, field by field. A data source declares it
// (data/data_source.h) and a model checks it accepts it (nn/model.h) before any worker starts,
// so a model fed the wrong data is one error line instead of a crash in the first step.
#pragma once

#include <cstdint>
#include <string>

namespace lockstep {

struct SampleLayout {
  int64_t seq = 0;       // tokens and targets per sample (int32 each); 0: none
  int64_t vocab = 0;     // with seq: tokens lie in [0, vocab), targets too (or < 0: ignored)
  int64_t features = 0;  // float inputs per sample (an image's C*H*W pixels, a feature vector)
  int64_t classes = 0;   // > 0: one int32 label per sample, in [0, classes)
  int64_t values = 0;    // float regression targets per sample

  bool operator==(const SampleLayout&) const = default;
  bool empty() const { return seq == 0 && features == 0 && classes == 0 && values == 0; }
  // "seq=128, vocab=256" / "features=784, classes=10" / "features=8, values=1": for errors.
  std::string ToString() const {
    std::string s;
    auto add = [&](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
    if (seq > 0) add("seq=" + std::to_string(seq) + ", vocab=" + std::to_string(vocab));
    if (features > 0) add("features=" + std::to_string(features));
    if (classes > 0) add("classes=" + std::to_string(classes));
    if (values > 0) add("values=" + std::to_string(values));
    return s.empty() ? "nothing" : s;
  }
};

}  // namespace lockstep
