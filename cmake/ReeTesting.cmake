# How REE registers its GoogleTest executables with ctest. tests/CMakeLists.txt includes this
# module, and so does the self-check project (tests/selfcheck), so the check exercises these very
# functions.
#
# The verdict is the exit code, never the printed text: every executable's main()
# (tests/gtest_main.cpp, or REE_MPI_TEST_MAIN in tests/mpi_test_main.h) exits with
# REE_TEST_SKIP_RETURN_CODE only when no case failed and every case that ran was skipped, 1 on any
# failure (on any rank), 0 otherwise; ctest maps the skip code to "Skipped" (SKIP_RETURN_CODE).
# No SKIP_REGULAR_EXPRESSION anywhere: a skip message beside a failure must not turn it into a skip.
#
# ree_add_gtest(<name> SOURCES ... [LIBS ...] [LABELS ...] [TIMEOUT s] [ENVIRONMENT ...] [PER_CASE])
# ree_add_mpi_test(<name> <ranks> SOURCES ... [LIBS ...] [LABELS ...] [TIMEOUT s] [ENVIRONMENT ...]
#                  [PER_CASE])
#   One executable. Without PER_CASE it is one ctest test named <name>; with PER_CASE each
#   GoogleTest case is its own ctest test, <name>:<Suite>.<Case>, listed from the built executable
#   when ctest runs (ReeTestCases.cmake), each with the same labels, timeout and environment.
#   PER_CASE starts one process per case: use it where a case has no costly shared set-up.
# ree_test_label(<var> <file stem>): "gpu" for <area>_gpu_test files, else "cpu".
include_guard(GLOBAL)
include(CMakeParseArguments)

set(REE_TEST_SKIP_RETURN_CODE 77)  # = kReeTestSkipExitCode in tests/gtest_verdict.h
set(REE_TESTING_TESTS_DIR "${CMAKE_CURRENT_LIST_DIR}/../tests")
set(REE_TESTING_CASES_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/ReeTestCases.cmake")

# The label of a test file by its name: <area>_gpu_test.* needs a GPU ("gpu"), the rest "cpu".
function(ree_test_label out_var stem)
  if(stem MATCHES "_gpu_test$")
    set(${out_var} gpu PARENT_SCOPE)
  else()
    set(${out_var} cpu PARENT_SCOPE)
  endif()
endfunction()

# GoogleTest's main with REE's exit codes, built once per project.
function(_ree_gtest_main_library)
  if(NOT TARGET ree_gtest_main)
    add_library(ree_gtest_main STATIC ${REE_TESTING_TESTS_DIR}/gtest_main.cpp)
    target_link_libraries(ree_gtest_main PUBLIC GTest::gtest)
    target_include_directories(ree_gtest_main PUBLIC ${REE_TESTING_TESTS_DIR})
  endif()
endfunction()

# One ctest test for the whole executable, or (PER_CASE) an include file that ctest reads to
# register one test per case. LAUNCHER: the command before the executable (mpirun ...), or empty.
function(_ree_register_tests name)
  cmake_parse_arguments(ARG "PER_CASE" "TIMEOUT" "LAUNCHER;LABELS;ENVIRONMENT" ${ARGN})
  if(NOT ARG_PER_CASE)
    add_test(NAME ${name} COMMAND ${ARG_LAUNCHER} $<TARGET_FILE:${name}>)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
                         SKIP_RETURN_CODE ${REE_TEST_SKIP_RETURN_CODE})
    if(ARG_ENVIRONMENT)
      set_tests_properties(${name} PROPERTIES ENVIRONMENT "${ARG_ENVIRONMENT}")
    endif()
    return()
  endif()
  # Bracket arguments keep lists (labels, environment, launcher) whole in the generated file.
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${name}_cases_include.cmake")
  file(GENERATE OUTPUT "${include_file}" CONTENT
"set(REE_CASES_NAME [==[${name}]==])
set(REE_CASES_EXECUTABLE [==[$<TARGET_FILE:${name}>]==])
set(REE_CASES_LAUNCHER [==[${ARG_LAUNCHER}]==])
set(REE_CASES_LABELS [==[${ARG_LABELS}]==])
set(REE_CASES_TIMEOUT [==[${ARG_TIMEOUT}]==])
set(REE_CASES_ENVIRONMENT [==[${ARG_ENVIRONMENT}]==])
set(REE_CASES_WORKING_DIRECTORY [==[${CMAKE_CURRENT_BINARY_DIR}]==])
set(REE_CASES_SKIP_RETURN_CODE [==[${REE_TEST_SKIP_RETURN_CODE}]==])
set(REE_CASES_TESTS_FILE [==[${CMAKE_CURRENT_BINARY_DIR}/${name}_cases.cmake]==])
set(REE_CASES_INCLUDE_FILE \"\${CMAKE_CURRENT_LIST_FILE}\")
include([==[${REE_TESTING_CASES_SCRIPT}]==])
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()

function(ree_add_gtest name)
  cmake_parse_arguments(ARG "PER_CASE" "TIMEOUT" "SOURCES;LIBS;LABELS;ENVIRONMENT" ${ARGN})
  _ree_gtest_main_library()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} ree_gtest_main GTest::gtest)
  target_include_directories(${name} PRIVATE ${REE_TESTING_TESTS_DIR})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  set(per_case "")
  if(ARG_PER_CASE)
    set(per_case PER_CASE)
  endif()
  _ree_register_tests(${name} ${per_case} TIMEOUT ${ARG_TIMEOUT} LABELS ${ARG_LABELS}
                      ENVIRONMENT ${ARG_ENVIRONMENT})
endfunction()

# An MPI test: `mpirun -n <ranks>` on the executable, whose main is REE_MPI_TEST_MAIN() (every
# rank exits with the job's verdict). Root and oversubscription are allowed for CI containers.
function(ree_add_mpi_test name ranks)
  cmake_parse_arguments(ARG "PER_CASE" "TIMEOUT" "SOURCES;LIBS;LABELS;ENVIRONMENT" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} MPI::MPI_C GTest::gtest)
  target_include_directories(${name} PRIVATE ${REE_TESTING_TESTS_DIR})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  set(per_case "")
  if(ARG_PER_CASE)
    set(per_case PER_CASE)
  endif()
  _ree_register_tests(
    ${name} ${per_case} TIMEOUT ${ARG_TIMEOUT} LABELS mpi ${ARG_LABELS}
    LAUNCHER ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} --oversubscribe
             --allow-run-as-root --bind-to none
    ENVIRONMENT OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_ALLOW_RUN_AS_ROOT=1
                OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ${ARG_ENVIRONMENT})
endfunction()
