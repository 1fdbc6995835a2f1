#include "nn/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lockstep::nn::ref {

Vec Linear(const Vec& x, const Vec& w, const Vec& b, int64_t n, int64_t ic, int64_t oc) {
  Vec y(n * oc);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < oc; ++o) {
      double s = b.empty() ? 0.0 : b[o];
      for (int64_t k = 0; k < ic; ++k) s += x[i * ic + k] * w[o * ic + k];
      y[i * oc + o] = s;
    }
  }
  return y;
}

Vec LayerNorm(const Vec& x, const Vec& w, const Vec& b, int64_t n, int64_t c, double eps) {
  Vec y(n * c);
  for (int64_t i = 0; i < n; ++i) {
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < c; ++j) mean += x[i * c + j];
    mean /= c;
    for (int64_t j = 0; j < c; ++j) var += (x[i * c + j] - mean) * (x[i * c + j] - mean);
    var /= c;  // biased, as PyTorch
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < c; ++j) y[i * c + j] = (x[i * c + j] - mean) * rstd * w[j] + b[j];
  }
  return y;
}

Vec Gelu(const Vec& x) {
  const double k = std::sqrt(2.0 / M_PI);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double u = x[i];
    y[i] = 0.5 * u * (1.0 + std::tanh(k * (u + 0.044715 * u * u * u)));
  }
  return y;
}

Vec Relu(const Vec& x) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] > 0 ? x[i] : 0.0;
  return y;
}

Vec Embedding(const std::vector<int32_t>& ids, const Vec& table, int64_t c) {
  Vec y(ids.size() * c);
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t j = 0; j < c; ++j) y[i * c + j] = table[ids[i] * c + j];
  }
  return y;
}

Vec Attention(const Vec& qkv, int64_t B, int64_t T, int64_t C, int64_t H) {
  const int64_t hs = C / H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  Vec y(B * T * C, 0.0);
  Vec att(T);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < T; ++i) {
        const double* q = &qkv[(b * T + i) * 3 * C + h * hs];
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          const double* k = &qkv[(b * T + j) * 3 * C + C + h * hs];
          double s = 0.0;
          for (int64_t d = 0; d < hs; ++d) s += q[d] * k[d];
          att[j] = s * scale;
          mx = std::max(mx, att[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) sum += att[j] = std::exp(att[j] - mx);
        for (int64_t j = 0; j <= i; ++j) {
          const double* v = &qkv[(b * T + j) * 3 * C + 2 * C + h * hs];
          for (int64_t d = 0; d < hs; ++d) y[(b * T + i) * C + h * hs + d] += att[j] / sum * v[d];
        }
      }
    }
  }
  return y;
}

Vec Conv2d(const Vec& x, const Vec& w, const Vec& b, int64_t N, int64_t IC, int64_t H, int64_t W, int64_t OC, int64_t K,
           int64_t pad) {
  const int64_t OH = H + 2 * pad - K + 1, OW = W + 2 * pad - K + 1;
  Vec y(N * OC * OH * OW);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < OC; ++o) {
      double* out = &y[(n * OC + o) * OH * OW];
      for (int64_t p = 0; p < OH * OW; ++p) out[p] = b.empty() ? 0.0 : b[o];
      for (int64_t c = 0; c < IC; ++c) {
        const double* in = &x[(n * IC + c) * H * W];
        for (int64_t ky = 0; ky < K; ++ky) {
          for (int64_t kx = 0; kx < K; ++kx) {
            const double wv = w[((o * IC + c) * K + ky) * K + kx];
            for (int64_t oy = 0; oy < OH; ++oy) {
              const int64_t iy = oy + ky - pad;
              if (iy < 0 || iy >= H) continue;
              // Contiguous in ox: the compiler vectorises this loop.
              const int64_t ox0 = std::max<int64_t>(0, pad - kx);
              const int64_t ox1 = std::min<int64_t>(OW, W + pad - kx);
              for (int64_t ox = ox0; ox < ox1; ++ox) {
                out[oy * OW + ox] += wv * in[iy * W + ox + kx - pad];
              }
            }
          }
        }
      }
    }
  }
  return y;
}

Vec MaxPool2x2(const Vec& x, int64_t N, int64_t C, int64_t H, int64_t W) {
  const int64_t OH = H / 2, OW = W / 2;
  Vec y(N * C * OH * OW);
  for (int64_t nc = 0; nc < N * C; ++nc) {
    for (int64_t oy = 0; oy < OH; ++oy) {
      for (int64_t ox = 0; ox < OW; ++ox) {
        const double* p = &x[nc * H * W + 2 * oy * W + 2 * ox];
        y[nc * OH * OW + oy * OW + ox] = std::max({p[0], p[1], p[W], p[W + 1]});
      }
    }
  }
  return y;
}

double CrossEntropy(const Vec& logits, const std::vector<int32_t>& targets, int64_t n, int64_t v) {
  double total = 0.0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] < 0) continue;
    const double* row = &logits[i * v];
    const double mx = *std::max_element(row, row + v);
    double sum = 0.0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(row[j] - mx);
    total += std::log(sum) + mx - row[targets[i]];
    ++count;
  }
  return count > 0 ? total / count : 0.0;
}

Vec AddVec(const Vec& a, const Vec& b) {
  Vec y(a.size());
  for (size_t i = 0; i < a.size(); ++i) y[i] = a[i] + b[i];
  return y;
}

