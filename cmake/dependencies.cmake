# defines: zt_dependency — find a dependency of the libraries now, and record it for the installed
#          package (ZeroTensorConfig.cmake finds the same dependencies for a consumer).
#
# The one list of what the installed libraries need is the list of zt_dependency() calls in
# CMakeLists.txt. Each call finds the dependency here (REQUIRED) and appends the line that finds
# it again on the consumer's side to the global property ZT_CONFIG_DEPENDENCIES, which
# cmake/install.cmake writes into ZeroTensorConfig.cmake (cmake/ZeroTensorConfig.cmake.in).
#
#   zt_dependency(PACKAGE <name> [version] [args...])
#       find_package(<name> [version] [args...] REQUIRED) here;
#       find_dependency(<name> [version] [args...]) in the config (it forwards QUIET / REQUIRED and
#       reports the missing package as the reason ZeroTensor was not found).
#   zt_dependency(PKG_CONFIG <PREFIX> <module>)
#       pkg_check_modules(<PREFIX> REQUIRED IMPORTED_TARGET <module>) here: target PkgConfig::<PREFIX>;
#       the same through zt_pkg_config_dependency in the config (ZeroTensor not found, naming the
#       module, when pkg-config cannot find it).
#
# A macro, not a function: find_package's variables (MPI_CXX_FOUND, ...) stay in the caller's scope.
macro(zt_dependency kind)
  if("${kind}" STREQUAL "PACKAGE")
    find_package(${ARGN} REQUIRED)
    string(REPLACE ";" " " _zt_dep_args "${ARGN}")
    set_property(GLOBAL APPEND PROPERTY ZT_CONFIG_DEPENDENCIES "find_dependency(${_zt_dep_args})")
  elseif("${kind}" STREQUAL "PKG_CONFIG")
    set(_zt_dep_args ${ARGN})
    list(LENGTH _zt_dep_args _zt_dep_n)
    if(NOT _zt_dep_n EQUAL 2)
      message(FATAL_ERROR "zt_dependency(PKG_CONFIG ${ARGN}): expected <PREFIX> <module>, e.g. PKG_CONFIG URING liburing")
    endif()
    list(GET _zt_dep_args 0 _zt_dep_prefix)
    list(GET _zt_dep_args 1 _zt_dep_module)
    find_package(PkgConfig REQUIRED)
    pkg_check_modules(${_zt_dep_prefix} REQUIRED IMPORTED_TARGET ${_zt_dep_module})
    set_property(GLOBAL APPEND PROPERTY ZT_CONFIG_DEPENDENCIES
                 "zt_pkg_config_dependency(${_zt_dep_prefix} ${_zt_dep_module})")
  else()
    message(FATAL_ERROR "zt_dependency(${kind} ...): expected PACKAGE or PKG_CONFIG as the first argument")
  endif()
endmacro()
