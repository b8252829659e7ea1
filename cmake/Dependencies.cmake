# Every external library comes from a Debian package (tools/packages/build.txt);
# nothing is vendored or downloaded at build time.

find_package(fmt 9 REQUIRED)
find_package(CLI11 2 REQUIRED)
find_package(SQLite3 3.37 REQUIRED)  # STRICT tables
find_package(OpenSSL 3 REQUIRED COMPONENTS Crypto)
find_package(Boost 1.81 REQUIRED COMPONENTS json url)
find_package(CURL 7.88 REQUIRED)
find_package(Threads REQUIRED)
# Page images: scanned pages go to the provider as PNG or JPEG (src/document/image.cpp).
find_package(PNG REQUIRED)
find_package(JPEG REQUIRED)
find_package(ZLIB REQUIRED)  # the PDF writer's Flate-compressed images
# poppler-cpp and libpq ship pkg-config files; CMake's own FindPostgreSQL wants the server's
# headers too, which the client does not need.
find_package(PkgConfig REQUIRED)
pkg_check_modules(POPPLER_CPP REQUIRED IMPORTED_TARGET poppler-cpp)
pkg_check_modules(LIBPQ REQUIRED IMPORTED_TARGET libpq>=15)
if(FAIRLANE_BUILD_TESTS)
  find_package(doctest 2.4 REQUIRED)
endif()
if(FAIRLANE_BUILD_BENCH)
  find_package(benchmark 1.7 REQUIRED)
endif()
