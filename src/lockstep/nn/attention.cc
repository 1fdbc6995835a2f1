#include "lockstep/nn/attention.h"

#include "lockstep/tensor/kernels.h"

namespace lockstep::nn {

Variable AttentionForward(Tape& tape, const Variable& qkv, int64_t heads) {
  LS_CHECK(qkv.value().ndim() == 3 && qkv.shape()[2] % 3 == 0)
      << "Attention input " << qkv.value().ToString() << " is not [B, T, 3C]";
  const int64_t B = qkv.shape()[0], T = qkv.shape()[1], C = qkv.shape()[2] / 3;
  LS_CHECK(heads > 0 && C % heads == 0) << "Attention: width " << C << ", heads " << heads;
  const bool rec = tape.ShouldRecord({&qkv});
  Variable out = tape.NewActivation({B, T, C}, rec);
  tensor::Tensor att = tape.NewBuffer({B, heads, T, T});
  tensor::AttentionForward(out.data(), att.data<float>(), qkv.data(), B, T, C, heads);
  if (rec) tape.Record({qkv}, [out, qkv, att, heads] { AttentionBackward(out, qkv, att, heads); });
  return out;
}

void AttentionBackward(const Variable& out, const Variable& qkv, const tensor::Tensor& att, int64_t heads) {
  if (!out.has_grad() || !qkv.requires_grad()) return;
  const int64_t B = qkv.shape()[0], T = qkv.shape()[1], C = qkv.shape()[2] / 3;
  bool fresh = false;
  float* dqkv = qkv.GradForWrite(&fresh);
  tensor::AttentionBackward(dqkv, out.grad().data<float>(), qkv.data(), att.data<float>(), B, T, C, heads,
                            /*accumulate=*/!fresh);
}

CausalSelfAttention::CausalSelfAttention(ParameterStore& ps, const std::string& prefix, int64_t width, int64_t heads,
                                         float std, float proj_std)
    : heads_(heads) {
  qkv_ = Linear(ps, prefix + ".qkv", width, 3 * width, true, Init::Normal(std), Init::Zeros());
  proj_ = Linear(ps, prefix + ".proj", width, width, true, Init::Normal(proj_std), Init::Zeros());
}

Variable CausalSelfAttention::Forward(Tape& tape, const Variable& x) const {
  Variable qkv = qkv_.Forward(tape, x);
  Variable y = AttentionForward(tape, qkv, heads_);
  return proj_.Forward(tape, y);
}

Variable CausalSelfAttention::ForwardResidual(Tape& tape, const Variable& x, const Variable& res) const {
  Variable qkv = qkv_.Forward(tape, x);
  Variable y = AttentionForward(tape, qkv, heads_);
  return proj_.ForwardResidual(tape, y, res);
}

}  // namespace lockstep::nn
