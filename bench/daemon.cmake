# daemon_bench: replay engine events/s and GPT-3-scale simulate wall time.
if(TARGET prism_engine)
  add_executable(daemon_bench daemon_bench.cc ${PROJECT_SOURCE_DIR}/test/daemon_test_graphs.cc)
  target_link_libraries(daemon_bench PRIVATE prism_engine)
endif()
