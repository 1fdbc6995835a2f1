#include "lockstep/data/source_loader.h"

#include <algorithm>

namespace lockstep::data {
namespace {

class SourceLoader final : public BatchLoader {
 public:
  SourceLoader(std::shared_ptr<const DataSource> source, DistributedSampler sampler)
      : source_(std::move(source)), layout_(source_->layout()), sampler_(std::move(sampler)) {}

  Status Next(Batch* batch) override {
    const LoaderState at = sampler_.State();
    sampler_.Next(&indices_);
    const SampleLayout& l = layout_;
    const int64_t b = static_cast<int64_t>(indices_.size());
    batch->layout = l;
    batch->B = b;
    batch->valid = 0;
    batch->tokens.resize(static_cast<size_t>(b * l.seq));
    batch->targets.resize(static_cast<size_t>(b * l.seq));
    batch->features.resize(static_cast<size_t>(b * l.features));
    batch->labels.resize(l.classes > 0 ? static_cast<size_t>(b) : 0);
    batch->values.resize(static_cast<size_t>(b * l.values));
    for (int64_t row = 0; row < b; ++row) {
      SampleSlot slot;
      if (l.seq > 0) {
        slot.tokens = batch->tokens.data() + row * l.seq;
        slot.targets = batch->targets.data() + row * l.seq;
      }
      if (l.features > 0) slot.features = batch->features.data() + row * l.features;
      if (l.classes > 0) slot.label = batch->labels.data() + row;
      if (l.values > 0) slot.values = batch->values.data() + row * l.values;
      const int64_t index = indices_[static_cast<size_t>(row)];
      if (index < 0) {  // masked slot: nothing to learn from, nothing counted
        if (slot.tokens) std::fill(slot.tokens, slot.tokens + l.seq, 0);
        if (slot.targets) std::fill(slot.targets, slot.targets + l.seq, kIgnoreTarget);
        if (slot.features) std::fill(slot.features, slot.features + l.features, 0.0f);
        if (slot.label) *slot.label = kIgnoreTarget;
        if (slot.values) std::fill(slot.values, slot.values + l.values, 0.0f);
        continue;
      }
      ++batch->valid;
      LS_RETURN_IF_ERROR(source_->Read({index, at.epoch, at.seed}, slot));
      LS_RETURN_IF_ERROR(CheckRanges(index, slot));
    }
    return Status::Ok();
  }

  // Token ids and labels index tables in the model (the kernels check them and abort): an
  // id outside the declared range is the source's error, reported as one line.
  Status CheckRanges(int64_t index, const SampleSlot& slot) const {
    const SampleLayout& l = layout_;
    auto bad = [&](const char* what, int64_t v, int64_t lo, int64_t hi) {
      return Status::InvalidArgument("data source: sample " + std::to_string(index) + " has " + what + " " +
                                     std::to_string(v) + ", outside [" + std::to_string(lo) + ", " +
                                     std::to_string(hi) + ") (its layout says " + l.ToString() + ")");
    };
    for (int64_t i = 0; i < l.seq; ++i) {
      if (slot.tokens[i] < 0 || slot.tokens[i] >= l.vocab) return bad("token", slot.tokens[i], 0, l.vocab);
      if (slot.targets[i] < kIgnoreTarget || slot.targets[i] >= l.vocab)
        return bad("target", slot.targets[i], kIgnoreTarget, l.vocab);
    }
    if (slot.label && (*slot.label < 0 || *slot.label >= l.classes)) return bad("label", *slot.label, 0, l.classes);
    return Status::Ok();
  }

  LoaderState State() const override { return sampler_.State(); }
  Status Restore(const LoaderState& state) override { return sampler_.Restore(state); }
  int64_t StepsPerEpoch() const override { return sampler_.BatchesPerEpoch(); }

 private:
  std::shared_ptr<const DataSource> source_;
  SampleLayout layout_;
  DistributedSampler sampler_;
  std::vector<int64_t> indices_;
};

}  // namespace

Result<std::unique_ptr<BatchLoader>> MakeSourceLoader(std::shared_ptr<const DataSource> source,
                                                      SamplerOptions sampling) {
  if (source == nullptr) return Status::InvalidArgument("no data source");
  const SampleLayout layout = source->layout();
  if (layout.empty() || layout.seq < 0 || layout.features < 0 || layout.classes < 0 || layout.values < 0 ||
      (layout.seq > 0 && layout.vocab <= 0))
    return Status::InvalidArgument("a data source's layout must declare what a sample holds, got " + layout.ToString());
  if (source->size() <= 0)
    return Status::InvalidArgument("a data source holds " + std::to_string(source->size()) + " samples");
  sampling.dataset_size = source->size();
  LS_ASSIGN_OR_RETURN(DistributedSampler sampler, DistributedSampler::Create(sampling));
  return std::unique_ptr<BatchLoader>(new SourceLoader(std::move(source), std::move(sampler)));
}

}  // namespace lockstep::data
