# The fuzz targets (ZT_FUZZ builds only): one executable per tests/fuzz/fuzz_*.cpp, linked with
# libFuzzer's main, and make_seeds, which writes their seed corpora with our own writers.
# scripts/fuzz.sh builds and runs them.
file(GLOB zt_fuzz_srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tests/fuzz/fuzz_*.cpp)
foreach(src ${zt_fuzz_srcs})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE zt_all)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer)
endforeach()
add_executable(make_seeds ${CMAKE_CURRENT_SOURCE_DIR}/tests/fuzz/make_seeds.cpp)
target_link_libraries(make_seeds PRIVATE zt_all)
