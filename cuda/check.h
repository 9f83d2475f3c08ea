// defines: ZT_CUDA_CHECK, cuda_error_message — CUDA runtime errors as zt::Error naming the call.
//
// Every CUDA runtime call goes through ZT_CUDA_CHECK(call): on an error it throws a zt::Error
// with the call's text, the error's name and description, and where it happened, e.g.
//   cudaMalloc(&p, bytes) failed: cudaErrorMemoryAllocation (out of memory) at cuda/allocator.cpp:88
#pragma once
#include <cuda_runtime_api.h>

#include <string>

#include "core/check.h"

namespace zt {

// "cudaErrorNoDevice (no CUDA-capable device is detected)"
std::string cuda_error_message(cudaError_t e);

}  // namespace zt

#define ZT_CUDA_CHECK(call)                                                                        \
  do {                                                                                             \
    const cudaError_t zt_cuda_err_ = (call);                                                       \
    if (zt_cuda_err_ != cudaSuccess)                                                               \
      ZT_THROW(#call, " failed: ", ::zt::cuda_error_message(zt_cuda_err_), " at ", __FILE__, ":", __LINE__); \
  } while (0)
