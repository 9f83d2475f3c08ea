// defines: fault_point — named places where a fault test may kill this process with SIGKILL
//          (docs/faults.md lists the points and the tests that use them).
//
// ZT_FAULT_KILL_AT="<point>[:<n>][@<rank>]" makes the n-th passage (default 1) of <point> on
// <rank> (default any) raise SIGKILL in this process: a real kill -9, at an instant a test could
// not otherwise hit on purpose (the middle of a checkpoint's rank file, the moment between the
// step directory and `latest`). Unset (always, outside the fault tests) a point is one load of a
// static and a branch. A malformed value is an error at the first point reached.
//
//   ZT_FAULT_KILL_AT=checkpoint.mid_file:2@1   rank 1, in the middle of its second checkpoint file
#pragma once

namespace zt {

// rank: the caller's rank in its process group (0 for a single process).
void fault_point(const char* point, int rank);

}  // namespace zt
