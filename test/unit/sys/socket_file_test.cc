// sys::socket_file: what is at a path a process is about to listen on.
#include "sys/socket_file.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace softmrc::sys {
namespace {

class SocketFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/socket_file_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/s.sock";
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  // A socket of `type` bound at path_; listening if `listen`.
  void bind_socket(int type, bool listen) {
    fd_ = ::socket(AF_UNIX, type, 0);
    ASSERT_GE(fd_, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path_.c_str());
    ASSERT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    if (listen) {
      ASSERT_EQ(::listen(fd_, 1), 0);
    }
  }

  std::string dir_, path_;
  int fd_ = -1;
};

TEST_F(SocketFileTest, NothingThereIsFree) {
  EXPECT_EQ(socket_file(path_, SOCK_SEQPACKET), SocketFile::kFree);
}

TEST_F(SocketFileTest, ARegularFileIsNotASocket) {
  FILE* f = std::fopen(path_.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  EXPECT_EQ(socket_file(path_, SOCK_SEQPACKET), SocketFile::kNotSocket);
}

TEST_F(SocketFileTest, AListenerIsLive) {
  bind_socket(SOCK_SEQPACKET, true);
  EXPECT_EQ(socket_file(path_, SOCK_SEQPACKET), SocketFile::kLive);
}

TEST_F(SocketFileTest, AListenerOfAnotherTypeIsLive) {
  bind_socket(SOCK_STREAM, true);
  EXPECT_EQ(socket_file(path_, SOCK_SEQPACKET), SocketFile::kLive);
}

TEST_F(SocketFileTest, ASocketNobodyListensOnIsStale) {
  bind_socket(SOCK_SEQPACKET, false);
  EXPECT_EQ(socket_file(path_, SOCK_SEQPACKET), SocketFile::kStale);
  ::close(fd_);  // its process gone: the file stays
  fd_ = -1;
  EXPECT_EQ(socket_file(path_, SOCK_SEQPACKET), SocketFile::kStale);
}

}  // namespace
}  // namespace softmrc::sys
