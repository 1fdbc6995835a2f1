#include "lockstep/comm/mpi/mpi_env.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <vector>

// LeakSanitizer's "check now" entry point; null unless the program is built with it.
extern "C" void __lsan_do_leak_check(void) __attribute__((weak));
extern "C" void __lsan_disable(void) __attribute__((weak));
extern "C" void __lsan_enable(void) __attribute__((weak));

namespace lockstep::comm::mpi_detail {
namespace {

std::mutex g_init_mu;
bool g_init_done = false;
Status g_init_status;
bool g_we_initialized = false;
std::atomic<bool> g_serialize{false};
std::atomic<bool> g_finalized{false};
std::recursive_mutex g_call_mu;  // recursive: cleanup paths may nest guards
std::atomic<int64_t> g_abandoned{0};

std::mutex g_registry_mu;
std::vector<MpiResource*>& Registry() {
  static auto* r = new std::vector<MpiResource*>();  // leaked: used from atexit
  return *r;
}

void FinalizeAtExit() {
  // Shut communicators down newest first: children (Split) before their parents.
  for (;;) {
    MpiResource* r = nullptr;
    {
      std::lock_guard<std::mutex> lk(g_registry_mu);
      if (Registry().empty()) break;
      r = Registry().back();
      Registry().pop_back();
    }
    r->ShutdownBeforeFinalize();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || !g_we_initialized) return;
  if (g_abandoned.load() > 0) {
    std::fflush(stdout);
    std::fprintf(stderr,
                 "lockstep: %lld MPI operation(s) of a failed collective are still pending; "
                 "aborting the MPI job instead of finalizing\n",
                 static_cast<long long>(g_abandoned.load()));
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // OpenMPI leaves many allocations unreachable once MPI_Finalize has unloaded its
  // components, which LeakSanitizer's exit-time check would report. Check for leaks here
  // instead, while MPI's memory is still reachable: this catches lockstep's own leaks and
  // turns the exit-time check off (see docs of __lsan_do_leak_check).
  if (&__lsan_do_leak_check != nullptr) __lsan_do_leak_check();
  g_finalized.store(true);
  MPI_Finalize();
}

}  // namespace

Status EnsureMpiInitialized() {
  std::lock_guard<std::mutex> lk(g_init_mu);
  if (g_init_done) return g_init_status;
  g_init_done = true;
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    IgnoreMpiLeaks ignore;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      g_init_status = Status::Internal("MPI_Init_thread failed: " + MpiErrorString(rc));
      return g_init_status;
    }
    g_we_initialized = true;
    std::atexit(FinalizeAtExit);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    g_init_status = Status::Unimplemented("the MPI library offers only thread level " + std::to_string(provided) +
                                          "; the mpi backend needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE");
    return g_init_status;
  }
  g_serialize.store(provided < MPI_THREAD_MULTIPLE);
  // Errors come back as codes (turned into Status), never as an abort inside MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return g_init_status;
}

bool MpiFinalized() { return g_finalized.load(std::memory_order_relaxed); }

IgnoreMpiLeaks::IgnoreMpiLeaks() {
  if (&__lsan_disable != nullptr) __lsan_disable();
}

IgnoreMpiLeaks::~IgnoreMpiLeaks() {
  if (&__lsan_enable != nullptr) __lsan_enable();
}

MpiCallGuard::MpiCallGuard() : locked_(g_serialize.load(std::memory_order_relaxed)) {
  if (locked_) g_call_mu.lock();
}

MpiCallGuard::~MpiCallGuard() {
  if (locked_) g_call_mu.unlock();
}

std::string MpiErrorString(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, static_cast<size_t>(len));
}

MPI_Datatype ElementType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return MPI_FLOAT;
    case DType::kBF16:
      return MPI_UINT16_T;
    case DType::kI32:
      return MPI_INT32_T;
    case DType::kI64:
      return MPI_INT64_T;
    case DType::kU8:
      return MPI_BYTE;
  }
  return MPI_BYTE;
}

void RegisterResource(MpiResource* r) {
  std::lock_guard<std::mutex> lk(g_registry_mu);
  Registry().push_back(r);
}

void UnregisterResource(MpiResource* r) {
  std::lock_guard<std::mutex> lk(g_registry_mu);
  auto& reg = Registry();
  reg.erase(std::remove(reg.begin(), reg.end(), r), reg.end());
}

void NoteAbandonedRequests(int n) { g_abandoned.fetch_add(n); }

void KeepForever(std::shared_ptr<void> buffers) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::shared_ptr<void>>();  // never destroyed: still reachable
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(buffers));
}

}  // namespace lockstep::comm::mpi_detail
