// defines: main (zt_tests, made by Catch2: CATCH_CONFIG_MAIN).
//
// The Catch2 main for zt_tests. Test data lives under ZT_SOURCE_DIR "/tests/data".
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
