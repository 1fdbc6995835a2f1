// CPU kernels on raw pointers, llm.c style: row-major, contiguous, fp32.
// "accumulate" means += into the output gradient (the caller zeroes gradients once per
// step); "overwrite" means the output is written. Parallel loops use the calling thread's
// ComputeThreads(); with DeterministicCompute() every result is bit-identical for any
// thread count (work is split only along independent output rows, block boundaries do
// not depend on the thread count, and no reduction is split).
#pragma once

#include <cstdint>

namespace lockstep::tensor {

// C[M,N] = alpha*op(A)*op(B) + beta*C; row-major; through dnnl_sgemm (row-major API), or in
// bf16 compute precision through oneDNN's bf16 matmul on rounded operands (precision.h).
// op(A) is [M,K] (A stored [K,M] when trans_a), op(B) is [K,N] (B stored [N,K] when trans_b).
void Gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
// `batch` independent GEMMs; matrix i uses A + i*stride_a, B + i*stride_b, C + i*stride_c.
void BatchedGemm(bool trans_a, bool trans_b, int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                 const float* A, int64_t lda, int64_t stride_a, const float* B, int64_t ldb, int64_t stride_b,
                 float beta, float* C, int64_t ldc, int64_t stride_c);

// out[n,oc] = inp[n,ic] . W[oc,ic]^T + bias[oc] (bias nullable). Overwrites out.
void LinearForward(float* out, const float* inp, const float* weight, const float* bias, int64_t n, int64_t ic,
                   int64_t oc);
// out = gelu(inp . W^T + bias), the MLP's up-projection and activation in one: the product is
// written to z ([n, oc]) without the bias, and BiasGelu adds it on its pass over z; with
// keep_grad z ends as gelu'(pre-activation) for backward (MulGrad then LinearBackward).
void LinearGeluForward(float* out, float* z, const float* inp, const float* weight, const float* bias, int64_t n,
                       int64_t ic, int64_t oc, bool keep_grad);
// out = res + inp . W^T + bias (bias nullable), a residual branch's output projection and the
// residual add in one: out is seeded with res + bias rows and the product is added into it,
// so the branch's own output is never written.
void LinearResidualForward(float* out, const float* res, const float* inp, const float* weight, const float* bias,
                           int64_t n, int64_t ic, int64_t oc);
// dinp = grad * dout (MulGrad's bits; dinp may alias grad) and, when colsum is given, colsum[j]
// += sum over rows of dinp[:, j] in LinearBackward's order and bits (a bias gradient), in the
// same pass: a linear layer behind an elementwise op then needs no second read for its bias.
void MulGradColumnSum(float* dinp, const float* grad, const float* dout, float* colsum, int64_t n, int64_t c);
// dinp = dinp_beta*dinp + dout.W (dinp nullable), dweight += dout^T.inp (nullable), dbias +=
// sum_rows dout (nullable). Asking for both products in one call lets bf16 precision round
// dout once for both.
void LinearBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, const float* weight,
                    int64_t n, int64_t ic, int64_t oc, float dinp_beta = 1.0f);

// Rows of c; mean, rstd: [n] saved for backward (nullable if not needed). weight/bias nullable
// (treated as 1/0). Overwrites out.
void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                      int64_t n, int64_t c, float eps);
// All accumulate; dweight/dbias nullable (also when weight is null).
void LayerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, const float* mean, const float* rstd, int64_t n, int64_t c);

// RMSNorm over rows of c (transformers' LlamaRMSNorm, fp32): out = (inp rstd) weight with
// rstd = (mean(inp^2) + eps)^-1/2, saved per row (nullable). Backward accumulates into dinp and
// dweight (nullable).
void RmsNormForward(float* out, float* rstd, const float* inp, const float* weight, int64_t n, int64_t c, float eps);
void RmsNormBackward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                     const float* rstd, int64_t n, int64_t c);

// Rotary position embedding and grouped-query attention's head mapping, into the packed
// [rows, 3 * heads * d] layout AttentionForward reads: q [rows, heads*d] and k [rows,
// kv_heads*d] rotated (rotate_half: element i pairs with i + d/2) by cos/sin [T, d/2] of the
// row's position (row % T), query head h taking key/value head h / (heads / kv_heads); v copied
// the same way. Backward is its transpose and accumulates (dq, dk, dv nullable).
void PackRotaryQkv(float* packed, const float* q, const float* k, const float* v, const float* cos, const float* sin,
                   int64_t rows, int64_t T, int64_t heads, int64_t kv_heads, int64_t d);
void PackRotaryQkvBackward(float* dq, float* dk, float* dv, const float* dpacked, const float* cos, const float* sin,
                           int64_t rows, int64_t T, int64_t heads, int64_t kv_heads, int64_t d);

// SwiGLU's gate: out = silu(gate) up, silu(g) = g sigmoid(g). Backward accumulates (nullable).
void SwiGluForward(float* out, const float* gate, const float* up, int64_t n);
void SwiGluBackward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int64_t n);

