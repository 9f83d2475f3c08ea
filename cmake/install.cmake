# defines: the install rules — `cmake --install <build> --prefix <dir>` lays out (docs/install.md):
#
#   <prefix>/include/zt/<layer>/*.h            the public headers, one folder per layer
#   <prefix>/lib/libzt_<layer>.a               one static library per layer (layers.txt)
#   <prefix>/lib/cmake/ZeroTensor/             ZeroTensorConfig.cmake, ZeroTensorConfigVersion.cmake,
#                                              ZeroTensorTargets*.cmake (ZeroTensor::zt, ::core, ::nn, ...)
#   <prefix>/bin/zt-train, zt-generate, ...    the tools
#   <prefix>/share/ZeroTensor/configs/*.json   the ready DeepSpeed-style configs (models/: model shapes,
#                                              devices/: the step simulator's datasheet profiles)
#
# Public headers: every .h (and .def) of every layer built, except
#   - the private kernel headers: any file under a kernels/ folder (core/kernels/, cuda/kernels/),
#     reached only through the backend table (core/backend.h);
#   - ZT_PRIVATE_HEADERS below: headers only their own layer's .cpp files include, the
#     implementation behind a public interface (the ZeRO stages behind zero/engine.h, liburing
#     behind zero/aio.h, ...). A header moves to this list when no header, no other layer and no
#     tool includes it; tests/test_install.sh checks that every installed header's own includes
#     are installed too.
# A folder that is a layer of its own (dist/nccl) is installed by that layer, only when it is built.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ZT_PRIVATE_HEADERS
  autograd/op_util.h          # shared helpers of autograd/ops_*.cpp
  core/cpu_bf16.h             # the CPU backend's bf16 conversion loops
  cuda/cublaslt_api.h         # cuBLASLt loaded by dlopen, behind cuda/gemm.h
  formats/hf_mapping.h        # Hugging Face name tables of formats/hf_*.cpp
  zero/activation_offload.h   # the engine's policies and tiers, behind zero/engine.h:
  zero/aio_engine.h           #   io_uring (includes liburing.h), behind zero/aio.h
  zero/checkpoint_files.h
  zero/config_reader.h
  zero/offload.h
  zero/stage.h
)
set(ZT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/ZeroTensor)

get_property(zt_installed_layers GLOBAL PROPERTY ZT_INSTALLED_LAYERS)
set(zt_installed_libs zt)
foreach(dir IN LISTS zt_installed_layers)
  string(REPLACE "/" "_" lib "zt_${dir}")
  list(APPEND zt_installed_libs ${lib})
  file(GLOB_RECURSE headers RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} CONFIGURE_DEPENDS
       ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*.h ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*.def)
  foreach(h IN LISTS headers)
    set(skip OFF)
    if(h MATCHES "(^|/)kernels/" OR h IN_LIST ZT_PRIVATE_HEADERS)
      set(skip ON)
    endif()
    foreach(other IN LISTS ZT_LAYERS)  # a nested layer's headers are that layer's
      if(NOT other STREQUAL dir AND other MATCHES "^${dir}/" AND h MATCHES "^${other}/")
        set(skip ON)
      endif()
    endforeach()
    if(NOT skip)
      get_filename_component(sub ${h} DIRECTORY)
      install(FILES ${h} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zt/${sub})
    endif()
  endforeach()
endforeach()

install(TARGETS ${zt_installed_libs} EXPORT ZeroTensorTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT ZeroTensorTargets NAMESPACE ZeroTensor:: DESTINATION ${ZT_INSTALL_CMAKEDIR})

foreach(tool zt-train zt-generate zt-info zt-estimate zt-ckpt zt-profile)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
install(DIRECTORY configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/ZeroTensor/configs FILES_MATCHING PATTERN "*.json")

# ZeroTensorConfig.cmake: the recorded dependencies (cmake/dependencies.cmake), one per line.
get_property(zt_deps GLOBAL PROPERTY ZT_CONFIG_DEPENDENCIES)
list(JOIN zt_deps "\n" ZT_CONFIG_DEPENDENCIES)
set(ZT_CONFIG_NATIVE ${ZT_NATIVE})
set(ZT_CONFIG_CUDA ${ZT_HAVE_CUDA})
configure_package_config_file(cmake/ZeroTensorConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ZeroTensorConfig.cmake INSTALL_DESTINATION ${ZT_INSTALL_CMAKEDIR})
# Before 1.0 a minor version may change the API: 0.1.x satisfies find_package(ZeroTensor 0.1), not 0.2.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ZeroTensorConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ZeroTensorConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/ZeroTensorConfigVersion.cmake
        DESTINATION ${ZT_INSTALL_CMAKEDIR})
