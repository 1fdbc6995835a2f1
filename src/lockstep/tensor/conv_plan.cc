#include "lockstep/tensor/conv_plan.h"

#include <algorithm>

#include "lockstep/tensor/check.h"
#include "lockstep/tensor/dnnl_context.h"
#include "lockstep/tensor/tensor.h"

namespace lockstep::tensor::conv_detail {
namespace {

memory ScratchMem(const dnnl::primitive_desc_base& pd) {
  memory::desc d = pd.scratchpad_desc();
  return memory(d, DnnlEngine(), DnnlScratchpad(d.get_size()));
}

}  // namespace

Plan MakePlan(const Conv2dShape& s, int64_t mb, Layouts blocked, bool bf16, const Plan* lender) {
  Plan p;
  p.mb = mb;
  p.bf16 = bf16;
  const int64_t OH = s.OH(), OW = s.OW();
  p.src_plain = memory::desc(Dims4(mb, s.IC, s.H, s.W), dt::f32, tag::nchw);
  p.wei_plain = memory::desc(Dims4(s.OC, s.IC, s.KH, s.KW), dt::f32, tag::oihw);
  p.bias_plain = memory::desc({s.OC}, dt::f32, tag::x);
  p.dst_plain = memory::desc(Dims4(mb, s.OC, OH, OW), dt::f32, tag::nchw);
  auto pick = [&](bool b, const memory::desc& plain) {
    return b ? memory::desc(plain.dims(), dt::f32, tag::any) : plain;
  };
  // bf16 operands: the primitive's source and weights (forward, backward-weights), its
  // output gradient and weights (backward-data); results and bias stay fp32.
  auto in = [&](bool b, const memory::desc& plain) {
    if (!bf16) return pick(b, plain);
    return b ? memory::desc(plain.dims(), dt::bf16, tag::any)
             : memory::desc(plain.dims(), dt::bf16, plain.dims().size() == 4 ? tag::nchw : tag::x);
  };
  const memory::dims strides = {s.stride, s.stride}, pad = {s.pad, s.pad};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto& eng = DnnlEngine();
  dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                     in(blocked.fwd, p.src_plain), in(blocked.fwd, p.wei_plain), p.bias_plain,
                                     pick(blocked.fwd, p.dst_plain), strides, pad, pad);
  p.fwd_pd = dnnl::convolution_forward::primitive_desc(fd, attr, eng);
  dnnl::convolution_backward_data::desc bdd(dnnl::algorithm::convolution_direct, pick(blocked.bwd_data, p.src_plain),
                                            in(blocked.bwd_data, p.wei_plain), in(blocked.bwd_data, p.dst_plain),
                                            strides, pad, pad);
  p.bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(bdd, attr, eng, p.fwd_pd);
  dnnl::convolution_backward_weights::desc bwd(
      dnnl::algorithm::convolution_direct, in(blocked.bwd_weights, p.src_plain), pick(blocked.bwd_weights, p.wei_plain),
      p.bias_plain, in(blocked.bwd_weights, p.dst_plain), strides, pad, pad);
  p.bwd_w_pd = dnnl::convolution_backward_weights::primitive_desc(bwd, attr, eng, p.fwd_pd);
  p.fwd = dnnl::convolution_forward(p.fwd_pd);
  p.bwd_data = dnnl::convolution_backward_data(p.bwd_data_pd);
  p.bwd_w = dnnl::convolution_backward_weights(p.bwd_w_pd);
  // A plan's buffers live only within one call: the forward's; or the backward's, which takes
  // the weight gradient before the data gradient (RunBackwardWeights then RunBackwardData), so
  // the source reordered for the first is dead when the second writes its input gradient. So
  // buffers of one role (source-shaped, output-shaped) with equal layouts are one buffer: the
  // output gradient's reorder and the forward's blocked output share memory, and so on. For the
  // same reason two plans used by one thread in turn may share buffers role by role (a lender's
  // buffer of the role, large enough, each lent once).
  std::vector<memory> roles[3];
  std::vector<bool> lent(lender ? lender->storage.size() : 0, false);
  auto own = [&](const memory::desc& d, const memory::desc& plain, int role) {
    if (d == plain) return memory();
    for (const memory& m : roles[role])
      if (m.get_desc() == d) return m;
    const size_t bytes = d.get_size();
    std::shared_ptr<Storage> storage;
    for (size_t i = 0; i < lent.size() && storage == nullptr; ++i)
      if (!lent[i] && lender->storage_role[i] == role && lender->storage[i]->bytes() >= bytes) {
        lent[i] = true;
        storage = lender->storage[i];
      }
    if (storage == nullptr) storage = Storage::Allocate(bytes, MemoryTag::kWorkspace);
    if (storage == nullptr) ExitIfLimitExceeded(bytes, MemoryTag::kWorkspace, "a convolution's blocked operand");
    LS_CHECK(storage != nullptr) << "cannot allocate " << bytes << " bytes for a convolution's blocked operand";
    p.storage.push_back(storage);
    p.storage_role.push_back(role);
    roles[role].emplace_back(d, eng, storage->data());
    return roles[role].back();
  };
  constexpr int kSrc = 0, kDst = 1, kWei = 2;
  p.fwd_src = own(p.fwd_pd.src_desc(), p.src_plain, kSrc);
  p.fwd_wei = own(p.fwd_pd.weights_desc(), p.wei_plain, kWei);
  p.fwd_dst = own(p.fwd_pd.dst_desc(), p.dst_plain, kDst);
  p.bd_dst = own(p.bwd_data_pd.diff_dst_desc(), p.dst_plain, kDst);
  p.bd_wei = own(p.bwd_data_pd.weights_desc(), p.wei_plain, kWei);
  p.bd_src = own(p.bwd_data_pd.diff_src_desc(), p.src_plain, kSrc);
  p.bw_src = own(p.bwd_w_pd.src_desc(), p.src_plain, kSrc);
  p.bw_dst = own(p.bwd_w_pd.diff_dst_desc(), p.dst_plain, kDst);
  p.bw_wei = own(p.bwd_w_pd.diff_weights_desc(), p.wei_plain, kWei);
  LS_CHECK(p.bwd_w_pd.diff_bias_desc() == p.bias_plain) << "oneDNN chose a blocked bias layout";
  return p;
}

