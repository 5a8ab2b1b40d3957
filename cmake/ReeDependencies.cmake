# Third-party dependencies. All come from Debian packages or PyPI (scripts/setup.sh installs them;
# on GPU machines scripts/gpu/unpack-deps.sh provides them under a prefix).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(cxxopts REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
# PCRE2 (tokenizer pre-tokenizer regexes). Found by path so no pkg-config is needed on GPU hosts.
find_path(PCRE2_INCLUDE_DIR pcre2.h REQUIRED)
find_library(PCRE2_LIBRARY pcre2-8 REQUIRED)
add_library(ree_pcre2 INTERFACE)
target_include_directories(ree_pcre2 SYSTEM INTERFACE ${PCRE2_INCLUDE_DIR})
target_link_libraries(ree_pcre2 INTERFACE ${PCRE2_LIBRARY})
target_compile_definitions(ree_pcre2 INTERFACE PCRE2_CODE_UNIT_WIDTH=8)
# utf8proc (tokenizer NFC/NFD/NFKC/NFKD, Lowercase, StripAccents). Found by path like PCRE2.
find_path(UTF8PROC_INCLUDE_DIR utf8proc.h)
find_library(UTF8PROC_LIBRARY utf8proc)
if(NOT UTF8PROC_INCLUDE_DIR OR NOT UTF8PROC_LIBRARY)
  message(FATAL_ERROR "utf8proc (utf8proc.h, libutf8proc) was not found: install the Debian package "
                      "libutf8proc-dev (scripts/setup.sh does)")
endif()
add_library(ree_utf8proc INTERFACE)
target_include_directories(ree_utf8proc SYSTEM INTERFACE ${UTF8PROC_INCLUDE_DIR})
target_link_libraries(ree_utf8proc INTERFACE ${UTF8PROC_LIBRARY})
# cpp-httplib (`ree-launch serve`, server/). Debian builds it as a shared library with OpenSSL, zlib
# and Brotli support; the same definitions keep httplib.h's structures identical to the library's.
find_path(HTTPLIB_INCLUDE_DIR httplib.h)
find_library(HTTPLIB_LIBRARY cpp-httplib)
if(NOT HTTPLIB_INCLUDE_DIR OR NOT HTTPLIB_LIBRARY)
  message(FATAL_ERROR "cpp-httplib (httplib.h, libcpp-httplib) was not found: install the Debian "
                      "package libcpp-httplib-dev (scripts/setup.sh does)")
endif()
add_library(ree_httplib INTERFACE)
target_include_directories(ree_httplib SYSTEM INTERFACE ${HTTPLIB_INCLUDE_DIR})
target_link_libraries(ree_httplib INTERFACE ${HTTPLIB_LIBRARY} Threads::Threads)
target_compile_definitions(ree_httplib INTERFACE CPPHTTPLIB_OPENSSL_SUPPORT CPPHTTPLIB_ZLIB_SUPPORT
                                                 CPPHTTPLIB_BROTLI_SUPPORT)

# MPFR: the oracle of the correctly rounded math tests (test-only dependency). Without it those
# checks are not built and the crmath tests report one skipped case saying so.
# REE_MPFR=OFF builds that way on purpose (to see the skip).
set(REE_MPFR "AUTO" CACHE STRING "Use MPFR in the crmath tests: ON, OFF or AUTO")
set(REE_HAVE_MPFR OFF)
if(NOT REE_MPFR STREQUAL "OFF")
  find_path(MPFR_INCLUDE_DIR mpfr.h)
  find_library(MPFR_LIBRARY mpfr)
  find_library(GMP_LIBRARY gmp)
  if(MPFR_INCLUDE_DIR AND MPFR_LIBRARY AND GMP_LIBRARY)
    add_library(ree_mpfr INTERFACE)
    target_include_directories(ree_mpfr SYSTEM INTERFACE ${MPFR_INCLUDE_DIR})
    target_link_libraries(ree_mpfr INTERFACE ${MPFR_LIBRARY} ${GMP_LIBRARY})
    set(REE_HAVE_MPFR ON)
  elseif(REE_MPFR STREQUAL "ON")
    message(FATAL_ERROR "REE_MPFR=ON but MPFR (mpfr.h, libmpfr, libgmp) was not found")
  endif()
endif()

