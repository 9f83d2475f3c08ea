// defines: main (zt_mpi_tests)
//
// The multi-rank test runner: every rank runs the same Catch2 test cases under mpirun, so the
// collectives inside them pair up. A failure on any rank makes mpirun's exit status non-zero.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "dist/process_group.h"

int main(int argc, char** argv) {
  zt::ProcessGroup& g = zt::init_process_group();
  const int failed = Catch::Session().run(argc, argv);
  // Every rank reports; a rank whose assertion failed still reaches here (Catch does not abort),
  // so the others are not left waiting. Exit status: this rank's failures.
  g.barrier();
  zt::finalize_process_group();
  return failed;
}
