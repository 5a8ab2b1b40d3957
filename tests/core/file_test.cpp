// core/include/ree/core/file.h: only regular files are read, bounded, and nothing blocks. Each
// refusal is one message naming the file's role, its path and why.
#include "ree/core/file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace ree {
namespace {

namespace fs = std::filesystem;

// A fresh directory per case under the system temporary directory, removed afterwards.
class RegularFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "ree_core_file_XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (fs::path(dir_) / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  // The call failed with kIoError and its message names the role, the path and the reason.
  static void expectRefused(Status status, const std::string& path, const std::string& why) {
    EXPECT_EQ(status, Status::kIoError);
    const std::string message = lastErrorMessage();
    EXPECT_NE(message.find("config.json '" + path + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(why), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  // Both statRegularFile and readRegularFile refuse `path`, saying `why`; nothing is read.
  static void expectReadAndStatRefused(const std::string& path, const std::string& why) {
    uint64_t size = 0;
    expectRefused(statRegularFile(path, "config.json", &size), path, why);
    std::string out = "stale";
    expectRefused(readRegularFile(path, 1024, "config.json", &out), path, why);
    EXPECT_TRUE(out.empty());
  }
  std::string dir_;
};

TEST_F(RegularFileTest, RegularFileIsReadWhole) {
  const std::string bytes("{\"a\": 1}\n\0tail", 14);
  const std::string path = write("config.json", bytes);
  uint64_t size = 0;
  EXPECT_EQ(statRegularFile(path, "config.json", &size), Status::kSuccess);
  EXPECT_EQ(size, bytes.size());
  std::string out = "stale";
  EXPECT_EQ(readRegularFile(path, 1024, "config.json", &out), Status::kSuccess);
  EXPECT_EQ(out, bytes);
  EXPECT_EQ(readRegularFile(path, bytes.size(), "config.json", &out), Status::kSuccess);
  EXPECT_EQ(out, bytes);
  EXPECT_EQ(readRegularFile(write("empty", ""), 0, "config.json", &out), Status::kSuccess);
  EXPECT_EQ(out, "");
}

TEST_F(RegularFileTest, SymlinkToARegularFileIsFollowed) {
  const std::string target = write("target.json", "{}");
  const std::string link = (fs::path(dir_) / "link.json").string();
  fs::create_symlink(target, link);
  std::string out;
  EXPECT_EQ(readRegularFile(link, 16, "config.json", &out), Status::kSuccess);
  EXPECT_EQ(out, "{}");
}

TEST_F(RegularFileTest, DirectoryIsRefused) {
  expectReadAndStatRefused(dir_, "is a directory, not a regular file");
}

TEST_F(RegularFileTest, FifoWithNoWriterIsRefusedWithoutBlocking) {
  const std::string fifo = (fs::path(dir_) / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  expectReadAndStatRefused(fifo, "is a FIFO, not a regular file");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(RegularFileTest, CharacterDeviceIsRefused) {
  expectReadAndStatRefused("/dev/zero", "is a character device, not a regular file");
}

TEST_F(RegularFileTest, MissingFileIsRefused) {
  expectReadAndStatRefused((fs::path(dir_) / "missing.json").string(),
                           "cannot open: No such file or directory");
}

TEST_F(RegularFileTest, FileOverTheLimitIsRefusedNamingSizeAndLimit) {
  const std::string path = write("big.json", std::string(101, 'x'));
  std::string out;
  expectRefused(readRegularFile(path, 100, "config.json", &out), path,
                "101 bytes is larger than the limit of 100 bytes");
  EXPECT_TRUE(out.empty());
}

TEST_F(RegularFileTest, HostilePathIsEscapedInTheMessage) {
  const std::string path = (fs::path(dir_) / "a\nb.json").string();
  std::string out;
  EXPECT_EQ(readRegularFile(path, 1024, "config.json", &out), Status::kIoError);
  const std::string message = lastErrorMessage();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_NE(message.find("a\\x0ab.json"), std::string::npos) << message;
}

TEST(ReadRegularFile, NullOutputIsAnInvalidArgument) {
  EXPECT_EQ(readRegularFile("/dev/null", 1, "config.json", nullptr), Status::kInvalidArgument);
}

}  // namespace
}  // namespace ree
