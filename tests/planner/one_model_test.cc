// One prediction model (docs/planning.md, "One model"): the measured path (a profile,
// BuildLayoutInput) and the described one (a hardware file, DescribedLayoutInput) both build a
// LayoutInput and go through PredictLayout, which counts the model states once (StatesOf),
// composes the step and runs the pipeline: the executor's schedule simulated, or a described
// machine's interleaved 1F1B in closed form, the same thing for equal stages.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "lockstep/planner/hardware.h"
#include "lockstep/planner/planner.h"
#include "lockstep/planner/step_model.h"

namespace lockstep::planner {
namespace {

using Master = StateBytes::Master;

void ExpectStates(const ModelStates& got, int64_t params, int64_t grads, int64_t optimizer, int64_t copy,
                  const std::string& what) {
  EXPECT_EQ(got.params_bytes, params) << what;
  EXPECT_EQ(got.grads_bytes, grads) << what;
  EXPECT_EQ(got.optimizer_bytes, optimizer) << what;
  EXPECT_EQ(got.copy_bytes, copy) << what;
}

// lockstep's states (the memory row's: fp32 parameters are the master, sharded by ZeRO-3 only;
// the bf16 copy beside them, none under ZeRO-3) and a mixed-precision framework's (the master in
// the optimizer, sharded from ZeRO-1: 18 bytes a parameter, 6 + 12/dp with ZeRO-1, 16/dp with
// FSDP), from one accounting.
TEST(PlanOneModel, StatesOfCountsTheZeroAccountingForBothConventions) {
  const int64_t n = 2002, s = 668;  // 3 replicas: shards of ceil(2002 / 3)
  const StateBytes lockstep{Master::kParameters, 2, 8};
  ExpectStates(StatesOf(lockstep, 0, 3, n), 4 * n, 4 * n, 8 * n, 2 * n, "lockstep zero 0");
  ExpectStates(StatesOf(lockstep, 1, 3, n), 4 * n, 4 * n, 8 * s, 2 * n, "lockstep zero 1");
  ExpectStates(StatesOf(lockstep, 2, 3, n), 4 * n, 4 * s, 8 * s, 2 * n, "lockstep zero 2");
  ExpectStates(StatesOf(lockstep, 3, 3, n), 4 * s, 4 * s, 8 * s, 0, "lockstep zero 3");
  ExpectStates(StatesOf({Master::kParameters, 0, 4}, 1, 3, n), 4 * n, 4 * n, 4 * s, 0, "lockstep fp32 SGD");
  const StateBytes mixed{Master::kOptimizer, 2, 8};
  ExpectStates(StatesOf(mixed, 0, 3, n), 2 * n, 4 * n, 12 * n, 0, "mixed zero 0");
  ExpectStates(StatesOf(mixed, 1, 3, n), 2 * n, 4 * n, 12 * s, 0, "mixed zero 1");
  ExpectStates(StatesOf(mixed, 2, 3, n), 2 * n, 4 * s, 12 * s, 0, "mixed zero 2");
  ExpectStates(StatesOf(mixed, 3, 3, n), 4 * s, 4 * s, 8 * s, 0, "mixed zero 3 (FSDP)");
  ExpectStates(StatesOf(mixed, 3, 1, n), 4 * n, 4 * n, 8 * n, 0, "one replica shards nothing");
}

Hardware Machine() {
  Hardware hw;
  hw.name = "synthetic";
  hw.devices_per_node = 4;
  hw.memory_gib = 80;
  hw.peak_tflops_bf16 = hw.peak_tflops_fp32 = 100;
  hw.matmul_efficiency = 0.5;
  hw.attention_efficiency = 0.3;
  hw.attention_bwd_efficiency = 0.25;
  hw.memory_gbs = 1000;
  hw.memory_efficiency = 0.8;
  hw.intra = {200, 5, 0.8};
  hw.inter = {25, 10, 0.9};
  return hw;
}

ModelShape Llama() {
  ModelShape m;
  m.llama = true;
  m.vocab = 1024;
  m.context = 256;
  m.layers = 8;
  m.heads = 8;
  m.kv_heads = 4;
  m.width = 512;
  m.ffn = 1536;
  return m;
}

// A described machine's rows are PredictLayout of their stage costs, nothing added after it, and
// their memory rows are StatesOf's mixed-precision accounting.
TEST(PlanOneModel, DescribedRowsArePredictionsOfTheirLayoutInputs) {
  const Hardware hw = Machine();
  const ModelShape m = Llama();
  const int workers = 8;
  const int64_t batch = 16;
  Result<PlanResult> plan = PlanForHardware(hw, m, batch, workers, 0, true);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_GT(plan->rows.size(), 50u);
  int pipelines = 0, fsdp = 0;
  for (const PlanRow& row : plan->rows) {
    const Candidate& c = row.candidate;
    Result<LayoutInput> in = DescribedLayoutInput(hw, m, c, workers, true);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    EXPECT_EQ(in->states.master, Master::kOptimizer);
    EXPECT_EQ(in->interleave, c.interleave);
    Result<PlanRow> again = PredictRow(c, *in, CommTable(), static_cast<double>(batch * m.context));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    const Prediction& p = row.prediction;
    EXPECT_EQ(p.step_ms, again->prediction.step_ms) << c.layout();
    EXPECT_EQ(p.pipeline_ms, again->prediction.pipeline_ms) << c.layout();
    EXPECT_EQ(p.bubble, again->prediction.bubble) << c.layout();
    EXPECT_EQ(p.comm_exposed_ms, again->prediction.comm_exposed_ms) << c.layout();
    EXPECT_EQ(p.peak_bytes, again->prediction.peak_bytes) << c.layout();
    EXPECT_EQ(row.units_per_s, again->units_per_s) << c.layout();
    const ModelStates st = StatesOf(in->states, c.zero, c.dims.dp, in->stages.at(0).numel());
    EXPECT_EQ(p.memory.at(0).params_bytes, st.params_bytes) << c.layout();
    EXPECT_EQ(p.memory.at(0).grads_bytes, st.grads_bytes) << c.layout();
    EXPECT_EQ(p.memory.at(0).optimizer_bytes, st.optimizer_bytes) << c.layout();
    // Korthikanti's 18 bytes a parameter; ZeRO-1 shards 12 of them, FSDP all 16 fp32 bytes.
    const int64_t n = in->stages.at(0).numel(), shard = ZeroShard(n, c.dims.dp);
    EXPECT_EQ(st.params_bytes + st.grads_bytes + st.optimizer_bytes, c.zero == 0   ? 18 * n
                                                                     : c.zero == 1 ? 6 * n + 12 * shard
                                                                                   : 16 * shard)
        << c.layout() << " zero " << c.zero;
    pipelines += c.dims.pp > 1;
    fsdp += c.zero == 3;
  }
  EXPECT_GT(pipelines, 0);
  EXPECT_GT(fsdp, 0);
}

// A two-layer GPT of width 16 and context 8, batch 4, read as `lockstep plan` reads it for
// `world` workers (the file is this process's own).
Result<PlanSetup> TinyPlanSetup(int world) {
  const std::string path = ::testing::TempDir() + "/plan_one_model_" + std::to_string(getpid()) + ".toml";
  std::ofstream(path) << "[model]\nkind = \"gpt\"\nvocab = 16\ncontext = 8\nlayers = 2\nheads = 2\nwidth = 16\n"
                         "[data]\nkind = \"text\"\n[train]\nbatch_size = 4\nsteps = 1\n";
  Result<PlanSetup> setup = ReadPlanSetup(path, {}, world);
  std::remove(path.c_str());
  return setup;
}

// The measured path's memory rows are StatesOf's lockstep accounting of each candidate's exact
// parameter count (the accounting the described rows above take with the master in the
// optimizer): one count of ZeRO's bytes for both.
TEST(PlanOneModel, ProfiledRowsCountTheirStatesWithTheSameAccounting) {
  Result<PlanSetup> setup = TinyPlanSetup(4);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  Result<std::vector<Candidate>> cands = EnumerateCandidates(*setup);
  ASSERT_TRUE(cands.ok()) << cands.status().ToString();
  ComputeProfile profile;
  profile.optimizer_ns_per_element = 1;
  for (const Candidate& c : *cands)
    for (int64_t rows : {c.micro_rows, EvalRows(c, *setup)})
      for (PieceCost* piece : {&profile.gpt[{rows, c.dims.tp}].embedding, &profile.gpt[{rows, c.dims.tp}].block,
                               &profile.gpt[{rows, c.dims.tp}].head}) {
        piece->fwd_ms = 0.1 * static_cast<double>(rows);
        piece->bwd_ms = 0.2 * static_cast<double>(rows);
        piece->saved_bytes = piece->peak_bytes = piece->eval_peak_bytes = 1000 * rows;
      }
  CommTable comm;  // collectives free: only the states matter here
  int zero = 0;
  for (const Candidate& c : *cands) {
    Result<LayoutInput> in = BuildLayoutInput(c, *setup, profile, comm);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    EXPECT_EQ(in->states.master, Master::kParameters);
    EXPECT_EQ(in->states.copy_bytes, c.precision == "bf16" ? 2 : 0);
    EXPECT_EQ(in->interleave, 0);  // the executor's schedule, simulated
    Result<PlanRow> row = PredictRow(c, *in, comm, 4.0 * 8);
    ASSERT_TRUE(row.ok()) << row.status().ToString();
    for (int s = 0; s < c.dims.pp; ++s) {
      const ModelStates st = StatesOf(in->states, c.zero, c.dims.dp, in->stages.at(s).numel());
      const StageMemory& mem = row->prediction.memory.at(s);
      EXPECT_EQ(mem.params_bytes, st.params_bytes) << c.layout() << " stage " << s;
      EXPECT_EQ(mem.grads_bytes, st.grads_bytes) << c.layout();
      EXPECT_EQ(mem.optimizer_bytes, st.optimizer_bytes) << c.layout();
    }
    zero += c.zero > 0;
  }
  EXPECT_GT(zero, 0);
}

// Stages of 1 + 2 ms a micro-batch, 0.5 ms sends; `interleave` 0 simulates 1F1B.
LayoutInput EqualStages(int pp, int micros, int interleave, double send_ms) {
  LayoutInput in;
  in.pp = pp;
  in.micros = micros;
  in.interleave = interleave;
  for (int s = 0; s < pp; ++s) {
    StageCost st;
    st.fwd_ms = 1;
    st.bwd_ms = 2;
    st.param_numels = {1000};
    st.units = {{0, 1}};
    st.described = StageCost::Described{};
    st.described->send_ms = send_ms;
    in.stages.push_back(st);
  }
  return in;
}

// Megatron's interleaved 1F1B in closed form: (m + (p-1)/v) x the stage's forward + backward,
// plus 2 v m sends not overlapped, which count as exposed communication; with v = 1 and free
// sends it is the simulated 1F1B of the measured path, bubble and all.
TEST(PlanOneModel, ClosedFormPipelineIsTheSimulatedScheduleOfEqualStages) {
  for (int micros : {1, 4, 8}) {
    Result<Prediction> closed = PredictLayout(EqualStages(4, micros, 1, 0), CommTable());
    Result<Prediction> simulated = PredictLayout(EqualStages(4, micros, 0, 0), CommTable());
    ASSERT_TRUE(closed.ok() && simulated.ok());
    EXPECT_NEAR(closed->pipeline_ms, simulated->pipeline_ms, 1e-9) << micros;
    EXPECT_NEAR(closed->pipeline_ms, (micros + 3) * 3.0, 1e-9) << micros;
    EXPECT_NEAR(closed->bubble, simulated->bubble, 1e-9) << micros;
    EXPECT_NEAR(closed->compute_ms, simulated->compute_ms, 1e-9) << micros;
    EXPECT_NEAR(closed->step_ms, simulated->step_ms, 1e-9) << micros;
  }
  Result<Prediction> p = PredictLayout(EqualStages(4, 6, 3, 0.5), CommTable());
  ASSERT_TRUE(p.ok());
  const double sends = 2 * 3 * 6 * 0.5;
  EXPECT_NEAR(p->pipeline_ms, (6 + 3.0 / 3) * 3.0 + sends, 1e-9);
  EXPECT_NEAR(p->bubble, 1.0 / 7, 1e-12);
  EXPECT_NEAR(p->compute_ms, 6 * 3.0, 1e-9);
  EXPECT_NEAR(p->comm_exposed_ms, sends, 1e-9);
  EXPECT_FALSE(PredictLayout(EqualStages(4, 6, -1, 0), CommTable()).ok());
}

}  // namespace
}  // namespace lockstep::planner
