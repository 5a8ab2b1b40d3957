# REE_FUZZ=ON (included by the top-level CMakeLists.txt before any library is defined): every C/C++
# target gets libFuzzer's coverage instrumentation (fuzzer-no-link), AddressSanitizer and
# UndefinedBehaviorSanitizer, so a bad read in the libraries is caught, not only in the targets.
# tests/fuzz/CMakeLists.txt links the fuzz targets themselves with -fsanitize=fuzzer.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "REE_FUZZ=ON needs clang (libFuzzer), e.g. -DCMAKE_CXX_COMPILER=clang++-14 "
                      "-DCMAKE_C_COMPILER=clang-14; got ${CMAKE_CXX_COMPILER_ID}")
endif()
if(REE_CUDA STREQUAL "ON" OR REE_MPI STREQUAL "ON" OR REE_TORCH STREQUAL "ON")
  message(FATAL_ERROR "REE_FUZZ=ON is CPU only: configure with -DREE_CUDA=OFF -DREE_MPI=OFF "
                      "-DREE_TORCH=OFF")
endif()
add_compile_options(
  "$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link,address,undefined>"
  "$<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=undefined;-fno-omit-frame-pointer;-g>")
add_link_options(-fsanitize=address,undefined)
