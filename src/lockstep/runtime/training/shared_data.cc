#include "lockstep/runtime/training/shared_data.h"

#include "lockstep/data/image_loaders.h"
#include "lockstep/data/text_loaders.h"

namespace lockstep::runtime {

Result<std::shared_ptr<const SharedData>> LoadSharedData(const RunConfig& run, int64_t context, int64_t vocab) {
  auto shared = std::make_shared<SharedData>();
  shared->kind = run.data.kind;
  shared->context = context;
  if (run.data.kind == data::DatasetKind::kText) {
    LS_ASSIGN_OR_RETURN(data::ByteCorpus corpus, data::ByteCorpus::Load(run.data.dir, context));
    shared->corpus = std::make_shared<const data::ByteCorpus>(std::move(corpus));
  } else if (run.data.kind == data::DatasetKind::kTokens) {
    data::TokenCorpusOptions o;
    o.train = run.data.train;
    o.val = run.data.val;
    o.format = run.data.format;
    o.vocab = vocab;
    o.context = context;
    LS_ASSIGN_OR_RETURN(data::TokenCorpus tokens, data::TokenCorpus::Load(o));
    shared->tokens = std::make_shared<const data::TokenCorpus>(std::move(tokens));
  } else {
    using data::FashionMnistSplit;
    LS_ASSIGN_OR_RETURN(data::IdxDataset train,
                        data::IdxDataset::LoadFashionMnist(run.data.dir, FashionMnistSplit::kTrain));
    LS_ASSIGN_OR_RETURN(data::IdxDataset test,
                        data::IdxDataset::LoadFashionMnist(run.data.dir, FashionMnistSplit::kTest));
    shared->train_images = std::make_shared<const data::IdxDataset>(std::move(train));
    shared->test_images = std::make_shared<const data::IdxDataset>(std::move(test));
  }
  return std::shared_ptr<const SharedData>(std::move(shared));
}

Result<std::unique_ptr<RankData>> RankData::Create(std::shared_ptr<const SharedData> shared, const RunConfig& run,
                                                   int rank, int world) {
  auto d = std::unique_ptr<RankData>(new RankData());
  d->shared_ = shared;
  data::SamplerOptions train = data::TrainSampling(run.data, run.train.batch_size, world, rank, run.train.seed);
  data::SamplerOptions eval = data::EvalSampling(run.data, world, rank);
  if (shared->kind == data::DatasetKind::kText) {
    LS_ASSIGN_OR_RETURN(d->text_train_, data::MakeTextTrainLoader(shared->corpus, shared->context, train));
    LS_ASSIGN_OR_RETURN(d->text_eval_,
                        data::MakeTextValLoader(shared->corpus, shared->context, eval, run.data.eval_batches));
    d->eval_start_ = d->text_eval_->State();
  } else if (shared->kind == data::DatasetKind::kTokens) {
    LS_ASSIGN_OR_RETURN(d->text_train_, data::MakeWindowTrainLoader(shared->tokens->train(), shared->context, train));
    LS_ASSIGN_OR_RETURN(d->text_eval_,
                        data::MakeWindowValLoader(shared->tokens->val(), shared->context, eval, run.data.eval_batches));
    d->eval_start_ = d->text_eval_->State();
  } else {
    LS_ASSIGN_OR_RETURN(d->image_train_, data::MakeImageTrainLoader(shared->train_images, train));
    LS_ASSIGN_OR_RETURN(d->image_eval_, data::MakeImageEvalLoader(shared->test_images, eval));
    d->eval_start_ = d->image_eval_->State();
  }
  return d;
}

int64_t RankData::StepsPerEpoch() const {
  return text_train_ ? text_train_->StepsPerEpoch() : image_train_->StepsPerEpoch();
}
data::LoaderState RankData::State() const { return text_train_ ? text_train_->State() : image_train_->State(); }
Status RankData::Restore(const data::LoaderState& s) {
  return text_train_ ? text_train_->Restore(s) : image_train_->Restore(s);
}

Status RankData::NextTrain() {
  return text_train_ ? text_train_->Next(&text_batch_) : image_train_->Next(&image_batch_);
}

int64_t RankData::train_rows() const { return text_train_ ? text_batch_.B : image_batch_.B; }

nn::ModelInput RankData::TrainRows(int64_t begin, int64_t n) const {
  nn::ModelInput in;
  in.batch = n;
  if (text_train_) {
    in.seq = text_batch_.T;
    in.tokens = text_batch_.x.data() + begin * text_batch_.T;
    in.targets = text_batch_.y.data() + begin * text_batch_.T;
  } else {
    int64_t pixels = image_batch_.C * image_batch_.H * image_batch_.W;
    in.images = image_batch_.images.data() + begin * pixels;
    in.labels = image_batch_.labels.data() + begin;
  }
  return in;
}

Status RankData::StartEval() {
  eval_batches_done_ = 0;
  return text_eval_ ? text_eval_->Restore(eval_start_) : image_eval_->Restore(eval_start_);
}

Result<bool> RankData::NextEval() {
  int64_t total = text_eval_ ? text_eval_->StepsPerEpoch() : image_eval_->StepsPerEpoch();
  if (eval_batches_done_ >= total) return false;
  ++eval_batches_done_;
  LS_RETURN_IF_ERROR(text_eval_ ? text_eval_->Next(&text_eval_batch_) : image_eval_->Next(&image_eval_batch_));
  return true;
}

int64_t RankData::eval_rows() const { return text_eval_ ? text_eval_batch_.valid : image_eval_batch_.valid; }

nn::ModelInput RankData::EvalRows(int64_t begin, int64_t n) const {
  nn::ModelInput in;
  in.batch = n;
  if (text_eval_) {
    in.seq = text_eval_batch_.T;
    in.tokens = text_eval_batch_.x.data() + begin * text_eval_batch_.T;
    in.targets = text_eval_batch_.y.data() + begin * text_eval_batch_.T;
  } else {
    int64_t pixels = image_eval_batch_.C * image_eval_batch_.H * image_eval_batch_.W;
    in.images = image_eval_batch_.images.data() + begin * pixels;
    in.labels = image_eval_batch_.labels.data() + begin;
  }
  return in;
}

}  // namespace lockstep::runtime
