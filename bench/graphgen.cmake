# graphgen_bench: generation and inspection time of the 8192-rank GPT-3 graph.
add_executable(graphgen_bench graphgen_bench.cc)
target_link_libraries(graphgen_bench PRIVATE prism_graphgen)
target_compile_definitions(graphgen_bench PRIVATE
  PRISM_GPT3_EXAMPLE="${PROJECT_SOURCE_DIR}/examples/gpt3-175b-8192.yaml")
