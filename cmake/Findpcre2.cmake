# Findpcre2: PCRE2's 8-bit library (Debian libpcre2-dev ships pkg-config files but no CMake
# package). Defines the imported target pcre2::pcre2-8. Installed beside lockstepConfig.cmake,
# which finds it the same way. The tokenizer (src/lockstep/text/) needs it: Hugging Face's
# pre-tokenizer regexes use \p{L}, \p{N} and lookahead, which std::regex lacks.
find_path(PCRE2_INCLUDE_DIR NAMES pcre2.h)
find_library(PCRE2_8_LIBRARY NAMES pcre2-8)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(pcre2 REQUIRED_VARS PCRE2_8_LIBRARY PCRE2_INCLUDE_DIR)
if(pcre2_FOUND AND NOT TARGET pcre2::pcre2-8)
  add_library(pcre2::pcre2-8 UNKNOWN IMPORTED)
  set_target_properties(pcre2::pcre2-8 PROPERTIES IMPORTED_LOCATION "${PCRE2_8_LIBRARY}"
                                                  INTERFACE_INCLUDE_DIRECTORIES "${PCRE2_INCLUDE_DIR}")
endif()
mark_as_advanced(PCRE2_INCLUDE_DIR PCRE2_8_LIBRARY)
