# Installable CMake package: `find_package(ree CONFIG REQUIRED)` then link ree::kernels,
# ree::comm, ree::models, ... (tests/package/ builds a consumer project against an install).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(REE_INSTALL_TARGETS ree_core ree_kernels)
foreach(component comm models runtime partitioner)
  if(TARGET ree_${component})
    list(APPEND REE_INSTALL_TARGETS ree_${component})
  endif()
endforeach()
foreach(target ${REE_INSTALL_TARGETS})
  string(REPLACE "ree_" "" component ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${component})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${component}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(TARGETS ${REE_INSTALL_TARGETS} EXPORT reeTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT reeTargets NAMESPACE ree:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ree)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/reeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/reeConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ree)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/reeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/reeConfig.cmake ${PROJECT_BINARY_DIR}/reeConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ree)
