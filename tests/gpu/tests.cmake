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
