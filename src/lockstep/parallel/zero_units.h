// ZeRO stages 2 and 3, one unit (layer group, StageModel::units()) at a time.
//
// The rank's local flat buffer (numel elements) is cut into dp contiguous shards
// (ShardRange); this rank owns one. Stage 2 keeps full parameters but only its shard of the
// gradient: while backward runs through a unit, that unit's gradient lives in a transient
// buffer, and when the unit is done it is reduced over the dp group, each part to the rank
// owning it, and freed. Stage 3 also keeps only its shard of the parameters: a unit's
// parameters are gathered (a broadcast from each owner of a part) just before the unit runs
// forward, released after, gathered again when backward reaches it, and the next unit's are
// prefetched while the current one computes. Per rank that is the ZeRO paper's accounting:
// parameters 4Ψ (stage 2) or 4Ψ/N (stage 3), gradients 4Ψ/N, plus a few units in flight
// during a step (the unit computing and, stage 3, the next one prefetched; at most two
// reductions; two spare buffers per role), none between steps.
//
// The model calls Enter/Exit around each unit's forward (UnitHooks). When gradients are
// being recorded, they also record marker ops on the tape: backward runs them in reverse, so
// Exit's marker fires just before the unit's backward (materialise, bind a gradient buffer)
// and Enter's just after it (reduce, release).
//
// Deterministic mode sets a contribution slot before each canonical shard's backward; each
// unit's gradient is then copied there instead of being reduced, and ReduceContributions sums
// the slots over dp with the fixed tree (the same bits as any other layout), keeping the
// owned part. Used by one rank thread.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/optim/param_groups.h"
#include "lockstep/parallel/stage_model.h"

namespace lockstep::parallel {

class ZeroUnits : public UnitHooks {
 public:
  // Reductions in flight at most (the oldest is waited for before the next unit's backward),
  // and freed buffers kept per role for reuse. The planner's in-flight bytes follow from them.
  static constexpr int kMaxPendingUnits = 2;
  static constexpr int kMaxSpares = 2;

  // stage: 2 or 3. The model must have no flat gradient buffer (and, for stage 3, no flat
  // value buffer): built that way or DetachStorage'd. Stage 3 initialises its parameter
  // shard from `initial` (values laid out like the model's flat buffer) when given, else
  // from each parameter's Init at (init_seed, name, GLOBAL element) through the placements:
  // the values every other layout starts from. Installs itself as the model's unit hooks.
  static Result<std::unique_ptr<ZeroUnits>> Create(int stage, std::shared_ptr<comm::Communicator> dp, StageModel* model,
                                                   uint64_t init_seed, const float* initial = nullptr);
  ~ZeroUnits() override;

  optim::FlatRange owned() const { return owned_; }
  float* param_shard() { return stage_ == 3 ? param_shard_.data<float>() : nullptr; }  // owned elements
  float* grad_shard() { return grad_shard_.data<float>(); }                            // owned elements

  // Start of a step: zeroes the gradient shard.
  void BeginStep();
  // Deterministic mode: where the next backward's unit gradients go (laid out like the local
  // flat buffer); nullptr: reduce them to their owners, accumulating into the shard.
  void SetContribution(float* slot) { slot_ = slot; }
  // Waits for every reduction of the step (and frees the spare buffers); the first
  // communication error.
  Status FinishStep();
  // Deterministic mode: the gradient shard = fixed-tree sum over dp of the V canonical
  // contributions (this rank's V/dp consecutive ones, each laid out like the flat buffer).
  Status ReduceContributions(const float* contributions, int64_t total_shards);

  void Enter(autograd::Tape& tape, int unit) override;
  void Exit(autograd::Tape& tape, int unit) override;
  const Status& status() const { return status_; }

 private:
  struct Unit {
    int64_t begin = 0, end = 0;  // local flat range
    int first_param = 0, end_param = 0;
    tensor::Tensor values;  // stage 3: gathered parameters (while needed)
    std::vector<comm::WorkHandle> gathers;
    tensor::Tensor grads;  // during the unit's backward
  };
  struct Part {
    comm::WorkHandle work;
    tensor::Tensor received;     // the owner's reduced part
    int64_t begin = 0, end = 0;  // flat range
  };
  struct PendingReduce {
    tensor::Tensor grads;  // kept alive until every part is reduced
    std::vector<Part> parts;
  };
  // Freed buffers of one role (gathered values, unit gradient, received part), handed out
  // again for the next unit that fits. A fresh allocation of a unit's size every unit and
  // micro-batch made glibc map its pages anew each time (a page fault per 4 KiB): gpt-tiny,
  // dp=2, ZeRO-2 had ~60% more page faults than ZeRO-0 and a ~15% slower step. Two per role
  // cover the usual overlap (the next unit's buffer taken before the last one is let go).
  class Spare {
   public:
    // A buffer of n floats: a spare when one fits and no one else holds it, else a new one.
    tensor::Tensor Take(int64_t n, tensor::MemoryTag tag);
    // Keeps `t` for a later Take (the largest kMaxSpares).
    void Give(tensor::Tensor t);
    void Drop() { spares_.clear(); }

   private:
    std::vector<tensor::Tensor> spares_;
  };

  ZeroUnits(int stage, std::shared_ptr<comm::Communicator> dp, StageModel* model);
  template <typename Fn>
  void ForEachOwner(const Unit& unit, Fn&& fn) const;
  void StartGather(int u);
  void Materialize(int u);
  void ReleaseValues(int u);
  void Bind(int u);
  void BackwardStart(int u);
  void BackwardDone(int u);
  void Complete(PendingReduce& p);
  void PollPending();
  void DropSpares();
  void Check(Status s);

  int stage_;
  std::shared_ptr<comm::Communicator> dp_;
  StageModel* model_;
  optim::FlatRange owned_;
  tensor::Tensor param_shard_, grad_shard_;
  std::vector<Unit> units_;
  std::deque<PendingReduce> pending_;
  Spare spare_values_, spare_grads_, spare_received_;
  float* slot_ = nullptr;
  Status status_;
};

}  // namespace lockstep::parallel
