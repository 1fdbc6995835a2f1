#include "lockstep/optim/param_groups.h"

#include <algorithm>
#include <string>

namespace lockstep::optim {

Result<std::vector<DecaySegment>> DecaySegmentsFor(const std::vector<ParamGroupSpan>& groups, FlatRange range) {
  if (range.begin < 0 || range.end < range.begin) {
    return Status::InvalidArgument("optimizer range [" + std::to_string(range.begin) + ", " +
                                   std::to_string(range.end) + ") is not a valid range");
  }
  std::vector<ParamGroupSpan> sorted = groups;
  std::sort(sorted.begin(), sorted.end(),
            [](const ParamGroupSpan& a, const ParamGroupSpan& b) { return a.offset < b.offset; });
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i].offset < 0 || sorted[i].size < 0) {
      return Status::InvalidArgument("parameter span at offset " + std::to_string(sorted[i].offset) + " with size " +
                                     std::to_string(sorted[i].size) + " is not a valid range");
    }
    if (i > 0 && sorted[i - 1].offset + sorted[i - 1].size > sorted[i].offset) {
      return Status::InvalidArgument("parameter spans at offsets " + std::to_string(sorted[i - 1].offset) + " and " +
                                     std::to_string(sorted[i].offset) + " overlap");
    }
  }

  std::vector<DecaySegment> out;
  auto emit = [&out](int64_t b, int64_t e, bool decay) {
    if (b >= e) return;
    if (!out.empty() && out.back().decay == decay && out.back().range.end == b) {
      out.back().range.end = e;  // merge runs so the update loop sees few, long segments
    } else {
      out.push_back({{b, e}, decay});
    }
  };
  int64_t pos = range.begin;
  for (const ParamGroupSpan& g : sorted) {
    int64_t b = std::max(g.offset, range.begin);
    int64_t e = std::min(g.offset + g.size, range.end);
    if (b >= e) continue;
    emit(pos, b, false);  // padding before this span
    emit(b, e, g.decay);
    pos = e;
  }
  emit(pos, range.end, false);
  return out;
}

std::vector<DecaySegment> ClipSegments(const std::vector<DecaySegment>& segments, FlatRange sub) {
  std::vector<DecaySegment> out;
  for (const DecaySegment& s : segments) {
    int64_t b = std::max(s.range.begin, sub.begin);
    int64_t e = std::min(s.range.end, sub.end);
    if (b < e) out.push_back({{b, e}, s.decay});
  }
  return out;
}

}  // namespace lockstep::optim
