# Project options. All are prefixed FAIRLANE_ and cached, so `cmake -D...` sets them.

option(FAIRLANE_WARNINGS_AS_ERRORS "Treat compiler warnings as errors" ON)
option(FAIRLANE_BUILD_TESTS "Build fairlane_tests and register the CTest suite" ON)
option(FAIRLANE_BUILD_BENCH "Build fairlane_bench (Google Benchmark)" ON)

set(FAIRLANE_SANITIZE "" CACHE STRING
    "Sanitizers to build with: empty, 'address,undefined' or 'thread'")
set_property(CACHE FAIRLANE_SANITIZE PROPERTY STRINGS "" "address,undefined" "thread")
option(FAIRLANE_FUZZ "Build the libFuzzer targets (tools/fuzz); needs clang" OFF)
set(FAIRLANE_FUZZ_BINARIES "" CACHE PATH
    "Where a fuzz build's fuzz_NAME binaries are; CTest then runs each for 60 s (tools/test)")
