// The fused pool's bf16 backward (pool_blocked.h) writes what the reorder it replaces would:
// its gradient against oneDNN's own reorder of the fp32 gradient into bf16, bit for bit, for
// ordinary values, exact ties, values that round up to infinity, denormals and NaN (through
// Conv2d these vanish into the products' sums, so only a direct comparison sees them).
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "lockstep/tensor/pool_blocked.h"
#include "lockstep/tensor/precision.h"
#include "lockstep/tensor/simd_avx512.h"
#include "tensor/tensor_test_util.h"

namespace lockstep::tensor {
namespace {

TEST(PoolBlocked, Bf16GradientRoundsAsOneDnnsReorder) {
  if (!UseNativeBf16() || !internal::HasAvx512()) GTEST_SKIP() << "no native bf16 on this processor";
  const int64_t N = 2, C = 32, H = 6, W = 6, n = N * C * H * W, o = n / 4;
  std::vector<float> x = testing::RandomVector(n, 1);  // blocked [N][C/16][H][W][16]
  std::vector<float> dout = testing::RandomVector(o, 2);
  const float specials[] = {1e-39f,
                            -1e-39f,
                            1.00390625f /* a tie: 1 + 2^-8 */,
                            1.01171875f /* 1 + 3 * 2^-8 */,
                            3.4e38f,
                            -3.4e38f,
                            std::numeric_limits<float>::quiet_NaN(),
                            std::bit_cast<float>(0x7fffffffu) /* rounding would carry it to -0 */,
                            0.0f,
                            -0.0f};
  for (size_t i = 0; i < dout.size(); ++i)
    if (i % 3 == 0) dout[i] = specials[(i / 3) % std::size(specials)];
  for (float& v : x) v = std::abs(v) + 0.5f;  // every window's maximum > 0: each gradient is written somewhere
  std::vector<float> pooled(o), dx32(n);
  std::vector<int32_t> code(o);
  std::vector<uint16_t> got(n), want(n);
  internal::ReluMaxPool2x2FromBlocked(pooled.data(), code.data(), x.data(), N, C, H, W, 16);
  internal::ReluMaxPool2x2BackwardToBlocked(dx32.data(), code.data(), dout.data(), N, C, H, W, 16);
  internal::ReluMaxPool2x2BackwardToBlockedBf16(got.data(), code.data(), dout.data(), N, C, H, W);

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  const dnnl::memory::dims dims{N, C, H, W};
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::memory from({dims, dt::f32, tag::nChw16c}, eng, dx32.data()),
      to({dims, dt::bf16, tag::nChw16c}, eng, want.data());
  dnnl::reorder(from, to).execute(st, from, to);
  st.wait();
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace lockstep::tensor
