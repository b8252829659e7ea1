// The one test binary's entry point; doctest finds the test cases in every tests/ file.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
