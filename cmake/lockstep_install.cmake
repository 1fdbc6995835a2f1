# `cmake --install build --prefix P`: the lockstep package. Installs the public headers
# (include/lockstep/, docs/api.md), the layer libraries
# (static by default, shared with -DBUILD_SHARED_LIBS=ON) behind one target lockstep::lockstep,
# the `lockstep` command, lockstepConfig.cmake + lockstepConfigVersion.cmake (find_package
# finds the dependencies itself) and lockstep.pc for pkg-config.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Public headers: everything under include/lockstep/ (the library's one include lockstep.h, the
# training entry points, and the headers a program's own model is written with), installed as
# they are; the layers' own headers stay in src/ and are not installed.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/lockstep DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_BINARY_DIR}/generated/lockstep/core/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/lockstep/core)

# lockstep::lockstep: every layer (each brings its own dependencies).
get_property(LOCKSTEP_LAYER_TARGETS GLOBAL PROPERTY LOCKSTEP_LAYERS)
add_library(lockstep_lib INTERFACE)
target_link_libraries(lockstep_lib INTERFACE ${LOCKSTEP_LAYER_TARGETS})
set_target_properties(lockstep_lib PROPERTIES EXPORT_NAME lockstep)

# Shared libraries find each other, and the command finds them, wherever the prefix is.
if(BUILD_SHARED_LIBS)
  set_target_properties(${LOCKSTEP_LAYER_TARGETS} PROPERTIES INSTALL_RPATH "$ORIGIN")
  set_target_properties(lockstep PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
endif()
install(TARGETS ${LOCKSTEP_LAYER_TARGETS} lockstep_lib EXPORT lockstepTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS lockstep RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(LOCKSTEP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/lockstep)
install(EXPORT lockstepTargets NAMESPACE lockstep:: DESTINATION ${LOCKSTEP_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/lockstepConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/package/lockstepConfig.cmake INSTALL_DESTINATION ${LOCKSTEP_CMAKE_DIR})
# 0.x: a minor version may change the API, so find_package(lockstep 0.6) accepts 0.6.* only.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/lockstepConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/package/lockstepConfig.cmake ${CMAKE_BINARY_DIR}/package/lockstepConfigVersion.cmake
              ${CMAKE_SOURCE_DIR}/cmake/Findxxhash.cmake
              ${CMAKE_SOURCE_DIR}/cmake/Findpcre2.cmake DESTINATION ${LOCKSTEP_CMAKE_DIR})

# pkg-config: the layer libraries top to bottom (static linking needs that order), then what
# they link (oneDNN ships no .pc file: -ldnnl).
set(LOCKSTEP_PC_LIBS "")
foreach(layer report planner api runtime interop checkpoint parallel trace comm data text optim nn autograd tensor core)
  string(APPEND LOCKSTEP_PC_LIBS " -llockstep_${layer}")
endforeach()
# The prefix relative to the .pc file, so that `cmake --install --prefix P` anywhere works.
file(RELATIVE_PATH LOCKSTEP_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" LOCKSTEP_PC_TO_PREFIX "${LOCKSTEP_PC_TO_PREFIX}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/lockstep.pc.in ${CMAKE_BINARY_DIR}/package/lockstep.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/package/lockstep.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
