#include "lockstep/optim/exact_square_sum.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <omp.h>

namespace lockstep::optim {
void ExactSquareSum::Normalize() {
  uint64_t carry = 0;
  for (uint64_t& d : digits_) {
    const uint64_t t = d + carry;  // d < 2^63 and carry < 2^32: no overflow
    d = t & 0xffffffffu;
    carry = t >> 32;
  }
  // The top digits stay zero for any realistic count (2^74 squares of FLT_MAX would be needed).
}

namespace {

// Squares are summed per exponent first: a float is M * 2^(e - 150) (e = max(exp, 1); M < 2^24
// with the implicit bit for normal numbers), so its square is M^2 << (2e - 2) in units of
// 2^-298, and the squares of one exponent add up as plain integers M^2 < 2^48. A uint64 per
// exponent holds 2^16 of them; every kFlush elements the 255 sums are shifted into the digits
// once. Four tables take consecutive elements in turn: neighbouring gradient elements share
// exponents, and one table would make every add wait for the previous one's store. Per element
// this is a multiply and one add, against a 128-bit shift and three digit adds element by
// element (same digits, so the same bits: the sum is exact either way).
constexpr int64_t kFlush = int64_t{1} << 16;  // elements per flush: <= 2^16 adds per table entry
constexpr int kTables = 4;

inline void AddToTable(uint32_t bits, uint64_t* table, int64_t* infs, int64_t* nans) {
  const uint32_t exp = (bits >> 23) & 0xffu;
  const uint64_t mant = (bits & 0x7fffffu) | (exp != 0 ? 0x800000u : 0u);
  if (exp == 0xffu) [[unlikely]] {
    ((bits & 0x7fffffu) != 0 ? *nans : *infs) += 1;
    return;
  }
  table[exp] += mant * mant;  // +-0 adds 0
}

}  // namespace

void ExactSquareSum::AddSerial(const float* x, int64_t n) {
  for (int64_t start = 0; start < n; start += kFlush) {
    const int64_t end = std::min(n, start + kFlush);
    uint64_t table[kTables][256] = {};
    int64_t i = start;
    for (; i + kTables <= end; i += kTables) {
      uint32_t bits[kTables];
      std::memcpy(bits, &x[i], sizeof bits);
      for (int t = 0; t < kTables; ++t) AddToTable(bits[t], table[t], &infs_, &nans_);
    }
    for (; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &x[i], sizeof bits);
      AddToTable(bits, table[0], &infs_, &nans_);
    }
    for (uint32_t exp = 0; exp < 0xffu; ++exp) {
      for (int t = 0; t < kTables; ++t) {
        const uint64_t v = table[t][exp];
        if (v == 0) continue;
        const uint32_t shift = 2 * std::max(exp, 1u) - 2;
        const unsigned __int128 w = static_cast<unsigned __int128>(v) << (shift & 31u);  // < 2^95
        const uint32_t d = shift >> 5;
        digits_[d] += static_cast<uint32_t>(w);
        digits_[d + 1] += static_cast<uint32_t>(w >> 32);
        digits_[d + 2] += static_cast<uint32_t>(w >> 64);
      }
    }
    // digits_ < 2^32 after Normalize, plus at most 4 tables x 48 exponents of additions below
    // 2^32 each: no overflow.
    Normalize();
  }
}

void ExactSquareSum::Add(const float* x, int64_t n) {
  // Large inputs (a model's gradient) are split over the compute threads. The sum is exact,
  // so neither the split nor the merge order can change a bit.
  constexpr int64_t kPiece = int64_t{1} << 16;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads <= 1 || n < 4 * kPiece) return AddSerial(x, n);
  const int64_t pieces = (n + kPiece - 1) / kPiece;
  std::vector<ExactSquareSum> part(static_cast<size_t>(threads));
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t p = 0; p < pieces; ++p)
    part[static_cast<size_t>(omp_get_thread_num())].AddSerial(x + p * kPiece, std::min(kPiece, n - p * kPiece));
  for (const ExactSquareSum& s : part) Merge(s);
}

void ExactSquareSum::Merge(const ExactSquareSum& other) {
  for (int i = 0; i < kDigits; ++i) digits_[i] += other.digits_[i];
  infs_ += other.infs_;
  nans_ += other.nans_;
  Normalize();
}

void ExactSquareSum::ToWords(int64_t* out) const {
  ExactSquareSum n = *this;
  n.Normalize();
  for (int i = 0; i < kDigits; ++i) out[i] = static_cast<int64_t>(n.digits_[i]);
  out[kDigits] = n.infs_;
  out[kDigits + 1] = n.nans_;
}

ExactSquareSum ExactSquareSum::FromWords(const int64_t* words) {
  ExactSquareSum s;
  for (int i = 0; i < kDigits; ++i) s.digits_[i] = static_cast<uint64_t>(words[i]);
  s.infs_ = words[kDigits];
  s.nans_ = words[kDigits + 1];
  s.Normalize();
  return s;
}

double ExactSquareSum::Value() const {
  if (nans_ > 0) return std::numeric_limits<double>::quiet_NaN();
  if (infs_ > 0) return std::numeric_limits<double>::infinity();
  ExactSquareSum n = *this;
  n.Normalize();
  int top = kDigits - 1;
  while (top >= 0 && n.digits_[top] == 0) --top;
  if (top < 0) return 0.0;
  // The top four digits (128 bits) through long double (64-bit mantissa), then one rounding
  // to double: a fixed sequence of operations on the exact value, so every rank gets the same
  // bits; the relative error is below 2^-60 before the final rounding.
  const int low = std::max(0, top - 3);
  long double r = 0;
  for (int i = top; i >= low; --i) r = r * 4294967296.0L + static_cast<long double>(n.digits_[i]);
  return static_cast<double>(std::ldexp(r, 32 * low - 298));
}

}  // namespace lockstep::optim
