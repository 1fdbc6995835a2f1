// What AdamW and SGD share: the owned range, its decay segments and the step count, the
// checks every UpdateRange makes, and the walk of a kernel over kLanes-element chunks whose
// tail runs the same lane function on zero-padded copies, split over the compute threads.
// Internal to optim/.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/core/bf16.h"
#include "lockstep/core/result.h"
#include "lockstep/optim/lanes.h"
#include "lockstep/optim/param_groups.h"

namespace lockstep::optim {

// "[begin, end)", for error messages.
std::string RangeText(FlatRange r);

// The part of the flat buffer an optimizer instance owns and steps.
class OwnedSegments {
 public:
  OwnedSegments(std::vector<DecaySegment> segments, FlatRange owned) : segments_(std::move(segments)), owned_(owned) {}

  FlatRange owned() const { return owned_; }
  int64_t step() const { return step_; }
  void set_step(int64_t step) { step_ = step; }
  void BeginStep() { ++step_; }

  // Calls fn(in_range, in_state, n, decay) for every decay segment inside `range`: in_range
  // indexes the caller's params/grads (element 0 is flat element range.begin), in_state the
  // state buffers (element 0 is owned().begin). Fails (Internal) when `range` is not inside
  // owned() or BeginStep() was never called; `who` names the optimizer in the message.
  template <typename Fn>
  Status ForEachSegment(const char* who, FlatRange range, Fn&& fn) const {
    if (!owned_.Contains(range) || range.begin > range.end)
      return Status::Internal(std::string(who) + "::UpdateRange: range " + RangeText(range) +
                              " is not inside the owned range " + RangeText(owned_));
    if (step_ < 1) return Status::Internal(std::string(who) + "::UpdateRange called before BeginStep");
    for (const DecaySegment& seg : ClipSegments(segments_, range))
      fn(seg.range.begin - range.begin, seg.range.begin - owned_.begin, seg.range.size(), seg.decay);
    return Status::Ok();
  }

 private:
  std::vector<DecaySegment> segments_;  // decay runs covering owned_, in flat coordinates
  FlatRange owned_;
  int64_t step_ = 0;
};

namespace detail {
inline float* Writable(float* p) { return p; }
inline float* Writable(const float*) { return nullptr; }  // inputs are never copied back
}  // namespace detail

// fn(at, len) over [0, n) cut into pieces of a fixed multiple of kLanes, run on the OpenMP
// compute threads when n is large: an optimizer's memory-bound update goes at the speed of
// all cores. The cut points depend on n only, and ApplyLanes makes an element's result
// independent of them anyway.
template <typename Fn>
void ParallelPieces(int64_t n, Fn&& fn) {
  constexpr int64_t kPiece = int64_t{1} << 15;  // a multiple of kLanes
  static_assert(kPiece % kLanes == 0);
  const int64_t pieces = (n + kPiece - 1) / kPiece;
#pragma omp parallel for schedule(static) if (pieces >= 8 && !omp_in_parallel())
  for (int64_t p = 0; p < pieces; ++p) fn(p * kPiece, std::min(kPiece, n - p * kPiece));
}

// lane(p0 + i, p1 + i, ...) for every chunk of kLanes elements of n. The tail runs the same
// lane function on zero-padded copies, so an element's result never depends on alignment or
// on where a range was cut (a scalar tail loop could be compiled with other FMA contraction);
// the copies of the non-const arrays are written back.
template <typename Lane, typename... Ptr>
void ApplyLanes(int64_t n, Lane&& lane, Ptr... ptrs) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) lane((ptrs + i)...);
  const int64_t rest = n - i;
  if (rest == 0) return;
  constexpr size_t kArrays = sizeof...(Ptr);
  float tail[kArrays][kLanes] = {};
  const float* in[kArrays] = {(ptrs + i)...};
  float* out[kArrays] = {detail::Writable(ptrs + i)...};
  const size_t bytes = static_cast<size_t>(rest) * sizeof(float);
  for (size_t a = 0; a < kArrays; ++a) std::memcpy(tail[a], in[a], bytes);
  [&]<size_t... k>(std::index_sequence<k...>) { lane(tail[k]...); }
  (std::make_index_sequence<kArrays>{});
  for (size_t a = 0; a < kArrays; ++a)
    if (out[a]) std::memcpy(out[a], tail[a], bytes);
}

// After a piece p[0, len) is updated: its bf16 rounding into rounded[at, at + len) when the
// caller keeps a bf16 copy (rounded may be null), while the piece is still in cache.
inline void RoundPiece(const float* p, uint16_t* rounded, int64_t at, int64_t len) {
  if (rounded != nullptr) F32ToBf16(p, rounded + at, static_cast<size_t>(len));
}

}  // namespace lockstep::optim
