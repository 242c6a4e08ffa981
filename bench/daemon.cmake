# daemon_bench: replay engine events/s and GPT-3-scale simulate wall time.
if(TARGET prism_engine)
  add_executable(daemon_bench daemon_bench.cc ${PROJECT_SOURCE_DIR}/test/daemon_test_graphs.cc)
  target_link_libraries(daemon_bench PRIVATE prism_engine)

  # engine_rate_bench: the engine's events/s as a ratio of a bare 4-ary-heap
  # loop doing the same number of events in the same run (classes off).
  add_executable(engine_rate_bench engine_rate_bench.cc ${PROJECT_SOURCE_DIR}/test/daemon_test_graphs.cc)
  target_link_libraries(engine_rate_bench PRIVATE prism_engine)
endif()

# hybrid_explain: replays a --record-sessions recording and prints what the
# engine played for chosen ranks beside what the real ranks reported.
if(TARGET prism_hybrid)
  add_executable(hybrid_explain hybrid_explain.cc)
  target_include_directories(hybrid_explain PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(hybrid_explain PRIVATE prism_hybrid_replay)

  # hybrid_lag_bench: prismd's engine lag and late receives in real time
  # against stand-in real ranks (docs/timing.md, "Lookahead and lag").
  add_executable(hybrid_lag_bench hybrid_lag_bench.cc)
  target_include_directories(hybrid_lag_bench PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(hybrid_lag_bench PRIVATE prism_hybrid_replay)

  # tree_pipeline_bench: time of the double binary tree play by ranks and size.
  add_executable(tree_pipeline_bench tree_pipeline_bench.cc)
  target_include_directories(tree_pipeline_bench PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(tree_pipeline_bench PRIVATE prism_hybrid)
endif()
