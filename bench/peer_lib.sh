# Shared by the bench/ scripts that run the PyTorch peer (source it; needs bash).
#
# The peer is what a user would really run: Debian's python3-torch on OpenBLAS. Without
# libopenblas0-pthread, Debian's torch calls the reference BLAS (about 15x slower), which is no
# peer: peer_setup installs OpenBLAS when missing, and peer_blas fails the benchmark unless the
# library torch actually loaded is OpenBLAS. Peers run with as many OpenMP/OpenBLAS threads as
# lockstep's compute threads (peer_env T).

PEERS=${PEERS:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/shared/peers}

peer_setup() {
  local missing=()
  for p in python3-torch python3-numpy libopenblas0-pthread; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "bench: installing ${missing[*]}" >&2
    local sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
  [ -f "$PEERS/torch_gpt.py" ] || { echo "bench: no peer scripts in $PEERS (set PEERS=)" >&2; exit 2; }
}

# The environment a T-thread peer runs in.
peer_env() { echo "OMP_NUM_THREADS=$1 OPENBLAS_NUM_THREADS=$1 MKL_NUM_THREADS=$1"; }

# Runs a peer script with T threads and prints its output plus a `blas=<path>` line read from
# the process's own mappings after the run (torch_cnn.py does not print it itself).
# Usage: peer_run T script.py args...
peer_run() {
  local t=$1 script=$2
  shift 2
  env $(peer_env "$t") /usr/bin/python3 - "$script" --threads "$t" "$@" <<'PY'
import runpy, sys
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
import resource
blas = next((l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.lower()), "none")
print(f"blas={blas} peak_rss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")
PY
}

# Fails (exit 1) unless the peer output names an OpenBLAS library; prints the library.
peer_check_blas() {
  local blas
  blas=$(grep -o 'blas=[^ ]*' <<<"$1" | tail -1 | cut -d= -f2)
  case "$blas" in
    *openblas*) echo "$blas" ;;
    *) echo "bench: the PyTorch peer loaded '$blas', not OpenBLAS: no peer (install libopenblas0-pthread)" >&2; exit 1 ;;
  esac
}

# Runs a command, discarding its output, and prints the peak RSS (KiB) of the processes it
# waited for (lockstep, and with the threads backend that is every worker). Fails if it fails.
rss_run() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
if r.returncode != 0:
    sys.stderr.write(r.stderr.decode(errors="replace")[-2000:])
    sys.exit(r.returncode)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}

# One line naming the machine: processor, the vector ISA that sets oneDNN's speed, cores.
machine_line() {
  local model isa=""
  model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
  local flags
  flags=$(grep -m1 '^flags' /proc/cpuinfo)
  for f in avx2 avx512f avx512_bf16 amx_bf16; do
    grep -qw "$f" <<<"$flags" && isa="$isa${isa:+ }$f"
  done
  echo "machine: $model, $(nproc) cores, ISA: $isa; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
}

# Median of a metrics.jsonl field over training rows after the first 3 (warm-up).
metrics_median() {
  python3 - "$1" "$2" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
vals = [r[sys.argv[2]] for r in rows if "loss" in r and sys.argv[2] in r][3:]
print(statistics.median(vals))
PY
}

# A field of the last row of metrics.jsonl that has it.
metrics_last() {
  python3 - "$1" "$2" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print([r[sys.argv[2]] for r in rows if sys.argv[2] in r][-1])
PY
}

# A key=value field of a peer's result line.
peer_field() { grep -o "$2=[^ ]*" <<<"$1" | tail -1 | cut -d= -f2; }

# Writes DIR/one_bucket.py: runs a peer script with DDP's whole gradient in one bucket. torch
# 1.13's PowerSGD hook over gloo aborts when two buckets' hooks are in flight ("enforce fail at
# gloo/transport/tcp/pair.cc: op.preamble.length <= op.nbytes"), so the DDP peers of
# bench/low_comm*.sh run this way (their synchronous rows too, for the same bucketing).
# Usage: python3 DIR/one_bucket.py script.py args...
peer_one_bucket_wrapper() {
  cat >"$1/one_bucket.py" <<'PY'
import runpy, sys
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 40
init = DDP.__init__
def one_bucket(self, *a, **k):
    k.setdefault("bucket_cap_mb", 1 << 20)
    init(self, *a, **k)
DDP.__init__ = one_bucket
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
PY
}
