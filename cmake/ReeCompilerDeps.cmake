# Dependencies of the ONNX compiler (compiler/): protobuf (Debian libprotobuf-dev +
# protobuf-compiler) and the ONNX schema onnx.proto, taken from an installed package at build time
# (Debian libonnx-dev, else the onnx wheel of REE_PYTHON's environment), never copied into the tree.
# Sets REE_HAVE_COMPILER and REE_ONNX_PROTO.
set(REE_HAVE_COMPILER OFF)
if(NOT REE_COMPILER STREQUAL "OFF")
  find_package(Protobuf QUIET)
  set(REE_ONNX_PROTO "" CACHE FILEPATH "onnx.proto of the ONNX schema (found automatically)")
  if(NOT REE_ONNX_PROTO)
    # <prefix>/include/onnx/onnx.proto under the system and CMAKE_PREFIX_PATH (scripts/gpu/run.sh
    # unpacks the bundled libonnx-dev into a private prefix).
    find_file(ree_found_onnx_proto onnx/onnx.proto PATH_SUFFIXES include)
    if(ree_found_onnx_proto)
      set(REE_ONNX_PROTO "${ree_found_onnx_proto}" CACHE FILEPATH "" FORCE)
    endif()
  endif()
  if(NOT REE_ONNX_PROTO AND REE_PYTHON)
    execute_process(
      COMMAND ${REE_PYTHON} -c "import os, onnx; print(os.path.join(os.path.dirname(onnx.__file__), 'onnx.proto'))"
      OUTPUT_VARIABLE ree_wheel_proto OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(ree_wheel_proto AND EXISTS "${ree_wheel_proto}")
      set(REE_ONNX_PROTO "${ree_wheel_proto}" CACHE FILEPATH "" FORCE)
    endif()
  endif()
  if(Protobuf_FOUND AND TARGET protobuf::protoc AND REE_ONNX_PROTO)
    set(REE_HAVE_COMPILER ON)
  else()
    set(ree_compiler_why "")
    if(NOT Protobuf_FOUND OR NOT TARGET protobuf::protoc)
      string(APPEND ree_compiler_why " protobuf (apt-get install libprotobuf-dev protobuf-compiler)")
    endif()
    if(NOT REE_ONNX_PROTO)
      string(APPEND ree_compiler_why " onnx.proto (apt-get install libonnx-dev, or pip install onnx)")
    endif()
    if(REE_COMPILER STREQUAL "ON")
      message(FATAL_ERROR "REE_COMPILER=ON but missing:${ree_compiler_why}")
    endif()
    message(STATUS "REE: the ONNX compiler (compiler/, ree-launch compile) is OFF: missing:${ree_compiler_why}")
  endif()
endif()
