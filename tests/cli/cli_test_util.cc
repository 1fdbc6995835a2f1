#include "cli_test_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace lockstep::testing {
namespace {

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

CommandResult RunLockstep(const std::vector<std::string>& args) {
  std::string dir = MakeTempDir("cmd");
  // Appended piece by piece: GCC 12's -Wrestrict misfires on chains of operator+ here.
  std::string cmd = "cd ";
  cmd += Quote(LOCKSTEP_SOURCE_DIR);
  cmd += " && ";
  cmd += Quote(std::string(LOCKSTEP_BINARY_DIR) + "/lockstep");
  for (const std::string& a : args) {
    cmd += ' ';
    cmd += Quote(a);
  }
  cmd += " >";
  cmd += dir;
  cmd += "/out 2>";
  cmd += dir;
  cmd += "/err </dev/null";
  int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = Slurp(dir + "/out");
  r.err = Slurp(dir + "/err");
  std::system(("rm -rf " + Quote(dir)).c_str());
  return r;
}

std::string MakeTempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/lockstep-" + prefix + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* d = mkdtemp(buf.data());
  return d ? std::string(d) : std::string();
}

std::string CachedDoneHash(const std::vector<std::string>& args) {
  const std::string binary = std::string(LOCKSTEP_BINARY_DIR) + "/lockstep";
  struct stat st {};
  stat(binary.c_str(), &st);
  std::string key = std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  for (const std::string& a : args) key += "\x1f" + a;
  const std::string dir = std::string(LOCKSTEP_BINARY_DIR) + "/test-cache";
  mkdir(dir.c_str(), 0755);
  const std::string base = dir + "/" + std::to_string(std::hash<std::string>{}(key));
  const int lock = open((base + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
  if (lock >= 0) flock(lock, LOCK_EX);
  std::string hash = Slurp(base + ".hash");
  if (hash.empty()) {
    const std::string out = MakeTempDir("cached");
    std::vector<std::string> a = args;
    for (std::string& x : a)
      if (x == "{out}") x = out;
    CommandResult r = RunLockstep(a);
    hash = DoneHash(out);
    EXPECT_FALSE(hash.empty()) << r.err;
    if (!hash.empty()) std::ofstream(base + ".hash") << hash;
    std::system(("rm -rf " + Quote(out)).c_str());
  }
  if (lock >= 0) close(lock);
  return hash;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

std::string DoneHash(const std::string& run_dir) {
  auto lines = ReadLines(run_dir + "/metrics.jsonl");
  if (lines.empty()) return "";
  auto j = nlohmann::json::parse(lines.back(), nullptr, false);
  if (j.is_discarded() || j.value("event", "") != "done") return "";
  return j.value("weights_xxh64", "");
}

int64_t ExpectResumedAt(const std::string& run_dir, int64_t step) {
  std::vector<nlohmann::json> rows;
  for (const std::string& line : ReadLines(run_dir + "/metrics.jsonl")) rows.push_back(nlohmann::json::parse(line));
  size_t resume = rows.size();
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].value("event", "") == "resume") resume = i;
  if (resume == rows.size()) {
    ADD_FAILURE() << run_dir << ": no resume row (the run started over)";
    return 0;
  }
  const int64_t from = rows[resume].value("step", int64_t{-1});
  if (step >= 0) {
    EXPECT_EQ(from, step) << rows[resume].dump();
  } else {
    EXPECT_GT(from, 0) << rows[resume].dump();
  }
  for (size_t i = resume + 1; i < rows.size(); ++i) {
    if (!rows[i].contains("loss")) continue;
    EXPECT_EQ(rows[i].value("step", int64_t{-1}), from + 1)
        << "first training row after the resume: " << rows[i].dump();
    return from;
  }
  ADD_FAILURE() << run_dir << ": no training row after the resume at step " << from;
  return 0;
}

std::vector<std::string> TinyGptFlags() {
  return {"--config", "configs/gpt-tiny.toml", "--set", "model.layers=1",   "--set", "model.width=32",
          "--set",    "model.heads=2",         "--set", "model.context=32", "--set", "train.batch_size=8",
          "--set",    "optim.warmup_steps=1",  "--set", "eval.batches=2",   "--set", "train.log_every=1"};
}

std::vector<std::string> TinyTrainArgs(const std::string& out, int steps, int checkpoint_every,
                                       const std::vector<std::string>& extra) {
  std::vector<std::string> args = TinyGptFlags();
  args.insert(args.begin(), "train");
  for (const std::string& e :
       {std::string("--steps"), std::to_string(steps), std::string("--out"), out, std::string("--set"),
        "checkpoint.every=" + std::to_string(checkpoint_every), std::string("--set"), std::string("checkpoint.keep=5")})
    args.push_back(e);
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::string TrainTiny(const std::string& prefix, int steps, int checkpoint_every,
                      const std::vector<std::string>& extra) {
  std::string dir = MakeTempDir(prefix);
  CommandResult r = RunLockstep(TinyTrainArgs(dir, steps, checkpoint_every, extra));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(DoneHash(dir).size(), 16u) << r.err;
  return dir;
}

std::vector<nlohmann::json> Events(const std::string& run_dir, const std::string& kind) {
  std::vector<nlohmann::json> rows;
  for (const std::string& l : ReadLines(run_dir + "/metrics.jsonl")) {
    auto j = nlohmann::json::parse(l);
    if (j.value("event", "") == kind) rows.push_back(j);
  }
  return rows;
}

std::string WhatRan(const std::string& run_dir) {
  const std::vector<nlohmann::json> starts = Events(run_dir, "start");
  if (starts.empty()) return run_dir + ": no start row";
  const nlohmann::json& s = starts.front();
  std::string ran = s.value("layout", "?") + " zero=" + std::to_string(s.value("zero", -1)) +
                    " world=" + std::to_string(s.value("world", -1)) + " " + s.value("backend", "?");
  if (const int64_t accum = s.value("accum_steps", int64_t{1}); accum > 1) ran += " accum=" + std::to_string(accum);
  for (const nlohmann::json& p : Events(run_dir, "pipeline"))
    if (p.contains("schedule")) return ran + " " + p["schedule"].get<std::string>();
  return ran;
}

nlohmann::json LastMemoryRow(const std::string& run_dir) {
  nlohmann::json last;
  for (const nlohmann::json& j : Events(run_dir, "memory"))
    if (j.value("rank", -1) == 0) last = j;
  return last;
}

void ExpectEachStepOnce(const std::string& run_dir, int64_t steps) {
  std::vector<int64_t> seen, want;
  for (const std::string& l : ReadLines(run_dir + "/metrics.jsonl")) {
    auto j = nlohmann::json::parse(l);
    if (j.contains("loss")) seen.push_back(j["step"].get<int64_t>());
  }
  for (int64_t s = 1; s <= steps; ++s) want.push_back(s);
  EXPECT_EQ(seen, want);
}

}  // namespace lockstep::testing
