// defines: tcp_rendezvous (dist/tcp_rendezvous.h); file-local: Sock, Clock, put32, get32, send_all,
//          recv_all, resolve, serve, join
#include "dist/tcp_rendezvous.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "core/check.h"

namespace zt {

namespace {

using Clock = std::chrono::steady_clock;

struct Sock {
  int fd = -1;
  explicit Sock(int f = -1) : fd(f) {}
  ~Sock() {
    if (fd >= 0) ::close(fd);
  }
  Sock(Sock&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Sock& operator=(Sock&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  Sock(const Sock&) = delete;
  Sock& operator=(const Sock&) = delete;
};

constexpr char kMagic[4] = {'Z', 'T', 'R', 'V'};

void put32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t get32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Whole buffers, within the deadline; false on a timeout or a closed / failed connection.
bool send_all(int fd, const std::string& b, Clock::time_point deadline) {
  size_t done = 0;
  while (done < b.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, ms_left(deadline)) != 1) return false;
    const ssize_t n = ::send(fd, b.data() + done, b.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}
bool recv_all(int fd, char* buf, size_t len, Clock::time_point deadline) {
  size_t done = 0;
  while (done < len) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms_left(deadline)) != 1) return false;
    const ssize_t n = ::recv(fd, buf + done, len - done, 0);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

sockaddr_in resolve(const std::string& addr, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(addr.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res)
    ZT_THROW("TCP rendezvous: MASTER_ADDR '", addr, "' does not resolve to an IPv4 address (", ::gai_strerror(rc), ")");
  sockaddr_in sa = *reinterpret_cast<const sockaddr_in*>(res->ai_addr);
  ::freeaddrinfo(res);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  return sa;
}

std::string where(const std::string& addr, int port) { return addr + ":" + std::to_string(port); }

// Rank 0: listen, take size - 1 ranks, answer them all.
Rendezvous serve(const std::string& addr, int port, int size, int node, const std::string& payload,
                 Clock::time_point deadline, double timeout_s) {
  Sock ls(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (ls.fd < 0) ZT_THROW("TCP rendezvous: socket failed: ", std::strerror(errno));
  const int one = 1;
  ::setsockopt(ls.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);  // every interface: MASTER_ADDR is how the others reach this one
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(ls.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(ls.fd, 128) != 0)
    ZT_THROW("TCP rendezvous: rank 0 cannot listen on port ", port, " (MASTER_PORT): ", std::strerror(errno),
             " (another job on this port?)");
  Rendezvous r;
  r.payload = payload;
  r.node_of.assign(static_cast<size_t>(size), -1);
  r.node_of[0] = node;
  std::vector<Sock> peers(static_cast<size_t>(size));
  std::string error;
  int arrived = 1;
  while (arrived < size && error.empty()) {
    pollfd p{ls.fd, POLLIN, 0};
    if (::poll(&p, 1, ms_left(deadline)) != 1) break;
    Sock c(::accept4(ls.fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (c.fd < 0) continue;
    char h[16];
    if (!recv_all(c.fd, h, sizeof h, deadline) || std::memcmp(h, kMagic, 4) != 0) continue;  // not one of ours
    const uint32_t q = get32(h + 4), qsize = get32(h + 8);
    const int qnode = static_cast<int>(get32(h + 12));
    if (qsize != static_cast<uint32_t>(size))
      error = "rank " + std::to_string(q) + " says the world has " + std::to_string(qsize) +
              " ranks, rank 0 was started with " + std::to_string(size) + " (WORLD_SIZE)";
    else if (q == 0 || q >= static_cast<uint32_t>(size))
      error = "a peer says it is rank " + std::to_string(q) + ", expected 1.." + std::to_string(size - 1);
    else if (peers[q].fd >= 0) error = "two peers say they are rank " + std::to_string(q) + " (RANK)";
    if (!error.empty()) {  // this peer hears it now; the others below
      std::string e(kMagic, 4);
      put32(e, 1);
      put32(e, static_cast<uint32_t>(error.size()));
      send_all(c.fd, e + error, deadline);
      break;
    }
    r.node_of[q] = qnode;
    peers[q] = std::move(c);
    ++arrived;
  }
  if (error.empty() && arrived < size) {
    std::string missing;
    for (int q = 1; q < size; ++q)
      if (peers[static_cast<size_t>(q)].fd < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(q);
    error = "rank 0 waited " + std::to_string(timeout_s) + " s at port " + std::to_string(port) + " for " +
            std::to_string(size - arrived) + " of " + std::to_string(size) + " ranks; missing: rank " + missing;
  }
  std::string msg(kMagic, 4);
  if (error.empty()) {
    put32(msg, 0);
    put32(msg, static_cast<uint32_t>(payload.size()));
    msg += payload;
    for (int n : r.node_of) put32(msg, static_cast<uint32_t>(n));
  } else {
    put32(msg, 1);
    put32(msg, static_cast<uint32_t>(error.size()));
    msg += error;
  }
  const auto send_deadline = Clock::now() + std::chrono::seconds(5);  // answers go out even after a timeout
  for (int q = 1; q < size; ++q)
    if (peers[static_cast<size_t>(q)].fd >= 0) send_all(peers[static_cast<size_t>(q)].fd, msg, send_deadline);
  if (!error.empty()) ZT_THROW("TCP rendezvous: ", error);
  return r;
}

// Rank q > 0: connect (retrying until rank 0 listens), introduce itself, read the answer.
Rendezvous join(const std::string& addr, int port, int rank, int size, int node, Clock::time_point deadline,
                double timeout_s) {
  const sockaddr_in sa = resolve(addr, port);
  Sock s;
  std::string last = "no attempt";
  for (;;) {
    Sock t(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(t.fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0) {
      s = std::move(t);
      break;
    }
    last = std::strerror(errno);
    if (ms_left(deadline) == 0)
      ZT_THROW("TCP rendezvous: rank ", rank, " could not reach rank 0 at ", where(addr, port), " in ", timeout_s,
               " s (", last, "): is rank 0 running, and are MASTER_ADDR / MASTER_PORT the same on every rank?");
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, ms_left(deadline))));
  }
  std::string hello(kMagic, 4);
  put32(hello, static_cast<uint32_t>(rank));
  put32(hello, static_cast<uint32_t>(size));
  put32(hello, static_cast<uint32_t>(node));
  // Rank 0 answers when all have arrived or when its own timeout passes: a little longer here, so
  // that its verdict (which ranks are missing) arrives rather than a bare timeout.
  const auto answer_deadline = deadline + std::chrono::seconds(5);
  char h[12];
  if (!send_all(s.fd, hello, deadline) || !recv_all(s.fd, h, sizeof h, answer_deadline) ||
      std::memcmp(h, kMagic, 4) != 0)
    ZT_THROW("TCP rendezvous: rank ", rank, ": no answer from rank 0 at ", where(addr, port), " within ", timeout_s,
             " + 5 s (that port is not a ZeroTensor rank 0, or rank 0 stopped)");
  const uint32_t status = get32(h + 4), len = get32(h + 8);
  if (len > (1u << 20))
    ZT_THROW("TCP rendezvous: rank ", rank, ": rank 0 at ", where(addr, port), " sent ", len,
             " bytes, expected at most 1 MiB");
  std::string body(len, '\0');
  if (!recv_all(s.fd, body.data(), len, answer_deadline))
    ZT_THROW("TCP rendezvous: rank ", rank, ": rank 0 at ", where(addr, port), " closed the connection mid-answer");
  if (status != 0) ZT_THROW("TCP rendezvous (rank ", rank, ", rank 0 at ", where(addr, port), "): ", body);
  Rendezvous r;
  r.payload = std::move(body);
  std::string nodes(static_cast<size_t>(size) * 4, '\0');
  if (!recv_all(s.fd, nodes.data(), nodes.size(), answer_deadline))
    ZT_THROW("TCP rendezvous: rank ", rank, ": rank 0 at ", where(addr, port), " closed the connection mid-answer");
  for (int q = 0; q < size; ++q) r.node_of.push_back(static_cast<int>(get32(nodes.data() + 4 * q)));
  return r;
}

}  // namespace

Rendezvous tcp_rendezvous(const std::string& master_addr, int master_port, int rank, int size, int node,
                          const std::string& payload, double timeout_s) {
  ZT_CHECK(size >= 1 && rank >= 0 && rank < size, "TCP rendezvous: rank ", rank, " of ", size,
           " (RANK, WORLD_SIZE): expected 0 <= rank < size");
  ZT_CHECK(master_port > 0 && master_port < 65536, "TCP rendezvous: MASTER_PORT ", master_port,
           " is not a port (expected 1..65535)");
  ZT_CHECK(!master_addr.empty(), "TCP rendezvous: MASTER_ADDR is empty (expected rank 0's host name or address)");
  ZT_CHECK(timeout_s > 0, "TCP rendezvous: timeout ", timeout_s, " s, expected > 0");
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  if (size == 1) return {payload, {node}};
  return rank == 0 ? serve(master_addr, master_port, size, node, payload, deadline, timeout_s)
                   : join(master_addr, master_port, rank, size, node, deadline, timeout_s);
}

}  // namespace zt
