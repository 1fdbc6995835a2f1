#include "lockstep/tensor/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "lockstep/core/bf16.h"
#include "tensor/tensor_test_util.h"

namespace lockstep::tensor {
namespace {

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

TEST(Tensor, UndefinedByDefault) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.ToString(), "Tensor(undefined)");
}

TEST(Tensor, EmptyZerosFullShapeAndStrides) {
  Tensor t = Tensor::Zeros({2, 3, 4});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.ndim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_EQ(t.dim(0), 2);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.dtype(), DType::kF32);
  EXPECT_EQ(t.tag(), MemoryTag::kActivation);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data<float>()) % 64, 0u);
  for (float x : t.ToVector()) EXPECT_EQ(x, 0.0f);
  Tensor f = Tensor::Full({3}, 2.5f);
  EXPECT_EQ(f.ToVector(), (std::vector<float>{2.5f, 2.5f, 2.5f}));
  Tensor s = Tensor::Zeros({});  // scalar
  EXPECT_EQ(s.numel(), 1);
}

TEST(Tensor, ViewSharesStorageAndInfersMinusOne) {
  Tensor t = Tensor::FromVector({2, 6}, Iota(12));
  Tensor v = t.View({3, -1});
  EXPECT_EQ(v.shape(), (Shape{3, 4}));
  EXPECT_EQ(v.storage(), t.storage());
  v.data<float>()[5] = 100.0f;
  EXPECT_EQ(t.ToVector()[5], 100.0f);
}

