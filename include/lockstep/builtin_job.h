// The built-in job of `lockstep train`: the model named by model.kind ("gpt" or "cnn", through
// nn::MakeModel) on the data set named by data.kind ("text": the byte corpus in data.dir,
// "tokens": the token files data.train/data.val, "fashion-mnist": the IDX files in data.dir). It goes through the same
// Job interface as a program's own model; a program can also take parts of it (BuiltinJob().model with its own data:
// examples/custom_data). Public API (docs/api.md).
#pragma once

#include "lockstep/job.h"

namespace lockstep {

Job BuiltinJob();

// data.kind's data set as DataSources (model.context sets the text and token windows' length,
// model.vocab bounds the token files' ids).
Result<DataSources> BuiltinData(const Config& config);

}  // namespace lockstep
