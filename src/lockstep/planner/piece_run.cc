#include "lockstep/planner/piece_run.h"

#include <algorithm>
#include <ctime>
#include <thread>

#include "lockstep/core/clock.h"
#include "lockstep/nn/llama.h"
#include "lockstep/nn/model.h"
#include "lockstep/tensor/precision.h"
#include "lockstep/tensor/threads.h"

namespace lockstep::planner::probe {

using autograd::Variable;
using tensor::MemoryTag;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Batch MakeBatch(int64_t rows, int64_t seq, int64_t vocab, int64_t image_floats) {
  Batch b;
  uint64_t s = 0x9e3779b97f4a7c15ull;
  auto next = [&] { return static_cast<uint32_t>((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33); };
  if (seq > 0) {
    b.tokens.resize(static_cast<size_t>(rows * seq));
    b.targets.resize(b.tokens.size());
    for (size_t i = 0; i < b.tokens.size(); ++i) {
      b.tokens[i] = static_cast<int32_t>(next() % vocab);
      b.targets[i] = static_cast<int32_t>(next() % vocab);
    }
    b.in.tokens = b.tokens.data();
    b.in.targets = b.targets.data();
  } else {
    b.images.resize(static_cast<size_t>(rows * image_floats));
    b.labels.resize(static_cast<size_t>(rows));
    for (float& x : b.images) x = static_cast<float>(next() % 256) / 255.0f;
    for (int32_t& l : b.labels) l = static_cast<int32_t>(next() % 10);
    b.in.features = b.images.data();
    b.in.labels = b.labels.data();
  }
  b.in.batch = rows;
  b.in.seq = seq > 0 ? seq : 1;
  return b;
}

Result<Batch> WholeModelBatch(const Config& config, int64_t rows) {
  LS_ASSIGN_OR_RETURN(const std::string kind, config.GetString("model.kind", ""));
  if (kind == "llama") {
    LS_ASSIGN_OR_RETURN(const nn::LlamaConfig c, nn::ReadLlamaConfig(config));
    return MakeBatch(rows, c.context, c.vocab, 0);
  }
  return MakeBatch(rows, 0, 0, 28 * 28);
}

double ThreadCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

parallel::GptShardOptions PieceOptions(const nn::GptConfig& c, int piece) {
  parallel::GptShardOptions o;
  o.model = c;
  o.first_layer = 0;
  o.end_layer = piece == 1 ? 1 : 0;
  o.has_embedding = piece == 0;
  o.has_head = piece == 2;
  return o;
}

double Oversubscription(int workers, int threads_per_worker) {
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  return threads_per_worker == 1 ? std::max(1.0, static_cast<double>(workers) / cores) : 1.0;
}

void PieceRun::UseBf16() {
  bf16_ = true;
  nn::ParameterStore& ps = m_->params();
  if (tensor::UseNativeBf16() && ps.has_flat_params()) weights_.Refresh(ps.flat_params(), ps.numel());
}

void PieceRun::ReleasedForward() {
  const tensor::ScopedPrecision precision(bf16_ ? tensor::Precision::kBF16 : tensor::ComputePrecision());
  const tensor::ScopedBf16Weights weights(bf16_ ? &weights_ : tensor::CurrentBf16Weights());
  const Variable x = StandInInput();
  Stopwatch clock;
  const double cpu0 = ThreadCpuMs();
  { Variable out = m_->Forward(tape_, *in_, x); }
  tape_.Clear();
  released_.fwd.push_back(clock.ElapsedMs());
  released_.fwd_cpu.push_back(ThreadCpuMs() - cpu0);
}

void PieceRun::Pass(tensor::MemoryTracker& mem, bool first_pass, bool warm) {
  const tensor::ScopedPrecision precision(bf16_ ? tensor::Precision::kBF16 : tensor::ComputePrecision());
  const tensor::ScopedBf16Weights weights(bf16_ ? &weights_ : tensor::CurrentBf16Weights());
  const bool last = m_->last_stage();
  const Variable x = StandInInput();
  tensor::Tensor grad;
  if (!last) {
    grad = tape_.NewBuffer(m_->ActivationShape(*in_));
    std::fill(grad.data<float>(), grad.data<float>() + grad.numel(), 1e-3f);
  }
  const int64_t before = mem.Current(MemoryTag::kActivation);
  const int64_t kernels_before = mem.Current(MemoryTag::kWorkspace);
  mem.ResetPeak();
  Stopwatch clock;
  const double cpu0 = ThreadCpuMs();
  Variable out = m_->Forward(tape_, *in_, x);
  const double f = clock.ElapsedMs(), cpu1 = ThreadCpuMs();
  const int64_t after = mem.Current(MemoryTag::kActivation);
  clock.Reset();
  if (last)
    tape_.Backward(out, 1.0f);
  else
    tape_.BackwardFrom(out, grad.data<float>());
  const double b = clock.ElapsedMs(), cpu2 = ThreadCpuMs();
  if (first_pass) {
    cost_.saved_bytes = after - before;
    cost_.peak_bytes = std::max(cost_.saved_bytes, mem.Peak(MemoryTag::kActivation) - before);
    MeasureEvaluation(mem);
    cost_.kernel_bytes = mem.Current(MemoryTag::kWorkspace) - kernels_before;  // plans made by both
  } else {
    Times& t = warm ? warm_ : cold_;
    t.fwd.push_back(f);
    t.bwd.push_back(b);
    t.fwd_cpu.push_back(cpu1 - cpu0);
    t.bwd_cpu.push_back(cpu2 - cpu1);
  }
}

PieceCost PieceRun::Cost(double oversubscribed) const {
  PieceCost c = cost_;
  c.fwd_ms = cold_.FwdMs(oversubscribed);
  c.bwd_ms = cold_.BwdMs(oversubscribed);
  c.warm_fwd_ms = warm_.FwdMs(oversubscribed);  // 0 when no warm pass ran
  c.warm_bwd_ms = warm_.BwdMs(oversubscribed);
  c.recompute_fwd_ms = released_.FwdMs(oversubscribed);  // 0 when none ran
  return c;
}

void PieceRun::MeasureEvaluation(tensor::MemoryTracker& mem) {
  const bool first = m_->first_stage(), last = m_->last_stage();
  const size_t n = static_cast<size_t>(tensor::NumElements(m_->ActivationShape(*in_)));
  std::vector<float> x_in(first ? 0 : n), x_out(last ? 0 : n);
  const int64_t before = mem.Current(MemoryTag::kActivation);
  mem.ResetPeak();
  m_->Evaluate(*in_, first ? nullptr : x_in.data(), last ? nullptr : x_out.data());
  cost_.eval_peak_bytes = mem.Peak(MemoryTag::kActivation) - before;
}

Variable PieceRun::StandInInput() {
  if (m_->first_stage()) return Variable();
  Variable x = tape_.NewActivation(m_->ActivationShape(*in_), true);
  float* p = x.data();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = 0.01f * static_cast<float>((i * 7919) % 201 - 100);
  return x;
}

}  // namespace lockstep::planner::probe
