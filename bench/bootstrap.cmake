# Bootstrap benchmarks (need the test helpers: only with PRISM_BUILD_TESTS).
if(PRISM_BUILD_TESTS)
  add_executable(bootstrap_init_bench ${CMAKE_CURRENT_LIST_DIR}/bootstrap_init_bench.cc)
  target_link_libraries(bootstrap_init_bench PRIVATE prism_bootstrap_testlib)
  add_executable(bootstrap_split_bench ${CMAKE_CURRENT_LIST_DIR}/bootstrap_split_bench.cc)
  target_link_libraries(bootstrap_split_bench PRIVATE prism_bootstrap_testlib)
endif()