double GptLoss(const GptConfig& c, const Params& p, const std::vector<int32_t>& tokens,
               const std::vector<int32_t>& targets, int64_t B, int64_t T) {
  const int64_t C = c.width, n = B * T, Hd = c.mlp_ratio * C;
  auto P = [&](const std::string& name) -> const Vec& { return p.at(name); };
  std::vector<int32_t> pos(n);
  for (int64_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(i % T);
  Vec x = AddVec(Embedding(tokens, P("wte.weight"), C), Embedding(pos, P("wpe.weight"), C));
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    Vec h = LayerNorm(x, P(b + "ln1.weight"), P(b + "ln1.bias"), n, C);
    Vec qkv = Linear(h, P(b + "qkv.weight"), P(b + "qkv.bias"), n, C, 3 * C);
    Vec a = Attention(qkv, B, T, C, c.heads);
    x = AddVec(x, Linear(a, P(b + "proj.weight"), P(b + "proj.bias"), n, C, C));
    Vec h2 = LayerNorm(x, P(b + "ln2.weight"), P(b + "ln2.bias"), n, C);
    Vec f = Gelu(Linear(h2, P(b + "fc.weight"), P(b + "fc.bias"), n, C, Hd));
    x = AddVec(x, Linear(f, P(b + "fc2.weight"), P(b + "fc2.bias"), n, Hd, C));
  }
  Vec hf = LayerNorm(x, P("lnf.weight"), P("lnf.bias"), n, C);
  Vec logits = Linear(hf, P("head.weight"), {}, n, C, c.vocab);
  return CrossEntropy(logits, targets, n, c.vocab);
}

double CnnLoss(const Params& p, const Vec& images, const std::vector<int32_t>& labels, int64_t N) {
  auto P = [&](const std::string& name) -> const Vec& { return p.at(name); };
  Vec a = MaxPool2x2(Relu(Conv2d(images, P("conv1.weight"), P("conv1.bias"), N, 1, 28, 28, 32, 3, 1)), N, 32, 28, 28);
  Vec b = MaxPool2x2(Relu(Conv2d(a, P("conv2.weight"), P("conv2.bias"), N, 32, 14, 14, 64, 3, 1)), N, 64, 14, 14);
  Vec logits = Linear(b, P("fc.weight"), P("fc.bias"), N, 3136, 10);
  return CrossEntropy(logits, labels, N, 10);
}

CnnStaged::CnnStaged(const Params* p, const Vec* images, const std::vector<int32_t>* labels, int64_t n)
    : p_(p), images_(images), labels_(labels), n_(n) {}

double CnnStaged::Run() {
  const Params& p = *p_;
  a1_ = Conv2d(*images_, p.at("conv1.weight"), p.at("conv1.bias"), n_, 1, 28, 28, 32, 3, 1);
  p1_ = MaxPool2x2(Relu(a1_), n_, 32, 28, 28);
  a2_ = Conv2d(p1_, p.at("conv2.weight"), p.at("conv2.bias"), n_, 32, 14, 14, 64, 3, 1);
  p2_ = MaxPool2x2(Relu(a2_), n_, 64, 14, 14);
  return Head(a2_);
}

double CnnStaged::Head(const Vec& a2) const {
  Vec b = MaxPool2x2(Relu(a2), n_, 64, 14, 14);
  return CrossEntropy(Linear(b, p_->at("fc.weight"), p_->at("fc.bias"), n_, 3136, 10), *labels_, n_, 10);
}

double CnnStaged::LossAfterFc() const {
  return CrossEntropy(Linear(p2_, p_->at("fc.weight"), p_->at("fc.bias"), n_, 3136, 10), *labels_, n_, 10);
}

double CnnStaged::LossAfterConv2Channel(int64_t o) const {
  const Vec& w = p_->at("conv2.weight");
  Vec wo(w.begin() + o * 288, w.begin() + (o + 1) * 288);
  Vec bo = {p_->at("conv2.bias")[o]};
  Vec ch = Conv2d(p1_, wo, bo, n_, 32, 14, 14, 1, 3, 1);  // [n, 1, 14, 14]
  Vec a2 = a2_;
  for (int64_t i = 0; i < n_; ++i) {
    std::copy(ch.begin() + i * 196, ch.begin() + (i + 1) * 196, a2.begin() + (i * 64 + o) * 196);
  }
  return Head(a2);
}

double CnnStaged::LossAfterConv1Channel(int64_t c) const {
  const Vec& w1 = p_->at("conv1.weight");
  Vec wc(w1.begin() + c * 9, w1.begin() + (c + 1) * 9);
  Vec bc = {p_->at("conv1.bias")[c]};
  Vec a1c = Conv2d(*images_, wc, bc, n_, 1, 28, 28, 1, 3, 1);
  Vec p1c = MaxPool2x2(Relu(a1c), n_, 1, 28, 28);  // [n, 1, 14, 14]
  Vec delta(n_ * 196);
  for (int64_t i = 0; i < n_; ++i) {
    for (int64_t j = 0; j < 196; ++j) delta[i * 196 + j] = p1c[i * 196 + j] - p1_[(i * 32 + c) * 196 + j];
  }
  // conv2 is linear in its input: add the change from input channel c alone.
  const Vec& w2 = p_->at("conv2.weight");
  Vec w2c(64 * 9);
  for (int64_t o = 0; o < 64; ++o) {
    for (int64_t k = 0; k < 9; ++k) w2c[o * 9 + k] = w2[(o * 32 + c) * 9 + k];
  }
  Vec d2 = Conv2d(delta, w2c, {}, n_, 1, 14, 14, 64, 3, 1);
  return Head(AddVec(a2_, d2));
}

Params FromStore(const ParameterStore& ps) {
  Params out;
  for (const ParamInfo& info : ps) {
    const float* v = ps.flat_params() + info.offset;
    out[info.name] = Vec(v, v + info.numel);
  }
  return out;
}

}  // namespace lockstep::nn::ref
