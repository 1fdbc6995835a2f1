// The fused f32 reduction kernel against a scalar reference, bit for bit: every op, 1-5
// inputs, 1-3 outputs, streamed or not, unaligned ranges and buffers, outputs that alias an
// input (in place), and values whose max/min order matters (NaN, signed zeros, infinities).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "lockstep/comm/reduce_f32.h"
#include "lockstep/comm/reduce_kernels.h"

namespace lockstep::comm {
namespace {

// Small integers and halves (exact sums), with specials sprinkled in.
float Value(int input, size_t i) {
  const uint64_t h = (i * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(input) << 40);
  switch ((h >> 20) % 23) {
    case 0:
      return NAN;
    case 1:
      return -0.0f;
    case 2:
      return 0.0f;
    case 3:
      return INFINITY;
    case 4:
      return -INFINITY;
    default:
      return static_cast<float>(static_cast<int>((h >> 32) % 41) - 20) * 0.5f;
  }
}

// The kernel's contract written the obvious way: left to right, then one division.
float Reference(ReduceOp op, int n_inputs, size_t i, int divisor) {
  float r = Value(0, i);
  for (int p = 1; p < n_inputs; ++p) {
    const float b = Value(p, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        r = r + b;
        break;
      case ReduceOp::kMax:
        r = r > b ? r : b;
        break;
      case ReduceOp::kMin:
        r = r < b ? r : b;
        break;
    }
  }
  return op == ReduceOp::kAvg ? r / static_cast<float>(divisor) : r;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

struct Case {
  ReduceOp op;
  int n_inputs, n_outputs;
  size_t begin, end;
  size_t misalign;  // floats by which output k > 0 is shifted against output 0
  bool stream, in_place;
};

std::string Name(const Case& c) {
  return std::string(ReduceOpName(c.op)) + " in=" + std::to_string(c.n_inputs) + " out=" + std::to_string(c.n_outputs) +
         " [" + std::to_string(c.begin) + "," + std::to_string(c.end) + ") misalign=" + std::to_string(c.misalign) +
         (c.stream ? " stream" : "") + (c.in_place ? " in-place" : "");
}

void Check(const Case& c) {
  const size_t n = c.end + 40, pad = 8;
  std::vector<std::vector<float>> in(c.n_inputs, std::vector<float>(n + pad));
  for (int p = 0; p < c.n_inputs; ++p) {
    for (size_t i = 0; i < n; ++i) in[p][i] = Value(p, i);
  }
  std::vector<std::vector<float>> out(c.n_outputs, std::vector<float>(n + pad, 7.0f));
  std::vector<const void*> ins(c.n_inputs);
  std::vector<void*> outs(c.n_outputs);
  for (int p = 0; p < c.n_inputs; ++p) ins[p] = in[p].data();
  for (int k = 0; k < c.n_outputs; ++k) {
    // Index i of output k lives at out[k][i + shift]: shifted buffers cannot all be aligned.
    outs[k] = out[k].data() + (k > 0 ? c.misalign : 0);
  }
  if (c.in_place) outs[0] = in[c.n_inputs - 1].data();
  const int divisor = 3;
  ReduceF32Fused(c.op, ins.data(), c.n_inputs, outs.data(), c.n_outputs, c.begin, c.end, divisor, c.stream);
  for (int k = 0; k < c.n_outputs; ++k) {
    const float* o = static_cast<const float*>(outs[k]);
    for (size_t i = 0; i < n; ++i) {
      if (i >= c.begin && i < c.end) {
        ASSERT_EQ(Bits(o[i]), Bits(Reference(c.op, c.n_inputs, i, divisor)))
            << Name(c) << " output " << k << " element " << i;
      } else if (!(c.in_place && k == 0)) {
        ASSERT_EQ(Bits(o[i]), Bits(7.0f)) << Name(c) << " wrote outside, element " << i;
      } else {
        ASSERT_EQ(Bits(o[i]), Bits(Value(c.n_inputs - 1, i))) << Name(c) << " element " << i;
      }
    }
  }
}

TEST(ReduceF32Fused, MatchesScalarReferenceBitForBit) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    for (int n_in : {1, 2, 3, 5}) {
      for (int n_out : {1, 2, 3}) {
        for (bool stream : {false, true}) {
          for (size_t begin : {size_t{0}, size_t{3}, size_t{9}}) {
            for (size_t len : {size_t{0}, size_t{1}, size_t{31}, size_t{32}, size_t{77}, size_t{1000}}) {
              for (size_t misalign : {size_t{0}, size_t{1}, size_t{8}}) {
                Check({op, n_in, n_out, begin, begin + len, misalign, stream, false});
                if (HasFatalFailure()) return;
              }
            }
          }
          Check({op, n_in, n_out, 5, 300, 0, stream, true});
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// ReduceRange with an explicit store kind and the automatic one give the same bits.
TEST(ReduceF32Fused, StreamedAndCachedAgreeThroughReduceRange) {
  const size_t n = 5000;
  std::vector<float> a(n), b(n), x(n), y(n);
  for (size_t i = 0; i < n; ++i) a[i] = Value(0, i), b[i] = Value(1, i);
  const void* in[2] = {a.data(), b.data()};
  void* ox = x.data();
  void* oy = y.data();
  ReduceRange(DType::kF32, ReduceOp::kAvg, in, 2, &ox, 1, 0, n, 2, true);
  ReduceRange(DType::kF32, ReduceOp::kAvg, in, 2, &oy, 1, 0, n, 2);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), n * sizeof(float)), 0);
  EXPECT_FALSE(StreamOutputs(1 << 20));
  EXPECT_TRUE(StreamOutputs(size_t{64} << 20));
}

}  // namespace
}  // namespace lockstep::comm
