# Plugin benchmarks (print figures; no assertions).
add_executable(plugin_bench ${CMAKE_CURRENT_SOURCE_DIR}/plugin_bench.cc)
target_include_directories(plugin_bench PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(plugin_bench PRIVATE ${CMAKE_DL_LIBS})
target_compile_definitions(plugin_bench PRIVATE PRISM_PLUGIN_SO="$<TARGET_FILE:nccl-net-prism>")
add_dependencies(plugin_bench nccl-net-prism)

add_executable(plugin_virtual_bench ${CMAKE_CURRENT_SOURCE_DIR}/plugin_virtual_bench.cc)
target_include_directories(plugin_virtual_bench PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(plugin_virtual_bench PRIVATE ${CMAKE_DL_LIBS})
target_compile_definitions(plugin_virtual_bench PRIVATE
  PRISM_PLUGIN_SO="$<TARGET_FILE:nccl-net-prism>"
  PRISM_SESSION_TESTD="$<TARGET_FILE:prism-session-testd>")
add_dependencies(plugin_virtual_bench nccl-net-prism prism-session-testd)

add_executable(plugin_ring_bench ${CMAKE_CURRENT_SOURCE_DIR}/plugin_ring_bench.cc)
target_include_directories(plugin_ring_bench PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(plugin_ring_bench PRIVATE ${CMAKE_DL_LIBS})
target_compile_definitions(plugin_ring_bench PRIVATE PRISM_PLUGIN_SO="$<TARGET_FILE:nccl-net-prism>")
add_dependencies(plugin_ring_bench nccl-net-prism)

add_executable(ll_fill_bench ${CMAKE_CURRENT_SOURCE_DIR}/ll_fill_bench.cc)
target_link_libraries(ll_fill_bench PRIVATE prism_plugin_core)

# pat_hybrid_bench: a real rank's PAT collective against virtual peers, the
# plugin's PAT rule (and floor) against prismd's play (test/pat_stand_in.h).
add_executable(pat_hybrid_bench ${CMAKE_CURRENT_SOURCE_DIR}/pat_hybrid_bench.cc)
target_include_directories(pat_hybrid_bench PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(pat_hybrid_bench PRIVATE prism_plugin_core)

# ring_floor_bench: the ring's lockstep floor (plugin/arrival.h) against a
# real rank whose own step varies around the model's (PRISM_RING_FLOOR).
add_executable(ring_floor_bench ${CMAKE_CURRENT_SOURCE_DIR}/ring_floor_bench.cc)
target_include_directories(ring_floor_bench PRIVATE ${PROJECT_SOURCE_DIR})

# virtual_fill_bench: what a virtual peer's receive (its fill) costs NCCL's
# proxy thread, per size and protocol, zero once against writing again.
add_executable(virtual_fill_bench ${CMAKE_CURRENT_SOURCE_DIR}/virtual_fill_bench.cc)
target_include_directories(virtual_fill_bench PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(virtual_fill_bench PRIVATE prism_plugin_core)

# link_order_bench: a short ring's time on a NIC that a bandwidth-bound ring
# holds, as posted against round-robin (PRISM_LINK_ORDER, plugin/link_arbiter.h).
add_executable(link_order_bench ${CMAKE_CURRENT_SOURCE_DIR}/link_order_bench.cc)
target_include_directories(link_order_bench PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(link_order_bench PRIVATE prism_plugin_core)

# idle_test_bench: test() on a posted receive while nothing has come, over a
# shared-memory ring (headers counted, no socket read) and over a socket alone.
add_executable(idle_test_bench ${CMAKE_CURRENT_SOURCE_DIR}/idle_test_bench.cc)
target_include_directories(idle_test_bench PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(idle_test_bench PRIVATE prism_plugin_core)
