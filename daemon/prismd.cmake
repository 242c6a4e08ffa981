# The prismd executable (build/daemon/prismd).
if(TARGET prism_engine AND TARGET prism_server AND TARGET prism_session AND TARGET prism_bootstrap AND TARGET prism_rendezvous)
  add_executable(prismd ${CMAKE_CURRENT_LIST_DIR}/main.cc ${CMAKE_CURRENT_LIST_DIR}/control_plane.cc)
  target_link_libraries(prismd PRIVATE prism_engine prism_server prism_session prism_bootstrap prism_rendezvous CLI11::CLI11)
  set_target_properties(prismd PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/daemon)
endif()
