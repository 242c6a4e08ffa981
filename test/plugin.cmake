# Plugin tests: unit tests of internals (linked), ABI and two-process
# transfer tests through dlopen of the built libnccl-net-prism.so.
add_executable(plugin_peer ${CMAKE_CURRENT_SOURCE_DIR}/plugin_peer.cc)
target_include_directories(plugin_peer PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(plugin_peer PRIVATE ${CMAKE_DL_LIBS})

add_executable(plugin_tests
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_units_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_abi_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_transfer_test.cc)
target_link_libraries(plugin_tests PRIVATE prism_test_main prism_plugin_core ${CMAKE_DL_LIBS})
target_compile_definitions(plugin_tests PRIVATE
  PRISM_PLUGIN_SO="$<TARGET_FILE:nccl-net-prism>"
  PRISM_PLUGIN_PEER="$<TARGET_FILE:plugin_peer>")
add_dependencies(plugin_tests nccl-net-prism plugin_peer)
catch_discover_tests(plugin_tests)
