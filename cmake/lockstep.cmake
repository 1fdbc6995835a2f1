include(GoogleTest)

# lockstep_layer(NAME DEPS ...): one library per folder under src/lockstep/NAME, built from
# every .cc file there (sources are globbed so a new file needs no CMake edit). Static unless
# BUILD_SHARED_LIBS is on; installed and exported as lockstep::NAME (cmake/lockstep_install.cmake).
function(lockstep_layer name)
  cmake_parse_arguments(L "" "" "DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/lockstep/${name}/*.cc)
  # include/: the public headers (installed as they are); src/: every layer's own headers.
  set(includes $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/src>
               $<INSTALL_INTERFACE:include>)
  if(srcs)
    add_library(lockstep_${name} ${srcs})
    target_include_directories(lockstep_${name} PUBLIC ${includes})
    target_link_libraries(lockstep_${name} PUBLIC ${L_DEPS})
  else()
    add_library(lockstep_${name} INTERFACE)
    target_include_directories(lockstep_${name} INTERFACE ${includes})
    target_link_libraries(lockstep_${name} INTERFACE ${L_DEPS})
  endif()
  set_target_properties(lockstep_${name} PROPERTIES EXPORT_NAME ${name})
  set_property(GLOBAL APPEND PROPERTY LOCKSTEP_LAYERS lockstep_${name})
endfunction()

# lockstep_tests(LAYER): every tests/LAYER/*_test.cc becomes one GoogleTest executable
# linked against that layer, and each of its test cases becomes one CTest test.
function(lockstep_tests layer)
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/${layer}/*_test.cc)
  # Every other .cc beside them is a test helper (fixtures, the fault-injecting Env): compiled
  # into the tests, never into the installed libraries.
  file(GLOB helpers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/${layer}/*.cc)
  list(FILTER helpers EXCLUDE REGEX "_test\\.cc$")
  # The CLI tests run the real binary end to end and are all labelled 'slow', which the
  # sanitizer pass of .ci/run skips: a sanitizer build does not compile them.
  if(LOCKSTEP_SANITIZE AND layer STREQUAL "cli")
    return()
  endif()
  if(layer STREQUAL "cli")
    set(lib lockstep_runtime)
  else()
    set(lib lockstep_${layer})
  endif()
  # GCC 12 with -fsanitize warns maybe-uninitialized inside libstdc++'s <regex> (the
  # std::function in its NFA states), a false positive; silenced for the test files that
  # include <regex> and only in sanitizer builds, so -Werror holds everywhere else.
  if(LOCKSTEP_SANITIZE)
    foreach(file ${srcs} ${helpers})
      file(STRINGS ${file} uses_regex REGEX "#include <regex>")
      if(uses_regex)
        set_source_files_properties(${file} PROPERTIES COMPILE_OPTIONS -Wno-maybe-uninitialized)
      endif()
    endforeach()
  endif()
  # The layer's test helpers are compiled once and linked into each of its test executables.
  set(test_deps ${lib})
  if(helpers)
    add_library(${layer}_test_helpers OBJECT ${helpers})
    target_link_libraries(${layer}_test_helpers PUBLIC ${lib} GTest::gtest)
    target_include_directories(${layer}_test_helpers PUBLIC ${CMAKE_SOURCE_DIR}/tests)
    target_compile_definitions(${layer}_test_helpers PUBLIC
      LOCKSTEP_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
      LOCKSTEP_BINARY_DIR="${CMAKE_BINARY_DIR}")
    set(test_deps ${layer}_test_helpers)
  endif()
  foreach(src ${srcs})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_link_libraries(${name} PRIVATE ${test_deps} GTest::gtest GTest::gtest_main)
    target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests)
    target_compile_definitions(${name} PRIVATE
      LOCKSTEP_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
      LOCKSTEP_BINARY_DIR="${CMAKE_BINARY_DIR}")
    if(layer STREQUAL "cli")
      add_dependencies(${name} lockstep)
    endif()
    # CLI tests run the real binary end to end: labelled 'slow' so the sanitizer pass of
    # .ci/run can skip them (they are covered by the Release pass).
    if(name STREQUAL "straggler_test")
      # Four ranks on two cores must get equal shares of them for "nobody is named" to hold:
      # another test's threads on the same cores make whichever ranks share a core with them
      # slower, and the detector rightly names one (1.14-1.41x the others, 3 of 20 runs).
      gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120 LABELS slow RUN_SERIAL TRUE)
    elseif(layer STREQUAL "cli")
      gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120 LABELS slow)
    else()
      gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120)
    endif()
  endforeach()
endfunction()
