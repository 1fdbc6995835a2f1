#!/bin/sh
# A launch agent for OpenMPI's rsh launcher that enters a Linux network namespace instead of
# logging in to another machine, so that one machine can stand in for several (each
# namespace is a "host" with its own interfaces and addresses).
#
#   mpirun --mca plm_rsh_agent /path/to/netns-agent.sh --hostfile HOSTS ...
#
# OpenMPI calls the agent the way it calls ssh:  AGENT [ssh options] HOST WORD...
# where the WORDs together are one shell command line (with its own quoting), meant for the
# remote login shell. This agent drops the ssh options, maps HOST to a namespace and runs
# the command line there with `ip netns exec NS sh -c "WORD WORD ..."`, exactly as sshd
# would hand it to `sh -c`. It needs root (or CAP_SYS_ADMIN) like `ip netns exec` does.
#
# HOST -> namespace: the file named by LOCKSTEP_NETNS_MAP (lines "HOST NAMESPACE"; '#'
# starts a comment) is consulted first; a HOST that is not listed there but is the name of
# a namespace (`ip netns list`) is used as is. Anything else is an error (exit 255, like
# ssh's "could not resolve hostname"), never a silent run on the wrong host.
set -u

me="netns-agent"

# ssh options OpenMPI or a user may pass before the host; those that take a value skip it.
while [ $# -gt 0 ]; do
  case "$1" in
    -[bcDEeFIiJLlmOoPpQRSWw]) shift 2 ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done

if [ $# -lt 1 ]; then
  echo "$me: usage: $0 [ssh options] HOST COMMAND..." >&2
  exit 255
fi
host=$1
shift
# OpenMPI may pass "user@host" when a hostfile names a user.
host=${host#*@}

ns=""
if [ -n "${LOCKSTEP_NETNS_MAP:-}" ]; then
  if [ ! -r "$LOCKSTEP_NETNS_MAP" ]; then
    echo "$me: LOCKSTEP_NETNS_MAP=$LOCKSTEP_NETNS_MAP is not a readable file" >&2
    exit 255
  fi
  ns=$(awk -v h="$host" '{ sub(/#.*/, "") } $1 == h && NF >= 2 { print $2; exit }' "$LOCKSTEP_NETNS_MAP")
fi
if [ -z "$ns" ] && ip netns list 2>/dev/null | awk '{ print $1 }' | grep -qxF -- "$host"; then
  ns=$host
fi
if [ -z "$ns" ]; then
  echo "$me: no network namespace for host '$host' (add \"$host NAMESPACE\" to LOCKSTEP_NETNS_MAP)" >&2
  exit 255
fi

if [ $# -eq 0 ]; then
  echo "$me: no command for host '$host' (interactive logins are not supported)" >&2
  exit 255
fi

# Each host gets a host name of its own (a UTS namespace named like the host): OpenMPI names
# its shared-memory segments and session directories by host name, and two "hosts" with the
# machine's one name would share them (a crash in its vader transport).
# Like ssh: the words are joined with single spaces and the result is one shell command line.
exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns && $*"
