// Test harness for comm/ (gloo's base_test.h is the model): N ranks as threads over the
// threads backend, the first failure rethrown after all ranks joined; and exact-value
// generators whose reductions are exactly representable in every dtype (f32, bf16, i32, i64),
// so results can be compared bit for bit. Backend-independent parts (values, expectations,
// comparison) are reused by the MPI tests and by `lockstep bench-comm`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lockstep/comm/communicator.h"
#include "lockstep/comm/threads/threads_world.h"

namespace lockstep::comm::testing {

// Runs fn(comm) on `world_size` threads, each with its own rank's communicator of one
// ThreadsWorld. gtest EXPECT/ASSERT failures inside fn are recorded by gtest as usual (ASSERT
// returns from fn on that rank only); an exception escaping fn on any rank is rethrown here
// after every rank finished.
void RunRanks(int world_size, const std::function<void(Communicator& comm)>& fn,
              const ThreadsWorldOptions& options = {});

// The value of element `index` on `rank`: a small integer in [-16, 15], a hash of
// (rank, index, salt). Sums over up to 8 ranks stay within [-128, 120], exact in bf16.
int64_t TestValue(int rank, uint64_t index, uint64_t salt);

// buf[i] = TestValue(rank, index_base + i, salt) as `dtype` (bytes: the low 8 bits).
void FillTestValues(DType dtype, void* buf, size_t count, int rank, uint64_t index_base, uint64_t salt);

// out[i] = the exact reduction over ranks 0..world_size-1 of
// TestValue(r, index_base + i, salt) as `dtype`, computed the way every backend must round:
// integer sum/max/min; avg = sum / world_size (f32: one rounding; bf16: f32 then RNE; ints:
// truncating).
void ExpectedReduction(DType dtype, ReduceOp op, int world_size, size_t count, uint64_t index_base, uint64_t salt,
                       void* out);

// Number of elements whose bits differ.
size_t CountMismatches(DType dtype, const void* got, const void* want, size_t count);
// "" when equal, else "element 7: got 3, want 5 (and 2 more mismatches)".
std::string DescribeMismatch(DType dtype, const void* got, const void* want, size_t count);

// A byte buffer of count elements of dtype, filled with a poison pattern (0xA5) so that
// untouched output is visible.
std::vector<unsigned char> PoisonedBuffer(DType dtype, size_t count);

}  // namespace lockstep::comm::testing
