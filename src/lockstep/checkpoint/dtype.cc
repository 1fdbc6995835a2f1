#include "lockstep/checkpoint/dtype.h"

namespace lockstep::checkpoint {

const char* StoredDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
    case DType::kU8:
      return "U8";
  }
  return "?";
}

std::optional<DType> ParseStoredDType(std::string_view name) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kI32, DType::kI64, DType::kU8}) {
    if (name == StoredDTypeName(d)) return d;
  }
  return std::nullopt;
}

}  // namespace lockstep::checkpoint