// GELU, tanh approximation (PyTorch approximate='tanh'). out may alias inp.
void GeluForward(float* out, const float* inp, int64_t n);
// dinp (+)= gelu'(inp) * dout: accumulates, or overwrites when !accumulate.
void GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n, bool accumulate = true);
// z: [rows, cols] pre-activations without their bias; bias: [cols] or null. out = gelu(z + bias)
// and, with keep_grad, z = gelu'(z + bias) (GeluBackward's derivative, bit for bit), so backward
// is one multiply (MulGrad) and exp runs once per element for the step instead of twice. The
// bias add rides on the GELU's pass: a linear layer + GELU writes its output once.
void BiasGelu(float* out, float* z, const float* bias, int64_t rows, int64_t cols, bool keep_grad);
// dinp (+)= grad * dout, rounded as GeluBackward's (one FMA when accumulating).
void MulGrad(float* dinp, const float* grad, const float* dout, int64_t n, bool accumulate);
// out may alias inp. Backward uses the forward output (out > 0 <=> inp > 0).
void ReluForward(float* out, const float* inp, int64_t n);
void ReluBackward(float* dinp, const float* out, const float* dout, int64_t n);  // accumulate

void Add(float* out, const float* a, const float* b, int64_t n);
void AddInPlace(float* a, const float* b, int64_t n);  // a += b
void Scale(float* a, float s, int64_t n);              // a *= s
// out += s * a
void Axpy(float* out, float s, const float* a, int64_t n);
// Double accumulation in a fixed order (independent of the thread count).
double SumSquares(const float* a, int64_t n);
double Sum(const float* a, int64_t n);

// out[i,:] = table[ids[i],:]. ids must be in range (checked).
void EmbeddingForward(float* out, const int32_t* ids, const float* table, int64_t n, int64_t c);
// dtable[ids[i],:] += dout[i,:]; accumulate, deterministic (rows applied in order of i for
// each table row, whatever the thread count).
void EmbeddingBackward(float* dtable, const int32_t* ids, const float* dout, int64_t n, int64_t c);

// Causal multi-head self-attention on packed qkv [B,T,3C] (q|k|v along the last dim; head h
// uses cols h*hs..(h+1)*hs of each), out [B,T,C], att [B,H,T,T] saved softmax
// probabilities for j <= i; above the diagonal only a band of zeros next to it is written (the
// rest is never read, by AttentionBackward either: treat it as unspecified). scale = 1/sqrt(hs).
void AttentionForward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C, int64_t H);
// dqkv accumulates, or is overwritten when !accumulate (every element is written once);
// the kernel needs only a small per-thread buffer of its own.
void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int64_t B, int64_t T,
                       int64_t C, int64_t H, bool accumulate = true);

// Fused softmax + cross-entropy over rows of logits[n,v]: losses[n] (nullable); returns the
// mean loss over counted rows (double accumulation, fixed order). If dlogits != nullptr
// writes (softmax - onehot(target)) * dscale (overwrite). Targets < 0 are ignored rows
// (loss 0, grad 0, not counted in the mean); returns 0 if no row counts. dlogits may alias
// logits. `valid` (default: all v) columns take part: columns [valid, v) are vocabulary
// padding, never predicted (outside the softmax, gradient 0); targets must be < valid.
double SoftmaxCrossEntropy(float* losses, float* dlogits, const float* logits, const int32_t* targets, int64_t n,
                           int64_t v, float dscale, int64_t valid = -1);
// Row-wise softmax; out may alias inp.
void SoftmaxRows(float* out, const float* inp, int64_t rows, int64_t cols);

// 2x2 stride-2 max pooling, NCHW, H and W even. argmax [N,C,H/2,W/2]: index (y*W+x) into
// the input plane of the maximum (first one on ties; NaN propagates).
void MaxPool2x2Forward(float* out, int32_t* argmax, const float* inp, int64_t N, int64_t C, int64_t H, int64_t W);
// Backward writes every element of dinp: adds to it with accumulate, else overwrites it
// (no need to zero it first).
void MaxPool2x2Backward(float* dinp, const int32_t* argmax, const float* dout, int64_t N, int64_t C, int64_t H,
                        int64_t W, bool accumulate = true);
// Fused ReLU + pooling: out = maxpool(relu(inp)) = relu(maxpool(inp)), one pass over the
// input instead of two (the ReLU output is never materialised). argmax as above (of the
// raw input); backward gives gradient only where out > 0, matching relu'(0) = 0.
void ReluMaxPool2x2Forward(float* out, int32_t* argmax, const float* inp, int64_t N, int64_t C, int64_t H, int64_t W);
void ReluMaxPool2x2Backward(float* dinp, const int32_t* argmax, const float* out, const float* dout, int64_t N,
                            int64_t C, int64_t H, int64_t W, bool accumulate = true);

}  // namespace lockstep::tensor
