// ExactSquareSum: the sum of squares of fp32 values computed EXACTLY, as a wide fixed-point
// integer, so the global gradient norm has the same bits however the gradient is cut up.
//
// Why exact: under tensor parallelism a rank holds column blocks of some matrices, under
// pipeline parallelism only some layers, under ZeRO-2/3 an arbitrary range of the flat
// buffer. Any floating-point sum over those pieces depends on how they were cut; an exact
// sum does not. The square of a float is M^2 * 2^(2E-300) with M < 2^24, so it is an integer
// multiple of 2^-298 below 2^(2*127+48); every square is added into 32-bit digits of a
// 640-bit accumulator (held in uint64 words so carries can wait). Partial sums of different
// ranks merge by integer addition, which is associative: an allreduce (i64 sum) of ToWords()
// over the ranks gives every rank the exact total, whatever the partition.
//
// Cost: one bit-manipulation and three integer adds per element (about 1 ns); a large Add
// runs on the OpenMP compute threads (one partial sum each, merged exactly). Not thread-safe
// to share between callers; a plain value.
#pragma once

#include <array>
#include <cstdint>

namespace lockstep::optim {

class ExactSquareSum {
 public:
  static constexpr int kDigits = 20;          // 32-bit digits; digit i weighs 2^(32*i - 298)
  static constexpr int kWords = kDigits + 2;  // ToWords(): digits, then #inf, #nan

  // Adds x[i]^2 for i < n. Infinities and NaNs are counted, not added.
  void Add(const float* x, int64_t n);
  // Adds another partial sum.
  void Merge(const ExactSquareSum& other);

  // kWords int64 values, each digit in [0, 2^32): summing the words of several partial sums
  // elementwise (an i64 allreduce; fine for up to 2^31 ranks) and reading the result back
  // with FromWords gives the exact sum of all of them.
  void ToWords(int64_t* out) const;
  static ExactSquareSum FromWords(const int64_t* words);

  // The sum rounded to double by a fixed procedure (a pure function of the exact value):
  // NaN if a NaN was added, +inf if an infinity was, else the finite sum.
  double Value() const;

 private:
  void AddSerial(const float* x, int64_t n);  // Add on the calling thread
  void Normalize();

  std::array<uint64_t, kDigits> digits_{};
  int64_t infs_ = 0, nans_ = 0;
};

}  // namespace lockstep::optim
