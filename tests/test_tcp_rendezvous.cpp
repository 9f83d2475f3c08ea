// defines: Catch2 test cases tagged [tcp_rendezvous]; helpers: free_port, run_ranks
//
// dist/tcp_rendezvous.h on real sockets of this machine, each rank a thread (the NCCL backend's
// bootstrap without MPI, as torchrun's variables describe it: MASTER_ADDR, MASTER_PORT, RANK,
// WORLD_SIZE): rank 0's payload reaches every rank and every rank's node every rank, whichever
// rank starts first; a world-size disagreement, a duplicate rank, a missing rank and an absent
// rank 0 each end in an error that names the address, the port or the rank.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dist/tcp_rendezvous.h"

using namespace zt;

namespace {

// A port nobody listens on now (bound to 0, read, closed): the kernel hands ports out in turn,
// so it is free for the moment the test needs it.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0);
  ::close(fd);
  return ntohs(sa.sin_port);
}

// f(rank) on one thread per rank; each rank's error text ("" when it returned).
std::vector<std::string> run_ranks(int n, const std::function<void(int)>& f) {
  std::vector<std::string> err(static_cast<size_t>(n));
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        f(r);
      } catch (const std::exception& e) {
        err[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  return err;
}

}  // namespace

TEST_CASE("tcp rendezvous: rank 0's payload and every rank's node reach every rank", "[tcp_rendezvous]") {
  const int port = free_port(), N = 4;
  const std::string id(128, '\0');  // an ncclUniqueId-sized payload with every byte value in it
  std::string payload = id;
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 2 + 1);
  std::vector<Rendezvous> got(N);
  const auto err = run_ranks(N, [&](int r) {
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others wait for rank 0
    got[static_cast<size_t>(r)] = tcp_rendezvous("127.0.0.1", port, r, N, r / 2, r == 0 ? payload : "", 10.0);
  });
  for (int r = 0; r < N; ++r) {
    INFO("rank " << r << ": " << err[static_cast<size_t>(r)]);
    REQUIRE(err[static_cast<size_t>(r)].empty());
    CHECK(got[static_cast<size_t>(r)].payload == payload);
    CHECK(got[static_cast<size_t>(r)].node_of == std::vector<int>{0, 0, 1, 1});
  }
  // one rank: no socket at all
  const Rendezvous one = tcp_rendezvous("127.0.0.1", port, 0, 1, 0, "x", 1.0);
  CHECK(one.payload == "x");
  CHECK(one.node_of == std::vector<int>{0});
}

TEST_CASE("tcp rendezvous: disagreements and absences are errors that name them", "[tcp_rendezvous]") {
  SECTION("a rank started with another world size") {
    const int port = free_port();
    const auto err = run_ranks(2, [&](int r) { tcp_rendezvous("127.0.0.1", port, r, r == 0 ? 2 : 3, 0, "id", 5.0); });
    CHECK_THAT(err[0], Catch::Contains("rank 1 says the world has 3 ranks, rank 0 was started with 2 (WORLD_SIZE)"));
    CHECK_THAT(err[1], Catch::Contains("rank 1 says the world has 3 ranks"));
  }
  SECTION("two ranks with one RANK") {
    const int port = free_port();
    const auto err = run_ranks(3, [&](int r) { tcp_rendezvous("127.0.0.1", port, r == 2 ? 1 : r, 3, 0, "id", 5.0); });
    CHECK_THAT(err[0], Catch::Contains("two peers say they are rank 1 (RANK)"));
  }
  SECTION("a rank that never comes: rank 0 names it after the timeout, the others hear it") {
    const int port = free_port();
    const auto err = run_ranks(2, [&](int r) { tcp_rendezvous("127.0.0.1", port, r, 3, 0, "id", 1.0); });
    CHECK_THAT(err[0], Catch::Contains("for 1 of 3 ranks; missing: rank 2"));
    CHECK_THAT(err[1], Catch::Contains("missing: rank 2"));
  }
  SECTION("no rank 0 at MASTER_ADDR:MASTER_PORT") {
    const int port = free_port();
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(
        tcp_rendezvous("127.0.0.1", port, 1, 2, 0, "", 0.5),
        Catch::Contains("rank 1 could not reach rank 0 at 127.0.0.1:" + std::to_string(port) + " in 0.5 s") &&
            Catch::Contains("MASTER_ADDR / MASTER_PORT"));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
  }
  SECTION("bad values") {
    CHECK_THROWS_WITH(tcp_rendezvous("127.0.0.1", 0, 0, 2, 0, "", 1.0), Catch::Contains("MASTER_PORT 0 is not a port"));
    CHECK_THROWS_WITH(tcp_rendezvous("", 29500, 0, 2, 0, "", 1.0), Catch::Contains("MASTER_ADDR is empty"));
    CHECK_THROWS_WITH(tcp_rendezvous("127.0.0.1", 29500, 2, 2, 0, "", 1.0), Catch::Contains("rank 2 of 2"));
    CHECK_THROWS_WITH(tcp_rendezvous("no-such-host.invalid", 29500, 1, 2, 0, "", 1.0),
                      Catch::Contains("MASTER_ADDR 'no-such-host.invalid' does not resolve"));
  }
}
