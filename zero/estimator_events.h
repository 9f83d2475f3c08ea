// defines: Event, step_events — the residency events of one training micro-step, as the
//          estimator replays them (zero/estimator.cpp: memory; zero/estimator_comm.cpp: bytes moved).
#pragma once
#include <cstddef>
#include <vector>

namespace zt::estimator_detail {

// The residency events of one training micro-step in order (models/transformer.h's forward loop,
// autograd/backward.cpp's before/after_backward hooks): +1 acquire unit i, -1 release unit i.
// Units: 0 = embed, 1..L = blocks, L+1 = head. Tied: the head's forward also holds the embedding,
// and in backward the embedding's span runs from the head's matmul to the token lookup.
struct Event {
  bool acquire;
  size_t unit;
  bool backward;
};
inline std::vector<Event> step_events(size_t n_units, bool tied) {
  const size_t E = 0, H = n_units - 1;
  std::vector<Event> ev;
  for (size_t i = 0; i < H; ++i) ev.insert(ev.end(), {{true, i, false}, {false, i, false}});
  if (tied) ev.push_back({true, E, false});
  ev.insert(ev.end(), {{true, H, false}, {false, H, false}});
  if (tied) ev.push_back({false, E, false});
  if (tied) ev.push_back({true, E, true});
  ev.insert(ev.end(), {{true, H, true}, {false, H, true}});
  for (size_t i = H - 1; i >= 1; --i) ev.insert(ev.end(), {{true, i, true}, {false, i, true}});
  if (!tied) ev.push_back({true, E, true});
  ev.push_back({false, E, true});
  return ev;
}

}  // namespace zt::estimator_detail
