# cmake -P script behind the ctest test tests_selfcheck (see CMakeLists.txt here): configures,
# builds and tests the scratch project under SCRATCH_DIR, then compares the verdict ctest gave
# each of its tests with the one it deserves. Any difference, or a green inner ctest, fails.
cmake_minimum_required(VERSION 3.25)
set(expected
    "mixed_whole=Failed"
    "mixed_cases:Selfcheck.Passes=Passed"
    "mixed_cases:Selfcheck.Skips=Skipped"
    "mixed_cases:Selfcheck.Fails=Failed"
    "mixed_cases:Selfcheck.FailsThenSkips=Failed"
    "mixed_cases:Selfcheck.DISABLED_NeverRuns=Disabled"
    "all_skip=Skipped"
    "pass_and_skip=Passed"
    "no_case=Failed")
if(WITH_MPI)
  list(APPEND expected
       "mpi_mixed=Failed"
       "mpi_all_skip=Skipped"
       "mpi_pass_and_skip=Passed"
       "mpi_cases:SelfcheckMpi.FailsOnRankOneOnly=Failed"
       "mpi_cases:SelfcheckMpi.SkipsOnEveryRank=Skipped"
       "mpi_cases:SelfcheckMpi.PassesOnRankZeroOnly=Passed")
endif()

function(run_step what)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "self-check: ${what} of the scratch project failed (${rc}):\n${out}")
  endif()
endfunction()

set(configure_args -S ${REE_SOURCE_DIR}/tests/selfcheck/project -B ${SCRATCH_DIR}
                   -G ${GENERATOR} -DREE_SOURCE_DIR=${REE_SOURCE_DIR} -DWITH_MPI=${WITH_MPI}
                   -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(CXX_COMPILER_LAUNCHER)
  list(APPEND configure_args -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_COMPILER_LAUNCHER})
endif()
if(GTEST_DIR)
  list(APPEND configure_args -DGTest_DIR=${GTEST_DIR})
endif()
run_step(configure ${CMAKE_COMMAND} ${configure_args})
run_step(build ${CMAKE_COMMAND} --build ${SCRATCH_DIR})

execute_process(COMMAND ${CMAKE_CTEST_COMMAND} --test-dir ${SCRATCH_DIR} -j2 --timeout 60
                OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
message("${out}")
set(problems "")
if(rc EQUAL 0)
  string(APPEND problems "  the scratch ctest reported success although cases failed\n")
endif()

# "  3/14 Test  #3: all_skip ......................***Skipped   0.01 sec"
string(REGEX MATCHALL "Test +#[0-9]+: [^\n]+" lines "${out}")
set(seen "")
foreach(line IN LISTS lines)
  if(line MATCHES "^Test +#[0-9]+: ([^ ]+) [ .]*(\\*\\*\\*)?([A-Za-z]+)")
    set(test_name "${CMAKE_MATCH_1}")
    set(test_verdict "${CMAKE_MATCH_3}")
    if(line MATCHES "Not Run \\(Disabled\\)")
      set(test_verdict Disabled)
    endif()
    list(APPEND seen "${test_name}=${test_verdict}")
  endif()
endforeach()
foreach(verdict IN LISTS expected)
  if(NOT verdict IN_LIST seen)
    string(APPEND problems "  expected ${verdict}\n")
  endif()
endforeach()
foreach(verdict IN LISTS seen)
  if(NOT verdict IN_LIST expected)
    string(APPEND problems "  got ${verdict}\n")
  endif()
endforeach()
if(problems)
  message(FATAL_ERROR "self-check: the test registration gives wrong verdicts:\n${problems}")
endif()
list(LENGTH expected count)
message("self-check: all ${count} verdicts as expected (failures red, skips only when nothing failed)")
