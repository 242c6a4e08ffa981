# Bootstrap emulation tests: ids/profiles, the server against independent
# fake real ranks, recording and replay.
add_library(prism_bootstrap_testlib STATIC
  ${CMAKE_CURRENT_LIST_DIR}/bootstrap_fake_rank.cc
  ${CMAKE_CURRENT_LIST_DIR}/bootstrap_test_util.cc)
target_link_libraries(prism_bootstrap_testlib PUBLIC prism_bootstrap prism_wire_replay prism_common
  nlohmann_json::nlohmann_json spdlog::spdlog Threads::Threads)

add_executable(bootstrap_tests
  ${CMAKE_CURRENT_LIST_DIR}/bootstrap_ids_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/bootstrap_profiles_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/bootstrap_server_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/bootstrap_hostile_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/bootstrap_replay_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/bootstrap_version_test.cc)
target_link_libraries(bootstrap_tests PRIVATE prism_test_main prism_bootstrap_testlib)
target_compile_definitions(bootstrap_tests PRIVATE
  PRISM_WIRE_FIXTURES="${CMAKE_CURRENT_LIST_DIR}/fixtures/wire")
prism_discover_tests(bootstrap_tests)
# The components' layering (components.h): none includes one above it.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME bootstrap.layers
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/bootstrap_layers_check.py ${PROJECT_SOURCE_DIR})
endif()
