# prismd's hybrid mode without sockets: the HybridScheduler, the engine and a
# test harness acting as the real ranks' plugins (test/hybrid_harness.h), and
# the replay of recorded GPU-host sessions (test/fixtures/hybrid/).
if(TARGET prism_hybrid AND TARGET prism_graphgen)
  add_executable(hybrid_tests hybrid_harness.cc hybrid_scheduler_test.cc hybrid_replay_test.cc hybrid_tree_pipeline_test.cc
                 hybrid_closed_form_test.cc hybrid_self_check_test.cc hybrid_programs_test.cc daemon_test_graphs.cc
                 hybrid_session_capture_test.cc hybrid_divergence_watch_test.cc hybrid_twin_comms_test.cc
                 hybrid_gloo_test.cc gloo_fake_rank.cc torch_store_client.cc
                 hybrid_follow_test.cc hybrid_follow_torch_test.cc hybrid_follow_side_stream_test.cc hybrid_follow_train_gpt_test.cc hybrid_step_cost_fit_test.cc hybrid_op_time_report_test.cc
                 hybrid_own_pace_test.cc hybrid_late_receives_test.cc hybrid_calibration_test.cc
                 graphgen_test_util.cc)
  target_include_directories(hybrid_tests PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(hybrid_tests PRIVATE prism_test_main prism_hybrid_replay prism_session_capture prism_graphgen)
  target_compile_definitions(hybrid_tests PRIVATE PRISM_HYBRID_FIXTURES="${CMAKE_CURRENT_LIST_DIR}/fixtures/hybrid"
                             PRISM_FIDELITY_SPECS="${PROJECT_SOURCE_DIR}/bench/fidelity/specs"
                             PRISM_EXAMPLES_DIR="${PROJECT_SOURCE_DIR}/examples"
                             PRISMD_PATH="$<TARGET_FILE:prismd>")
  add_dependencies(hybrid_tests prismd)
  prism_discover_tests(hybrid_tests TEST_PREFIX "hybrid.")
endif()
