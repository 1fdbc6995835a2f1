// The prediction model of `lockstep plan` (docs/planning.md), the one place that turns stage
// costs into a step time and a peak memory, for both of the planner's paths: stage costs
// measured on this machine (the profile, BuildLayoutInput) or computed from a hardware file's
// arithmetic (a described machine, DescribedLayoutInput). Pure arithmetic: no tensors, no
// communication.
//
//   step = pipeline makespan of the micro-batches (compute; with pp > 1 the schedule's
//          simulation, so the bubble and the sends between stages are in it, or for a
//          described machine Megatron's interleaved 1F1B in closed form)
//        + exposed data-parallel communication (DDP buckets or ZeRO units overlapped with the
//          last backward; ZeRO-3's parameter gathers overlapped with the previous unit; or,
//          profiled, what ZeRO-2/3 measured per micro-batch and parameter; or what a described
//          machine's framework leaves exposed)
//        + optimizer (norm, clip, update over the owned elements) + ZeRO-1/2's all-gather
//        + the small collective over every rank that ends each step (the step record's
//          all-gather, which carries the exact gradient norm's parts)
//   peak = model states (the ZeRO paper's accounting, StatesOf: exactly as the memory row counts
//          them, or as a mixed-precision framework keeps them)
//        + ZeRO units in flight + activations of the micro-batches in flight + workspace
// Code: step_model.cc (time and the prediction), stage_memory.cc (memory), compose_stage.cc
// (a stage from its profiled pieces).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "lockstep/core/result.h"
#include "lockstep/parallel/pipeline_schedule.h"
#include "lockstep/planner/comm_curve.h"
#include "lockstep/planner/host_placement.h"

