#include "lockstep/core/hash.h"
#include "lockstep/core/result.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Status Chain(int x, int* out) {
  LS_ASSIGN_OR_RETURN(int h, Half(x));
  LS_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(Status, OkAndErrors) {
  EXPECT_TRUE(Status().ok());
  Status s = Status::NotFound("no file");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: no file");
  EXPECT_EQ(s.WithContext("load").message(), "load: no file");
}

TEST(Result, PropagatesThroughMacros) {
  int out = 0;
  EXPECT_TRUE(Chain(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Chain(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
}

TEST(Hash, Xxh64KnownValues) {
  // xxh64 of the empty input with seed 0 (from the xxHash specification).
  EXPECT_EQ(Xxh64("", 0), 0xef46db3751d8e999ull);
  EXPECT_EQ(HexU64(0xef46db3751d8e999ull), "ef46db3751d8e999");
  Xxh64Stream st;
  st.Update("ab", 2);
  st.Update("c", 1);
  EXPECT_EQ(st.Digest(), Xxh64("abc", 3));
}

}  // namespace
}  // namespace lockstep
