# Virtual ranks in the real ranks' Gloo groups (daemon/gloo) against fake
# real ranks that speak Gloo's store rendezvous and TCP pair protocol.
add_executable(gloo_tests
  ${CMAKE_CURRENT_LIST_DIR}/gloo_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/gloo_fake_rank.cc
  ${CMAKE_CURRENT_LIST_DIR}/torch_store_client.cc)
target_link_libraries(gloo_tests PRIVATE prism_test_main prism_gloo prism_store prism_bootstrap)
prism_discover_tests(gloo_tests)
