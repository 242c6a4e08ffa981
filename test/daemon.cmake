# Tests of prismd: network model vs closed forms, engine semantics, equivalence
# classes vs full replay, determinism, real-time mode and inbox, metrics over
# HTTP, gRPC server, hostile graphs (API and the prismd binary).
if(TARGET prism_engine AND TARGET prism_server AND TARGET prismd)
  find_package(CURL REQUIRED)
  add_executable(daemon_tests
    daemon_test_graphs.cc daemon_network_model_test.cc daemon_step_cost_test.cc daemon_nccl_choice_test.cc daemon_pat_kernel_test.cc daemon_engine_test.cc daemon_classes_test.cc
    daemon_realtime_test.cc daemon_server_test.cc daemon_hostile_test.cc daemon_status_test.cc
    daemon_socket_test.cc daemon_nic_calendar_test.cc daemon_nic_models_test.cc daemon_throughput_test.cc
    daemon_golden_test.cc daemon_event_queue_test.cc daemon_tables_test.cc daemon_replay_accounting_test.cc
    daemon_late_ranks_test.cc)
  target_link_libraries(daemon_tests PRIVATE prism_test_main prism_engine prism_server prism_graphgen CURL::libcurl)
  target_compile_definitions(daemon_tests PRIVATE PRISMD_PATH="$<TARGET_FILE:prismd>"
                             PRISM_EXAMPLES_DIR="${PROJECT_SOURCE_DIR}/examples")
  add_dependencies(daemon_tests prismd)
  prism_discover_tests(daemon_tests TEST_PREFIX "daemon.")

  # The status page in headless Chromium (skipped when /usr/bin/chromium is absent).
  add_executable(status_page_server status_page_server.cc)
  target_link_libraries(status_page_server PRIVATE prism_server)
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_Interpreter_FOUND)
    add_test(NAME daemon.status_page_browser
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/status_page_test.py $<TARGET_FILE:prismd>
                     $<TARGET_FILE:prism-graphgen> $<TARGET_FILE:status_page_server>)
    set_tests_properties(daemon.status_page_browser PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  endif()
endif()
# The hostile checks of issue 12 against the built prismd and prism-graphgen
# (loopback and /tmp only, bounded in time): test/hostile_checks.py.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND AND TARGET prismd AND TARGET prism-graphgen)
  add_test(NAME daemon.hostile_checks
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/hostile_checks.py
                   $<TARGET_FILE:prismd> $<TARGET_FILE:prism-graphgen> ${PROJECT_SOURCE_DIR}/examples)
  set_tests_properties(daemon.hostile_checks PROPERTIES TIMEOUT 300)
endif()
# What a practitioner expects of prismd, prism-graphgen and scripts/prism
# (issue 25: waiting made visible, CLI conventions, progress, traces).
if(Python3_Interpreter_FOUND AND TARGET prismd AND TARGET prism-graphgen)
  add_test(NAME daemon.practitioner_checks
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/practitioner_checks.py
                   $<TARGET_FILE:prismd> $<TARGET_FILE:prism-graphgen> ${PROJECT_SOURCE_DIR}/examples
                   ${PROJECT_SOURCE_DIR}/scripts/prism)
  set_tests_properties(daemon.practitioner_checks PROPERTIES TIMEOUT 600)
endif()
