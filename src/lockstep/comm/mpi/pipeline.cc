#include "lockstep/comm/mpi/pipeline.h"

#include <algorithm>
#include <climits>

#include "lockstep/comm/mpi/collectives.h"
#include "lockstep/comm/mpi/mpi_env.h"

namespace lockstep::comm::mpi_detail {
namespace {

constexpr int kTagReduceScatter = 1;
constexpr int kTagAllGather = 2;
constexpr int kTagGather = 4;
// Up to this many ranks, small reductions exchange inputs directly instead of MPI_Iallgather.
constexpr int kDirectExchangeMaxRanks = 8;

size_t NumSegments(size_t len, size_t seg) { return (len + seg - 1) / seg; }

}  // namespace

BlockLayout EvenBlocks(size_t count, int n) {
  BlockLayout b;
  const size_t base = count / static_cast<size_t>(n), extra = count % static_cast<size_t>(n);
  size_t off = 0;
  for (int p = 0; p < n; ++p) {
    size_t len = base + (static_cast<size_t>(p) < extra ? 1 : 0);
    b.off.push_back(off);
    b.len.push_back(len);
    off += len;
  }
  return b;
}

BlockLayout FixedBlocks(size_t per_rank, int n) {
  BlockLayout b;
  for (int p = 0; p < n; ++p) {
    b.off.push_back(per_rank * static_cast<size_t>(p));
    b.len.push_back(per_rank);
  }
  return b;
}

Status PipelinedReduceScatter(ExecContext& ctx, const PipelineArgs& a) {
  const int n = ctx.size(), me = ctx.rank();
  const size_t es = a.elem_size;
  const BlockLayout& bl = *a.blocks;
  const size_t seg = std::max<size_t>(1, SegmentBytes() / es);
  auto seg_len = [&](int p, size_t k) { return std::min(seg, bl.len[p] - k * seg); };
  std::vector<size_t> nseg(n);
  size_t rounds = 0;
  for (int p = 0; p < n; ++p) {
    nseg[p] = NumSegments(bl.len[p], seg);
    rounds = std::max(rounds, nseg[p]);
  }
  const auto* send = static_cast<const unsigned char*>(a.send);
  auto* reduced = static_cast<unsigned char*>(a.reduced);
  auto* gather = static_cast<unsigned char*>(a.gather_to);
  // Two buffers of one segment per peer: segment k arrives while k-1 is reduced.
  const size_t slot_bytes = seg * es * static_cast<size_t>(n > 1 ? n - 1 : 1);
  unsigned char* scratch = ctx.Scratch(2 * slot_bytes);
  auto peer_buf = [&](size_t k, int q) {  // q != me
    int idx = q < me ? q : q - 1;
    return scratch + (k & 1) * slot_bytes + static_cast<size_t>(idx) * seg * es;
  };

  std::vector<MPI_Request> cur, prev, gathers;
  auto abandon = [&] {
    for (auto* v : {&cur, &prev, &gathers}) {
      ctx.Abandon(v->data(), static_cast<int>(v->size()), RequestKind::kPointToPoint);
    }
  };
  auto fail = [&](int rc, const char* call) {
    abandon();
    return ctx.Check(rc, call);
  };
  std::vector<const void*> inputs(n);
  for (size_t k = 0; k <= rounds; ++k) {
    if (k < rounds) {
      MpiCallGuard guard;
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        if (k < nseg[me]) {
          cur.emplace_back();
          int rc = MPI_Irecv(peer_buf(k, p), static_cast<int>(seg_len(me, k) * es), MPI_BYTE, p, kTagReduceScatter,
                             ctx.comm(), &cur.back());
          if (rc != MPI_SUCCESS) return fail(rc, "MPI_Irecv");
        }
        if (k < nseg[p]) {
          cur.emplace_back();
          int rc = MPI_Isend(send + (bl.off[p] + k * seg) * es, static_cast<int>(seg_len(p, k) * es), MPI_BYTE, p,
                             kTagReduceScatter, ctx.comm(), &cur.back());
          if (rc != MPI_SUCCESS) return fail(rc, "MPI_Isend");
        }
      }
    }
    if (k >= 1) {
      const size_t j = k - 1;  // the segment index finishing now
      Status s = ctx.WaitAll(prev, RequestKind::kPointToPoint);
      if (!s.ok()) {
        abandon();
        return s;
      }
      prev.clear();
      if (j < nseg[me]) {
        for (int q = 0; q < n; ++q) {
          inputs[q] = q == me ? static_cast<const void*>(send + (bl.off[me] + j * seg) * es)
                              : static_cast<const void*>(peer_buf(j, q));
        }
        a.combine(inputs.data(), reduced + j * seg * es, seg_len(me, j));
      }
      if (gather != nullptr) {
        MpiCallGuard guard;
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          if (j < nseg[me]) {
            gathers.emplace_back();
            int rc = MPI_Isend(reduced + j * seg * es, static_cast<int>(seg_len(me, j) * es), MPI_BYTE, p,
                               kTagAllGather, ctx.comm(), &gathers.back());
            if (rc != MPI_SUCCESS) return fail(rc, "MPI_Isend");
          }
          // Our reduce-scatter send of this segment of block p is complete (waited above),
          // so in place the region may now be overwritten by p's reduced segment.
          if (j < nseg[p]) {
            gathers.emplace_back();
            int rc = MPI_Irecv(gather + (bl.off[p] + j * seg) * es, static_cast<int>(seg_len(p, j) * es), MPI_BYTE, p,
                               kTagAllGather, ctx.comm(), &gathers.back());
            if (rc != MPI_SUCCESS) return fail(rc, "MPI_Irecv");
          }
        }
      }
    }
    std::swap(cur, prev);
  }
  return ctx.WaitAll(gathers, RequestKind::kPointToPoint);
}

