# The leak gate for a ctest suite: every test runs under `memtide run --check`, so that a test
# that leaks fails with the leaking stacks in its output.
#
#   memtide_add_leak_gate(TARGETS t1 t2 ...
#                         [SUPPRESSIONS file...]   LeakSanitizer-format suppressions
#                         [JUNIT_DIR dir]          one JUnit file per target: dir/<target>.xml;
#                                                  per GoogleTest test run with --gtest_filter:
#                                                  dir/<target>.<Suite>.<Test>.xml
#                         [TRACE_DIR dir]          where the traces go (default: each test's
#                                                  working directory); kept only when the gate fails
#                         [ERROR_EXITCODE n]       exit status of a leak (default 23, as
#                                                  LeakSanitizer's), told apart from a test's own failure
#                         [OPTIONS opt...])        more `memtide run` options (--max-leaked-bytes 1KiB, ...)
#
# It sets each target's TEST_LAUNCHER (CMake 3.29 and later) or CROSSCOMPILING_EMULATOR
# (before 3.29; CMake prefixes add_test() commands that name the target with it). Either way a
# test is gated when its COMMAND names the target: add_test(NAME t1 COMMAND t1 ...).
# The emulator is also put in front of add_custom_command()s that run the target.
#
# With GoogleTest's test discovery, memtide_add_leak_gate(TARGETS t ...) comes before
# gtest_discover_tests(t), which reads the launcher when it is called; called after it, it is
# a configure error. The launcher (memtide-test-launcher, beside this file) runs the discovery
# run, `t --gtest_list_tests`, as it is: not gated, no report, its output the program's own.
# Each discovered test (`t --gtest_filter=Suite.Test`) runs under the gate with its own report.
#
# MEMTIDE_TEST_LAUNCHER is the same command with the default options, to gate every test of a
# directory in one line before its targets are made:
#   set(CMAKE_TEST_LAUNCHER ${MEMTIDE_TEST_LAUNCHER})             # CMake 3.29 and later
#   set(CMAKE_CROSSCOMPILING_EMULATOR ${MEMTIDE_TEST_LAUNCHER})   # earlier (policy CMP0158 OLD from 3.28)
include_guard(GLOBAL)

# A global property: the functions read it from any directory, whichever included this file.
set_property(GLOBAL PROPERTY MEMTIDE_TEST_LAUNCHER_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/memtide-test-launcher")

function(memtide_leak_gate_command out)
  cmake_parse_arguments(PARSE_ARGV 1 G "" "JUNIT;TRACE_DIR;ERROR_EXITCODE" "SUPPRESSIONS;OPTIONS")
  if(NOT DEFINED G_ERROR_EXITCODE)
    set(G_ERROR_EXITCODE 23)
  endif()
  # memtide-test-launcher [--junit FILE] -- memtide run OPTIONS... --: the launcher names each
  # GoogleTest test's report, and runs a --gtest_list_tests run ungated.
  get_property(launcher GLOBAL PROPERTY MEMTIDE_TEST_LAUNCHER_SCRIPT)
  set(cmd "${launcher}")
  if(G_JUNIT)
    list(APPEND cmd --junit "${G_JUNIT}")
  endif()
  list(APPEND cmd -- "${MEMTIDE_EXECUTABLE}" run --quiet --check --keep-traces=failed --error-exitcode ${G_ERROR_EXITCODE})
  foreach(s IN LISTS G_SUPPRESSIONS)
    get_filename_component(s "${s}" ABSOLUTE)
    list(APPEND cmd --suppressions "${s}")
  endforeach()
  if(G_TRACE_DIR)
    list(APPEND cmd -o "${G_TRACE_DIR}/%e.%p.mtide")
  endif()
  list(APPEND cmd ${G_OPTIONS} --)
  set(${out} "${cmd}" PARENT_SCOPE)
endfunction()

function(memtide_add_leak_gate)
  cmake_parse_arguments(PARSE_ARGV 0 G "" "JUNIT_DIR;TRACE_DIR;ERROR_EXITCODE" "TARGETS;SUPPRESSIONS;OPTIONS")
  if(G_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "memtide_add_leak_gate: unknown arguments: ${G_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT G_TARGETS)
    message(FATAL_ERROR "memtide_add_leak_gate: TARGETS names no target")
  endif()
  foreach(dir IN ITEMS "${G_JUNIT_DIR}" "${G_TRACE_DIR}")
    if(dir)
      file(MAKE_DIRECTORY "${dir}")
    endif()
  endforeach()
  set(common SUPPRESSIONS ${G_SUPPRESSIONS} OPTIONS ${G_OPTIONS})
  if(DEFINED G_ERROR_EXITCODE)
    list(APPEND common ERROR_EXITCODE ${G_ERROR_EXITCODE})
  endif()
  if(G_TRACE_DIR)
    get_filename_component(G_TRACE_DIR "${G_TRACE_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
    list(APPEND common TRACE_DIR "${G_TRACE_DIR}")
  endif()
  foreach(t IN LISTS G_TARGETS)
    if(NOT TARGET ${t})
      message(FATAL_ERROR "memtide_add_leak_gate: ${t} is not a target")
    endif()
    # gtest_discover_tests sets CTEST_DISCOVERED_TEST_COUNTER on the target, and reads its
    # launcher then: the tests it discovers would run without the gate.
    get_property(discovered TARGET ${t} PROPERTY CTEST_DISCOVERED_TEST_COUNTER SET)
    if(discovered)
      message(FATAL_ERROR "memtide_add_leak_gate: gtest_discover_tests(${t}) was called before it, so "
        "the tests it discovers would run without the leak gate. Call memtide_add_leak_gate(TARGETS ${t} ...) "
        "before gtest_discover_tests(${t}).")
    endif()
    set(junit "")
    if(G_JUNIT_DIR)
      get_filename_component(j "${G_JUNIT_DIR}/${t}.xml" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
      set(junit JUNIT "${j}")
    endif()
    memtide_leak_gate_command(cmd ${junit} ${common})
    if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.29)
      set_property(TARGET ${t} PROPERTY TEST_LAUNCHER "${cmd}")
    else()
      set_property(TARGET ${t} PROPERTY CROSSCOMPILING_EMULATOR "${cmd}")
    endif()
  endforeach()
endfunction()

memtide_leak_gate_command(MEMTIDE_TEST_LAUNCHER)
