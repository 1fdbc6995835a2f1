// The variables a supervisor (recovery/supervisor.h) sets in the environment of the workers
// it starts: how a worker knows it is supervised, and where it shows it is alive. Here, below
// both, because the launch of a job over hosts passes them on too (setup/hosts.h).
#pragma once

namespace lockstep::runtime {

// Where a supervised rank touches its heartbeat file (recovery/heartbeat.h).
inline constexpr const char* kHeartbeatDirEnv = "LOCKSTEP_HEARTBEAT_DIR";

// Set in the environment of a restarted attempt: even when it starts from step 0 (nothing
// committed yet) it keeps metrics.jsonl (the supervisor's restart rows) instead of truncating.
inline constexpr const char* kRestartEnv = "LOCKSTEP_SUPERVISED_RESTART";

}  // namespace lockstep::runtime
