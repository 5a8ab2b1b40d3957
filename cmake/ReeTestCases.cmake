# Read by ctest (through the include file that ree_add_gtest(... PER_CASE) generates; see
# ReeTesting.cmake): one ctest test per GoogleTest case of REE_CASES_EXECUTABLE. The cases are
# listed with --gtest_list_tests when the executable is newer than the last listing, so ctest always
# runs what was built. Each case runs as `<launcher> <executable> --gtest_filter=<Suite>.<Case>`
# and its exit code is the verdict, as for whole executables.

# Writes REE_CASES_TESTS_FILE: add_test/set_tests_properties for each case of the listing.
function(_ree_write_case_tests)
  execute_process(COMMAND "${REE_CASES_EXECUTABLE}" --gtest_list_tests
                  WORKING_DIRECTORY "${REE_CASES_WORKING_DIRECTORY}"
                  OUTPUT_VARIABLE listing ERROR_VARIABLE listing_errors RESULT_VARIABLE rc
                  TIMEOUT 60)
  set(launcher "")
  foreach(arg IN LISTS REE_CASES_LAUNCHER)
    string(APPEND launcher " [==[${arg}]==]")
  endforeach()
  set(properties "LABELS [==[${REE_CASES_LABELS}]==] TIMEOUT ${REE_CASES_TIMEOUT}")
  string(APPEND properties " SKIP_RETURN_CODE ${REE_CASES_SKIP_RETURN_CODE}")
  string(APPEND properties " WORKING_DIRECTORY [==[${REE_CASES_WORKING_DIRECTORY}]==]")
  if(NOT REE_CASES_ENVIRONMENT STREQUAL "")
    string(APPEND properties " ENVIRONMENT [==[${REE_CASES_ENVIRONMENT}]==]")
  endif()
  if(NOT rc EQUAL 0)
    # Listing failed: one test that lists again, so that ctest shows the failure and its output.
    file(WRITE "${REE_CASES_TESTS_FILE}"
         "add_test([==[${REE_CASES_NAME}:listing]==] [==[${REE_CASES_EXECUTABLE}]==] --gtest_list_tests)\n"
         "set_tests_properties([==[${REE_CASES_NAME}:listing]==] PROPERTIES ${properties})\n")
    return()
  endif()
  # Only names matter: drop the comments (# GetParam() = ..., # TypeParam = ...), and keep
  # semicolons and brackets (which could appear in those comments) out of CMake's list splitting.
  string(REGEX REPLACE "[;\\[\\]]" "_" listing "${listing}")
  string(REPLACE "\n" ";" lines "${listing}")
  set(content "")
  set(suite "")
  set(count 0)
  foreach(line IN LISTS lines)
    string(REGEX REPLACE " *#.*$" "" line "${line}")
    if(line MATCHES "^([^ ].*)\\.$")
      set(suite "${CMAKE_MATCH_1}")
    elseif(line MATCHES "^  +([^ ]+)$" AND NOT suite STREQUAL "")
      set(case "${suite}.${CMAKE_MATCH_1}")
      set(test "${REE_CASES_NAME}:${case}")
      string(APPEND content
             "add_test([==[${test}]==]${launcher} [==[${REE_CASES_EXECUTABLE}]==] "
             "[==[--gtest_filter=${case}]==] --gtest_also_run_disabled_tests)\n"
             "set_tests_properties([==[${test}]==] PROPERTIES ${properties})\n")
      if(case MATCHES "(^|[./])DISABLED_")  # as GoogleTest: listed, not run
        string(APPEND content "set_tests_properties([==[${test}]==] PROPERTIES DISABLED TRUE)\n")
      endif()
      math(EXPR count "${count} + 1")
    endif()
  endforeach()
  if(count EQUAL 0)
    # No case at all: run the executable whole; its main() fails when no case ran.
    string(APPEND content "add_test([==[${REE_CASES_NAME}]==]${launcher} [==[${REE_CASES_EXECUTABLE}]==])\n"
           "set_tests_properties([==[${REE_CASES_NAME}]==] PROPERTIES ${properties})\n")
  endif()
  file(WRITE "${REE_CASES_TESTS_FILE}" "${content}")
endfunction()

if(NOT EXISTS "${REE_CASES_EXECUTABLE}")
  # Not built yet: a test that fails and says so, rather than silently fewer tests.
  add_test("${REE_CASES_NAME}:NOT_BUILT" "${REE_CASES_NAME}_NOT_BUILT")
  return()
endif()
if(NOT EXISTS "${REE_CASES_TESTS_FILE}"
   OR NOT "${REE_CASES_TESTS_FILE}" IS_NEWER_THAN "${REE_CASES_EXECUTABLE}"
   OR NOT "${REE_CASES_TESTS_FILE}" IS_NEWER_THAN "${REE_CASES_INCLUDE_FILE}"
   OR NOT "${REE_CASES_TESTS_FILE}" IS_NEWER_THAN "${CMAKE_CURRENT_LIST_FILE}")
  _ree_write_case_tests()
endif()
include("${REE_CASES_TESTS_FILE}")
