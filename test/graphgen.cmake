# prism-graphgen tests (graphgen/). Included from test/CMakeLists.txt.
add_executable(graphgen_tests
  graphgen_test_util.cc
  graphgen_layout_test.cc
  graphgen_group_plan_test.cc
  graphgen_ddp_buckets_test.cc
  graphgen_volume_test.cc
  graphgen_errors_test.cc
  graphgen_collective_test.cc
  graphgen_inspect_test.cc
  graphgen_graph_test.cc
  graph_tables_test.cc
  graph_rules_test.cc
  graphgen_user_program_test.cc
  graphgen_hostile_test.cc
  graphgen_memory_test.cc
  graphgen_flops_test.cc
  graphgen_chakra_test.cc
  graphgen_capture_test.cc)
target_link_libraries(graphgen_tests PRIVATE prism_test_main prism_graphgen)
target_compile_definitions(graphgen_tests PRIVATE PRISM_EXAMPLES_DIR="${PROJECT_SOURCE_DIR}/examples"
                           PRISM_GRAPHGEN_PATH="$<TARGET_FILE:prism-graphgen>")
add_dependencies(graphgen_tests prism-graphgen)
prism_discover_tests(graphgen_tests TEST_PREFIX "graphgen: ")
