// The out-of-band channel of smrc-perf: a TCP connection between the two
// sides, as perftest and the OCP benchmark use, for what RDMA leaves to
// the application (QP numbers, addresses, rkeys) and to keep the two
// sides in step between message sizes. Messages are length-prefixed and
// their fields little-endian, so no struct layout crosses the wire.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace softmrc::perf {

// A message under construction or being read. Reading past the end sets
// ok() false instead of reading garbage.
class Message {
 public:
  Message() = default;
  explicit Message(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}

  void put(uint64_t v, int bytes);
  void put_bytes(const void* p, size_t n);
  uint64_t get(int bytes);
  void get_bytes(void* p, size_t n);
  bool ok() const { return ok_; }
  bool at_end() const { return at_ == bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
  size_t at_ = 0;
  bool ok_ = true;
};

class Channel {
 public:
  Channel() = default;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ~Channel();

  // The server: waits up to timeout_ms for one client on `port` (any address).
  bool accept(uint16_t port, int timeout_ms, std::string* err);
  // The client: connects to host:port, retrying until timeout_ms passes (the
  // server may not listen yet); no attempt waits beyond it either.
  bool connect(const std::string& host, uint16_t port, int timeout_ms, std::string* err);

  bool send(const Message& m, std::string* err);
  // Waits up to timeout_ms for the next message.
  bool receive(Message* m, int timeout_ms, std::string* err);
  // Whether the peer sent something (or closed): receive() will not wait long.
  bool readable() const;

 private:
  bool read_exact(uint8_t* p, size_t n, int timeout_ms, std::string* err);
  int fd_ = -1;
};

}  // namespace softmrc::perf
