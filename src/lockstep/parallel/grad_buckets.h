// Gradient buckets for data parallelism (PyTorch DDP's Reducer, on a flat buffer).
//
// Parameters are packed in the flat gradient buffer in registration (= forward) order, and
// backward produces their gradients roughly in reverse. Buckets are therefore formed walking
// the parameters from last to first, closing a bucket once it holds at least `bucket_bytes`;
// each bucket is one contiguous element range of the flat buffer, so its allreduce is a
// single in-place call on a span, no copies into a staging buffer.
#pragma once

#include <cstdint>
#include <vector>

namespace lockstep::parallel {

struct GradBucket {
  int64_t begin = 0, end = 0;  // element range in the flat gradient buffer
  int first_param = 0;         // lowest parameter index in the bucket
  int last_param = 0;          // highest
};

struct BucketPlan {
  std::vector<GradBucket> buckets;   // in launch order: bucket 0 holds the last parameters
  std::vector<int> bucket_of_param;  // parameter index -> bucket index
};

// offsets[i], numels[i]: parameter i's range in the flat buffer (contiguous, ascending).
BucketPlan PlanBuckets(const std::vector<int64_t>& offsets, const std::vector<int64_t>& numels, int64_t bucket_bytes);

}  // namespace lockstep::parallel
