# Fidelity bench helpers (bench/fidelity/README.md).
# libprism-yield-sleep.so: LD_PRELOAD shim for packed ground truths
# (run-gpu.sh YIELD_SLEEP_US); bundled by scripts/bundle-runtime.sh.
add_library(prism-yield-sleep SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fidelity/yield_sleep.cc)
set_target_properties(prism-yield-sleep PROPERTIES CXX_VISIBILITY_PRESET hidden)
# prism-cpu-stalls: how late each CPU wakes a fair and a FIFO sleeper, beside
# a ground truth (run-gpu.sh CPU_STALLS=1); bundled by scripts/bundle-runtime.sh.
add_executable(prism-cpu-stalls ${CMAKE_CURRENT_SOURCE_DIR}/fidelity/cpu_stalls.cc)
find_package(Threads REQUIRED)
target_link_libraries(prism-cpu-stalls PRIVATE Threads::Threads)
