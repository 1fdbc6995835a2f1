// lockstep as a library: everything a program needs to train its own model (docs/api.md).
//
//   class MyModel : public lockstep::Model { ... Loss() with lockstep::nn layers ... };
//   class MyData : public lockstep::DataSource { ... size(), layout(), Read() ... };
//   int main(int argc, char** argv) {
//     lockstep::Job job;
//     job.model = [](const lockstep::Config&) { return ...std::make_unique<MyModel>()...; };
//     job.data = [](const lockstep::Config&) { return lockstep::DataSources{train, val}; };
//     return lockstep::TrainMain(argc, argv, job);
//   }
//
// The headers below are the public ones (installed, stable within a minor version); the rest
// of src/lockstep/ is internal.
#pragma once

#include "lockstep/train.h"
#include "lockstep/autograd/tape.h"
#include "lockstep/autograd/variable.h"
#include "lockstep/core/config.h"
#include "lockstep/core/result.h"
#include "lockstep/core/rng.h"
#include "lockstep/core/sample_layout.h"
#include "lockstep/core/status.h"
#include "lockstep/core/version.h"
#include "lockstep/data/data_source.h"
#include "lockstep/nn/activation.h"
#include "lockstep/nn/cnn.h"
#include "lockstep/nn/conv2d.h"
#include "lockstep/nn/cross_entropy.h"
#include "lockstep/nn/embedding.h"
#include "lockstep/nn/gpt.h"
#include "lockstep/nn/inputs.h"
#include "lockstep/nn/layer_norm.h"
#include "lockstep/nn/linear.h"
#include "lockstep/nn/max_pool.h"
#include "lockstep/nn/model.h"
#include "lockstep/nn/mse_loss.h"
#include "lockstep/nn/parameter_store.h"
#include "lockstep/nn/shape_ops.h"
#include "lockstep/builtin_job.h"
#include "lockstep/job.h"
#include "lockstep/train_options.h"
#include "lockstep/tensor/tensor.h"

namespace lockstep {

using autograd::Tape;
using autograd::Variable;
using data::DataSource;
using data::SampleKey;
using data::SampleSlot;
using nn::EvalResult;
using nn::Model;
using nn::ModelInput;
using nn::ParameterStore;

}  // namespace lockstep
