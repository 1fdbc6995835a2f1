#include "lockstep/data/byte_corpus.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "data/data_test_util.h"
#include "test_env.h"

namespace lockstep::data {
namespace {

using testing::TempDir;
using testing::WriteFile;

std::string AsString(std::span<const uint8_t> s) { return std::string(s.begin(), s.end()); }

TEST(ByteCorpus, SelectsDotlessRegularFilesInByteOrder) {
  TempDir dir;
  WriteFile(dir / "b", std::string(17, 'B'));
  WriteFile(dir / "a", "aa");
  WriteFile(dir / "Z", "Z");          // 'Z' (0x5a) sorts before 'a' (0x61)
  WriteFile(dir / "a.dat", "index");  // has a dot
  WriteFile(dir / ".hidden", "h");    // has a dot
  std::filesystem::create_symlink("b", dir / "b.u8");
  std::filesystem::create_symlink("a", dir / "link");  // no dot, but a symlink
  std::filesystem::create_directory(dir / "sub");      // no dot, but a directory
  WriteFile(dir / "sub/inner", "nested");
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);  // not a regular file

  auto files = ByteCorpus::SelectFiles(dir.path());
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[0].name, "Z");
  EXPECT_EQ((*files)[1].name, "a");
  EXPECT_EQ((*files)[2].name, "b");

  auto corpus = ByteCorpus::Load(dir.path(), 1);  // 20 bytes: 18 train, 2 val
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  EXPECT_EQ(AsString(corpus->bytes()), "Zaa" + std::string(17, 'B'));
  EXPECT_EQ(corpus->files().size(), 3u);
}

TEST(ByteCorpus, SplitIsFloorOfNinetyPercent) {
  EXPECT_EQ(ByteCorpus::SplitPoint(1000), 900);
  EXPECT_EQ(ByteCorpus::SplitPoint(1001), 900);  // 900.9
  EXPECT_EQ(ByteCorpus::SplitPoint(19), 17);     // 17.1
  EXPECT_EQ(ByteCorpus::SplitPoint(10), 9);
  // 0.9 is not exact in binary: like Python's int(n * 0.9), computed in double.
  EXPECT_EQ(ByteCorpus::SplitPoint(2576674), static_cast<int64_t>(2576674 * 0.9));

  TempDir dir;
  std::string text;
  for (int i = 0; i < 1001; ++i) text.push_back(static_cast<char>('a' + i % 26));
  WriteFile(dir / "text", text);
  auto corpus = ByteCorpus::Load(dir.path(), 8);
  ASSERT_TRUE(corpus.ok());
  EXPECT_EQ(corpus->train().size(), 900u);
  EXPECT_EQ(corpus->val().size(), 101u);
  EXPECT_EQ(AsString(corpus->train()), text.substr(0, 900));
  EXPECT_EQ(AsString(corpus->val()), text.substr(900));
}

void ExpectOneLineNaming(const Status& s, StatusCode code, const std::string& path) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.ToString();
}

TEST(ByteCorpus, Errors) {
  TempDir dir;
  ExpectOneLineNaming(ByteCorpus::Load(dir / "missing", 4).status(), StatusCode::kNotFound, dir / "missing");

  WriteFile(dir / "plain", "x");
  ExpectOneLineNaming(ByteCorpus::Load(dir / "plain", 4).status(), StatusCode::kInvalidArgument, dir / "plain");

  std::filesystem::create_directory(dir / "empty");
  WriteFile(dir / "empty/only.dat", "dots only");
  ExpectOneLineNaming(ByteCorpus::Load(dir / "empty", 4).status(), StatusCode::kNotFound, dir / "empty");

  std::filesystem::create_directory(dir / "small");
  WriteFile(dir / "small/f", std::string(100, 'x'));  // 90 train / 10 val bytes
  ExpectOneLineNaming(ByteCorpus::Load(dir / "small", 16).status(), StatusCode::kInvalidArgument, dir / "small");
  EXPECT_TRUE(ByteCorpus::Load(dir / "small", 9).ok());  // val 10 >= 9 + 1, train 90 >= 18
}

// Loads dir in a child process running as an unprivileged user (root reads any file whatever
// its mode, and CI runs as root), and hands back the status it got.
Status LoadAsUnprivilegedUser(const std::string& dir) {
  int fds[2];
  if (pipe(fds) != 0) return Status::Internal("pipe failed");
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    constexpr uid_t kNobody = 65534;
    if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0)) _exit(3);
    const Status s = ByteCorpus::Load(dir, 4).status();
    const int code = static_cast<int>(s.code());
    const std::string& m = s.message();
    if (write(fds[1], &code, sizeof(code)) != sizeof(code) ||
        write(fds[1], m.data(), m.size()) != static_cast<ssize_t>(m.size()))
      _exit(4);
    _exit(0);
  }
  close(fds[1]);
  int code = -1;
  std::string message;
  const bool got_code = read(fds[0], &code, sizeof(code)) == sizeof(code);
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) message.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  if (!got_code || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
    return Status::Internal("the unprivileged child failed (exit " + std::to_string(WEXITSTATUS(wstatus)) + ")");
  return Status(static_cast<StatusCode>(code), message);
}

TEST(ByteCorpus, UnreadableFileIsNamed) {
  TempDir dir;
  WriteFile(dir / "readable", std::string(100, 'x'));
  WriteFile(dir / "secret", std::string(100, 'x'));
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);  // the user can list the directory ...
  ASSERT_EQ(chmod((dir / "readable").c_str(), 0644), 0);
  ASSERT_EQ(chmod((dir / "secret").c_str(), 0), 0);  // ... but not read this file
  ExpectOneLineNaming(LoadAsUnprivilegedUser(dir.path()), StatusCode::kInvalidArgument, dir / "secret");
  // The same child loads the directory once the file is readable: the error was the mode.
  ASSERT_EQ(chmod((dir / "secret").c_str(), 0644), 0);
  EXPECT_TRUE(LoadAsUnprivilegedUser(dir.path()).ok());
}

TEST(ByteCorpus, RealFortunesCorpus) {
  if (!std::filesystem::is_directory(kDefaultCorpusDir)) {
    LOCKSTEP_SKIP_OUTSIDE_CI(kDefaultCorpusDir << " not installed (Debian package 'fortunes')");
  }
  auto corpus = ByteCorpus::Load(kDefaultCorpusDir, 128);
  ASSERT_TRUE(corpus.ok()) << corpus.status().ToString();
  int64_t total = 0;
  for (const auto& f : corpus->files()) {
    EXPECT_EQ(f.name.find('.'), std::string::npos);
    EXPECT_FALSE(std::filesystem::is_symlink(std::string(kDefaultCorpusDir) + "/" + f.name));
    total += f.size;
  }
  EXPECT_EQ(static_cast<int64_t>(corpus->bytes().size()), total);
  EXPECT_GT(total, 1000000);  // about 2.5 MB in Debian 12
  EXPECT_TRUE(std::is_sorted(corpus->files().begin(), corpus->files().end(),
                             [](const CorpusFile& a, const CorpusFile& b) { return a.name < b.name; }));
  EXPECT_EQ(corpus->split(), static_cast<int64_t>(static_cast<double>(total) * 0.9));
}

}  // namespace
}  // namespace lockstep::data
