#include "lockstep/comm/hier/host_context.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "lockstep/core/clock.h"

namespace lockstep::comm::hier_detail {
namespace {

// The shape of one new group on the hosts: the hosts it spans, in group order, and how many
// members each holds.
struct GroupShape {
  std::vector<int> members;  // world ranks by (key, parent rank)
  std::vector<int> hosts;
  int local_size = 0;
};

// An mpi communicator the split needs: across the group's hosts for one local index
// (local >= 0), or the child's host communicator (local == -1).
struct CommItem {
  int color;  // the group's
  int local;
  std::vector<int> hosts;
};

std::string ListRanks(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) {
    if (!s.empty()) s += ',';
    s += std::to_string(r);
  }
  return s;
}

}  // namespace

SplitPlan HostContext::PlanSplit(int local_rank, int color, int key, const CollectiveOptions& opts) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls_[local_rank] = Call{color < 0 ? -1 : color, key};
  }
  const int64_t deadline = NowNanos() + std::chrono::duration_cast<std::chrono::nanoseconds>(opts.timeout).count();
  if (Status s = Rendezvous(deadline, [&] { PlanAll(opts); }); !s.ok()) {
    SplitPlan failed;
    failed.status = s;
    return failed;
  }
  std::lock_guard<std::mutex> lock(mu_);
  return plans_[local_rank];
}

Status HostContext::Rendezvous(int64_t deadline_ns, const std::function<void()>& leader) {
  std::unique_lock<std::mutex> lock(mu_);
  if (broken_) return Status::Aborted("hier: this host's workers fell out of step in an earlier split");
  const uint64_t generation = generation_;
  if (++arrived_ == local_size_) {
    leader();  // under mu_: every other local worker is waiting below
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return Status::Ok();
  }
  while (generation_ == generation) {
    const int64_t left = deadline_ns - NowNanos();
    if (left <= 0 || broken_) {
      broken_ = true;
      cv_.notify_all();
      return Status::Timeout("hier: split: this host's other " + std::to_string(local_size_ - arrived_) +
                             " worker(s) did not call it in time");
    }
    cv_.wait_for(lock, std::chrono::nanoseconds(left));
  }
  return Status::Ok();
}

void HostContext::PlanAll(const CollectiveOptions& opts) {
  const int L = local_size_, H = hosts(), h = host();
  auto fail_all = [&](const Status& s) {
    for (SplitPlan& p : plans_) {
      p = SplitPlan();
      p.status = s;
    }
  };
  // Every worker's (color, key), world rank order.
  std::vector<int32_t> row(2 * static_cast<size_t>(L)), table(2 * static_cast<size_t>(L) * H);
  for (int j = 0; j < L; ++j) {
    row[2 * j] = calls_[j].color;
    row[2 * j + 1] = calls_[j].key;
  }
  if (Status s = host_comm_->AllGather(row.data(), table.data(), 2 * L, DType::kI32, opts)->Wait(); !s.ok())
    return fail_all(s);
  const int n = L * H;
  std::map<int, GroupShape> groups;  // by color: every host iterates them in the same order
  for (int p = 0; p < n; ++p)
    if (table[2 * p] >= 0) groups[table[2 * p]].members.push_back(p);
  std::vector<int> index_of(n, -1);
  for (auto& [color, g] : groups) {
    std::stable_sort(g.members.begin(), g.members.end(),
                     [&](int a, int b) { return table[2 * a + 1] < table[2 * b + 1]; });
    for (size_t i = 0; i < g.members.size(); ++i) {
      const int host = g.members[i] / L;
      if (g.hosts.empty() || g.hosts.back() != host) g.hosts.push_back(host);
      index_of[g.members[i]] = static_cast<int>(i);
    }
    const size_t m = g.members.size();
    g.local_size = static_cast<int>(m / g.hosts.size());
    bool regular = m % g.hosts.size() == 0;
    for (size_t i = 0; regular && i < m; ++i) regular = g.members[i] / L == g.hosts[i / g.local_size];
    std::vector<int> sorted_hosts = g.hosts;
    std::sort(sorted_hosts.begin(), sorted_hosts.end());
    regular = regular && std::adjacent_find(sorted_hosts.begin(), sorted_hosts.end()) == sorted_hosts.end();
    if (!regular)
      return fail_all(Status::InvalidArgument(
          "hier: split: group " + std::to_string(color) + " (ranks " + ListRanks(g.members) +
          ") must take the same number of workers from each host it spans, host by host in rank order"));
  }
  // The mpi communicators to make, in one order every host computes alike.
  std::vector<CommItem> items;
  for (auto& [color, g] : groups) {
    if (g.hosts.size() < 2) continue;
    for (int l = 0; l < g.local_size; ++l) items.push_back(CommItem{color, l, g.hosts});
    if (g.local_size > 1) items.push_back(CommItem{color, -1, g.hosts});
  }
  // MPI_Comm_split gives a process one communicator a call: schedule the items in rounds in
  // which no host takes part twice (greedy, identical on every host).
  std::vector<std::vector<char>> busy;  // [round][host]
  std::vector<int> round_of(items.size());
  for (size_t k = 0; k < items.size(); ++k) {
    size_t r = 0;
    for (;; ++r) {
      if (r == busy.size()) busy.emplace_back(H, 0);
      bool free = true;
      for (int host : items[k].hosts) free = free && !busy[r][host];
      if (free) break;
    }
    for (int host : items[k].hosts) busy[r][host] = 1;
    round_of[k] = static_cast<int>(r);
  }
  std::vector<std::shared_ptr<Communicator>> made(items.size());
  for (size_t r = 0; r < busy.size(); ++r) {
    int color = -1, key = 0;
    size_t mine = 0;
    for (size_t k = 0; k < items.size(); ++k) {
      if (round_of[k] != static_cast<int>(r)) continue;
      const auto at = std::find(items[k].hosts.begin(), items[k].hosts.end(), h);
      if (at == items[k].hosts.end()) continue;
      color = static_cast<int>(k);
      key = static_cast<int>(at - items[k].hosts.begin());
      mine = k;
    }
    Result<std::shared_ptr<Communicator>> comm = host_comm_->Split(color, key, opts);
    if (!comm.ok()) return fail_all(comm.status());
    if (color >= 0) made[mine] = *comm;
  }
  std::map<int, std::shared_ptr<HostContext>> contexts;  // by color, shared by the local members
  // In item order on every host: each channel is a collective over its group's hosts.
  for (size_t k = 0; k < items.size(); ++k) {
    if (items[k].local >= 0 || made[k] == nullptr) continue;
    Result<std::shared_ptr<MpiChannel>> channel = MpiChannel::Create(*made[k]);
    if (!channel.ok()) return fail_all(channel.status());
    contexts[items[k].color] =
        std::make_shared<HostContext>(made[k], *channel, groups[items[k].color].local_size);
  }
  for (int j = 0; j < L; ++j) {
    const int p = h * L + j;
    SplitPlan plan;
    plan.color = calls_[j].color;
    if (plan.color >= 0) {
      const GroupShape& g = groups[plan.color];
      plan.new_rank = index_of[p];
      plan.group_hosts = static_cast<int>(g.hosts.size());
      plan.local_size = g.local_size;
      for (size_t k = 0; k < items.size(); ++k)
        if (items[k].color == plan.color && items[k].local == plan.new_rank % g.local_size) plan.cross = made[k];
      if (auto c = contexts.find(plan.color); c != contexts.end()) plan.child_context = c->second;
    }
    plans_[j] = plan;
  }
}

}  // namespace lockstep::comm::hier_detail
