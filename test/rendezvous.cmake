# PyTorch start-up through prismd's store: the TCPStore server, the key and
# group rules, and every start-up variant against fake PyTorch real ranks.
add_executable(rendezvous_tests
  ${CMAKE_CURRENT_LIST_DIR}/store_server_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/store_limits_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/store_table_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/rendezvous_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/torch_store_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/graphgen_test_util.cc)
target_link_libraries(rendezvous_tests PRIVATE prism_test_main prism_rendezvous prism_store prism_bootstrap_testlib
  prism_graphgen)
target_compile_definitions(rendezvous_tests PRIVATE PRISM_EXAMPLES_DIR="${PROJECT_SOURCE_DIR}/examples")
prism_discover_tests(rendezvous_tests)
