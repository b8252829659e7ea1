# fairlane_sanitizers: an INTERFACE target that adds -fsanitize=${FAIRLANE_SANITIZE} to
# compile and link of every fairlane target. Any report is fatal (no recovery), so a
# sanitizer finding fails the test that triggered it.

add_library(fairlane_sanitizers INTERFACE)
if(FAIRLANE_SANITIZE)
  if(NOT FAIRLANE_SANITIZE MATCHES "^(address,undefined|undefined,address|address|undefined|thread)$")
    message(FATAL_ERROR "FAIRLANE_SANITIZE='${FAIRLANE_SANITIZE}' is not supported: "
                        "use 'address,undefined' or 'thread', or leave it empty.")
  endif()
  set(_fairlane_sanitize_flags -fsanitize=${FAIRLANE_SANITIZE} -fno-omit-frame-pointer
                               -fno-sanitize-recover=all)
  target_compile_options(fairlane_sanitizers INTERFACE ${_fairlane_sanitize_flags})
  target_link_options(fairlane_sanitizers INTERFACE ${_fairlane_sanitize_flags})
  if(FAIRLANE_SANITIZE STREQUAL "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # Asio's handler invocation uses std::atomic_thread_fence, which TSan does not model and
    # GCC warns about (-Wtsan). Its scheduler hands work between threads under a mutex, which
    # TSan does see; a race the fence alone would order would show as a report, not pass.
    target_compile_options(fairlane_sanitizers INTERFACE -Wno-tsan)
  endif()
endif()

# The fuzz build (tools/fuzz): every library is instrumented for libFuzzer's coverage; only
# the fuzz_NAME binaries link its runtime (-fsanitize=fuzzer).
if(FAIRLANE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "FAIRLANE_FUZZ needs clang (libFuzzer): configure with CXX=clang++")
  endif()
  # Line tables only: clang 14 with ASan and full debug information fails on the C++20
  # coroutines of src/service ("Cannot represent a difference across sections"); stacks
  # keep their files and lines.
  target_compile_options(fairlane_sanitizers INTERFACE -fsanitize=fuzzer-no-link
                                                       -gline-tables-only)
endif()
