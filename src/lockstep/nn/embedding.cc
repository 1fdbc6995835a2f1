#include "lockstep/nn/embedding.h"

#include "lockstep/tensor/kernels.h"

namespace lockstep::nn {

Variable EmbeddingForward(Tape& tape, const tensor::Tensor& ids, const Variable& table) {
  LS_CHECK(ids.dtype() == tensor::DType::kI32 && ids.is_contiguous()) << "Embedding ids " << ids.ToString();
  LS_CHECK(table.value().ndim() == 2) << "Embedding table " << table.value().ToString();
  const int64_t c = table.shape()[1];
  tensor::Shape out_shape = ids.shape();
  out_shape.push_back(c);
  const bool rec = tape.ShouldRecord({&table});
  Variable out = tape.NewActivation(out_shape, rec);
  const int64_t v = table.shape()[0];
  const int32_t* id = ids.data<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    LS_CHECK(id[i] >= 0 && id[i] < v) << "Embedding id " << id[i] << " at " << i << " outside [0, " << v << ")";
  }
  tensor::EmbeddingForward(out.data(), ids.data<int32_t>(), table.data(), ids.numel(), c);
  if (rec) tape.Record({table}, [out, ids, table] { EmbeddingBackward(out, ids, table); });
  return out;
}

void EmbeddingBackward(const Variable& out, const tensor::Tensor& ids, const Variable& table) {
  if (!out.has_grad() || !table.requires_grad()) return;
  tensor::EmbeddingBackward(table.GradAccumulate(), ids.data<int32_t>(), out.grad().data<float>(), ids.numel(),
                            table.shape()[1]);
}

Embedding::Embedding(ParameterStore& ps, const std::string& prefix, int64_t num, int64_t dim, Init init) : ps_(&ps) {
  w_ = ps.Add(prefix + ".weight", {num, dim}, init, /*decay=*/true);
}

Variable Embedding::Forward(Tape& tape, const tensor::Tensor& ids) const {
  return EmbeddingForward(tape, ids, ps_->var(w_));
}

}  // namespace lockstep::nn
