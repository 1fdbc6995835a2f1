# `cmake --install build --prefix P`: the lockstep package. Installs the public headers (the
# list below: lockstep/lockstep.h and what it includes, docs/api.md), the layer libraries
# (static by default, shared with -DBUILD_SHARED_LIBS=ON) behind one target lockstep::lockstep,
# the `lockstep` command, lockstepConfig.cmake + lockstepConfigVersion.cmake (find_package
# finds the dependencies itself) and lockstep.pc for pkg-config.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Public headers, relative to src/ (the generated version.h is added below). Internal headers
# (comm/, parallel/, checkpoint/, most of runtime/, cli/) are not installed.
set(LOCKSTEP_PUBLIC_HEADERS
  lockstep/lockstep.h
  lockstep/api/train.h
  lockstep/autograd/buffer_pool.h lockstep/autograd/tape.h lockstep/autograd/variable.h
  lockstep/core/config.h lockstep/core/result.h lockstep/core/rng.h lockstep/core/sample_layout.h lockstep/core/status.h
  lockstep/data/data_source.h lockstep/data/distributed_sampler.h lockstep/data/loader_state.h
  lockstep/nn/activation.h lockstep/nn/attention.h lockstep/nn/cnn.h lockstep/nn/conv2d.h
  lockstep/nn/cross_entropy.h lockstep/nn/embedding.h lockstep/nn/gpt.h lockstep/nn/inputs.h
  lockstep/nn/layer_norm.h lockstep/nn/linear.h lockstep/nn/max_pool.h lockstep/nn/model.h
  lockstep/nn/mse_loss.h lockstep/nn/parameter_store.h lockstep/nn/shape_ops.h
  lockstep/runtime/setup/builtin_job.h lockstep/runtime/setup/job.h lockstep/runtime/setup/train_options.h
  lockstep/tensor/check.h lockstep/tensor/conv.h lockstep/tensor/memory.h lockstep/tensor/tensor.h)
foreach(header ${LOCKSTEP_PUBLIC_HEADERS})
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${CMAKE_SOURCE_DIR}/src/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/${dir})
endforeach()
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
              ${CMAKE_SOURCE_DIR}/cmake/Findxxhash.cmake DESTINATION ${LOCKSTEP_CMAKE_DIR})

# pkg-config: the layer libraries top to bottom (static linking needs that order), then what
# they link (oneDNN ships no .pc file: -ldnnl).
set(LOCKSTEP_PC_LIBS "")
foreach(layer report planner api runtime interop checkpoint parallel trace comm data optim nn autograd tensor core)
  string(APPEND LOCKSTEP_PC_LIBS " -llockstep_${layer}")
endforeach()
# The prefix relative to the .pc file, so that `cmake --install --prefix P` anywhere works.
file(RELATIVE_PATH LOCKSTEP_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" LOCKSTEP_PC_TO_PREFIX "${LOCKSTEP_PC_TO_PREFIX}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/lockstep.pc.in ${CMAKE_BINARY_DIR}/package/lockstep.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/package/lockstep.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
