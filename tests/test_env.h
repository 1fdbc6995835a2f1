// Tests that need something of the machine beyond the build (network namespaces, chromium,
// a Debian dataset) skip where it is missing, so a newcomer's `ctest` still runs. In CI
// (.ci/run sets LOCKSTEP_CI=1) nothing may be missing: a skip there would hide a feature that
// was never tested, so it fails instead.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace lockstep::testing {

inline bool InCi() {
  const char* ci = std::getenv("LOCKSTEP_CI");
  return ci != nullptr && std::strcmp(ci, "1") == 0;
}

}  // namespace lockstep::testing

// Skips the test with `message`, or fails it under LOCKSTEP_CI=1. Returns from the test body.
#define LOCKSTEP_SKIP_OUTSIDE_CI(message)                                                                     \
  do {                                                                                                        \
    if (::lockstep::testing::InCi()) FAIL() << "LOCKSTEP_CI=1 and a test needs what is missing: " << message; \
    GTEST_SKIP() << message;                                                                                  \
  } while (0)
