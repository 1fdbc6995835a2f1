#include "lockstep/runtime/setup/rank_data.h"

#include <algorithm>

namespace lockstep::runtime {

Result<std::unique_ptr<RankData>> RankData::Create(const DataSources& sources, const RunConfig& run, int rank,
                                                   int world) {
  if (!sources.train || !sources.val)
    return Status::InvalidArgument("the job's data has no training or validation source");
  auto d = std::unique_ptr<RankData>(new RankData());
  d->layout_ = sources.train->layout();
  if (sources.val->layout() != d->layout_)
    return Status::InvalidArgument("the validation source's samples hold " + sources.val->layout().ToString() +
                                   ", the training source's " + d->layout_.ToString());
  data::SamplerOptions train = data::TrainSampling(run.data, run.train.batch_size, world, rank, run.train.seed);
  data::SamplerOptions eval = data::EvalSampling(run.data, world, rank);
  train.shuffle = true;
  eval.final_batch = sources.val_final_batch;
  LS_ASSIGN_OR_RETURN(d->train_, data::MakeSourceLoader(sources.train, train));
  LS_ASSIGN_OR_RETURN(d->eval_, data::MakeSourceLoader(sources.val, eval));
  d->eval_start_ = d->eval_->State();
  d->eval_batches_ = d->eval_->StepsPerEpoch();
  if (run.data.eval_batches > 0) d->eval_batches_ = std::min(d->eval_batches_, run.data.eval_batches);
  return d;
}

Status RankData::NextTrain() { return train_->Next(&train_batch_); }

int64_t RankData::TrainedTargets() const {
  const size_t n = static_cast<size_t>(train_batch_.B * std::max<int64_t>(train_batch_.layout.seq, 0));
  int64_t trained = 0;
  for (size_t i = 0; i < n && i < train_batch_.targets.size(); ++i) trained += train_batch_.targets[i] >= 0;
  return trained;
}

nn::ModelInput RankData::Rows(const data::Batch& b, int64_t begin, int64_t n) {
  const SampleLayout& l = b.layout;
  nn::ModelInput in;
  in.batch = n;
  if (l.seq > 0) {
    in.seq = l.seq;
    in.tokens = b.tokens.data() + begin * l.seq;
    in.targets = b.targets.data() + begin * l.seq;
  }
  if (l.features > 0) in.features = b.features.data() + begin * l.features;
  if (l.classes > 0) in.labels = b.labels.data() + begin;
  if (l.values > 0) in.values = b.values.data() + begin * l.values;
  return in;
}

Status RankData::StartEval() {
  eval_batches_done_ = 0;
  return eval_->Restore(eval_start_);
}

Result<bool> RankData::NextEval() {
  if (eval_batches_done_ >= eval_batches_) return false;
  ++eval_batches_done_;
  LS_RETURN_IF_ERROR(eval_->Next(&eval_batch_));
  return true;
}

}  // namespace lockstep::runtime
