# Plugin tests.
# plugin_tests: drive the built libnccl-net-prism.so through dlopen (ABI,
# two-process real-peer transfers, virtual peers against
# prism-session-testd). It must not link the plugin's code itself: the
# generated proto descriptors would then register twice in libprotobuf.
# plugin_unit_tests: internals of the plugin and of daemon/session, linked
# (plugin_fake_nccl.cc plays NCCL's profiler front end for the op tracker).
add_executable(plugin_peer ${CMAKE_CURRENT_SOURCE_DIR}/plugin_peer.cc)
target_include_directories(plugin_peer PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(plugin_peer PRIVATE ${CMAKE_DL_LIBS})

add_executable(plugin_tests
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_abi_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_transfer_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_movers_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_virtual_test.cc)
target_include_directories(plugin_tests PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(plugin_tests PRIVATE prism_test_main Threads::Threads ${CMAKE_DL_LIBS})
target_compile_definitions(plugin_tests PRIVATE
  PRISM_PLUGIN_SO="$<TARGET_FILE:nccl-net-prism>"
  PRISM_PLUGIN_PEER="$<TARGET_FILE:plugin_peer>"
  PRISM_SESSION_TESTD="$<TARGET_FILE:prism-session-testd>")
add_dependencies(plugin_tests nccl-net-prism plugin_peer prism-session-testd)
prism_discover_tests(plugin_tests TEST_PREFIX "plugin: ")

# A library holding a logger and ncclGetVersion (plugin unit: NCCL version lookup).
add_library(fake_libnccl_version SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fake_libnccl_version.cc)
# A stand-in for libcudart (plugin unit: GPU copies on the plugin's own streams).
add_library(fake_libcudart SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fake_libcudart.cc)

add_executable(plugin_unit_tests
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_units_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_daemon_owner_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_progress_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_session_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_fake_nccl.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_op_tracker_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_op_times_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_arrival_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_arrival_pat_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_ring_floor_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_pat_floor_order_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_ll_lines_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_recv_fill_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_link_hold_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_return_on_complete_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_modelled_link_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_same_host_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_shared_ring_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/plugin_cuda_copy_test.cc)
target_link_libraries(plugin_unit_tests PRIVATE prism_test_main prism_plugin_core prism_session)
target_compile_definitions(plugin_unit_tests PRIVATE
  PRISM_PLUGIN_DOC="${PROJECT_SOURCE_DIR}/docs/plugin.md"
  PRISM_FAKE_LIBNCCL="$<TARGET_FILE:fake_libnccl_version>"
  PRISM_FAKE_LIBCUDART="$<TARGET_FILE:fake_libcudart>")
add_dependencies(plugin_unit_tests fake_libnccl_version fake_libcudart)
prism_discover_tests(plugin_unit_tests TEST_PREFIX "plugin unit: ")
