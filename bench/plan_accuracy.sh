#!/bin/bash
# How well `lockstep plan` predicts. For each model and worker count: run the plan
# (profile measured fresh), then train a sample of the layouts it lists (the recommended one
# plus rows spread over its ranking, any precision and recompute) for a few steps,
# and print predicted vs measured median step_ms (steps after the first two) and rank 0's
# peak_bytes (its last memory row: the run's peak, evaluation included), the error of each,
# the worst, and whether the recommended layout is within 10% of the fastest one measured.
# REPEAT=n (default 1) trains each sampled layout n times, the rounds interleaved over the
# sample, and the faster median counts: on a shared VM whose speed drifts by 10-25% within
# minutes it separates the model's error from the drift during the runs (the plan's profile
# is still measured once, as a user's plan is). With REPEAT >= 2, "spread" is how far apart the
# rounds' medians of a row came out (max / min - 1): the measurement's own noise.
# After the sample trains, the plan runs again on a fresh profile ("re-plan": its prediction for
# the same row against the same measurement): a row whose two plans disagree by as much as its
# error missed through the machine's drift between profile and training, not the model. The
# goal counts only the first plan (the one a user would run); the re-plan is a diagnostic.
# Each worker count's summary also prints both plans' second looks (how much faster or slower the
# profile's re-measured shape ran, and whether the profile was scaled to it).
# Usage: bench/plan_accuracy.sh [models="gpt-tiny cnn-fashion"] [workers="1 2 4"] [sample=8] [steps=12]
#        [backend=threads]   (needs scripts/setup.sh first; LOCKSTEP=path picks another binary)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/peer_lib.sh
MODELS=${1:-"gpt-tiny cnn-fashion"}
WORKERS=${2:-"1 2 4"}
SAMPLE=${3:-8}
STEPS=${4:-12}
BACKEND=${5:-threads}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
machine_line
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other processes share these cores)"
echo "each sampled layout trains ${REPEAT:-1} time(s) (rounds interleaved); the faster median step counts"
python3 - "$tmp" "$MODELS" "$WORKERS" "$SAMPLE" "$STEPS" "$BACKEND" <<'PY'
import json, os, statistics, subprocess, sys, time
tmp, models, workers, sample, steps, backend = sys.argv[1], sys.argv[2].split(), [int(w) for w in sys.argv[3].split()], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
repeat = max(1, int(os.environ.get("REPEAT", "1")))
common = ["--set", "eval.batches=1"]

