// One DType for every layer: its sizes and names, the stored names a checkpoint writes for it,
// and a tensor refusing the types it does not compute with.
#include "lockstep/core/dtype.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

TEST(DType, SizesAndNames) {
  const struct {
    DType type;
    int64_t size;
    const char* name;
  } cases[] = {{DType::kF32, 4, "f32"},
               {DType::kBF16, 2, "bf16"},
               {DType::kI32, 4, "i32"},
               {DType::kI64, 8, "i64"},
               {DType::kU8, 1, "u8"}};
  for (const auto& c : cases) {
    EXPECT_EQ(DTypeSize(c.type), c.size) << c.name;
    EXPECT_STREQ(DTypeName(c.type), c.name);
  }
  EXPECT_EQ(DTypeSize(static_cast<DType>(99)), 0);  // no element size for what is not a type
}

}  // namespace
}  // namespace lockstep
