// defines: main (zt_gpu_tests)
//
// The GPU tests' main: every test here needs a usable CUDA device. Without one (no GPU, no
// driver, or only devices older than sm_80) the binary prints why and exits 77, which CTest
// reports as "Skipped" (SKIP_RETURN_CODE), never as passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "cuda/backend.h"
#include "cuda/device.h"

int main(int argc, char** argv) {
  std::string reason;
  const auto& devs = zt::cuda_devices(&reason);
  if (!zt::cuda_available()) {
    std::printf("SKIP: no usable CUDA device (%s): the GPU tests need an sm_80+ GPU\n",
                devs.empty() ? reason.c_str() : "none of sm_80 or newer");
    return 77;
  }
  std::printf("GPU tests on %s\n", devs.front().name.c_str());
  // Every test may reach the device through the backend table; registered once here, so a test
  // run alone (one tag, as scripts/gpu-check.sh runs them) finds it as well as the whole binary.
  zt::register_cuda_backend();
  return Catch::Session().run(argc, argv);
}
