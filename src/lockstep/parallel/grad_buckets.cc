#include "lockstep/parallel/grad_buckets.h"

namespace lockstep::parallel {

BucketPlan PlanBuckets(const std::vector<int64_t>& offsets, const std::vector<int64_t>& numels, int64_t bucket_bytes) {
  BucketPlan plan;
  const int n = static_cast<int>(offsets.size());
  plan.bucket_of_param.assign(n, 0);
  int64_t bytes = 0;
  GradBucket cur;
  bool open = false;
  for (int i = n - 1; i >= 0; --i) {
    if (!open) {
      cur = GradBucket{offsets[i], offsets[i] + numels[i], i, i};
      open = true;
      bytes = 0;
    }
    cur.begin = offsets[i];
    cur.first_param = i;
    bytes += numels[i] * static_cast<int64_t>(sizeof(float));
    plan.bucket_of_param[i] = static_cast<int>(plan.buckets.size());
    if (bytes >= bucket_bytes) {
      plan.buckets.push_back(cur);
      open = false;
    }
  }
  if (open) plan.buckets.push_back(cur);
  return plan;
}

}  // namespace lockstep::parallel
