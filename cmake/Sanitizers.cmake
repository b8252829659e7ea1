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
