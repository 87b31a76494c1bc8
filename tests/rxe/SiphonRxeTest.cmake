# siphon_add_rxe_test(): tier 2 of DESIGN.md §4.1, tests that run inside a
# QEMU/TCG guest whose stock Debian kernel provides Soft-RoCE (rdma_rxe).
# See docs/testing-rxe.md.
#
# Any CMakeLists may include this file, whatever order the directories are
# added in:
#   include("${PROJECT_SOURCE_DIR}/tests/rxe/SiphonRxeTest.cmake")
#
# siphon_add_rxe_test(NAME <name> COMMAND <cmd> [<arg>...]
#                     [TIMEOUT <sec>] [WORKING_DIRECTORY <dir>] [LABELS <label>...])
#
# Registers a ctest that runs <cmd> inside the guest through
#   tests/rxe/run-in-guest --cache ${CMAKE_BINARY_DIR}/rxe-cache -- <cmd>...
# with LABELS rxe, TIMEOUT 600 (the guest gets 60 s less, so that a hang still
# prints the guest console before ctest steps in), RESOURCE_LOCK
# siphon_rxe_guest (one guest at a time, but other tests beside it) and COST
# 55. A guest keeps about one core busy (1.1 on average over the tier,
# measured), so running the tier alone, as RUN_SERIAL did, left the second
# core mostly idle for its 200 s; the cost starts the tier early, right
# after the longest interop tests, so that it overlaps the rest of the run
# instead of trailing it. (The two-guest tests of rxe2 keep RUN_SERIAL: they
# use 1.3-1.6 cores and time link cuts.)
#
# If <cmd> names a CMake target that already exists it is replaced by
# $<TARGET_FILE:...>; otherwise pass $<TARGET_FILE:tgt> or a path yourself:
#   siphon_add_rxe_test(NAME rxe.provider_conformance
#     COMMAND provider_conformance --provider=verbs --device=rxe0)
# Inside the guest the command sees the host's files read-only, the test's
# working directory as its cwd (read-only too), tmpfs on /tmp, /run, /var/tmp
# and /dev/shm, a writable results dir at the same path as on the host
# (${CMAKE_CURRENT_BINARY_DIR}/rxe-out/<name>, also in $SIPHON_RXE_OUT), the
# host's environment (ctest's ENVIRONMENT property included) and
# SIPHON_RXE_GUEST=1, SIPHON_RXE_DEV=rxe0, SIPHON_RXE_ADDR=192.0.2.1,
# SIPHON_RXE_GID_INDEX=<RoCEv2 GID index of that address>.
#
# The runner needs root (it installs packages and exports / over 9p). Run only
# this tier with `ctest -L rxe`; leave it out with `ctest -LE rxe`.
include_guard(GLOBAL)

function(siphon_add_rxe_test)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;TIMEOUT;WORKING_DIRECTORY" "COMMAND;LABELS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "siphon_add_rxe_test: unexpected arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_NAME OR NOT ARG_COMMAND)
    message(FATAL_ERROR "siphon_add_rxe_test: NAME and COMMAND are required")
  endif()

  set(timeout 600)
  if(ARG_TIMEOUT)
    set(timeout ${ARG_TIMEOUT})
  endif()
  math(EXPR guest_timeout "${timeout} - 60")
  if(guest_timeout LESS 30)
    message(FATAL_ERROR "siphon_add_rxe_test(${ARG_NAME}): TIMEOUT must be at least 90 s")
  endif()

  set(command ${ARG_COMMAND})
  list(GET command 0 exe)
  if(TARGET "${exe}")
    list(REMOVE_AT command 0)
    list(PREPEND command "$<TARGET_FILE:${exe}>")
  endif()

  set(workdir "${CMAKE_CURRENT_BINARY_DIR}")
  if(ARG_WORKING_DIRECTORY)
    set(workdir "${ARG_WORKING_DIRECTORY}")
  endif()

  add_test(NAME "${ARG_NAME}"
    COMMAND "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/run-in-guest"
            --cache "${CMAKE_BINARY_DIR}/rxe-cache"
            --timeout ${guest_timeout}
            --out "${CMAKE_CURRENT_BINARY_DIR}/rxe-out/${ARG_NAME}"
            -- ${command}
    WORKING_DIRECTORY "${workdir}")
  set_tests_properties("${ARG_NAME}" PROPERTIES
    LABELS "rxe;${ARG_LABELS}"
    TIMEOUT ${timeout}
    RESOURCE_LOCK siphon_rxe_guest
    COST 55)
endfunction()