def run(args):
    r = subprocess.run([os.environ.get("LOCKSTEP", "build/lockstep")] + args, capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        sys.exit(f"lockstep {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r

def pick(rows, rec, k):
    # The recommended row, then rows spread evenly over the ranking (fits first, fastest first).
    idx = [i for i, r in enumerate(rows) if r["fits"]]
    chosen = [rec] if rec >= 0 else []
    step = max(1, len(idx) / max(1, k))
    j = 0.0
    while len(chosen) < k and int(j) < len(idx):
        if idx[int(j)] not in chosen: chosen.append(idx[int(j)])
        j += step
    return chosen

worst_t = worst_m = (0.0, "")
def second_look(out):
    # The plan's second look at the compute (docs/planning.md, section 1): its ratios, as printed.
    line = next((l for l in out.splitlines() if l.startswith("second look at the compute")), "")
    return line.split("): ", 1)[1] if "): " in line else "none"

def probe_pass(out):
    # The ZeRO probe's plain pass over the N workers against the profile's (section 1), as printed.
    line = next((l for l in out.splitlines() if l.startswith("the ZeRO probe's plain pass")), "")
    return line.split(", ", 1)[1] if ", " in line else "none"

def same_row(a, b):
    return all(a[k] == b[k] for k in ("layout", "zero", "microbatches", "precision", "recompute"))

tally = {"rows": 0, "first": 0, "again": 0, "either": 0}
print(f"{'model':<12}{'N':>3} {'layout':<16}{'zero':>4}{'micro':>6} {'prec':>5} {'recomp':>6} {'pred ms':>9}{'meas ms':>9}{'err':>7}"
      f"{'spread':>7}{'re-plan':>8}  {'pred MiB':>9}{'meas MiB':>9}{'err':>7}")
for model in models:
    cfg = f"configs/{model}.toml"
    for n in workers:
        out = f"{tmp}/{model}-{n}"
        t0 = time.time()
        plan_out = run(["plan", "--config", cfg, "--nproc", str(n), "--backend", backend, "--out", out, "--json",
                        f"{out}/plan.json"] + common).stdout
        look, probe = second_look(plan_out), probe_pass(plan_out)
        plan_s = time.time() - t0
        plan = json.load(open(f"{out}/plan.json"))
        rows, rec = plan["layouts"], plan["recommended"]
        measured = {}
        chosen = pick(rows, rec, sample)
        best, peaks, rounds = {}, {}, {}
        for _ in range(repeat):
            for i in chosen:
                r = rows[i]
                pp = int(r["layout"].split("pp=")[1])
                key = "train.pp_microbatches" if pp > 1 else "train.accum_steps"
                d = f"{out}/run{i}"
                run(["train", "--config", cfg, "--nproc", str(n), "--backend", backend, "--steps", str(steps), "--out", d,
                     "--layout", r["layout"], "--zero", str(r["zero"]), "--set", f"{key}={r['microbatches']}",
                     "--set", f"train.precision={r['precision']}", "--set", f"train.recompute={r['recompute']}"] + common)
                lines = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
                ms = statistics.median([l["step_ms"] for l in lines if "step_ms" in l and l["step"] > 2])
                best[i] = min(ms, best.get(i, ms))
                rounds.setdefault(i, []).append(ms)
                # rank 0's last memory row: the run's peak so far, evaluation included
                peaks[i] = [l for l in lines if l.get("event") == "memory" and l.get("rank", 0) == 0][-1]["peak_bytes"]
        # The same plan on a profile measured now, after the training (see the header).
        look_again = second_look(run(["plan", "--config", cfg, "--nproc", str(n), "--backend", backend, "--out",
                                      f"{out}-again", "--json", f"{out}-again/plan.json"] + common).stdout)
        again = json.load(open(f"{out}-again/plan.json"))["layouts"]
        for i in chosen:
            r = rows[i]
            ms, peak = best[i], peaks[i]
            r2 = next((a for a in again if same_row(a, r)), None)
            e2 = r2["step_ms"] / ms - 1 if r2 else None
            spread = max(rounds[i]) / min(rounds[i]) - 1
            pm, pb = r["step_ms"], r["rank0"]["peak_bytes"]
            et, em = pm / ms - 1, pb / peak - 1
            measured[i] = ms
            name = f"{model} N={n} {r['layout']} zero {r['zero']} micro {r['microbatches']} {r['precision']} {r['recompute']}"
            if not worst_t[1] or abs(et) > abs(worst_t[0]): worst_t = (et, name)
            if not worst_m[1] or abs(em) > abs(worst_m[0]): worst_m = (em, name)
            mark = "*" if i == rec else " "
            tally["rows"] += 1
            tally["first"] += abs(et) <= 0.15
            tally["again"] += e2 is not None and abs(e2) <= 0.15
            tally["either"] += abs(et) <= 0.15 or (e2 is not None and abs(e2) <= 0.15)
            again_s = f"{100*e2:>+7.0f}%" if e2 is not None else f"{'-':>8}"
            print(f"{model:<12}{n:>3}{mark}{r['layout']:<16}{r['zero']:>4}{r['microbatches']:>6} {r['precision']:>5} {r['recompute']:>6} {pm:>9.1f}{ms:>9.1f}{100*et:>+6.0f}%"
                  f"{100*spread:>6.0f}%{again_s}  {pb/2**20:>9.1f}{peak/2**20:>9.1f}{100*em:>+6.0f}%", flush=True)
        if rec in measured:
            fastest = min(measured.values())
            print(f"{'':<12}{n:>3} plan took {plan_s:.1f} s; recommended measured {measured[rec]:.1f} ms, fastest measured "
                  f"{fastest:.1f} ms ({100*(measured[rec]/fastest-1):+.0f}%); one_worker_faster={plan['one_worker_faster']}, "
                  f"binding={plan['binding']}", flush=True)
            print(f"{'':<12}{n:>3} second looks (times against the first look): plan {look}; re-plan {look_again}",
                  flush=True)
            print(f"{'':<12}{n:>3} the ZeRO probe's plain pass over the {n} workers ({backend}), {probe}", flush=True)
print(f"worst step_ms error: {100*worst_t[0]:+.0f}% ({worst_t[1]})")
print(f"step_ms within 15%: {tally['first']} of {tally['rows']} rows (the plan); against the re-plan's profile "
      f"{tally['again']}; against either {tally['either']}")
print(f"worst peak_bytes error: {100*worst_m[0]:+.0f}% ({worst_m[1]})")
PY
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
