#include "lockstep/data/text_loaders.h"

#include <algorithm>
#include <string>
#include <vector>

#include "lockstep/core/rng.h"
#include "lockstep/data/source_loader.h"

namespace lockstep::data {
namespace {

// One source class for both splits of any window stream (a byte corpus split, token files):
// they differ only in where window k starts.
class WindowDataSource final : public DataSource {
 public:
  WindowDataSource(std::shared_ptr<const WindowSource> stream, bool train, int64_t context, int64_t windows,
                   int64_t vocab)
      : stream_(std::move(stream)), train_(train), context_(context), windows_(windows), vocab_(vocab) {}

  int64_t size() const override { return windows_; }
  SampleLayout layout() const override { return {.seq = context_, .vocab = vocab_}; }
  Status Read(const SampleKey& key, const SampleSlot& out) const override {
    const int64_t t = context_;
    const int64_t offset = train_ ? TrainWindowOffset(key.seed, key.epoch, t) : 0;
    // T+1 ids in one read (a token stream releases the pages it touched after each read).
    thread_local std::vector<int32_t> window;
    window.resize(static_cast<size_t>(t + 1));
    stream_->Read(offset + key.index * t, t + 1, window.data());
    std::copy(window.begin(), window.end() - 1, out.tokens);
    std::copy(window.begin() + 1, window.end(), out.targets);
    if (stream_->has_mask()) {
      // A target the loss mask leaves out becomes -1, which the loss ignores (ignore_index).
      stream_->ReadMask(offset + key.index * t + 1, t, window.data());
      for (int64_t i = 0; i < t; ++i)
        if (window[static_cast<size_t>(i)] == 0) out.targets[i] = -1;
    }
    return Status::Ok();
  }

 private:
  std::shared_ptr<const WindowSource> stream_;
  bool train_;
  int64_t context_, windows_, vocab_;
};

// The text batches of a source loader (the same rows, under the text batch's names).
class TextBatchLoader final : public TextLoader {
 public:
  explicit TextBatchLoader(std::unique_ptr<BatchLoader> inner) : inner_(std::move(inner)) {}

  Status Next(TextBatch* batch) override {
    LS_RETURN_IF_ERROR(inner_->Next(&rows_));
    batch->x.swap(rows_.tokens);
    batch->y.swap(rows_.targets);
    batch->B = rows_.B;
    batch->T = rows_.layout.seq;
    batch->valid = rows_.valid;
    return Status::Ok();
  }
  LoaderState State() const override { return inner_->State(); }
  Status Restore(const LoaderState& state) override { return inner_->Restore(state); }
  int64_t StepsPerEpoch() const override { return inner_->StepsPerEpoch(); }

 private:
  std::unique_ptr<BatchLoader> inner_;
  Batch rows_;
};

// A split of a byte corpus as a window stream that keeps the corpus alive.
class CorpusSplit final : public WindowSource {
 public:
  CorpusSplit(std::shared_ptr<const ByteCorpus> corpus, bool train)
      : corpus_(std::move(corpus)), bytes_(train ? corpus_->train() : corpus_->val(), corpus_->dir()) {}
  int64_t size() const override { return bytes_.size(); }
  void Read(int64_t begin, int64_t n, int32_t* out) const override { bytes_.Read(begin, n, out); }
  const std::string& name() const override { return bytes_.name(); }

