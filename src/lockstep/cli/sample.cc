#include "lockstep/cli/sample.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "lockstep/interop/gpt_weights.h"
#include "lockstep/interop/llama_weights.h"
#include "lockstep/interop/export.h"

namespace lockstep::cli {
namespace {

Result<std::vector<int32_t>> ParseTokens(const std::string& text, int64_t vocab) {
  std::vector<int32_t> out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    char* stop = nullptr;
    const long long v = std::strtoll(item.c_str(), &stop, 10);
    if (item.empty() || *stop != '\0' || v < 0 || v >= vocab)
      return Status::InvalidArgument("--prompt-tokens: \"" + item + "\" is not a token id in [0, " +
                                     std::to_string(vocab) + ")");
    out.push_back(static_cast<int32_t>(v));
    at = end + 1;
  }
  return out;
}

}  // namespace

Status RunSample(const SampleOptions& o) {
  if (o.tokens < 0) return Status::InvalidArgument("--tokens: expected >= 0");
  if (o.top_k < 0) return Status::InvalidArgument("--top-k: expected >= 0");
  if (!o.prompt.empty() && !o.prompt_tokens.empty())
    return Status::InvalidArgument("--prompt and --prompt-tokens exclude each other");
  // The model the checkpoint describes (a GPT when it says nothing: written before 0.7).
  std::string kind;
  if (o.config_path.empty()) {
    LS_ASSIGN_OR_RETURN(kind, interop::CheckpointModelKind(o.checkpoint));
  }
  std::optional<interop::GptWeights> gpt;
  std::optional<interop::LlamaWeights> llama;
  int64_t vocab = 0;
  if (kind == "llama") {
    LS_ASSIGN_OR_RETURN(llama, interop::LoadLlamaCheckpoint(o.checkpoint));
    vocab = llama->config.vocab;
  } else {
    LS_ASSIGN_OR_RETURN(gpt, interop::LoadGptCheckpoint(o.checkpoint, o.config_path, o.overrides));
    vocab = gpt->config.vocab;
  }
  const bool bytes = vocab == 256;
  // The run's tokenizer, when it trained on token files made with one (data.tokenizer).
  LS_ASSIGN_OR_RETURN(std::optional<interop::CheckpointTokenizer> saved, interop::ReadCheckpointTokenizer(o.checkpoint));
  const text::Tokenizer* tokenizer = saved ? &saved->tokenizer : nullptr;
  std::vector<int32_t> prompt;
  if (!o.prompt_tokens.empty()) {
    LS_ASSIGN_OR_RETURN(prompt, ParseTokens(o.prompt_tokens, vocab));
  } else if (!o.prompt.empty() && tokenizer) {
    auto ids = tokenizer->Encode(o.prompt);
    if (!ids.ok()) return Status::InvalidArgument("--prompt: " + ids.status().message());
    prompt = *std::move(ids);
  } else if (!o.prompt.empty()) {
    if (!bytes)
      return Status::InvalidArgument("--prompt needs a byte-level model (model.vocab = 256) or a run that trained with "
                                     "data.tokenizer; this one has " + std::to_string(vocab) +
                                     " tokens and no tokenizer: pass --prompt-tokens");
    for (unsigned char c : o.prompt) prompt.push_back(c);
  } else if (tokenizer && tokenizer->end_of_text()) {
    prompt.push_back(*tokenizer->end_of_text());  // a document starts after an end-of-text token
  } else {
    // Byte models start from a newline, GPT-2 from <|endoftext|>, others from token 0.
    prompt.push_back(bytes ? '\n' : vocab == 50257 ? 50256 : 0);
  }
  const int64_t context = llama ? llama->config.context : gpt->config.context;
  if (static_cast<int64_t>(prompt.size()) > context)
    return Status::InvalidArgument("--prompt is " + std::to_string(prompt.size()) + " tokens, longer than the context of " +
                                   std::to_string(context));
  std::vector<int32_t> out;
  if (llama) {
    nn::Llama model(llama->config, nn::Llama::InferenceOnly{});
    float* flat = model.params().flat_params();
    for (const nn::ParamInfo& p : model.params()) std::copy_n(llama->tensors.at(p.name).data(), p.numel, flat + p.offset);
    out = model.GenerateTokens(prompt, o.tokens, o.temperature, o.seed, o.top_k);
  } else {
    nn::Gpt model(gpt->config, nn::Gpt::InferenceOnly{});
    interop::CopyInto(*gpt, &model);
    out = model.GenerateTokens(prompt, o.tokens, o.temperature, o.seed, o.top_k);
  }
  if (tokenizer) {
    // The prompt as given (none when it was the end-of-text token), then the new tokens' text.
    std::vector<int32_t> all = o.prompt.empty() && o.prompt_tokens.empty() ? std::vector<int32_t>() : prompt;
    all.insert(all.end(), out.begin(), out.end());
    LS_ASSIGN_OR_RETURN(std::string text, tokenizer->Decode(all));
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::printf("\n");
  } else if (bytes) {
    std::string text(prompt.begin(), prompt.end());
    for (int32_t t : out) text.push_back(static_cast<char>(t));
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::printf("\n");
  } else {
    std::string line;
    for (int32_t t : prompt) {
      if (!line.empty()) line += ',';
      line += std::to_string(t);
    }
    line += " |";
    for (int32_t t : out) {
      line += ' ';
      line += std::to_string(t);
    }
    std::printf("%s\n", line.c_str());
  }
  return Status::Ok();
}

}  // namespace lockstep::cli
