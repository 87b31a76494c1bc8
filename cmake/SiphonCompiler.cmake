# Compiler flags, ccache and sanitizers.
find_program(SIPHON_CCACHE ccache)
if(SIPHON_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_C_COMPILER_LAUNCHER "${SIPHON_CCACHE}")
  set(CMAKE_CXX_COMPILER_LAUNCHER "${SIPHON_CCACHE}")
endif()

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Debug CACHE STRING "Build type" FORCE)
endif()
# Debug keeps assertions and trace logging but optimises lightly, so the
# 100k-message tests stay quick.
set(CMAKE_CXX_FLAGS_DEBUG "-O1 -g -fno-omit-frame-pointer")
set(CMAKE_C_FLAGS_DEBUG "-O1 -g -fno-omit-frame-pointer")

add_library(siphon_warnings INTERFACE)
target_compile_options(siphon_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
  -Wcast-align -Woverloaded-virtual -Wimplicit-fallthrough
  # Not -Wnull-dereference: GCC 12 reports false positives inside Boost.Asio
  # and gtest at -O1 and above.
  $<$<BOOL:${SIPHON_WERROR}>:-Werror>)

if(SIPHON_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
elseif(SIPHON_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT SIPHON_SANITIZE STREQUAL "")
  message(FATAL_ERROR "SIPHON_SANITIZE='${SIPHON_SANITIZE}': use '', 'address' or 'thread'")
endif()

# The linker. Linking is a large part of a build here (about a hundred test
# and tool executables per preset, each with the whole static library and
# full debug information): GNU ld took 6.6 s to link the debug siphon-bench,
# gold 4.7 s, lld 1.0 s (the same command, measured on the CI machine). lld
# comes from Debian's `lld` package (tools/dev/install-deps.sh); without it
# the build uses the compiler's default linker and says so.
#   SIPHON_LINKER  lld (the default) or default (the compiler's own choice)
set(SIPHON_LINKER "lld" CACHE STRING "Linker: lld or default (the compiler's default, GNU ld)")
if(NOT SIPHON_LINKER MATCHES "^(lld|default)$")
  message(FATAL_ERROR "SIPHON_LINKER='${SIPHON_LINKER}': use 'lld' or 'default'")
endif()
if(SIPHON_LINKER STREQUAL "lld")
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-fuse-ld=lld" SIPHON_HAVE_LLD)
  if(SIPHON_HAVE_LLD)
    add_link_options(-fuse-ld=lld)
  else()
    message(STATUS "lld not found (Debian package lld): linking with the compiler's default linker")
  endif()
endif()

# Debug information. Full DWARF (-g) is what makes g++ slow on this code
# (Asio, gtest and fmt templates): measured on one test object, tcp_test.cc,
# CPU time 13.4 s with -g and 9.4 s with -g1 at -O1, 14.1 s and 11.0 s at -O2.
# Line tables (-g1) still give backtraces, perf and sanitizer reports with
# file:line; they lack variables and types for a debugger.
#   SIPHON_DEBUG_INFO       the library, the tools and the benchmarks
#   SIPHON_TEST_DEBUG_INFO  the test code (siphon_test_flags below)
# Values: full (-g) or lines (-g1). They apply to build types that have
# debug information (Debug, RelWithDebInfo); Release has none either way.
set(SIPHON_DEBUG_INFO "full" CACHE STRING "Debug information of the library and tools: full (-g) or lines (-g1)")
set(SIPHON_TEST_DEBUG_INFO "lines" CACHE STRING "Debug information of the test code: full (-g) or lines (-g1)")
foreach(var SIPHON_DEBUG_INFO SIPHON_TEST_DEBUG_INFO)
  if(NOT ${var} MATCHES "^(full|lines)$")
    message(FATAL_ERROR "${var}='${${var}}': use 'full' (-g) or 'lines' (-g1)")
  endif()
endforeach()
if(SIPHON_DEBUG_INFO STREQUAL "lines")
  # After CMAKE_CXX_FLAGS_<CONFIG> on the command line: the last -g level wins.
  add_compile_options($<$<CONFIG:Debug,RelWithDebInfo>:-g1>)
endif()

# Flags of the test code only (every gtest binary, the provider suites and
# the interop tests link this; the fuzz targets and benchmarks do not).
# The test code builds at -O0 in every preset, and the library under test
# keeps its preset's level (-O1 debug and sanitizers, -O2 release), so what
# the tests check is the code we ship, optimised as shipped. Optimising the
# test code itself buys nothing the tests check and costs compile time, most
# of it in gtest, Asio and fmt templates: one test object took 14.2 s at -O1
# and 9.3 s at -O0 under clang's ASan; with g++ (-g1), admin_socket_test.cc
# 11.1 s at -O2, 9.1 s at -O1 and 8.3 s at -O0, perf_counters_test.cc 8.4,
# 6.9 and 5.6 s. Under a sanitizer the test code keeps full -g (-g1 saves
# nothing with clang).
add_library(siphon_test_flags INTERFACE)
target_compile_options(siphon_test_flags INTERFACE $<$<CONFIG:Debug,RelWithDebInfo>:-O0>)
if(SIPHON_SANITIZE STREQUAL "" AND SIPHON_TEST_DEBUG_INFO STREQUAL "lines")
  target_compile_options(siphon_test_flags INTERFACE $<$<CONFIG:Debug,RelWithDebInfo>:-g1>)
endif()
