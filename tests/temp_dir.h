// A fresh empty directory for one test, removed with everything in it (whatever modes a test
// set inside) when it goes out of scope. Under $LOCKSTEP_TEST_TMPDIR when set, else /dev/shm
// when writable (tests that fsync a lot run on tmpfs: what fsync guarantees is modelled by
// tests/checkpoint/fault_env.h, not measured on a disk), else $TMPDIR or /tmp. A test whose
// files must not live in memory (one measuring the resident set while it maps them) asks for
// kDisk: the system's temporary directory.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace lockstep::testing {

class TempDir {
 public:
  enum class Medium { kFast, kDisk };
  explicit TempDir(Medium medium = Medium::kFast) {
    const std::string base = medium == Medium::kDisk ? std::filesystem::temp_directory_path().string() : Base();
    std::string tmpl = base + "/lockstep-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed in " + base);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    // A test may have taken its own permissions away (an unreadable file or directory).
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }
  std::string operator/(const std::string& name) const { return Sub(name); }

 private:
  static std::string Base() {
    if (const char* v = std::getenv("LOCKSTEP_TEST_TMPDIR"); v != nullptr && *v) return v;
    if (::access("/dev/shm", W_OK) == 0) return "/dev/shm";
    const char* t = std::getenv("TMPDIR");
    return t != nullptr && *t ? t : "/tmp";
  }
  std::string path_;
};

}  // namespace lockstep::testing
