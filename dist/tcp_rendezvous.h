// defines: Rendezvous, tcp_rendezvous — how ranks started without MPI find each other: rank 0
//          listens at MASTER_ADDR:MASTER_PORT, as torchrun's store does, and every other rank
//          connects to it.
//
// What travels: rank 0's payload (the NCCL backend's 128-byte ncclUniqueId) to every rank, and
// every rank's node number to every rank (so each knows the topology). One TCP connection per
// rank, a fixed little-endian framing:
//   rank q -> rank 0:  "ZTRV" u32 rank, u32 size, i32 node
//   rank 0 -> rank q:  "ZTRV" u32 status (0 ok, 1 error), u32 length, length bytes (the payload,
//                      or the error's text), then on success size i32 nodes (by rank)
// Rank 0 answers once every rank has arrived, or answers the ones that did with an error when
// the timeout passes. A rank that starts before rank 0 listens retries its connection until the
// timeout. Every error names the address, the port and what was expected ("rank 2 says the world
// has 3 ranks, rank 0 was started with 4").
#pragma once
#include <string>
#include <vector>

namespace zt {

struct Rendezvous {
  std::string payload;       // rank 0's
  std::vector<int> node_of;  // every rank's node, by rank
};

// Collective over the `size` ranks started with the same master address and port. `payload`
// matters on rank 0 only. Throws a zt::Error on a timeout, a refused or malformed peer, or a
// disagreement on the world size.
Rendezvous tcp_rendezvous(const std::string& master_addr, int master_port, int rank, int size, int node,
                          const std::string& payload, double timeout_s);

}  // namespace zt
