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
