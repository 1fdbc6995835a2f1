#include "lockstep/optim/flat_update.h"

namespace lockstep::optim {

std::string RangeText(FlatRange r) {
  // Appended piece by piece: GCC 12's -Wrestrict misfires on "[" + std::to_string(...).
  std::string s(1, '[');
  s += std::to_string(r.begin);
  s += ", ";
  s += std::to_string(r.end);
  s += ')';
  return s;
}

}  // namespace lockstep::optim
