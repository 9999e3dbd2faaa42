# Precompiled headers (docs/BUILD.md, "Precompiled headers"). A 2-core machine builds
# Braze three times in CI (Release, the ASan tree, the TSan tree), and most of a file's
# compile is parsing headers it shares with the others: Halide.h alone takes about 4 s,
# gtest, gmock and braze/braze.h together about 3.5 s. Precompiled once per target and
# loaded by each file, they cost a fraction of that.
#
# Only the files that include Halide.h (directly or through Braze's own headers) get
# Halide's precompiled header: loading it takes over a second, more than the files that
# do not use Halide spend on all their headers. Every file still includes what it uses,
# so BRAZE_PCH=OFF builds the same code.
option(BRAZE_PCH "Precompile Halide.h and the tests' common headers (docs/BUILD.md)" ON)

# Sets `out_var` to TRUE when `file` includes Halide.h, directly or through a quoted
# include found beside it or under src/, include/ or test/. Results are kept per file in
# a global property, so each header is read once per configure.
function(braze_includes_halide file out_var)
  get_property(known GLOBAL PROPERTY "braze_halide:${file}" SET)
  if(known)
    get_property(result GLOBAL PROPERTY "braze_halide:${file}")
    set(${out_var} ${result} PARENT_SCOPE)
    return()
  endif()
  # A cycle of includes stops here (guarded headers make one harmless).
  set_property(GLOBAL PROPERTY "braze_halide:${file}" FALSE)
  file(STRINGS ${file} lines REGEX "^#include [\"<]")
  get_filename_component(dir ${file} DIRECTORY)
  set(result FALSE)
  foreach(line IN LISTS lines)
    if(line MATCHES "^#include [\"<]Halide\\.h[\">]")
      set(result TRUE)
    elseif(line MATCHES "^#include \"([^\"]+)\"")
      foreach(base ${dir} ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include
              ${PROJECT_SOURCE_DIR}/test)
        if(EXISTS ${base}/${CMAKE_MATCH_1})
          braze_includes_halide(${base}/${CMAKE_MATCH_1} result)
          break()
        endif()
      endforeach()
    endif()
    if(result)
      break()
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY "braze_halide:${file}" ${result})
  set(${out_var} ${result} PARENT_SCOPE)
endfunction()

# Sets `all_var` to `target`'s source files (absolute paths) and `halide_var` to those of
# them that include Halide.h.
function(braze_sources_using_halide target all_var halide_var)
  get_target_property(srcs ${target} SOURCES)
  get_target_property(src_dir ${target} SOURCE_DIR)
  set(all)
  set(halide)
  foreach(src IN LISTS srcs)
    get_filename_component(abs ${src} ABSOLUTE BASE_DIR ${src_dir})
    list(APPEND all ${abs})
    braze_includes_halide(${abs} uses)
    if(uses)
      list(APPEND halide ${abs})
    endif()
  endforeach()
  set(${all_var} ${all} PARENT_SCOPE)
  set(${halide_var} ${halide} PARENT_SCOPE)
endfunction()

# Gives `target` a precompiled header of `headers` for the files `users` (the others skip
# it). Call it in the folder that made the target (source file properties are per folder).
# A precompiled header takes about 10 s to build and saves each user about 3: fewer than
# five users do not repay it.
function(braze_precompile target all users headers)
  list(LENGTH users count)
  if(count LESS 5)
    return()
  endif()
  foreach(src IN LISTS all)
    if(NOT src IN_LIST users)
      set_source_files_properties(${src} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()

# The Halide layers: Halide.h for the files that include it.
function(braze_precompile_halide target)
  if(BRAZE_PCH)
    braze_sources_using_halide(${target} all halide)
    braze_precompile(${target} "${all}" "${halide}" "<Halide.h>")
  endif()
endfunction()

# A test binary: gtest, gmock and Braze's public API for every file, and Halide.h too
# where at least a third of them include it (loading Halide's header costs the others
# about a second; parsing it costs its users about four).
function(braze_precompile_test target)
  if(NOT BRAZE_PCH)
    return()
  endif()
  braze_sources_using_halide(${target} all halide)
  set(headers <gtest/gtest.h> <gmock/gmock.h> <braze/braze.h> <algorithm> <cmath> <cstdint>
              <cstring> <functional> <limits> <memory> <string> <thread> <vector>)
  list(LENGTH all total)
  list(LENGTH halide users)
  math(EXPR users_x3 "${users} * 3")
  if(users_x3 GREATER_EQUAL total)
    list(PREPEND headers <Halide.h>)
  endif()
  braze_precompile(${target} "${all}" "${all}" "${headers}")
endfunction()
