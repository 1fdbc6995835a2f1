#include "comm/comm_test_util.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "lockstep/comm/reduce_kernels.h"
#include "lockstep/core/log.h"

namespace lockstep::comm::testing {

namespace {

// A failing rank must not leave the others waiting for the 300 s production default.
const bool kTestTimeoutInstalled = [] {
  if (std::getenv("LOCKSTEP_COLLECTIVE_TIMEOUT_S") == nullptr) {
    SetDefaultTimeout(std::chrono::seconds(30));
  }
  return true;
}();

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t Hash(int rank, uint64_t index, uint64_t salt) {
  return SplitMix64(SplitMix64(salt * 1000003ull + static_cast<uint64_t>(rank)) ^ index);
}

// The integer value element `index` of `rank` has for dtype (i64 spreads into high bits).
int64_t IntValue(DType dtype, int rank, uint64_t index, uint64_t salt) {
  int64_t v = TestValue(rank, index, salt);
  return dtype == DType::kI64 ? v * ((int64_t{1} << 34) + 1) : v;
}

void Store(DType dtype, void* buf, size_t i, int64_t v) {
  switch (dtype) {
    case DType::kF32:
      static_cast<float*>(buf)[i] = static_cast<float>(v);
      break;
    case DType::kBF16:
      static_cast<uint16_t*>(buf)[i] = F32ToBf16(static_cast<float>(v));
      break;
    case DType::kI32:
      static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v);
      break;
    case DType::kI64:
      static_cast<int64_t*>(buf)[i] = v;
      break;
    case DType::kU8:
      static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v);
      break;
  }
}

std::string ElementString(DType dtype, const void* buf, size_t i) {
  switch (dtype) {
    case DType::kF32:
      return std::to_string(static_cast<const float*>(buf)[i]);
    case DType::kBF16:
      return std::to_string(Bf16ToF32(static_cast<const uint16_t*>(buf)[i])) + " (bf16)";
    case DType::kI32:
      return std::to_string(static_cast<const int32_t*>(buf)[i]);
    case DType::kI64:
      return std::to_string(static_cast<const int64_t*>(buf)[i]);
    case DType::kU8:
      return std::to_string(static_cast<const uint8_t*>(buf)[i]);
  }
  return "?";
}

}  // namespace

void RunRanks(int world_size, const std::function<void(Communicator& comm)>& fn, const ThreadsWorldOptions& options) {
  (void)kTestTimeoutInstalled;
  ThreadsWorld world(world_size, options);
  std::vector<std::exception_ptr> errors(world_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      log::SetThreadPrefix("[rank " + std::to_string(r) + "] ");
      try {
        fn(*world.Rank(r));
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

int64_t TestValue(int rank, uint64_t index, uint64_t salt) {
  return static_cast<int64_t>((Hash(rank, index, salt) >> 32) % 32) - 16;
}

void FillTestValues(DType dtype, void* buf, size_t count, int rank, uint64_t index_base, uint64_t salt) {
  for (size_t i = 0; i < count; ++i) {
    if (dtype == DType::kU8) {
      static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(Hash(rank, index_base + i, salt));
    } else {
      Store(dtype, buf, i, IntValue(dtype, rank, index_base + i, salt));
    }
  }
}

void ExpectedReduction(DType dtype, ReduceOp op, int world_size, size_t count, uint64_t index_base, uint64_t salt,
                       void* out) {
  for (size_t i = 0; i < count; ++i) {
    int64_t sum = 0, mx = INT64_MIN, mn = INT64_MAX;
    for (int r = 0; r < world_size; ++r) {
      int64_t v = IntValue(dtype, r, index_base + i, salt);
      sum += v;
      mx = std::max(mx, v);
      mn = std::min(mn, v);
    }
    int64_t v = op == ReduceOp::kMax ? mx : op == ReduceOp::kMin ? mn : sum;
    if (op == ReduceOp::kAvg && (dtype == DType::kF32 || dtype == DType::kBF16)) {
      float avg = static_cast<float>(sum) / static_cast<float>(world_size);
      if (dtype == DType::kF32) {
        static_cast<float*>(out)[i] = avg;
      } else {
        static_cast<uint16_t*>(out)[i] = F32ToBf16(avg);
      }
      continue;
    }
    if (op == ReduceOp::kAvg) v = sum / world_size;
    Store(dtype, out, i, v);
  }
}

size_t CountMismatches(DType dtype, const void* got, const void* want, size_t count) {
  const size_t es = DTypeSize(dtype);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(static_cast<const char*>(got) + i * es, static_cast<const char*>(want) + i * es, es) != 0) {
      ++wrong;
    }
  }
  return wrong;
}

std::string DescribeMismatch(DType dtype, const void* got, const void* want, size_t count) {
  const size_t es = DTypeSize(dtype);
  size_t wrong = CountMismatches(dtype, got, want, count);
  if (wrong == 0) return "";
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(static_cast<const char*>(got) + i * es, static_cast<const char*>(want) + i * es, es) != 0) {
      return "element " + std::to_string(i) + ": got " + ElementString(dtype, got, i) + ", want " +
             ElementString(dtype, want, i) +
             (wrong > 1 ? " (and " + std::to_string(wrong - 1) + " more mismatches)" : "");
    }
  }
  return "";
}

std::vector<unsigned char> PoisonedBuffer(DType dtype, size_t count) {
  return std::vector<unsigned char>(count * DTypeSize(dtype), 0xA5);
}

}  // namespace lockstep::comm::testing
