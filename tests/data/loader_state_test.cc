#include "lockstep/data/loader_state.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace lockstep::data {
namespace {

TEST(LoaderState, JsonRoundTripKeepsAll64SeedBits) {
  LoaderState s{3, 17, 0xfedcba9876543210ull};
  nlohmann::json j = LoaderStateToJson(s);
  EXPECT_EQ(j.dump(), R"({"batch_in_epoch":17,"epoch":3,"seed":18364758544493064720})");
  auto back = LoaderStateFromJson(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
}

TEST(LoaderState, MalformedJsonNamesTheField) {
  struct Case {
    const char* json;
    const char* field;
  } cases[] = {
      {R"({"batch_in_epoch":1,"seed":2})", "epoch"},
      {R"({"epoch":1,"seed":2})", "batch_in_epoch"},
      {R"({"epoch":1,"batch_in_epoch":2})", "seed"},
      {R"({"epoch":-1,"batch_in_epoch":2,"seed":3})", "epoch"},
      {R"({"epoch":1.5,"batch_in_epoch":2,"seed":3})", "epoch"},
      {R"({"epoch":1,"batch_in_epoch":2,"seed":-3})", "seed"},
      {R"({"epoch":1,"batch_in_epoch":"2","seed":3})", "batch_in_epoch"},
  };
  for (const Case& c : cases) {
    auto r = LoaderStateFromJson(nlohmann::json::parse(c.json));
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.status().message().find(std::string("'") + c.field + "'"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(LoaderStateFromJson(nlohmann::json::array()).ok());
}

}  // namespace
}  // namespace lockstep::data
