#!/bin/bash
# A real Slurm on the emulated cluster (scripts/cluster.sh): slurmctld on host 0 and one slurmd
# a host, each in its host's network namespace with the host's name (UTS namespace); one munged
# for the cluster. For trying sbatch/srun with lockstep on one machine, and for
# tests/scripts/slurm_test.sh.
#
#   scripts/slurm-cluster.sh up N [--rate RATE]   the cluster (cluster.sh up) and Slurm on it
#   scripts/slurm-cluster.sh run COMMAND...       COMMAND on host 0 with SLURM_CONF set
#                                                 (sbatch, srun, sinfo, squeue, scontrol ...)
#   scripts/slurm-cluster.sh down                 Slurm and the cluster removed
#
# The partition `lockstep` holds every host, CPUs as `nproc` says (the hosts share this
# machine's cores). Jobs see the machine's files, as nodes on a shared filesystem do. Files go
# to LOCKSTEP_SLURM_DIR (default /var/tmp/<cluster name>-slurm): slurm.conf (the controller's
# and the clients'), conf-<host>/ (each slurmd's: the same slurm.conf, and an mpi.conf giving
# its PMIx client directories a base of their own, which on real nodes their own /tmp gives),
# logs (log/), the munge key and socket.
# LOCKSTEP_CLUSTER_NAME and _SUBNET choose the cluster, as for cluster.sh. Needs root, and
# Debian's slurmctld, slurmd, slurm-client and munge (scripts/setup.sh installs them).
set -eEuo pipefail

me=slurm-cluster.sh
here=$(cd "$(dirname "$0")" && pwd)
NAME=${LOCKSTEP_CLUSTER_NAME:-lockstep}
SUBNET=${LOCKSTEP_CLUSTER_SUBNET:-10.214.0}
CLUSTER_DIR=${LOCKSTEP_CLUSTER_DIR:-/run/$NAME-cluster}
DIR=${LOCKSTEP_SLURM_DIR:-/var/tmp/$NAME-slurm}
H=$NAME-h

die() { echo "$me: $*" >&2; exit 2; }

need() {
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, slurmd); running as uid $(id -u)"
  local tool
  for tool in slurmctld slurmd srun sinfo munged mungekey; do
    command -v "$tool" >/dev/null || die "needs $tool (Debian packages slurmctld slurmd slurm-client munge)"
  done
}

# Daemons of this Slurm, found by the config file on their command lines.
stop_daemons() {
  pkill -9 -f -- "-f $DIR/(conf-[^ ]*/)?slurm.conf" 2>/dev/null || true
  if [ -f "$DIR/munged.pid" ]; then kill -9 "$(cat "$DIR/munged.pid")" 2>/dev/null || true; fi
}

# slurmd of host K in its namespace, named after it, with its own configuration directory:
# two nodes' PMIx servers on one /tmp would both make /tmp/spmix_appdir_<uid>_<job>.<step>
# and the second step launch would fail ("File exists").
start_slurmd() {
  local k=$1 conf=$DIR/conf-$H$k
  mkdir -p "$DIR/spool-$H$k" "$DIR/pmix-$H$k" "$conf"
  cp "$DIR/slurm.conf" "$DIR/cgroup.conf" "$conf/"
  echo "PMIxCliTmpDirBase=$DIR/pmix-$H$k" >"$conf/mpi.conf"
  ip netns exec "$H$k" unshare --uts \
    sh -c "hostname $H$k && SLURM_CONF=$conf/slurm.conf exec slurmd -f $conf/slurm.conf"
}

up() {
  local n=$1
  shift
  need
  "$here/cluster.sh" up "$n" "$@" >/dev/null
  stop_daemons
  rm -rf "$DIR"
  mkdir -p "$DIR/state" "$DIR/log"
  chmod 700 "$DIR"
  mungekey -c -k "$DIR/munge.key" 2>/dev/null || dd if=/dev/urandom of="$DIR/munge.key" bs=1024 count=1 status=none
  chmod 600 "$DIR/munge.key"
  munged --force --socket="$DIR/munge.sock" --key-file="$DIR/munge.key" --pid-file="$DIR/munged.pid" \
    --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge.seed"
  local cpus
  cpus=$(nproc)
  {
    echo "# written by $me: a Slurm on the emulated cluster $NAME"
    echo "ClusterName=$NAME"
    echo "SlurmctldHost=${H}0($SUBNET.1)"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$DIR/munge.sock"
    # No cgroups for tracking or binding: the nodes are namespaces of one machine.
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "MpiDefault=none"
    echo "SchedulerType=sched/builtin"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "StateSaveLocation=$DIR/state"
    echo "SlurmdSpoolDir=$DIR/spool-%n"
    echo "SlurmctldPidFile=$DIR/slurmctld.pid"
    echo "SlurmdPidFile=$DIR/slurmd-%n.pid"
    echo "SlurmctldLogFile=$DIR/log/slurmctld.log"
    echo "SlurmdLogFile=$DIR/log/slurmd-%n.log"
    # A node that stops answering is DOWN after 10 s (jobs submitted with --no-kill go on).
    echo "SlurmdTimeout=10"
    echo "ReturnToService=2"
    echo "InactiveLimit=0"
    echo "KillWait=5"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    local k
    for ((k = 0; k < n; k++)); do echo "NodeName=$H$k NodeAddr=$SUBNET.$((k + 1)) CPUs=$cpus State=UNKNOWN"; done
    echo "PartitionName=lockstep Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$DIR/slurm.conf"
  # The machine mounts cgroup v1 under a tmpfs, which Slurm's autodetection misreads.
  printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\n' >"$DIR/cgroup.conf"
  ip netns exec "${H}0" unshare --uts sh -c "hostname ${H}0 && exec slurmctld -f $DIR/slurm.conf"
  for ((k = 0; k < n; k++)); do start_slurmd "$k"; done
  # Every node idle within 30 s, or say which are not.
  local i state=""
  for ((i = 0; i < 60; i++)); do
    state=$(run sinfo -h -N -o '%N %t' 2>/dev/null || true)
    if [ "$(grep -c ' idle$' <<<"$state")" -eq "$n" ]; then
      echo "$me: up: slurmctld on ${H}0, slurmd on ${H}0..${H}$((n - 1)); SLURM_CONF=$DIR/slurm.conf"
      return 0
    fi
    sleep 0.5
  done
  echo "$me: the nodes did not come up within 30 s: ${state:-no answer from slurmctld} (logs in $DIR/log)" >&2
  exit 1
}

# COMMAND in host 0's namespace, where slurmctld answers.
run() {
  [ -f "$DIR/slurm.conf" ] || die "no Slurm is up ($DIR/slurm.conf is missing): $me up N first"
  ip netns exec "${H}0" env SLURM_CONF="$DIR/slurm.conf" "$@"
}

case "${1:-}" in
  up)
    [ $# -ge 2 ] || die "usage: $me up N [--rate RATE]"
    shift
    up "$@"
    ;;
  run)
    shift
    [ $# -ge 1 ] || die "usage: $me run COMMAND..."
    run "$@"
    ;;
  restart-node)  # K: slurmd of host K again (after a test killed the host's processes)
    need
    start_slurmd "$2"
    ;;
  down)
    stop_daemons
    rm -rf "$DIR"
    "$here/cluster.sh" down
    ;;
  *) die "usage: $me up N [--rate RATE] | run COMMAND... | down" ;;
esac
