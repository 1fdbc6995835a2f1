#include "lockstep/comm/call_desc.h"

#include <cstdio>

namespace lockstep::comm {

bool IsReduction(OpKind kind) {
  return kind == OpKind::kAllreduce || kind == OpKind::kReduceScatter || kind == OpKind::kReduce;
}

bool SameCall(const CallDesc& a, const CallDesc& b) {
  if (a.kind != b.kind || a.count != b.count || a.dtype != b.dtype || a.root != b.root || a.aux != b.aux) {
    return false;
  }
  return !IsReduction(a.kind) || a.op == b.op;
}

std::string Describe(const CallDesc& d) {
  std::string s = OpKindName(d.kind);
  if (d.kind == OpKind::kBarrier || d.kind == OpKind::kSplit) return s + "()";
  s += "(count=" + std::to_string(d.count) + ", " + DTypeName(d.dtype);
  if (IsReduction(d.kind)) s += std::string(", ") + ReduceOpName(d.op);
  if (d.kind == OpKind::kBroadcast || d.kind == OpKind::kReduce) {
    s += ", root=" + std::to_string(d.root);
  }
  if (d.kind == OpKind::kSend || d.kind == OpKind::kRecv) {
    s += ", peer=" + std::to_string(d.root) + ", tag=" + std::to_string(d.aux);
  }
  if (d.kind == OpKind::kDeterministicAllreduce) {
    s += ", contributions=" + std::to_string(d.aux);
  }
  if (d.algorithm != Algorithm::kAuto) s += std::string(", algo=") + AlgorithmName(d.algorithm);
  return s + ")";
}

std::string DesyncMessage(uint64_t seq, const std::vector<CallDesc>& calls) {
  std::string s = "collective #" + std::to_string(seq) + " desync: ";
  for (size_t r = 0; r < calls.size(); ++r) {
    if (r > 0) s += ", ";
    s += "rank " + std::to_string(r) + " called " + Describe(calls[r]);
  }
  return s;
}

namespace {

std::string Seconds(std::chrono::nanoseconds waited) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f s", std::chrono::duration<double>(waited).count());
  return buf;
}

}  // namespace

std::string TimeoutMessage(int rank, const CallDesc& d, uint64_t seq, std::chrono::nanoseconds waited,
                           const std::vector<int>& missing) {
  std::string s = "rank " + std::to_string(rank) + ": collective " + OpKindName(d.kind) + " #" + std::to_string(seq) +
                  " (count=" + std::to_string(d.count) + ", dtype=" + DTypeName(d.dtype) + ") timed out after " +
                  Seconds(waited) + " waiting for ";
  if (missing.empty()) return s + "peers";
  s += "rank(s) ";
  for (size_t i = 0; i < missing.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(missing[i]);
  }
  return s;
}

std::string P2PTimeoutMessage(int rank, const CallDesc& d, std::chrono::nanoseconds waited) {
  return "rank " + std::to_string(rank) + ": " + OpKindName(d.kind) +
         (d.kind == OpKind::kRecv ? " from rank " : " to rank ") + std::to_string(d.root) +
         " (tag=" + std::to_string(d.aux) + ", count=" + std::to_string(d.count) + ", dtype=" + DTypeName(d.dtype) +
         ") timed out after " + Seconds(waited);
}

Status ValidateCall(const CallDesc& d, int rank, int size, const void* send, const void* recv) {
  auto fail = [&](const std::string& what) {
    return Status::InvalidArgument("rank " + std::to_string(rank) + ": " + Describe(d) + ": " + what);
  };
  if (IsReduction(d.kind) && d.dtype == DType::kU8) {
    return fail("dtype bytes cannot be reduced (only moved); use i32/i64/f32/bf16");
  }
  if (d.kind == OpKind::kDeterministicAllreduce && d.dtype != DType::kF32) {
    return fail("deterministic allreduce is f32 only");
  }
  if (d.count > (uint64_t{1} << 46)) return fail("count is implausibly large");
  const bool has_root = d.kind == OpKind::kBroadcast || d.kind == OpKind::kReduce;
  const bool has_peer = d.kind == OpKind::kSend || d.kind == OpKind::kRecv;
  if ((has_root || has_peer) && (d.root < 0 || d.root >= size)) {
    return fail(std::string(has_root ? "root" : "peer") + " must be in [0, " + std::to_string(size) + ")");
  }
  const bool moves_data = d.count > 0 && d.kind != OpKind::kBarrier && d.kind != OpKind::kSplit;
  if (moves_data) {
    const bool needs_send = d.kind != OpKind::kRecv && d.kind != OpKind::kBroadcast;
    const bool needs_recv = d.kind != OpKind::kSend && !(d.kind == OpKind::kReduce && rank != d.root);
    if (needs_send && send == nullptr) return fail("send buffer is null");
    if (needs_recv && recv == nullptr) return fail("recv buffer is null");
  }
  if (d.kind == OpKind::kDeterministicAllreduce) {
    Status s = ValidateDeterministicContributions(d.aux, size);
    if (!s.ok()) return fail(s.message());
  }
  return Status::Ok();
}

}  // namespace lockstep::comm
