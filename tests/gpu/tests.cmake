# GPU test registrations: zt_gpu_test(<tag>) runs the cases tagged [<tag>] (label gpu).
zt_gpu_test(cuda_device)
if(TARGET zt_dist_nccl)
  zt_gpu_test(nccl)
endif()
zt_gpu_test(cuda_allocator)
zt_gpu_test(cuda_kernels)
