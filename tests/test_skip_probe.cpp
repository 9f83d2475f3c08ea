// defines: 1 Catch2 test case tagged [.skip_probe]
//
// A hidden case (tag [.skip_probe]: not in the default run, so not a CTest entry of its own) that
// always skips: meta.skip_exit runs it to check tests/skip.h's two behaviours, exit 77 with the
// reason under CTest (ZT_TEST_SKIP_EXIT=77), its TempDir removed, and a warning and a pass when
// run by hand.
#include <catch2/catch.hpp>

#include "tests/skip.h"      // defines: ZT_SKIP
#include "tests/temp_dir.h"  // defines: zt::test::TempDir

TEST_CASE("a case that cannot run here is reported as skipped", "[.skip_probe]") {
  zt::test::TempDir tmp("skip_probe");  // removed by the skip, though its destructor never runs
  ZT_SKIP("the probe always skips (" << 7 * 11 << ")");
  FAIL("ZT_SKIP returned into the case");
}
