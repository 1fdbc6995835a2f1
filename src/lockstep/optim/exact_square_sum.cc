#include "lockstep/optim/exact_square_sum.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace lockstep::optim {
namespace {

// Digits take at most 2^31 additions of values below 2^32 before a Normalize().
constexpr int64_t kChunk = int64_t{1} << 30;

}  // namespace

void ExactSquareSum::Normalize() {
  uint64_t carry = 0;
  for (uint64_t& d : digits_) {
    const uint64_t t = d + carry;  // d < 2^63 and carry < 2^32: no overflow
    d = t & 0xffffffffu;
    carry = t >> 32;
  }
  // The top digits stay zero for any realistic count (2^74 squares of FLT_MAX would be needed).
}

void ExactSquareSum::Add(const float* x, int64_t n) {
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t end = std::min(n, start + kChunk);
    for (int64_t i = start; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &x[i], sizeof bits);
      const uint32_t exp = (bits >> 23) & 0xffu;
      uint64_t mant = bits & 0x7fffffu;
      if (exp == 0xffu) {
        (mant != 0 ? nans_ : infs_) += 1;
        continue;
      }
      if (exp == 0 && mant == 0) continue;  // +-0
      // value = M * 2^(e - 150) with e = max(exp, 1) (subnormals have no implicit bit), so the
      // square is M^2 * 2^(2e - 300) = M^2 << (2e - 2) in units of 2^-298.
      uint32_t e = exp;
      if (exp == 0)
        e = 1;
      else
        mant |= 0x800000u;
      const uint32_t shift = 2 * e - 2;
      const unsigned __int128 v = static_cast<unsigned __int128>(mant * mant) << (shift & 31u);
      const uint32_t d = shift >> 5;
      digits_[d] += static_cast<uint32_t>(v);
      digits_[d + 1] += static_cast<uint32_t>(v >> 32);
      digits_[d + 2] += static_cast<uint32_t>(v >> 64);
    }
    Normalize();
  }
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
