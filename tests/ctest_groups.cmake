# Read by ctest when it starts (a TEST_INCLUDE_FILES entry, tests/CMakeLists.txt): the test
# binary's own list of tests (--gtest_list_tests), turned into one ctest entry per group, so
# that the suite pays the binary's start (about 0.6 s: LibTorch's operator registration) once
# a group instead of once a test. A group is a test suite, or, for a value-parameterized
# suite, the suite at one parameter (Variants/FusedCpu/x86_64_v3: every fused CPU test on one
# kernel variant), so that a variant this CPU lacks shows as one skipped entry.
#
# Set by the including file: COPYTASK_TESTS_BINARY (the test binary), COPYTASK_TESTS_DIR (its
# working folder), COPYTASK_TESTS_ENVIRONMENT (each entry's environment), COPYTASK_LONG_GROUPS
# (groups started first: ctest orders by COST, and a fresh build has no timings of its own).
if(NOT EXISTS "${COPYTASK_TESTS_BINARY}")
  add_test(copytask_tests_NOT_BUILT copytask_tests_NOT_BUILT)
  return()
endif()
execute_process(COMMAND "${COPYTASK_TESTS_BINARY}" --gtest_list_tests
                WORKING_DIRECTORY "${COPYTASK_TESTS_DIR}"
                OUTPUT_VARIABLE listing ERROR_VARIABLE listing_errors RESULT_VARIABLE listed
                TIMEOUT 60)
if(NOT listed EQUAL 0)
  message(FATAL_ERROR "copytask_tests --gtest_list_tests failed (${listed}): ${listing_errors}")
endif()

# --gtest_list_tests prints each suite ("Suite." or "Prefix/Suite.", a comment may follow)
# and under it its tests, indented by two spaces ("  Name" or "  Name/Parameter", a comment
# may follow). A ';' would split CMake's list, and is in no name: only in the comments.
string(REPLACE ";" "," listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(groups "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ #]+)\\.( .*)?$")
    set(suite "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^  ([^ #]+)")
    set(test "${CMAKE_MATCH_1}")
    if(test MATCHES "/([^/]+)$")
      set(group "${suite}/${CMAKE_MATCH_1}")
      set(filter "${suite}.*/${CMAKE_MATCH_1}")
    else()
      set(group "${suite}")
      set(filter "${suite}.*")
    endif()
    if(NOT DEFINED "tests_of_${group}")
      list(APPEND groups "${group}")
      set("filter_of_${group}" "${filter}")
      set("tests_of_${group}" 0)
    endif()
    math(EXPR "tests_of_${group}" "${tests_of_${group}} + 1")
  elseif(NOT line STREQUAL "")
    # A line of another form would leave its tests out of every group without a word.
    message(FATAL_ERROR "tests/ctest_groups.cmake cannot read this line of copytask_tests --gtest_list_tests: "
                        "'${line}' (it reads 'Suite.' and '  Test' lines): fix the parser")
  endif()
endforeach()

foreach(group IN LISTS groups)
  # --exit-77-when-all-skipped (tests/test_main.cpp): 77, which ctest shows as skipped, when
  # every test of the group skipped itself (a kernel variant this CPU cannot run, no GPU); a
  # failure still fails the entry, and gtest's output names each test that failed or skipped.
  add_test("${group}" "${COPYTASK_TESTS_BINARY}" "--gtest_filter=${filter_of_${group}}" --exit-77-when-all-skipped)
  set(cost "${tests_of_${group}}")
  list(FIND COPYTASK_LONG_GROUPS "${group}" long)  # (ctest runs this under no policy: no IN_LIST)
  if(long GREATER -1)
    set(cost 500)
  endif()
  set_tests_properties("${group}" PROPERTIES WORKING_DIRECTORY "${COPYTASK_TESTS_DIR}"
                       ENVIRONMENT "${COPYTASK_TESTS_ENVIRONMENT}" SKIP_RETURN_CODE 77 TIMEOUT 600 COST "${cost}")
endforeach()
