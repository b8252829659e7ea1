# fairlane_warnings: an INTERFACE target every fairlane target links, carrying the
# warning flags (and -Werror when FAIRLANE_WARNINGS_AS_ERRORS is on).
# -Wnull-dereference is left out: it only works with optimisation, where GCC 12 reports
# false positives from inside Boost.Asio's headers.
# -Wmismatched-new-delete (in -Wall) is turned off for GCC: at -O2 (RelWithDebInfo, the
# default build type) it reports every Asio coroutine frame, whose class operator new
# allocates through aligned_new and whose sized operator delete frees through
# aligned_delete, as mismatched once both are inlined: GCC's false positive (PR
# middle-end/109224), and the build of src/service/dispatcher.cpp would fail with -Werror.

add_library(fairlane_warnings INTERFACE)
target_compile_options(
  fairlane_warnings
  INTERFACE -Wall
            -Wextra
            -Wpedantic
            -Wshadow
            -Wconversion
            -Wsign-conversion
            -Wold-style-cast
            -Wnon-virtual-dtor
            -Woverloaded-virtual
            -Wdouble-promotion
            -Wformat=2
            -Wimplicit-fallthrough
            $<$<CXX_COMPILER_ID:GNU>:-Wno-mismatched-new-delete>
            $<$<BOOL:${FAIRLANE_WARNINGS_AS_ERRORS}>:-Werror>)
