# fairlane_warnings: an INTERFACE target every fairlane target links, carrying the
# warning flags (and -Werror when FAIRLANE_WARNINGS_AS_ERRORS is on).
# -Wnull-dereference is left out: it only works with optimisation, where GCC 12 reports
# false positives from inside Boost.Asio's headers.

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
            $<$<BOOL:${FAIRLANE_WARNINGS_AS_ERRORS}>:-Werror>)
