# A C++ compiler that has no shared libstdc++ (a GCC configured without one, such as the /opt/gcc of
# the GPU machines, or -static-libstdc++ in the linker flags) links libstdc++.a into every shared
# library. Each REE library then carries a copy of libstdc++ and, by default, exports it. In a
# process that has also loaded the system's libstdc++.so.6 (Python, LibTorch), the dynamic linker
# binds some of those exported symbols to the system copy and leaves others in REE's: one
# std::istringstream then mixes two copies' locale tables and crashes (seen: ree.Engine on Ubuntu
# 24.04, in hostAvailableMemoryBytes). Hiding the archive's symbols keeps every library on its own
# copy, self-consistent. REE's public API passes no iostream or locale object between libraries,
# so separate copies never meet. With a shared libstdc++ these options change nothing.
if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  add_link_options("LINKER:--exclude-libs,libstdc++.a" "LINKER:--exclude-libs,libsupc++.a")
  execute_process(
    COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so
    OUTPUT_VARIABLE REE_LIBSTDCXX_SO
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT IS_ABSOLUTE "${REE_LIBSTDCXX_SO}" OR NOT EXISTS "${REE_LIBSTDCXX_SO}")
    message(STATUS "${CMAKE_CXX_COMPILER} has no shared libstdc++: each REE library keeps a "
                   "private copy of libstdc++.a (symbols hidden)")
  endif()
endif()
