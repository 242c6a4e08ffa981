# The prismd executable (build/daemon/prismd).
if(TARGET prism_hybrid)
  add_executable(prismd ${CMAKE_CURRENT_LIST_DIR}/main.cc)
  target_link_libraries(prismd PRIVATE prism_hybrid CLI11::CLI11)
  set_target_properties(prismd PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/daemon)
endif()
