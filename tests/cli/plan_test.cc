// `lockstep plan` end to end: the memory it predicts for rank 0's model states (parameters,
// gradients, optimizer) equals the memory row `lockstep train` writes for the same layout,
// exactly (ZeRO 0-3, tensor and pipeline parallelism, the CNN); plan.json has the contract's
// fields; a second plan reuses the cached profile; bad input is one line and exit status 2.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace lockstep::testing {
namespace {

// A small GPT, so that each training run is one quick step.
const std::vector<std::string> kSmallGpt = {"--config", LOCKSTEP_SOURCE_DIR "/configs/gpt-tiny.toml",
                                            "--set",    "model.layers=2",
                                            "--set",    "model.width=64",
                                            "--set",    "train.batch_size=8",
                                            "--set",    "eval.batches=1"};

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, false);
}

// The plan's row for a layout (fp32, no recompute).
nlohmann::json Row(const nlohmann::json& plan, const std::string& layout, int zero, int micro) {
  for (const nlohmann::json& r : plan["layouts"])
    if (r["layout"] == layout && r["zero"] == zero && r["microbatches"] == micro && r["precision"] == "fp32" &&
        r["recompute"] == "none")
      return r;
  return {};
}

// Trains one step of `layout` and checks the memory row against the plan's rank-0 prediction.
void ExpectModelStatesMatch(const std::vector<std::string>& config, const nlohmann::json& plan,
                            const std::string& layout, int zero, int micro, const std::string& name) {
  SCOPED_TRACE(layout + " zero " + std::to_string(zero) + " micro " + std::to_string(micro));
  const nlohmann::json row = Row(plan, layout, zero, micro);
  ASSERT_FALSE(row.is_null());
  const std::string out = MakeTempDir(name);
  const bool pipeline = layout.find("pp=1") == std::string::npos;
  CommandResult r = RunLockstep(With(
      With({"train"}, config), {"--nproc", std::to_string(plan["workers"].get<int>()), "--steps", "1", "--out", out,
                                "--layout", layout, "--zero", std::to_string(zero), "--set",
                                (pipeline ? "train.pp_microbatches=" : "train.accum_steps=") + std::to_string(micro)}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json mem = LastMemoryRow(out);
  ASSERT_FALSE(mem.is_null());
  EXPECT_EQ(mem["params_bytes"], row["rank0"]["params_bytes"]);
  EXPECT_EQ(mem["grads_bytes"], row["rank0"]["grads_bytes"]);
  EXPECT_EQ(mem["optimizer_bytes"], row["rank0"]["optimizer_bytes"]);
  // The whole peak (activations too) is composed from pieces measured alone, whose freed buffers
  // the allocator pools differently than one whole pass does: close, not exact (docs/planning.md).
  const double peak = mem["peak_bytes"].get<double>(), predicted = row["rank0"]["peak_bytes"].get<double>();
  EXPECT_NEAR(predicted / peak, 1.0, 0.2) << "predicted " << predicted << ", memory row " << peak;
}

// A plan measures ZeRO over its workers as the backend runs them (threads in this process; mpi:
// the plan relaunched under mpirun with the internal --zero-probe): the cache slot
// "<backend>-2" holds both figures (a step of one micro-batch and of four) at the ZeRO layouts'
// micro-batch rows, a second plan reuses them, and the prediction charges them (edited in the
// cache, they set ZeRO-2's exposed time); with check_fresh, --fresh measures them again.
// `args` ran once already, writing into `dir`.
void ExpectZeroFiguresMeasuredAndCharged(const std::vector<std::string>& args, const std::string& dir,
                                         const std::string& slot, bool check_fresh = false) {
  const nlohmann::json cache = ReadJson(dir + "/plan-profile.json");
  const nlohmann::json& zero = cache["zero"][slot];
  ASSERT_TRUE(zero.is_object()) << cache.dump();
  EXPECT_EQ(zero["rows"], nlohmann::json({1, 2, 4}));  // batch 8 over dp=2, 1-4 micro-batches
  for (const char* f : {"zero2", "zero3", "zero2_overlap", "zero3_overlap"}) EXPECT_GT(zero[f].get<double>(), 0) << f;
  // The plain piece's pass as the ranks ran it, at the first of the rows, and the line that
  // sets it against the profile's (printed from the cache too).
  EXPECT_EQ(zero["plain_rows"], 1);
  EXPECT_GT(zero["plain_ms"].get<double>(), 0);
  CommandResult again = RunLockstep(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("profile: cached"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("the ZeRO probe's plain pass over the 2 "), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("x the profile's "), std::string::npos) << again.out;
  EXPECT_EQ(again.out.find("second look"), std::string::npos) << again.out;
  // The cached figures are what the prediction charges: set them far above anything measured
  // (us an element) and ZeRO-2's exposed time is theirs, the further micro-batch charged
  // (4 c4 - c1) / 3 beside the first one's c1.
  nlohmann::json edited = cache;
  edited["zero"][slot]["zero2"] = 1e5;
  edited["zero"][slot]["zero2_overlap"] = 2e5;
  std::ofstream(dir + "/plan-profile.json") << edited.dump();
  CommandResult forced = RunLockstep(With(args, {"--json", dir + "/forced.json"}));
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(forced.out.find("profile: cached"), std::string::npos) << forced.out;
  const nlohmann::json plan = ReadJson(dir + "/forced.json");
  const nlohmann::json one = Row(plan, "dp=2,tp=1,pp=1", 2, 1), two = Row(plan, "dp=2,tp=1,pp=1", 2, 2);
  ASSERT_FALSE(one.is_null() || two.is_null()) << plan.dump();
  EXPECT_GT(one["comm_exposed_ms"].get<double>(), 1000);  // ~0.1 ms an element x 1e5 elements
  EXPECT_NEAR(two["comm_exposed_ms"].get<double>() / one["comm_exposed_ms"].get<double>(),
              (1e5 + (4 * 2e5 - 1e5) / 3) / 1e5, 0.01);
  if (check_fresh) {
    // --fresh measures again whatever the cache holds, and replaces it (checked on threads only:
    // the option does not depend on the backend, and an mpi plan costs a minute on 2 cores).
    CommandResult fresh = RunLockstep(With(args, {"--fresh"}));
    ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
    EXPECT_NE(fresh.out.find("profile: measured"), std::string::npos) << fresh.out;
    const nlohmann::json remeasured = ReadJson(dir + "/plan-profile.json");
    EXPECT_GT(remeasured["zero"][slot]["zero2"].get<double>(), 0);
    EXPECT_LT(remeasured["zero"][slot]["zero2"].get<double>(), 1e5);
  }
  std::ofstream(dir + "/plan-profile.json") << cache.dump();  // as first measured, for any later plan
}

TEST(Plan, ModelStatesEqualTheMemoryRowOfEveryLayout) {
  const std::string dir = MakeTempDir("plan-gpt");
  std::vector<std::string> plan_args = {"plan"};
  plan_args.insert(plan_args.begin() + 1, kSmallGpt.begin(), kSmallGpt.end());
  CommandResult r = RunLockstep(With(plan_args, {"--nproc", "2", "--out", dir, "--json", dir + "/plan.json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("verdict: "), std::string::npos) << r.out;
  // A measured profile looks at one shape again after the collectives, both line-ups (2 workers,
  // and the 1 worker the verdict compares with); a cached one does not (below).
  EXPECT_NE(r.out.find("second look at the compute, after the collectives (times against the first look): 2 workers "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("; 1 worker "), std::string::npos) << r.out;
  const nlohmann::json plan = ReadJson(dir + "/plan.json");
  ASSERT_TRUE(plan.is_object());
  EXPECT_EQ(plan["workers"], 2);
  for (const char* key : {"binding", "one_worker_faster", "recommended", "layouts"})
    EXPECT_TRUE(plan.contains(key)) << key;
  for (const char* key : {"layout", "zero", "precision", "recompute", "microbatches", "fits", "peak_bytes", "step_ms",
                          "tokens_per_s", "comm_exposed_ms", "bubble"})
    EXPECT_TRUE(plan["layouts"][0].contains(key)) << key;
  for (int zero = 0; zero <= 3; ++zero)
    ExpectModelStatesMatch(kSmallGpt, plan, "dp=2,tp=1,pp=1", zero, 1, "plan-dp-z" + std::to_string(zero));
  ExpectModelStatesMatch(kSmallGpt, plan, "dp=1,tp=2,pp=1", 0, 2, "plan-tp");
  ExpectModelStatesMatch(kSmallGpt, plan, "dp=1,tp=1,pp=2", 0, 4, "plan-pp");

  // The second plan measures nothing; ZeRO was measured over the two worker threads.
  ExpectZeroFiguresMeasuredAndCharged(With(plan_args, {"--nproc", "2", "--out", dir}), dir, "threads-2",
                                      /*check_fresh=*/true);

  // A block's forward as recompute runs it is measured, fp32 and bf16 (the embedding and head
  // never recompute), and it is what a recompute row's forward charges: edited to 1000 ms, each
  // micro-batch's blocks cost that much more forward than the measured figure, and rows without
  // recompute do not move.
  nlohmann::json cache = ReadJson(dir + "/plan-profile.json");
  nlohmann::json& pieces = cache["compute"]["w2-t1"]["gpt"];
  ASSERT_FALSE(pieces.empty());
  std::map<std::pair<int64_t, std::string>, double> released;  // (rows, precision) -> measured ms
  for (nlohmann::json& e : pieces) {
    if (e["tp"] != 1) continue;
    EXPECT_EQ(e["embedding"].value("recompute_fwd_ms", 0.0), 0.0);
    EXPECT_EQ(e["head"].value("recompute_fwd_ms", 0.0), 0.0);
    for (const char* precision : {"fp32", "bf16"}) {
      const std::string f = std::string(precision) == "bf16" ? "bf16_recompute_fwd_ms" : "recompute_fwd_ms";
      EXPECT_GT(e["block"].value(f, 0.0), 0.0) << f;
      released[{e["rows"].get<int64_t>(), precision}] = e["block"][f].get<double>();
      e["block"][f] = 1000.0;
    }
  }
  std::ofstream(dir + "/plan-profile.json") << cache.dump();
  r = RunLockstep(With(plan_args, {"--nproc", "2", "--out", dir, "--json", dir + "/released.json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json edited = ReadJson(dir + "/released.json");
  ASSERT_EQ(edited["layouts"].size(), plan["layouts"].size());
  auto key = [](const nlohmann::json& row) {  // the rows' order follows their predicted times
    return row["layout"].dump() + row["zero"].dump() + row["precision"].dump() + row["recompute"].dump() +
           row["microbatches"].dump();
  };
  std::map<std::string, nlohmann::json> edited_rows;
  for (const nlohmann::json& row : edited["layouts"]) edited_rows[key(row)] = row;
  int checked = 0;
  for (const nlohmann::json& before : plan["layouts"]) {
    if (before["layout"] != "dp=2,tp=1,pp=1" || before["zero"] != 0) continue;
    const nlohmann::json& after = edited_rows.at(key(before));
    const double grew = after["compute_ms"].get<double>() - before["compute_ms"].get<double>();
    if (before["recompute"] == "none") {
      EXPECT_NEAR(grew, 0.0, 1e-9) << before.dump();
      continue;
    }
    const double was = released.at({before["micro_rows"].get<int64_t>(), before["precision"].get<std::string>()});
    EXPECT_NEAR(grew, before["microbatches"].get<int>() * 2 * (1000.0 - was), 1e-6) << before.dump();  // 2 blocks
    ++checked;
  }
  EXPECT_GE(checked, 4);  // fp32 and bf16, 1 and 2 micro-batches at least
}

TEST(Plan, CnnModelStatesEqualTheMemoryRow) {
  const std::vector<std::string> cnn = {"--config", LOCKSTEP_SOURCE_DIR "/configs/cnn-fashion.toml", "--set",
                                        "eval.batches=1"};
  const std::string dir = MakeTempDir("plan-cnn");
  CommandResult r = RunLockstep(With({"plan"}, With(cnn, {"--nproc", "2", "--out", dir, "--json", dir + "/p.json"})));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = ReadJson(dir + "/p.json");
  ASSERT_TRUE(plan.is_object());
  EXPECT_TRUE(plan["layouts"][0].contains("samples_per_s"));
  ExpectModelStatesMatch(cnn, plan, "dp=2,tp=1,pp=1", 2, 1, "plan-cnn-z2");

  // The whole model's warm passes (a micro-batch right after another) are measured, fp32 and
  // bf16, and an accumulation step charges them for every micro-batch after the first: edited
  // far above any measurement in the cache, they set the 2-micro-batch rows' compute alone.
  nlohmann::json cache = ReadJson(dir + "/plan-profile.json");
  nlohmann::json& whole = cache["compute"]["w2-t1"]["whole"];
  ASSERT_FALSE(whole.empty());
  for (nlohmann::json& e : whole) {
    nlohmann::json& m = e["model"];
    for (const char* f : {"warm_fwd_ms", "warm_bwd_ms", "bf16_warm_fwd_ms", "bf16_warm_bwd_ms"}) {
      EXPECT_GT(m.value(f, 0.0), 0.0) << f;
      m[f] = 1000.0;
    }
  }
  std::ofstream(dir + "/plan-profile.json") << cache.dump();
  r = RunLockstep(With({"plan"}, With(cnn, {"--nproc", "2", "--out", dir, "--json", dir + "/warm.json"})));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int checked = 0;
  const nlohmann::json warm = ReadJson(dir + "/warm.json");
  for (const nlohmann::json& row : warm["layouts"]) {
    if (row["layout"] != "dp=2,tp=1,pp=1" || row["microbatches"] != 2) continue;
    const std::string prefix = row["precision"] == "bf16" ? "bf16_" : "";
    for (const nlohmann::json& e : whole)
      if (e["rows"] == row["micro_rows"]) {
        const nlohmann::json& m = e["model"];
        const double cold = m[prefix + "fwd_ms"].get<double>() + m[prefix + "bwd_ms"].get<double>();
        EXPECT_NEAR(row["compute_ms"].get<double>(), cold + 2000.0, 1e-6) << row.dump();
        ++checked;
      }
  }
  EXPECT_GE(checked, 2);
}

TEST(Plan, MpiPlanMeasuresZeroOverProcesses) {
  const std::string dir = MakeTempDir("plan-mpi-zero");
  const std::vector<std::string> args =
      With(With({"plan"}, kSmallGpt), {"--nproc", "2", "--backend", "mpi", "--out", dir});
  CommandResult r = RunLockstep(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectZeroFiguresMeasuredAndCharged(args, dir, "mpi-2");
  // Outside mpirun --zero-probe is one line, exit 2.
  CommandResult probe = RunLockstep(With(args, {"--zero-probe", "2"}));
  EXPECT_EQ(probe.exit_code, 2);
  EXPECT_EQ(std::count(probe.err.begin(), probe.err.end(), '\n'), 1) << probe.err;
  EXPECT_NE(probe.err.find("--zero-probe is internal"), std::string::npos) << probe.err;
}

TEST(Plan, BadInputIsOneLineAndExitTwo) {
  const std::string tiny = LOCKSTEP_SOURCE_DIR "/configs/gpt-tiny.toml";
  const std::string dir = MakeTempDir("plan-bad");
  const std::vector<std::vector<std::string>> cases = {
      {"plan", "--config", tiny, "--nproc", "3", "--out", dir},  // batch 16, 4 heads: no layout of 3
      {"plan", "--config", tiny, "--out", dir},                  // no --nproc
      {"plan", "--config", tiny, "--nproc", "2", "--set", "train.bogus=1", "--out", dir},
      {"plan", "--config", tiny, "--nproc", "2", "--mem-limit", "lots", "--out", dir},
      {"plan", "--nproc", "2", "--out", dir},
  };
  for (const auto& args : cases) {
    CommandResult r = RunLockstep(args);
    EXPECT_EQ(r.exit_code, 2) << args[3] << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  CommandResult r = RunLockstep({"plan", "--config", tiny, "--nproc", "3", "--out", dir});
  EXPECT_NE(r.err.find("no layout of 3 workers"), std::string::npos) << r.err;
}

// A described machine: a missing or negative field of the hardware file is one line naming it.
TEST(Plan, HardwareFileErrorsNameTheField) {
  const std::string dir = MakeTempDir("plan-hw");
  const std::string good = LOCKSTEP_SOURCE_DIR "/hardware/a100-80g-selene.toml";
  const std::string config = LOCKSTEP_SOURCE_DIR "/bench/plan_published/megatron-22b.toml";
  CommandResult ok = RunLockstep({"plan", "--config", config, "--hardware", good, "--nproc", "8"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("verdict: "), std::string::npos) << ok.out;
  std::string text;
  {
    std::ifstream in(good);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [&](const std::string& name, const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) t.replace(at, from.size(), to);
    std::ofstream(dir + "/" + name) << t;
    return dir + "/" + name;
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {write("missing.toml", "memory_gib = 80", ""), "'device.memory_gib' is missing"},
      {write("negative.toml", "bandwidth_gbs = 25", "bandwidth_gbs = -25"), "'inter_node.bandwidth_gbs' = -25"},
      {write("text.toml", "peak_tflops_bf16 = 312.0", "peak_tflops_bf16 = \"fast\""), "must be a number"},
      // The optional field, when present, is checked as the others are.
      {write("bwd.toml", "memory_gbs = 2039", "attention_bwd_efficiency = 1.5\nmemory_gbs = 2039"),
       "'device.attention_bwd_efficiency' = 1.5"},
  };
  for (const auto& [path, want] : cases) {
    CommandResult r = RunLockstep({"plan", "--config", config, "--hardware", path, "--nproc", "8"});
    EXPECT_EQ(r.exit_code, 2) << path;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  }
  // 7 devices cannot split 64 heads, 48 layers and a batch of 4.
  CommandResult r = RunLockstep({"plan", "--config", config, "--hardware", good, "--nproc", "7"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("no layout of 7 devices"), std::string::npos) << r.err;
  // The described frameworks have no DiLoCo or PowerSGD; described hosts are not measured ones.
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"--set", "train.sync=diloco"}, "not train.sync = \"diloco\""},
      {{"--set", "train.grad_compression=powersgd"}, "not train.grad_compression = \"powersgd\""},
      {{"--hosts", "h0:4,h1:4"}, "--hosts measures real ones"},
  };
  for (const auto& [flags, want] : refused) {
    std::vector<std::string> args = {"plan", "--config", config, "--hardware", good, "--nproc", "8"};
    args.insert(args.end(), flags.begin(), flags.end());
    CommandResult no = RunLockstep(args);
    EXPECT_EQ(no.exit_code, 2) << want;
    EXPECT_EQ(std::count(no.err.begin(), no.err.end(), '\n'), 1) << no.err;
    EXPECT_NE(no.err.find(want), std::string::npos) << no.err;
  }
}

// A described machine: `peak` TFLOP/s at full efficiency (flash attention's backward at
// `attention_bwd` of it), `memory` GB/s of HBM and `link` GB/s between devices, nothing lost.
std::string Machine(int devices, double peak, double attention_bwd, double memory, double link) {
  std::ostringstream o;
  o << "name = \"synthetic\"\n[node]\ndevices = " << devices
    << "\n[device]\nmemory_gib = 1000\npeak_tflops_bf16 = " << peak << "\npeak_tflops_fp32 = " << peak
    << "\nmatmul_efficiency = 1\nattention_efficiency = 1\nattention_bwd_efficiency = " << attention_bwd
    << "\nmemory_gbs = " << memory << "\nmemory_efficiency = 1\n";
  for (const char* l : {"intra_node", "inter_node"})
    o << "[" << l << "]\nbandwidth_gbs = " << link << "\nlatency_us = 0\nefficiency = 1\n";
  return o.str();
}

struct SmallLlama {
  static constexpr int layers = 2, h = 64, heads = 4, kv_heads = 2, f = 128, vocab = 256, s = 32;
  static constexpr double kv = static_cast<double>(kv_heads) * h / heads;
  static constexpr int64_t layer_params = h * (h + 2 * kv_heads * (h / heads)) + h * h + 3 * h * f + 2 * h;
  static constexpr int64_t total = layers * layer_params + 2 * vocab * h + h;  // + embedding, untied head, norm

  // Writes the config (batch_size rows) and the machine, plans for `nproc` and returns its rows.
  static nlohmann::json Plan(const std::string& dir, const std::string& machine, int nproc, int batch,
                             const std::string& extra = "") {
    std::ofstream(dir + "/hw.toml") << machine;
    std::ofstream(dir + "/llama.toml") << "[model]\nkind = \"llama\"\nvocab = " << vocab << "\ncontext = " << s
                                       << "\nlayers = " << layers << "\nheads = " << heads
                                       << "\nkv_heads = " << kv_heads << "\nwidth = " << h << "\nffn_hidden = " << f
                                       << "\n[train]\nbatch_size = " << batch << "\n"
                                       << extra;
    CommandResult r = RunLockstep({"plan", "--config", dir + "/llama.toml", "--hardware", dir + "/hw.toml", "--nproc",
                                   std::to_string(nproc), "--json", dir + "/plan.json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? ReadJson(dir + "/plan.json")["layouts"] : nlohmann::json::array();
  }
};

// The Llama terms on a described machine where only the products cost anything (1 TFLOP/s at
// full efficiency, memory and links effectively free): flash attention's backward does 2.5x
// its forward's FLOPs (at attention_bwd_efficiency), torchtitan's op policy recomputes every
// second matmul of a layer (wk, wo, w3) and full recompute the whole forward.
TEST(Plan, LlamaTimeTermsOnADescribedMachine) {
  const std::string dir = MakeTempDir("plan-llama");
  using M = SmallLlama;
  const double tokens = M::s, ms_per_flop = 1e3 / 1e12;
  const double matmul = tokens * 2 * (M::h * (M::h + 2 * M::kv) + M::h * M::h + 3.0 * M::h * M::f) * ms_per_flop;
  const double attention = tokens * 4 * (M::s / 2.0) * M::h * ms_per_flop;  // the causal half
  const double head = 3 * tokens * 2 * M::h * M::vocab * ms_per_flop;
  for (double bwd : {1.0, 0.5}) {
    std::map<std::string, double> step;
    for (const nlohmann::json& row : M::Plan(dir, Machine(1, 1, bwd, 1e9, 1e9), 1, 1)) {
      step[row["recompute"].get<std::string>()] = row["step_ms"];
      // One stage holds every parameter: both the embedding and the untied head, as bf16 weights.
      EXPECT_EQ(row["rank0"]["params_bytes"].get<int64_t>(), 2 * M::total);
    }
    ASSERT_EQ(step.size(), 3u);
    EXPECT_NEAR(step["none"], M::layers * (3 * matmul + attention + 2.5 * attention / bwd) + head, 1e-6 * step["none"]);
    EXPECT_NEAR(step["op"] - step["none"],
                M::layers * tokens * 2 * (M::h * M::kv + M::h * M::h + M::h * M::f) * ms_per_flop, 1e-6 * step["none"]);
    EXPECT_NEAR(step["full"] - step["none"], M::layers * (matmul + attention), 1e-6 * step["none"]);
  }
}

// FSDP (ZeRO-3) on a described machine, 2 devices, one row each. Products free: (a) memory at
// 1 GB/s and links free, the zero-3 row over the zero-1 row is FSDP2's copy-out of every
// gathered bf16 weight (read and written; the blocks' in the forward and the backward, the
// root's once) less the smaller optimizer pass (16 bytes a parameter over 2 against 6 + 12 / 2,
// read and written); (b) links at 1 GB/s
// and memory free, nothing hides the per-layer gathers (bf16, twice) and reduce-scatters
// (fp32), and the edges (the unit outside the blocks and the first block) are gathered
// before the compute and reduce-scattered after it once more. Also gradient clipping's pass.
TEST(Plan, FsdpCopyOutEdgesAndClippingOnADescribedMachine) {
  const std::string dir = MakeTempDir("plan-fsdp");
  using M = SmallLlama;
  auto row = [](const nlohmann::json& rows, int zero) {
    for (const nlohmann::json& r : rows)
      if (r["layout"] == "dp=2,tp=1,pp=1" && r["zero"] == zero && r["recompute"] == "none" && r["micro_rows"] == 1)
        return r["step_ms"].get<double>();
    ADD_FAILURE() << "no dp=2 zero " << zero << " row";
    return 0.0;
  };
  const double p = static_cast<double>(M::total), ms_per_byte = 1e3 / 1e9;
  nlohmann::json rows = M::Plan(dir, Machine(2, 1e9, 1, 1, 1e9), 2, 2);
  const double blocks = static_cast<double>(M::layers) * M::layer_params;
  EXPECT_NEAR(row(rows, 3) - row(rows, 1),
              (8 * blocks + 4 * (p - blocks) + 2 * p * (16.0 / 2 - (6 + 12.0 / 2))) * ms_per_byte, 1e-4);
  // Gradient clipping (optim.grad_clip > 0): the norm reads and the clip scales every fp32
  // gradient element the rank holds, 12 bytes each (ZeRO-1 and FSDP: half of them here).
  const nlohmann::json clipped = M::Plan(dir, Machine(2, 1e9, 1, 1, 1e9), 2, 2, "[optim]\ngrad_clip = 1.0\n");
  EXPECT_NEAR(row(clipped, 3) - row(rows, 3), 12 * p / 2 * ms_per_byte, 1e-4);
  EXPECT_NEAR(row(clipped, 1) - row(rows, 1), 12 * p / 2 * ms_per_byte, 1e-4);
  rows = M::Plan(dir, Machine(2, 1e9, 1, 1e9, 1), 2, 2);
  const double half = 0.5 * ms_per_byte;  // (n - 1) / n of the bytes cross the link
  const double per_layer = (2 * 2 + 4) * M::layer_params * half;
  const double edge = (2 + 4) * (M::total - M::layers * M::layer_params + M::layer_params) * half;
  EXPECT_NEAR(row(rows, 3), M::layers * per_layer + edge, 1e-4);
}

}  // namespace
}  // namespace lockstep::testing
