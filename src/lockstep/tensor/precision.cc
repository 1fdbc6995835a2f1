#include "lockstep/tensor/precision.h"

#include <dnnl.h>

#include <atomic>

namespace lockstep::tensor {
namespace {

thread_local Precision tls_precision = Precision::kF32;
std::atomic<bool> force_emulation{false};

bool Has(dnnl_cpu_isa_t isa, dnnl_cpu_isa_t want) {
  return (static_cast<unsigned>(isa) & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
}

const char* IsaName(dnnl_cpu_isa_t isa) {
  if (Has(isa, dnnl_cpu_isa_avx512_core_amx)) return "avx512_core_amx";
  if (Has(isa, dnnl_cpu_isa_avx512_core_bf16)) return "avx512_core_bf16";
  if (Has(isa, dnnl_cpu_isa_avx512_core_vnni)) return "avx512_core_vnni";
  if (Has(isa, dnnl_cpu_isa_avx512_core)) return "avx512_core";
  if (Has(isa, dnnl_cpu_isa_avx2_vnni)) return "avx2_vnni";
  if (Has(isa, dnnl_cpu_isa_avx2)) return "avx2";
  return "older than avx2";
}

}  // namespace

void SetComputePrecision(Precision p) { tls_precision = p; }
Precision ComputePrecision() { return tls_precision; }

Bf16Support QueryBf16Support() {
  static const Bf16Support support = [] {
    Bf16Support s;
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    s.isa = IsaName(isa);
    // oneDNN's bf16 kernels need avx512_core_bf16 (AVX512_BF16's vdpbf16ps) or AMX; on
    // avx512_core alone it would emulate bf16 dot products, slower than its fp32 kernels.
    s.native = Has(isa, dnnl_cpu_isa_avx512_core_bf16);
    if (!s.native) {
      s.missing = Has(isa, dnnl_cpu_isa_avx512_core) ? "AVX512_BF16 (or AMX-BF16)"
                                                     : "AVX-512 (F, BW, VL, DQ) with AVX512_BF16 (or AMX-BF16)";
    }
    return s;
  }();
  return support;
}

std::string Bf16Warning() {
  const Bf16Support s = QueryBf16Support();
  if (s.native) return "";
  return "train.precision = bf16: this processor lacks " + s.missing + " (oneDNN ISA " + s.isa +
         "); products run on fp32 kernels over bf16-rounded operands: same results, no speed-up "
         "(expect about the fp32 step time, a few percent slower for the rounding)";
}

void ForceBf16Emulation(bool on) { force_emulation.store(on, std::memory_order_relaxed); }

bool UseNativeBf16() { return QueryBf16Support().native && !force_emulation.load(std::memory_order_relaxed); }

}  // namespace lockstep::tensor
