// defines: StateServer (constructor, destructor, loop), probe_peer, local_ipv4_addresses, outcome_text
//          (dist/peer_probe.h); file-local: Fd, now_s, fail, try_address
#include "dist/peer_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>

#include "core/check.h"

namespace zt {

namespace {

// A socket closed on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

[[noreturn]] void fail(const char* call) {
  ZT_THROW("the collective timeout's state server: ", call, " failed: ", std::strerror(errno));
}

std::string address_text(uint32_t addr, uint16_t port) {
  char buf[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = addr;
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(port);
}

// One address: connect, then read until the server closes, within `deadline` (now_s() time).
// Returns false when nothing connected before the deadline (the next address may be tried).
bool try_address(uint32_t addr, uint16_t port, double deadline, ProbeResult& out) {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (s.fd < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = addr;
  const auto left_ms = [&] { return std::max(0, static_cast<int>((deadline - now_s()) * 1000.0)); };
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno == ECONNREFUSED) {
      out = {ProbeOutcome::refused, "", address_text(addr, port)};
      return true;
    }
    if (errno != EINPROGRESS) return false;
    pollfd p{s.fd, POLLOUT, 0};
    if (::poll(&p, 1, left_ms()) != 1) return false;  // no connection in time
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == ECONNREFUSED) {
      out = {ProbeOutcome::refused, "", address_text(addr, port)};
      return true;
    }
    if (err != 0) return false;
  }
  // Connected: the kernel of that machine answered. Now the process itself must.
  out = {ProbeOutcome::silent, "", address_text(addr, port)};
  std::string got;
  for (;;) {
    pollfd p{s.fd, POLLIN, 0};
    if (::poll(&p, 1, left_ms()) != 1) break;  // nothing more in time
    char buf[512];
    const ssize_t n = ::recv(s.fd, buf, sizeof buf, 0);
    if (n <= 0) break;  // closed (the whole line is in) or an error
    got.append(buf, static_cast<size_t>(n));
  }
  const size_t nl = got.find('\n');
  if (nl != std::string::npos) out = {ProbeOutcome::answered, got.substr(0, nl), out.address};
  return true;
}

}  // namespace

StateServer::StateServer(std::function<std::string()> answer) : answer_(std::move(answer)) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) fail("socket");
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  sa.sin_port = 0;  // the kernel picks a free port
  socklen_t len = sizeof sa;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd_, 64) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    const int e = errno;
    ::close(fd_);
    errno = e;
    fail("bind / listen");
  }
  port_ = ntohs(sa.sin_port);
  thread_ = std::thread([this] { loop(); });
}

StateServer::~StateServer() {
  stop_.store(true);
  thread_.join();
  ::close(fd_);
}

void StateServer::loop() {
  while (!stop_.load()) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) != 1) continue;  // wakes every 100 ms to see stop_
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    const std::string line = answer_() + "\n";
    ::send(c, line.data(), line.size(), MSG_NOSIGNAL);  // one short line: one send
    ::close(c);
  }
}

ProbeResult probe_peer(const std::vector<uint32_t>& addresses, uint16_t port, double timeout_s) {
  const double deadline = now_s() + timeout_s;
  ProbeResult r;
  for (uint32_t a : addresses) {
    if (now_s() >= deadline) break;
    if (try_address(a, port, deadline, r)) return r;
  }
  return {ProbeOutcome::unreachable, "", ""};
}

std::vector<uint32_t> local_ipv4_addresses() {
  std::vector<uint32_t> up;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return up;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    if (i->ifa_flags & IFF_LOOPBACK) continue;  // another machine's 127.0.0.1 is the prober's own
    up.push_back(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
  }
  ::freeifaddrs(list);
  return up;
}

std::string outcome_text(const ProbeResult& r, double timeout_s) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  switch (r.outcome) {
    case ProbeOutcome::answered: s << "answers (" << r.address << ")"; break;
    case ProbeOutcome::silent:
      s << "does not answer: its machine accepted the connection (" << r.address << "), the process said nothing in "
        << timeout_s << " s (stopped or hung)";
      break;
    case ProbeOutcome::refused: s << "is gone: its machine refused the connection (" << r.address << ")"; break;
    case ProbeOutcome::unreachable:
      s << "is unreachable: no connection in " << timeout_s << " s (its machine or its link is down)";
      break;
  }
  return s.str();
}

}  // namespace zt