namespace lockstep::planner {

// Micro-batches a step of the ZeRO measurement that includes overlap (zero_overlap_ns_per_element).
inline constexpr int kZeroOverlapMicros = 4;

// One piece of a model (the embeddings, one transformer block, the head and loss, or a whole
// model) for one micro-batch on one worker.
struct PieceCost {
  double fwd_ms = 0, bwd_ms = 0;
  int64_t saved_bytes = 0;      // activations its forward leaves for its backward
  int64_t peak_bytes = 0;       // most activation bytes it holds at once in forward + backward (>= saved)
  int64_t eval_peak_bytes = 0;  // most bytes a forward without gradients (evaluation) holds
  int64_t kernel_bytes = 0;     // buffers its kernels keep between calls (convolution plans: the
                                // memory row's workspace_bytes)
  // The same pass run right after the piece's own previous pass, as an accumulation step's
  // further micro-batches run (its weights and buffers still in cache); 0: not measured (the
  // step model then charges every micro-batch fwd_ms + bwd_ms). Measured on whole models only:
  // a GPT block's next pass in a step comes after every other block's.
  double warm_fwd_ms = 0, warm_bwd_ms = 0;
  // A GPT block's forward under train.recompute = "block": the same recorded forward, its
  // activations released at once (autograd::Recompute), so the next block's forward finds the
  // same buffers in cache; 0: not measured (then fwd_ms). Its backward reruns the forward and
  // runs backward, as the pass above (fwd_ms + bwd_ms).
  double recompute_fwd_ms = 0;
  // What ZeRO-2 and ZeRO-3 add to the piece's forward and backward, per micro-batch and per
  // parameter element, measured with the piece as one ZeRO unit over the profile's workers
  // (0: not measured; the step model then uses the collectives' curves).
  double zero_ns_per_element[2] = {0, 0};
  // The same per micro-batch when a step runs kZeroOverlapMicros of them, where each unit's
  // reduction runs beside the next micro-batch's compute (0: not measured; every micro-batch
  // then costs zero_ns_per_element). Measured for mpi plans (MeasureZeroOverRanks), where
  // processes sharing cores pay for that overlap and a lone micro-batch does not.
  double zero_overlap_ns_per_element[2] = {0, 0};
  // The same piece with train.precision = bf16 (GEMM and convolution operands rounded to bf16,
  // the weights' bf16 copy; activations stay fp32), measured as the fp32 figures above; 0: not
  // measured (ComposeStage then assumes bf16_speedup and halved activations).
  double bf16_fwd_ms = 0, bf16_bwd_ms = 0;
  double bf16_warm_fwd_ms = 0, bf16_warm_bwd_ms = 0;
  double bf16_recompute_fwd_ms = 0;
  int64_t bf16_saved_bytes = 0, bf16_peak_bytes = 0;
  int64_t bf16_kernel_bytes = 0;  // bf16 plans kept beside the fp32 ones (convolutions)
};

// train.precision and train.recompute as the model applies them (the assumptions are in
// docs/planning.md: bf16 halves activations and the bytes sent between ranks and runs compute
// `bf16_speedup` times faster; block recompute keeps only each block's input and runs the
// block's forward again in backward).
struct ComputeOptions {
  bool bf16 = false;
  bool recompute_blocks = false;
  double bf16_speedup = 1.0;
};

// A pipeline stage's pieces: embeddings on the first, `blocks` blocks, head on the last.
struct StagePieces {
  bool has_embedding = false, has_head = false;
  int blocks = 0;
  PieceCost embedding, block, head;
  int64_t block_input_bytes = 0;  // fp32 bytes of a block's input (what recompute keeps)
  bool tensor_parallel = false;   // tp > 1 (on the last stage its recompute holds no extra tensor)
  int64_t send_bytes = 0;         // fp32 bytes of the activation a stage sends on (pp > 1)
  int64_t eval_bytes = 0;         // fp32 evaluation peak of the stage (StageCost::eval_bytes)
  // Kernel buffers of the evaluation's batch size when it differs from the step's: a plan is
  // made per shape and kept (cnn-fashion: the 64-row evaluation's convolution plans beside the
  // 16-row micro-batches').
  int64_t eval_kernel_bytes = 0;
};

// One stage on one tensor-parallel rank, one micro-batch.
struct StageCost {
  double fwd_ms = 0, bwd_ms = 0;  // compute (with the tp collectives when measured in)
  // A micro-batch that follows another of the same stage (pp = 1 accumulation): the pieces'
  // warm passes where measured, else fwd_ms and bwd_ms.
  double warm_fwd_ms = 0, warm_bwd_ms = 0;
  double tp_comm_ms = 0;           // tp collectives of the micro-batch (forward + backward)
  bool tp_comm_in_compute = true;  // measured inside fwd/bwd (a profile) or to add (a described machine)
  int64_t saved_bytes = 0;         // activations held per micro-batch in flight
  int64_t workspace_bytes = 0;     // on top of them while a piece runs
  // Per micro-batch in flight, beside the pieces' own: the [rows, T, C] tensors a pipeline stage
  // and recompute keep around them (ComposeStage).
  int64_t stream_bytes = 0;
  // Evaluation's forward without gradients. It runs in the step's pools (Trainer::
  // EvaluateLocal), so the peak is the larger of the two, never their sum.
  int64_t eval_bytes = 0;
  int64_t kernel_bytes = 0;                        // kept by the pieces' kernels (PieceCost::kernel_bytes)
  int64_t send_bytes = 0;                          // activation sent to the next stage (and its gradient back)
  double zero_ns_per_element[2] = {0, 0};          // ZeRO-2/3, measured (PieceCost::zero_ns_per_element)
  double zero_overlap_ns_per_element[2] = {0, 0};  // (PieceCost::zero_overlap_ns_per_element)
  std::vector<int64_t> param_numels;               // local parameters in forward order (exact)
  std::vector<std::pair<int, int>> units;          // ZeRO units: parameter index ranges [first, end)
  // The terms a described machine computes from its hardware file, because the frameworks it
  // stands for (Megatron, FSDP) schedule their collectives and hold their buffers their own way
  // (hardware_stage.cc). A profiled stage leaves it empty: the model derives these terms from
  // lockstep's own implementation (DDP's buckets, parallel::ZeroUnits, the buffer pools, the
  // measured optimizer pass, the measured send).
  struct Described {
    double dp_exposed_ms = 0;      // data-parallel collectives of a step not hidden behind compute
    double optimizer_ms = 0;       // the update (and clipping's pass) over the rank's states
    double send_ms = 0;            // the activation to the next stage, over the pipeline's link
    int64_t in_flight_bytes = 0;   // beside the states: FSDP's gathered units, recompute's layer
    int64_t activation_bytes = 0;  // the micro-batches in flight under the schedule
  };
  std::optional<Described> described;
  int64_t numel() const;
  int64_t largest_unit() const;
  int64_t largest_units(int k) const;  // the k largest units' elements together
};

StageCost ComposeStage(const StagePieces& p, const ComputeOptions& o);

// What a rank keeps per parameter element between steps, and which of it ZeRO shards from which
// stage (the ZeRO paper's accounting): fp32 master weights, fp32 gradients (sharded from ZeRO-2),
// the optimizer's moments (from ZeRO-1) and, in bf16, a bf16 copy of the weights (none under
// ZeRO-3, which gathers them unit by unit). Both paths count model states with it (StatesOf).
struct StateBytes {
  // Where the master weights live. kParameters (lockstep): they are the model's parameters,
  // which ZeRO-1/2 all-gather whole after each update, so only ZeRO-3 shards them; the bf16 copy
  // is a buffer beside them. kOptimizer (Megatron, DeepSpeed and FSDP in mixed precision, which
  // a described machine stands for): the master is optimizer state, sharded from ZeRO-1, and the
  // model's parameters are the bf16 copy (under ZeRO-3, FSDP's sharded fp32 parameters: the
  // master itself).
  enum class Master { kParameters, kOptimizer };
  Master master = Master::kParameters;
  int64_t copy_bytes = 0;    // the bf16 copy (2) or none (0)
  int64_t moment_bytes = 8;  // AdamW's two fp32 moments; SGD with momentum 4, without 0
};

// One rank's model states: the memory row's parameters, gradients and optimizer, and (kParameters)
// the bf16 copy beside the parameters, which the memory row does not count among them.
struct ModelStates {
  int64_t params_bytes = 0, grads_bytes = 0, optimizer_bytes = 0, copy_bytes = 0;
};
// `numel` local elements at ZeRO stage `zero` over `dp` replicas (shards: ZeroShard).
ModelStates StatesOf(const StateBytes& b, int zero, int dp, int64_t numel);

struct LayoutInput {
  int dp = 1, tp = 1, pp = 1, zero = 0;
  int micros = 1;  // pipeline micro-batches (pp > 1) or accumulation steps (pp = 1)
  parallel::PipeSchedule schedule = parallel::PipeSchedule::k1F1B;
  // Megatron's interleaved 1F1B with this many virtual stages per pipeline rank (1: its plain
  // 1F1B), in closed form: a described machine's schedule, which lockstep does not run. 0: the
  // simulation of `schedule`, the executor's.
  int interleave = 0;
  int64_t bucket_bytes = 25 << 20;
  StateBytes states;
  double optimizer_ns_per_element = 0;  // norm + clip + update, per owned element
  std::vector<StageCost> stages;        // pp entries
  // Workers per core when they outnumber the cores (the stages' times are then each worker's
  // share of a core while all compute: ComputeProfile::oversubscription()), else 1.
  double oversubscription = 1;
  // Every step of the trainer ends with one small collective over all dp*tp*pp ranks: the step
  // record's all-gather (this many bytes from each rank; it carries the exact gradient norm's
  // parts too). 0: left out (synthetic tests of the other terms).
  int64_t step_stats_bytes = 0;
  // Where the groups sit when the workers span hosts (`plan --hosts`): the dp collectives, the
  // pipeline's sends and the step's world collective then take the curves measured across that
  // many hosts, each group its share of a host's link. One machine: the defaults.
  HostPlacement hosts;
  // train.grad_compression = "powersgd" or train.sync = "diloco" (dp only, zero 0, pp 1): the
  // data-parallel term is theirs instead of DDP's buckets.
  struct LowComm {
    enum class Kind { kNone, kPowerSgd, kDiloco } kind = Kind::kNone;
    int64_t plain = 0, p = 0, q = 0;  // PowerSGD: numbers sent a step by each of its three allreduces
    double compress_ms = 0;           // PowerSGD: the factorisation's compute a step (measured)
    int64_t inner_steps = 1;          // DiLoCo: H; its allreduce of the outer gradient, once in H steps
    int64_t outer_bytes = 4;          // DiLoCo: bytes an element of the outer gradient travels as
    int64_t fragments = 1;            // DiLoCo: F, each fragment's allreduce once in H steps
    int64_t overlap_steps = 0;        // DiLoCo: tau, inner steps an exchange runs beside
  } low_comm;
};

// One rank's bytes (stage s, tp rank 0, dp rank 0: the largest ZeRO shard).
struct StageMemory {
  int64_t params_bytes = 0, grads_bytes = 0, optimizer_bytes = 0;  // as the memory row counts them
  int64_t in_flight_bytes = 0;  // ZeRO-2/3 gradient units, ZeRO-3 gathered units, the bf16 weight copy
  int64_t activation_bytes = 0;
  int64_t kernel_bytes = 0;  // StageCost::kernel_bytes
  int64_t peak_bytes = 0;
};

struct Prediction {
  std::vector<StageMemory> memory;  // per stage
  int64_t peak_bytes = 0;           // max over stages
  double compute_ms = 0;            // busiest stage: forward + backward of all its micro-batches (with the
                                    // tp collectives only where they were measured inside them)
  double pipeline_ms = 0;           // makespan of forward + backward (compute, bubble, sends)
  double bubble = 0;                // mean idle share of the stages in the pipeline part
  double comm_exposed_ms = 0;       // dp communication not hidden, ZeRO gathers, tp (described)
  double comm_total_ms = 0;         // all collectives, hidden or not
  // Bytes a data-parallel rank sends a step for the gradients (the ring count of the dp
  // collectives, comm/counting_communicator.h; DiLoCo's averaged over its H steps).
  double dp_bytes = 0;
  double step_sync_ms = 0;          // the per-step world collectives (in comm_exposed_ms)
  double optimizer_ms = 0;
  double step_ms = 0;
};

// InvalidArgument for an inconsistent input (no stages, pp != stages, micros < 1).
Result<Prediction> PredictLayout(const LayoutInput& in, const CommTable& comm);

// The shard of `numel` elements the largest ZeRO rank holds: ceil(numel / dp).
int64_t ZeroShard(int64_t numel, int dp);

}  // namespace lockstep::planner
