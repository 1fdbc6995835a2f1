#include "lockstep/parallel/zero_units.h"

#include <algorithm>
#include <cstring>

#include "lockstep/parallel/zero.h"
#include "lockstep/tensor/kernels.h"

namespace lockstep::parallel {

using tensor::MemoryTag;
using tensor::Tensor;

tensor::Tensor ZeroUnits::Spare::Take(int64_t n, MemoryTag tag) {
  // The smallest spare that fits. use_count() == 1: only the list holds the storage (no view
  // saved by an op); exact, as a storage never leaves this rank thread once its collective
  // has completed.
  auto best = spares_.end();
  for (auto it = spares_.begin(); it != spares_.end(); ++it)
    if (it->numel() >= n && it->storage().use_count() == 1 && (best == spares_.end() || it->numel() < best->numel()))
      best = it;
  if (best == spares_.end()) return Tensor::Empty({n}, tensor::DType::kF32, tag);
  Tensor t = Tensor::FromStorage(best->storage(), 0, {n});
  spares_.erase(best);
  return t;
}

void ZeroUnits::Spare::Give(Tensor t) {
  if (!t.defined()) return;
  spares_.push_back(Tensor::FromStorage(t.storage(), 0, {static_cast<int64_t>(t.storage()->bytes() / sizeof(float))}));
  if (spares_.size() > static_cast<size_t>(kMaxSpares))  // let the smallest go
    spares_.erase(std::min_element(spares_.begin(), spares_.end(),
                                   [](const Tensor& a, const Tensor& b) { return a.numel() < b.numel(); }));
}

ZeroUnits::ZeroUnits(int stage, std::shared_ptr<comm::Communicator> dp, StageModel* model)
    : stage_(stage), dp_(std::move(dp)), model_(model) {}

ZeroUnits::~ZeroUnits() {
  for (PendingReduce& p : pending_)
    for (Part& part : p.parts)
      if (part.work) (void)part.work->Wait();
  for (Unit& u : units_)
    for (comm::WorkHandle& g : u.gathers) (void)g->Wait();
}

Result<std::unique_ptr<ZeroUnits>> ZeroUnits::Create(int stage, std::shared_ptr<comm::Communicator> dp,
                                                     StageModel* model, uint64_t init_seed, const float* initial) {
  if (stage != 2 && stage != 3) return Status::InvalidArgument("ZeroUnits: stage " + std::to_string(stage));
  nn::ParameterStore& ps = model->params();
  if (ps.has_flat_grads() || (stage == 3 && ps.has_flat_params()))
    return Status::Internal("ZeroUnits: the model still has the flat buffers ZeRO shards");
  std::unique_ptr<ZeroUnits> z(new ZeroUnits(stage, std::move(dp), model));
  z->owned_ = ShardRange(ps.numel(), z->dp_->rank(), z->dp_->size());
  const int64_t n = z->owned_.size();
  z->grad_shard_ = Tensor::Zeros({n}, tensor::DType::kF32, MemoryTag::kGradient);
  if (stage == 3) {
    z->param_shard_ = Tensor::Empty({n}, tensor::DType::kF32, MemoryTag::kParameter);
    float* shard = z->param_shard_.data<float>();
    if (initial != nullptr) {
      std::memcpy(shard, initial + z->owned_.begin, static_cast<size_t>(n) * sizeof(float));
    } else {
      for (int i = 0; i < ps.size(); ++i) {
        const nn::ParamInfo& p = ps.info(i);
        const int64_t lo = std::max(z->owned_.begin, p.offset), hi = std::min(z->owned_.end, p.offset + p.numel);
        if (lo >= hi) continue;
        for (const ElementRun& r : model->placements()[i].RunsWithin(lo - p.offset, hi - p.offset))
          nn::InitValues(shard + (p.offset + r.local - z->owned_.begin), r.count, p.init, p.name, init_seed, r.global);
      }
    }
  }
  for (const ParamUnit& pu : model->units()) {
    Unit u;
    u.first_param = pu.first_param;
    u.end_param = pu.end_param;
    u.begin = ps.info(pu.first_param).offset;
    const nn::ParamInfo& last = ps.info(pu.end_param - 1);
    u.end = last.offset + last.numel;
    z->units_.push_back(std::move(u));
  }
  model->set_unit_hooks(z.get());
  return z;
}

void ZeroUnits::Check(Status s) {
  if (!s.ok() && status_.ok()) status_ = std::move(s);
}

// fn(rank, lo, hi) for every dp rank whose shard holds part [lo, hi) of the unit, in rank order.
template <typename Fn>
void ZeroUnits::ForEachOwner(const Unit& unit, Fn&& fn) const {
  for (int r = 0; r < dp_->size(); ++r) {
    const optim::FlatRange s = ShardRange(model_->params().numel(), r, dp_->size());
    const int64_t lo = std::max(s.begin, unit.begin), hi = std::min(s.end, unit.end);
    if (lo < hi) fn(r, lo, hi);
  }
}

// Each part of the unit comes from the rank owning it: a broadcast per owner (a unit spans
// one or two shards in practice), issued now and waited for in Materialize, so the next
// unit's parameters travel while the current one computes.
void ZeroUnits::StartGather(int u) {
  if (stage_ != 3 || u < 0 || u >= static_cast<int>(units_.size())) return;
  Unit& unit = units_[u];
  if (unit.values.defined()) return;
  unit.values = spare_values_.Take(unit.end - unit.begin, MemoryTag::kParameter);
  float* base = unit.values.data<float>();
  ForEachOwner(unit, [&](int r, int64_t lo, int64_t hi) {
    if (r == dp_->rank())
      std::memcpy(base + (lo - unit.begin), param_shard_.data<float>() + (lo - owned_.begin),
                  static_cast<size_t>(hi - lo) * sizeof(float));
    if (dp_->size() > 1)
      unit.gathers.push_back(
          dp_->Broadcast(base + (lo - unit.begin), static_cast<size_t>(hi - lo), comm::DType::kF32, r));
  });
}

void ZeroUnits::Materialize(int u) {
  StartGather(u);
  for (comm::WorkHandle& g : units_[u].gathers) Check(g->Wait());
  units_[u].gathers.clear();
  Bind(u);
}

void ZeroUnits::ReleaseValues(int u) {
  if (stage_ != 3) return;
  Unit& unit = units_[u];
  for (comm::WorkHandle& g : unit.gathers) Check(g->Wait());
  unit.gathers.clear();
  spare_values_.Give(std::move(unit.values));
  unit.values = Tensor();
  Bind(u);
}

// Points the unit's parameter views at whatever storage it has now (none: unbound).
void ZeroUnits::Bind(int u) {
  const Unit& unit = units_[u];
  nn::ParameterStore& ps = model_->params();
  for (int i = unit.first_param; i < unit.end_param; ++i) {
    const nn::ParamInfo& p = ps.info(i);
    Tensor value = ps.var(i).value();
    if (stage_ == 3)
      value =
          unit.values.defined() ? Tensor::FromStorage(unit.values.storage(), p.offset - unit.begin, p.shape) : Tensor();
    Tensor grad =
        unit.grads.defined() ? Tensor::FromStorage(unit.grads.storage(), p.offset - unit.begin, p.shape) : Tensor();
    ps.BindParam(i, value, grad);
  }
}

void ZeroUnits::Enter(autograd::Tape& tape, int u) {
  PollPending();
  Materialize(u);
  if (stage_ == 3) StartGather(u + 1);  // prefetch the next unit's parameters
  if (tape.grad_enabled()) tape.Record(std::vector<autograd::Variable>{}, [this, u] { BackwardDone(u); });
}

void ZeroUnits::Exit(autograd::Tape& tape, int u) {
  if (tape.grad_enabled()) tape.Record(std::vector<autograd::Variable>{}, [this, u] { BackwardStart(u); });
  ReleaseValues(u);
  if (!tape.grad_enabled() && u + 1 == static_cast<int>(units_.size())) DropSpares();  // an evaluation's end
}

// Outside a step a rank holds its shards only (what the memory row reports).
void ZeroUnits::DropSpares() {
  for (Spare* s : {&spare_values_, &spare_grads_, &spare_received_}) s->Drop();
}

void ZeroUnits::BackwardStart(int u) {
  PollPending();
  // At most kMaxPendingUnits reductions in flight: on a busy machine the collectives lag
  // behind the backward (their threads share the cores) and each pending unit keeps its
  // gradient alive; bounded, the gradients in flight stay a few units whatever the lag.
  while (static_cast<int>(pending_.size()) >= kMaxPendingUnits) {
    Complete(pending_.front());
    pending_.pop_front();
  }
  Materialize(u);
  if (stage_ == 3) StartGather(u - 1);  // backward walks the units in reverse
  Unit& unit = units_[u];
  unit.grads = spare_grads_.Take(unit.end - unit.begin, MemoryTag::kGradient);
  std::memset(unit.grads.data<float>(), 0, static_cast<size_t>(unit.grads.numel()) * sizeof(float));
  Bind(u);
}

// The unit's gradient is final: into the contribution slot (deterministic), or reduced over
// dp with each part going to its owner (asynchronously; Complete adds it into the shard).
void ZeroUnits::BackwardDone(int u) {
  Unit& unit = units_[u];
  Tensor grads = std::move(unit.grads);
  unit.grads = Tensor();
  ReleaseValues(u);
  // Unbind the gradient views (stage 3's release rebinds too; stage 2 keeps its values): bound,
  // they kept every unit's gradient alive until the unit's next backward, a whole model's
  // gradient at the activation peak instead of ZeRO-2's shard.
  Bind(u);
  const float* g = grads.data<float>();
  if (slot_ != nullptr) {
    std::memcpy(slot_ + unit.begin, g, static_cast<size_t>(unit.end - unit.begin) * sizeof(float));
    spare_grads_.Give(std::move(grads));
    return;
  }
  PendingReduce pending;
  pending.grads = grads;
  ForEachOwner(unit, [&](int r, int64_t lo, int64_t hi) {
    Part part;
    part.begin = lo;
    part.end = hi;
    const bool mine = r == dp_->rank();
    if (dp_->size() == 1) {
      tensor::AddInPlace(grad_shard_.data<float>() + (lo - owned_.begin), g + (lo - unit.begin), hi - lo);
      return;
    }
    if (mine) part.received = spare_received_.Take(hi - lo, MemoryTag::kGradient);
    part.work = dp_->Reduce(g + (lo - unit.begin), mine ? part.received.data<float>() : nullptr,
                            static_cast<size_t>(hi - lo), comm::DType::kF32, comm::ReduceOp::kSum, r);
    pending.parts.push_back(std::move(part));
  });
  if (!pending.parts.empty())
    pending_.push_back(std::move(pending));
  else
    spare_grads_.Give(std::move(pending.grads));
}

void ZeroUnits::Complete(PendingReduce& p) {
  for (Part& part : p.parts) {
    Check(part.work->Wait());
    if (part.received.defined())
      tensor::AddInPlace(grad_shard_.data<float>() + (part.begin - owned_.begin), part.received.data<float>(),
                         part.end - part.begin);
    spare_received_.Give(std::move(part.received));
  }
  spare_grads_.Give(std::move(p.grads));
}

// Frees the buffers of reductions that have finished (oldest first: the dp group runs them in
// issue order), so at most a few units' gradients are alive during backward.
void ZeroUnits::PollPending() {
  while (!pending_.empty()) {
    bool done = true;
    for (Part& part : pending_.front().parts) done = done && part.work->Done();
    if (!done) return;
    Complete(pending_.front());
    pending_.pop_front();
  }
}

void ZeroUnits::BeginStep() {
  std::memset(grad_shard_.data<float>(), 0, static_cast<size_t>(owned_.size()) * sizeof(float));
  slot_ = nullptr;
}

Status ZeroUnits::FinishStep() {
  while (!pending_.empty()) {
    Complete(pending_.front());
    pending_.pop_front();
  }
  DropSpares();
  return status_;
}

Status ZeroUnits::ReduceContributions(const float* contributions, int64_t total_shards) {
  const int64_t n = model_->params().numel();
  Tensor sum = Tensor::Empty({n}, tensor::DType::kF32, MemoryTag::kGradient);
  LS_RETURN_IF_ERROR(
      dp_->DeterministicAllreduceF32(contributions, sum.data<float>(), static_cast<size_t>(n), total_shards)->Wait());
  std::memcpy(grad_shard_.data<float>(), sum.data<float>() + owned_.begin,
              static_cast<size_t>(owned_.size()) * sizeof(float));
  DropSpares();
  return Status::Ok();
}

}  // namespace lockstep::parallel