if(REE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(REE_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# The Python interpreter of the project's virtual environment (scripts/setup.sh) gives LibTorch's
# CMake prefix and runs the reference scripts (transformers, tokenizers) in tests.
set(REE_PYTHON "" CACHE FILEPATH "Python with torch/transformers (default: .venv or python3)")
if(NOT REE_PYTHON)
  if(EXISTS "${CMAKE_SOURCE_DIR}/.venv/bin/python")
    set(REE_PYTHON "${CMAKE_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH "" FORCE)
  else()
    find_program(REE_PYTHON_FOUND python3)
    set(REE_PYTHON "${REE_PYTHON_FOUND}" CACHE FILEPATH "" FORCE)
  endif()
endif()

# --- LibTorch (from the torch wheel) -------------------------------------------------------------
set(REE_HAVE_TORCH OFF)
set(REE_TORCH_SITE "")
if(NOT REE_TORCH STREQUAL "OFF" AND REE_PYTHON)
  execute_process(
    COMMAND "${REE_PYTHON}" -c "import torch, os; print(torch.utils.cmake_prefix_path); print(os.path.dirname(os.path.dirname(torch.__file__)))"
    OUTPUT_VARIABLE _ree_torch_out RESULT_VARIABLE _ree_torch_rc ERROR_QUIET
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_ree_torch_rc EQUAL 0)
    string(REPLACE "\n" ";" _ree_torch_out "${_ree_torch_out}")
    list(GET _ree_torch_out 0 _ree_torch_prefix)
    list(GET _ree_torch_out 1 REE_TORCH_SITE)
    list(APPEND CMAKE_PREFIX_PATH "${_ree_torch_prefix}")
    # Torch's config looks for cuDNN/cuSPARSELt/NVTX; the wheels carry the libraries.
    # Torch's config rewrites CMAKE_CUDA_FLAGS/ARCHITECTURES for its own arch list; our targets
    # keep theirs, so save and restore them around it.
    set(_ree_saved_cuda_flags "${CMAKE_CUDA_FLAGS}")
    set(_ree_saved_cuda_archs "${CMAKE_CUDA_ARCHITECTURES}")
    find_package(Torch CONFIG QUIET)
    set(CMAKE_CUDA_FLAGS "${_ree_saved_cuda_flags}")
    set(CMAKE_CUDA_ARCHITECTURES "${_ree_saved_cuda_archs}")
    if(Torch_FOUND)
      set(REE_HAVE_TORCH ON)
      add_library(ree_torch INTERFACE)
      target_link_libraries(ree_torch INTERFACE ${TORCH_LIBRARIES})
      target_include_directories(ree_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
    endif()
  endif()
endif()
if(REE_TORCH STREQUAL "ON" AND NOT REE_HAVE_TORCH)
  message(FATAL_ERROR "REE_TORCH=ON but LibTorch was not found through REE_PYTHON='${REE_PYTHON}'")
endif()

# --- MPI and NCCL -------------------------------------------------------------------------------
set(REE_HAVE_MPI OFF)
set(REE_HAVE_NCCL OFF)
if(NOT REE_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C)
  if(MPI_C_FOUND)
    set(REE_HAVE_MPI ON)
    # C API only: keep Open MPI's deprecated C++ bindings out of every translation unit.
    target_compile_definitions(MPI::MPI_C INTERFACE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  elseif(REE_MPI STREQUAL "ON")
    message(FATAL_ERROR "REE_MPI=ON but MPI was not found")
  endif()
  if(REE_HAVE_CUDA)
    # One NCCL per process: prefer the one the torch wheel loads (nvidia-nccl), so that LibTorch
    # and REE never bring two different libnccl.so.2 into one process.
    set(_ree_nccl_hints "")
    if(REE_TORCH_SITE)
      list(APPEND _ree_nccl_hints "${REE_TORCH_SITE}/nvidia/nccl")
    endif()
    list(APPEND _ree_nccl_hints "$ENV{NCCL_ROOT}" "${CUDAToolkit_LIBRARY_ROOT}" /usr/local/cuda)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_ree_nccl_hints} PATH_SUFFIXES include NO_DEFAULT_PATH)
    find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR HINTS ${_ree_nccl_hints}
                 PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      add_library(ree_nccl INTERFACE)
      target_include_directories(ree_nccl SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
      target_link_libraries(ree_nccl INTERFACE ${NCCL_LIBRARY})
      set(REE_HAVE_NCCL ON)
    endif()
  endif()
endif()
