# GPU test registrations: zt_gpu_test(<tag>) runs the cases tagged [<tag>] (label gpu).
zt_gpu_test(cuda_device)
if(TARGET zt_dist_nccl)
  zt_gpu_test(nccl)
endif()
zt_gpu_test(cuda_allocator)
zt_gpu_test(cuda_kernels)
# Multi-rank GPU tests: ranks of zt_mpi_tests sharing the GPU through the MPI backend's staging.
if(TARGET zt_mpi_tests)
  foreach(np 2 4)
    add_test(NAME gpu.mpi_gpu_buffers.np${np}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/run_mpi.sh $<TARGET_FILE:zt-info> ${np}
                     $<TARGET_FILE:zt_mpi_tests> "[gpu_buffers]")
    set_tests_properties(gpu.mpi_gpu_buffers.np${np} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600
                         ENVIRONMENT "OMP_NUM_THREADS=1")
  endforeach()
endif()
zt_gpu_test(cuda_gemm)
zt_gpu_test(cuda_nn_kernels)
# zt-train on the GPU against the CPU, and ZeRO ranks sharing one GPU against one rank.
add_test(NAME gpu.train_gpu COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test_train_gpu.sh)
set_tests_properties(gpu.train_gpu PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900
                     ENVIRONMENT "ZT_BUILD_DIR=${PROJECT_BINARY_DIR};ZT_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
zt_gpu_test(cuda_backend_ops)
# copies between host memory and the device on the transfer streams
zt_gpu_test(cuda_transfers)
# the fused entries (bias + GELU, residual + LayerNorm / RMSNorm) and their autograd ops against the CPU
zt_gpu_test(cuda_fused_ops)
zt_gpu_test(cuda_backend_attn)
# cuDNN's attention behind CudaBackend::attention (in a build without cuDNN: that the backend says so)
zt_gpu_test(cudnn_attention)
# float32 GEMM precision from the table (F32Matmul: IEEE fp32 or TF32)
zt_gpu_test(cuda_f32_matmul)
# generation with the KV cache on the GPU against the CPU
zt_gpu_test(cuda_generation)
# ZeRO++'s block quantization: the GPU's bytes against the CPU's
zt_gpu_test(cuda_quantize)
