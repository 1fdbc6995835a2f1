// A user-defined MLP trained by lockstep on a synthetic regression task:
//   y = sin(2 x0) + x1 x2 - x3^2 / 2,  x uniform in [-1, 1]^8.
// It takes the flags of `lockstep train` (--nproc, --backend, --out, --resume auto,
// --deterministic, --zero, --set ...) and prints "done: ..., val_loss L, ..." last.
#include <lockstep/lockstep.h>

#include <cmath>
#include <memory>

namespace ls = lockstep;

constexpr int64_t kIn = 8, kHidden = 64;

class Mlp : public ls::Model {
 public:
  explicit Mlp(uint64_t seed) {
    fc1_ = ls::nn::Linear::TorchDefault(ps_, "fc1", kIn, kHidden, /*bias=*/true);
    fc2_ = ls::nn::Linear::TorchDefault(ps_, "fc2", kHidden, kHidden, true);
    out_ = ls::nn::Linear::TorchDefault(ps_, "out", kHidden, 1, true);
    ps_.Finalize(seed);  // one flat buffer; values from (seed, name, index), the same on any rank
  }
  ls::ParameterStore& params() override { return ps_; }
  const ls::ParameterStore& params() const override { return ps_; }
  std::string name() const override { return "mlp"; }
  ls::Status CheckLayout(const ls::SampleLayout& l) const override {
    if (l.features == kIn && l.values == 1) return ls::Status::Ok();
    return ls::Status::InvalidArgument("mlp wants features=8, values=1, got " + l.ToString());
  }
  // Forward with lockstep's layers; the tape records what backward needs.
  ls::Variable Loss(ls::Tape& tape, const ls::ModelInput& in) override {
    ls::Variable x = ls::nn::FloatInput(tape, in.features, {in.batch, kIn});
    x = ls::nn::ReluForward(tape, fc1_.Forward(tape, x));
    x = ls::nn::ReluForward(tape, fc2_.Forward(tape, x));
    return ls::nn::MseLossForward(tape, out_.Forward(tape, x), in.values);
  }

 private:
  ls::ParameterStore ps_;
  ls::nn::Linear fc1_, fc2_, out_;
};

// Sample i is a pure function of i: any rank reads any sample, in any order.
class Synthetic : public ls::DataSource {
 public:
  Synthetic(int64_t size, uint64_t stream) : size_(size), stream_(stream) {}
  int64_t size() const override { return size_; }
  ls::SampleLayout layout() const override { return {.features = kIn, .values = 1}; }
  ls::Status Read(const ls::SampleKey& key, const ls::SampleSlot& out) const override {
    ls::Rng rng(/*seed=*/7, stream_, static_cast<uint64_t>(key.index) * kIn);
    float* x = out.features;
    for (int64_t i = 0; i < kIn; ++i) x[i] = 2.0f * rng.Uniform() - 1.0f;
    out.values[0] = std::sin(2.0f * x[0]) + x[1] * x[2] - 0.5f * x[3] * x[3];
    return ls::Status::Ok();
  }

 private:
  int64_t size_;
  uint64_t stream_;
};

int main(int argc, char** argv) {
  ls::Job job;
  job.model = [](const ls::Config& config) -> ls::Result<std::unique_ptr<ls::Model>> {
    LS_ASSIGN_OR_RETURN(int64_t seed, config.GetInt("model.init_seed", 0));
    return std::make_unique<Mlp>(static_cast<uint64_t>(seed));
  };
  job.data = [](const ls::Config&) -> ls::Result<ls::DataSources> {
    return ls::DataSources{std::make_shared<Synthetic>(8192, 0), std::make_shared<Synthetic>(1024, 1)};
  };
  ls::TrainOptions defaults;  // flags override these; --set overrides the config
  defaults.out_dir = "runs/mlp_regression";
  defaults.config_toml = R"(
    [optim]
    lr = 3e-3
    [train]
    batch_size = 64
    steps = 300
    log_every = 50
    [eval]
    every = 100
    [checkpoint]
    every = 100
  )";
  return ls::TrainMain(argc, argv, job, defaults);
}