Status GatherAndCombine(ExecContext& ctx, const void* send, size_t count, size_t elem_size, void* out,
                        const CombineFn& combine) {
  const int n = ctx.size(), me = ctx.rank();
  const size_t bytes = count * elem_size;
  unsigned char* all = ctx.Scratch(bytes * static_cast<size_t>(n));
  std::vector<const void*> inputs(n);
  for (int q = 0; q < n; ++q) inputs[q] = all + static_cast<size_t>(q) * bytes;
  if (n <= kDirectExchangeMaxRanks) {
    // Few ranks: one message to and from every peer, all in flight at once. (MPI's
    // nonblocking all-gather costs about twice the latency here.)
    inputs[me] = send;
    std::vector<MPI_Request> reqs;
    reqs.reserve(2 * static_cast<size_t>(n));
    {
      MpiCallGuard guard;
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        reqs.emplace_back();
        int rc = MPI_Irecv(all + static_cast<size_t>(p) * bytes, static_cast<int>(bytes), MPI_BYTE, p, kTagGather,
                           ctx.comm(), &reqs.back());
        if (rc == MPI_SUCCESS) {
          reqs.emplace_back();
          rc = MPI_Isend(send, static_cast<int>(bytes), MPI_BYTE, p, kTagGather, ctx.comm(), &reqs.back());
        }
        if (rc != MPI_SUCCESS) {
          reqs.pop_back();
          ctx.Abandon(reqs.data(), static_cast<int>(reqs.size()), RequestKind::kPointToPoint);
          return ctx.Check(rc, "MPI_Isend/MPI_Irecv");
        }
      }
    }
    LS_RETURN_IF_ERROR(ctx.WaitAll(reqs, RequestKind::kPointToPoint));
  } else {
    MPI_Request req = MPI_REQUEST_NULL;
    {
      MpiCallGuard guard;
      int rc = MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes), MPI_BYTE,
                              ctx.comm(), &req);
      if (rc != MPI_SUCCESS) return ctx.Check(rc, "MPI_Iallgather");
    }
    LS_RETURN_IF_ERROR(ctx.WaitAll(&req, 1, nullptr, RequestKind::kCollective));
  }
  combine(inputs.data(), out, count);
  return Status::Ok();
}

}  // namespace lockstep::comm::mpi_detail