memory Input(memory owned, const memory::desc& plain, const void* ptr, bool concurrent) {
  memory user(plain, DnnlEngine(), const_cast<void*>(ptr));
  if (!owned) return user;
  if (concurrent) owned = memory(owned.get_desc(), DnnlEngine());  // this call's own buffer
  dnnl::reorder(user, owned).execute(DnnlStream(), user, owned);
  return owned;
}

memory Output(const memory& owned, const memory::desc& plain, void* ptr) {
  return owned ? owned : memory(plain, DnnlEngine(), ptr);
}

void Finish(memory owned, const memory::desc& plain, void* ptr) {
  if (!owned) return;
  memory user(plain, DnnlEngine(), ptr);
  dnnl::reorder(owned, user).execute(DnnlStream(), owned, user);
}

void RunForward(Plan& p, float* out, const float* inp, const float* w, const float* b, bool keep_blocked) {
  auto& st = DnnlStream();
  memory src = Input(p.fwd_src, p.src_plain, inp, p.concurrent);
  memory wei = Input(p.fwd_wei, p.wei_plain, w, p.concurrent);
  memory dst = Output(p.fwd_dst, p.dst_plain, out);
  std::vector<float> zero_bias;
  if (b == nullptr) {
    zero_bias.assign(p.bias_plain.get_size() / sizeof(float), 0.0f);
    b = zero_bias.data();
  }
  memory bias(p.bias_plain, DnnlEngine(), const_cast<float*>(b));
  p.fwd.execute(st, {{DNNL_ARG_SRC, src},
                     {DNNL_ARG_WEIGHTS, wei},
                     {DNNL_ARG_BIAS, bias},
                     {DNNL_ARG_DST, dst},
                     {DNNL_ARG_SCRATCHPAD, ScratchMem(p.fwd_pd)}});
  if (!keep_blocked) Finish(p.fwd_dst, p.dst_plain, out);
  st.wait();
}

void RunBackwardData(Plan& p, float* dinp, const float* dout, const float* w, const memory* ddst_ready) {
  auto& st = DnnlStream();
  memory ddst = ddst_ready ? *ddst_ready : Input(p.bd_dst, p.dst_plain, dout, p.concurrent);
  memory wei = Input(p.bd_wei, p.wei_plain, w, p.concurrent);
  memory dsrc = Output(p.bd_src, p.src_plain, dinp);
  p.bwd_data.execute(st, {{DNNL_ARG_DIFF_DST, ddst},
                          {DNNL_ARG_WEIGHTS, wei},
                          {DNNL_ARG_DIFF_SRC, dsrc},
                          {DNNL_ARG_SCRATCHPAD, ScratchMem(p.bwd_data_pd)}});
  Finish(p.bd_src, p.src_plain, dinp);
  st.wait();
}

memory RunBackwardWeights(Plan& p, float* dw_out, float* db_out, const float* dout, const float* inp,
                          const memory* ddst_ready) {
  auto& st = DnnlStream();
  memory src = Input(p.bw_src, p.src_plain, inp, p.concurrent);
  memory ddst = ddst_ready ? *ddst_ready : Input(p.bw_dst, p.dst_plain, dout, p.concurrent);
  memory dwei = Output(p.bw_wei, p.wei_plain, dw_out);
  memory dbias(p.bias_plain, DnnlEngine(), db_out);
  p.bwd_w.execute(st, {{DNNL_ARG_SRC, src},
                       {DNNL_ARG_DIFF_DST, ddst},
                       {DNNL_ARG_DIFF_WEIGHTS, dwei},
                       {DNNL_ARG_DIFF_BIAS, dbias},
                       {DNNL_ARG_SCRATCHPAD, ScratchMem(p.bwd_w_pd)}});
  Finish(p.bw_wei, p.wei_plain, dw_out);
  st.wait();
  return ddst;
}

int ActivationBlock(const memory& m, const memory::desc& plain, dt type) {
  if (!m) return 0;
  const memory::desc d = m.get_desc();
  if (d == memory::desc(plain.dims(), type, tag::nChw16c)) return 16;
  if (d == memory::desc(plain.dims(), type, tag::nChw8c)) return 8;
  return 0;
}

int64_t DeterministicChunk(int64_t n) {
  for (int64_t c = std::min<int64_t>(n, 16); c > 1; --c)
    if (n % c == 0) return c;
  return 1;
}

}  // namespace lockstep::tensor::conv_detail
