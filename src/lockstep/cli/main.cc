// lockstep: the command-line entry point. Dispatches to subcommands; the only place that
// turns a Status into an exit code (2 for bad input, 1 for failures at run time).
#include <malloc.h>

#include <cstdio>
#include <string>

#include "lockstep/cli/commands.h"

int main(int argc, char** argv) {
  // Keep freed memory mapped. glibc's defaults hand a freed block of a few hundred KiB or more
  // back to the kernel (munmap, or trimming a heap's top), and the next allocation of that size
  // faults every 4 KiB page in again: a training step frees and allocates the same transient
  // buffers (ZeRO units, collective scratch, validation batches) every time. Fixed thresholds
  // also stop glibc's adaptive ones. Blocks above 32 MiB are still mapped on their own; the
  // activation pool keeps those.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  return lockstep::cli::Main(argc, argv);
}