 private:
  std::shared_ptr<const ByteCorpus> corpus_;
  ByteWindowSource bytes_;
};

}  // namespace

int64_t TrainWindowsPerEpoch(int64_t train_len, int64_t context) { return train_len / context - 1; }

int64_t TrainWindowOffset(uint64_t seed, int64_t epoch, int64_t context) {
  Rng rng(seed, kWindowOffsetStream + static_cast<uint64_t>(epoch));
  return static_cast<int64_t>(rng.Below(static_cast<uint64_t>(context)));
}

int64_t ValWindowCount(int64_t val_len, int64_t context) { return (val_len - 1) / context; }

std::shared_ptr<const DataSource> WindowTrainSource(std::shared_ptr<const WindowSource> train, int64_t context,
                                                    int64_t vocab) {
  const int64_t windows = TrainWindowsPerEpoch(train->size(), context);
  return std::make_shared<WindowDataSource>(std::move(train), true, context, windows, vocab);
}

std::shared_ptr<const DataSource> WindowValSource(std::shared_ptr<const WindowSource> val, int64_t context,
                                                  int64_t vocab, int64_t max_windows) {
  int64_t windows = ValWindowCount(val->size(), context);
  if (max_windows > 0) windows = std::min(windows, max_windows);
  return std::make_shared<WindowDataSource>(std::move(val), false, context, windows, vocab);
}

Status CheckWindowValWindows(const WindowSource& val, int64_t context, const SamplerOptions& sampling,
                             const char* unit) {
  const int64_t windows = ValWindowCount(val.size(), context);
  if (windows >= sampling.global_batch) return Status::Ok();
  return Status::InvalidArgument(sampling.batch_key + " " + std::to_string(sampling.global_batch) +
                                 " is larger than the " + std::to_string(windows) + " validation windows of " +
                                 std::to_string(context) + " " + unit + " " + val.name());
}

Result<std::shared_ptr<const DataSource>> TextTrainSource(std::shared_ptr<const ByteCorpus> corpus, int64_t context) {
  LS_RETURN_IF_ERROR(CheckCorpusFitsContext(*corpus, context));
  return WindowTrainSource(std::make_shared<CorpusSplit>(std::move(corpus), true), context, 256);
}

Result<std::shared_ptr<const DataSource>> TextValSource(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                        int64_t max_windows) {
  LS_RETURN_IF_ERROR(CheckCorpusFitsContext(*corpus, context));
  return WindowValSource(std::make_shared<CorpusSplit>(std::move(corpus), false), context, 256, max_windows);
}

Status CheckValWindows(const ByteCorpus& corpus, int64_t context, const SamplerOptions& sampling) {
  return CheckWindowValWindows(ByteWindowSource(corpus.val(), corpus.dir()), context, sampling, "bytes in corpus");
}

Result<std::unique_ptr<TextLoader>> MakeWindowTrainLoader(std::shared_ptr<const WindowSource> train, int64_t context,
                                                          SamplerOptions sampling, int64_t vocab) {
  sampling.shuffle = true;
  LS_ASSIGN_OR_RETURN(std::unique_ptr<BatchLoader> rows,
                      MakeSourceLoader(WindowTrainSource(std::move(train), context, vocab), sampling));
  return std::unique_ptr<TextLoader>(new TextBatchLoader(std::move(rows)));
}

Result<std::unique_ptr<TextLoader>> MakeWindowValLoader(std::shared_ptr<const WindowSource> val, int64_t context,
                                                        SamplerOptions sampling, int64_t max_batches, const char* unit,
                                                        int64_t vocab) {
  LS_RETURN_IF_ERROR(CheckWindowValWindows(*val, context, sampling, unit));
  std::shared_ptr<const DataSource> source =
      WindowValSource(std::move(val), context, vocab, max_batches * sampling.global_batch);
  sampling.shuffle = false;
  sampling.final_batch = FinalBatch::kDrop;
  LS_ASSIGN_OR_RETURN(std::unique_ptr<BatchLoader> rows, MakeSourceLoader(std::move(source), sampling));
  return std::unique_ptr<TextLoader>(new TextBatchLoader(std::move(rows)));
}

Result<std::unique_ptr<TextLoader>> MakeTextTrainLoader(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                        SamplerOptions sampling) {
  LS_RETURN_IF_ERROR(CheckCorpusFitsContext(*corpus, context));
  return MakeWindowTrainLoader(std::make_shared<CorpusSplit>(std::move(corpus), true), context, std::move(sampling),
                               256);
}

Result<std::unique_ptr<TextLoader>> MakeTextValLoader(std::shared_ptr<const ByteCorpus> corpus, int64_t context,
                                                      SamplerOptions sampling, int64_t max_batches) {
  LS_RETURN_IF_ERROR(CheckCorpusFitsContext(*corpus, context));
  return MakeWindowValLoader(std::make_shared<CorpusSplit>(std::move(corpus), false), context, std::move(sampling),
                             max_batches, "bytes in corpus", 256);
}

}  // namespace lockstep::data
