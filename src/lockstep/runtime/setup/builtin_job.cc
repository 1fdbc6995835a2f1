#include "lockstep/builtin_job.h"

#include "lockstep/data/byte_corpus.h"
#include "lockstep/data/idx_dataset.h"
#include "lockstep/data/image_loaders.h"
#include "lockstep/data/text_loaders.h"
#include "lockstep/data/token_corpus.h"
#include "lockstep/runtime/setup/run_config.h"

namespace lockstep {

Result<DataSources> BuiltinData(const Config& config) {
  LS_ASSIGN_OR_RETURN(runtime::RunConfig run, runtime::ReadRunConfig(config, /*builtin_data=*/true));
  DataSources d;
  if (run.data.kind == data::DatasetKind::kText) {
    LS_ASSIGN_OR_RETURN(int64_t context, config.GetInt("model.context", 128));
    LS_ASSIGN_OR_RETURN(data::ByteCorpus loaded, data::ByteCorpus::Load(run.data.dir, context));
    auto corpus = std::make_shared<const data::ByteCorpus>(std::move(loaded));
    data::SamplerOptions eval;
    eval.global_batch = run.data.eval_batch_size;
    eval.batch_key = "eval.batch_size";
    LS_RETURN_IF_ERROR(data::CheckValWindows(*corpus, context, eval));
    LS_ASSIGN_OR_RETURN(d.train, data::TextTrainSource(corpus, context));
    LS_ASSIGN_OR_RETURN(d.val, data::TextValSource(corpus, context, run.data.eval_batches * run.data.eval_batch_size));
    d.val_final_batch = data::FinalBatch::kDrop;
    return d;
  }
  if (run.data.kind == data::DatasetKind::kTokens) {
    // Token files: the same windows as text, over the files' ids (every id checked < model.vocab
    // once, at load).
    data::TokenCorpusOptions o;
    o.train = run.data.train;
    o.val = run.data.val;
    o.format = run.data.format;
    o.loss_mask = run.data.loss_mask;
    LS_ASSIGN_OR_RETURN(o.vocab, config.GetInt("model.vocab", 256));
    LS_ASSIGN_OR_RETURN(o.context, config.GetInt("model.context", 128));
    LS_ASSIGN_OR_RETURN(data::TokenCorpus tokens, data::TokenCorpus::Load(o));
    data::SamplerOptions eval;
    eval.global_batch = run.data.eval_batch_size;
    eval.batch_key = "eval.batch_size";
    LS_RETURN_IF_ERROR(data::CheckWindowValWindows(*tokens.val(), o.context, eval));
    d.train = data::WindowTrainSource(tokens.train(), o.context, o.vocab);
    d.val = data::WindowValSource(tokens.val(), o.context, o.vocab, run.data.eval_batches * run.data.eval_batch_size);
    d.val_final_batch = data::FinalBatch::kDrop;
    return d;
  }
  using data::FashionMnistSplit;
  LS_ASSIGN_OR_RETURN(data::IdxDataset train,
                      data::IdxDataset::LoadFashionMnist(run.data.dir, FashionMnistSplit::kTrain));
  LS_ASSIGN_OR_RETURN(data::IdxDataset test,
                      data::IdxDataset::LoadFashionMnist(run.data.dir, FashionMnistSplit::kTest));
  d.train = data::ImageSource(std::make_shared<const data::IdxDataset>(std::move(train)));
  d.val = data::ImageSource(std::make_shared<const data::IdxDataset>(std::move(test)));
  return d;
}

Job BuiltinJob() {
  Job job;
  job.model = [](const Config& config) { return nn::MakeModel(config); };
  job.data = BuiltinData;
  job.gpt = [](const Config& config) -> Result<std::optional<nn::GptConfig>> {
    LS_ASSIGN_OR_RETURN(std::string kind, config.GetString("model.kind", ""));
    if (kind != "gpt") return std::optional<nn::GptConfig>();
    LS_ASSIGN_OR_RETURN(nn::GptConfig c, nn::ReadGptConfig(config));
    return std::optional<nn::GptConfig>(c);
  };
  job.llama = [](const Config& config) -> Result<std::optional<nn::LlamaConfig>> {
    LS_ASSIGN_OR_RETURN(std::string kind, config.GetString("model.kind", ""));
    if (kind != "llama") return std::optional<nn::LlamaConfig>();
    LS_ASSIGN_OR_RETURN(nn::LlamaConfig c, nn::ReadLlamaConfig(config));
    return std::optional<nn::LlamaConfig>(c);
  };
  return job;
}

}  // namespace lockstep
