// Embedding lookup: out[..., :] = table[ids[...], :].
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/autograd/tape.h"
#include "lockstep/nn/parameter_store.h"

namespace lockstep::nn {

using autograd::Tape;
using autograd::Variable;

// ids: I32 tensor of any shape with values in [0, V) (checked); table: [V, C].
// Returns [ids.shape..., C]. `ids` must not change until backward has run.
Variable EmbeddingForward(Tape& tape, const tensor::Tensor& ids, const Variable& table);
// dtable[ids[i], :] += dout[i, :].
void EmbeddingBackward(const Variable& out, const tensor::Tensor& ids, const Variable& table);

// Registers "<prefix>.weight" [num, dim] (decayed).
class Embedding {
 public:
  Embedding() = default;
  Embedding(ParameterStore& ps, const std::string& prefix, int64_t num, int64_t dim, Init init);

  Variable Forward(Tape& tape, const tensor::Tensor& ids) const;
  int weight_index() const { return w_; }

 private:
  const ParameterStore* ps_ = nullptr;
  int w_ = -1;
};

}  // namespace lockstep::nn
