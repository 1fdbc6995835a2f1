#include "lockstep/runtime/metrics/step_stats.h"

#include <algorithm>

namespace lockstep::runtime {

namespace {

template <typename T>
Result<std::vector<T>> AllGatherPod(comm::Communicator& comm, const T& mine) {
  std::vector<T> all(comm.size());
  if (comm.size() == 1) {
    all[0] = mine;
    return all;
  }
  LS_RETURN_IF_ERROR(comm.AllGather(&mine, all.data(), sizeof(T), comm::DType::kU8)->Wait());
  return all;
}

}  // namespace

Result<GatheredStep> GatherStep(comm::Communicator& comm, const RankStepRecord& mine) {
  LS_ASSIGN_OR_RETURN(std::vector<RankStepRecord> all, AllGatherPod(comm, mine));
  GatheredStep g;
  int64_t latest = mine.compute_end_ns;
  int pipelined = 0;
  double busiest = -1;
  for (const RankStepRecord& r : all) {
    g.loss += r.loss_part;
    g.trained_targets += r.trained_targets;
    g.compute_ms.push_back(r.compute_ms);
    g.rank_wait_ms.push_back(r.wait_ms);
    g.peer_group.push_back(r.peer_group);
    for (size_t w = 0; w < g.norm_words.size(); ++w) g.norm_words[w] += r.norm_words[w];
    latest = std::max(latest, r.compute_end_ns);
    if (r.pipe_total_ms > 0) {
      g.mean_bubble += 1.0 - r.pipe_busy_ms / r.pipe_total_ms;
      g.busy_ms.push_back(r.pipe_busy_ms);
      if (r.pipe_busy_ms > busiest) {
        busiest = r.pipe_busy_ms;
        g.bottleneck_bubble = 1.0 - r.pipe_busy_ms / r.pipe_total_ms;
      }
      ++pipelined;
    }
  }
  if (pipelined > 0) g.mean_bubble /= pipelined;
  g.wait_ms = (latest - mine.compute_end_ns) * 1e-6;
  return g;
}

Result<EvalSums> GatherEval(comm::Communicator& comm, const EvalSums& mine) {
  LS_ASSIGN_OR_RETURN(std::vector<EvalSums> all, AllGatherPod(comm, mine));
  EvalSums total;
  for (const EvalSums& e : all) {
    total.loss_sum += e.loss_sum;
    total.count += e.count;
    total.correct += e.correct;
  }
  return total;
}

}  // namespace lockstep::runtime