TEST(Tensor, SliceIsStridedViewAndCopiesCorrectly) {
  Tensor t = Tensor::FromVector({3, 4}, Iota(12));
  Tensor cols = t.Slice(1, 1, 3);  // [[1,2],[5,6],[9,10]]
  EXPECT_EQ(cols.shape(), (Shape{3, 2}));
  EXPECT_EQ(cols.offset(), 1);
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_EQ(cols.ToVector(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  Tensor rows = t.Slice(0, 1, 3);
  EXPECT_TRUE(rows.is_contiguous());
  EXPECT_EQ(rows.data<float>()[0], 4.0f);
  Tensor c = cols.Contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_NE(c.storage(), t.storage());
  EXPECT_EQ(c.ToVector(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  EXPECT_EQ(rows.Contiguous().storage(), t.storage());  // already contiguous: no copy
  // Writing through a strided view: Fill and CopyFrom.
  cols.Fill(-1.0f);
  EXPECT_EQ(t.ToVector(), (std::vector<float>{0, -1, -1, 3, 4, -1, -1, 7, 8, -1, -1, 11}));
  cols.CopyFrom(Tensor::FromVector({3, 2}, {10, 20, 30, 40, 50, 60}));
  EXPECT_EQ(t.ToVector(), (std::vector<float>{0, 10, 20, 3, 4, 30, 40, 7, 8, 50, 60, 11}));
  // Slice of a slice.
  EXPECT_EQ(cols.Slice(0, 1, 2).ToVector(), (std::vector<float>{30, 40}));
}

TEST(Tensor, TransposeAndCopyBetweenShapes) {
  Tensor t = Tensor::FromVector({2, 3}, Iota(6));
  Tensor tt = t.Transpose(0, 1);
  EXPECT_EQ(tt.shape(), (Shape{3, 2}));
  EXPECT_EQ(tt.ToVector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor flat = Tensor::Zeros({6});
  flat.CopyFrom(tt);  // same numel, different shape: row-major order of the source
  EXPECT_EQ(flat.ToVector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Tensor, CloneIsDeepAndKeepsTag) {
  Tensor t = Tensor::FromVector({2, 2}, {1, 2, 3, 4}, MemoryTag::kParameter);
  Tensor c = t.Clone();
  EXPECT_NE(c.storage(), t.storage());
  EXPECT_EQ(c.tag(), MemoryTag::kParameter);
  c.data<float>()[0] = 9;
  EXPECT_EQ(t.ToVector()[0], 1.0f);
  Tensor handle = t;  // handle copy shares
  handle.data<float>()[1] = 7;
  EXPECT_EQ(t.ToVector()[1], 7.0f);
}

TEST(Tensor, FlatBufferWithPerParameterViews) {
  // Parameters live in one flat buffer; each parameter is a view at an offset.
  auto flat = Storage::Allocate((6 + 3) * sizeof(float), MemoryTag::kParameter);
  ASSERT_NE(flat, nullptr);
  Tensor w = Tensor::FromStorage(flat, 0, {2, 3});
  Tensor b = Tensor::FromStorage(flat, 6, {3});
  w.CopyFrom(Tensor::FromVector({2, 3}, Iota(6)));
  b.Fill(5.0f);
  const float* all = static_cast<const float*>(flat->data());
  EXPECT_EQ(std::vector<float>(all, all + 9), (std::vector<float>{0, 1, 2, 3, 4, 5, 5, 5, 5}));
  EXPECT_EQ(b.offset(), 6);
  EXPECT_EQ(b.data<float>(), all + 6);
  EXPECT_EQ(flat->tag(), MemoryTag::kParameter);
  EXPECT_EQ(flat->bytes(), 36u);
}

TEST(Tensor, Int32Tensors) {
  Tensor ids = Tensor::FromVectorI32({3}, {4, -1, 7});
  EXPECT_EQ(ids.dtype(), DType::kI32);
  EXPECT_EQ(ids.data<int32_t>()[2], 7);
  EXPECT_EQ(ids.ToVectorI32(), (std::vector<int32_t>{4, -1, 7}));
  EXPECT_EQ(ids.ToVector(), (std::vector<float>{4, -1, 7}));
}

// The array conversion (16 lanes where the processor has AVX-512, else 8) gives every element
// the scalar form's bits: ties, NaNs (quieted, never carried to inf), infinities, denormals
// (kept, not flushed), in full vectors and in the tail.
TEST(Tensor, BF16ArrayConversionEqualsTheScalarOneOnEveryKindOfValue) {
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00008000u, 0x00018000u,
                                0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7f800001u,
                                0xffc00001u, 0x7fffffffu, 0x3f800000u, 0xc0600000u, 0x3f7fffffu};
  Rng rng(3, 0);
  while (bits.size() < 16 * 5 + 7) bits.push_back(rng.NextU32());
  std::vector<float> in(bits.size());
  std::memcpy(in.data(), bits.data(), bits.size() * 4);
  std::vector<uint16_t> out(in.size());
  for (size_t n : {in.size(), size_t{16}, size_t{7}}) {
    F32ToBf16(in.data(), out.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], F32ToBf16(in[i])) << "element " << i << " of " << n;
  }
}

TEST(Tensor, BF16RoundTripAndRounding) {
  // Exactly representable values survive; others round to nearest even.
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f)), 1.0f);
  EXPECT_EQ(Bf16ToF32(F32ToBf16(-3.5f)), -3.5f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even -> 1.
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  // 1 + 3*2^-8 is halfway between 1+2^-7 and 1+2^-6: ties to even -> 1 + 2^-6.
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  // Just above the halfway point rounds up.
  EXPECT_EQ(Bf16ToF32(F32ToBf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f))), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(Bf16ToF32(F32ToBf16(std::numeric_limits<float>::infinity()))));

  auto v = testing::RandomVector(1003, 1, 10.0f);
  Tensor t = Tensor::FromVector({1003}, v);
  Tensor h = t.ToBF16();
  EXPECT_EQ(h.dtype(), DType::kBF16);
  EXPECT_EQ(h.nbytes(), 1003u * 2);
  std::vector<float> back = h.ToF32().ToVector();
  for (size_t i = 0; i < v.size(); ++i) {
    // Vector path equals scalar path, and the relative error is within half a bf16 ulp (2^-8).
    ASSERT_EQ(back[i], Bf16ToF32(F32ToBf16(v[i]))) << i;
    ASSERT_LE(std::abs(back[i] - v[i]), std::abs(v[i]) * std::ldexp(1.0, -8)) << i;
  }
  // bf16 -> f32 -> bf16 is the identity.
  Tensor h2 = h.ToF32().ToBF16();
  EXPECT_EQ(std::memcmp(h.raw(), h2.raw(), h.nbytes()), 0);
}

TEST(TensorDeathTest, MisuseAborts) {
  Tensor t = Tensor::Zeros({2, 3});
  EXPECT_DEATH(t.View({4, 2}), "View");
  EXPECT_DEATH(t.Slice(1, 2, 5), "Slice");
  EXPECT_DEATH(t.data<int32_t>(), "data<i32>");
  EXPECT_DEATH(t.Slice(1, 0, 2).View({4}), "non-contiguous");
  EXPECT_DEATH(t.CopyFrom(Tensor::Zeros({5})), "CopyFrom");
  EXPECT_DEATH(t.dim(2), "dim");
}

// Tensors compute with f32, bf16 and i32; the wider DType of comm/ and checkpoint/ is refused
// at creation, with its name.
TEST(Tensor, RefusesTypesItDoesNotComputeWith) {
  for (DType t : {DType::kI64, DType::kU8}) {
    Result<Tensor> r = Tensor::TryEmpty({2}, t);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(DTypeName(t)), std::string::npos) << r.status().message();
  }
  EXPECT_TRUE(Tensor::TryEmpty({2}, DType::kI32).ok());
}

}  // namespace
}  // namespace lockstep::tensor
