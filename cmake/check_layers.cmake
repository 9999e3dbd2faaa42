# The layering check: fails when a file of one layer includes a header of a layer it may
# not use. Run as a build step before any layer compiles (CMakeLists.txt,
# braze_check_layers) and by ctest on the fixtures under test/layering/.
#
#   cmake -DSOURCE_ROOT=<dir holding one folder per layer> -DTABLE=<table file>
#         [-DSTAMP=<file touched on success>] [-DDISPLAY_ROOT=<paths shown relative to it>]
#         -P cmake/check_layers.cmake
#
# TABLE is the file CMakeLists.txt writes at configure time from its braze_layer(...)
# calls (build/braze_layers.cmake): BRAZE_LAYER_DIRS, the layer folders, and for each
# folder BRAZE_ALLOW_<folder>, the folders it may include: the transitive closure of its
# DEPS, the same list that gives its link dependencies, so the two cannot drift.
#
# Every *.h, *.cc, *.def and *.inc under SOURCE_ROOT/<layer>/ is read; each
# `#include "x/..."` or `#include <x/...>` whose first folder x is a layer (after
# resolving "../") must be the file's own layer or one of BRAZE_ALLOW_<layer>. Anything
# else (braze/ public headers, absl/, Halide.h, the standard library) is not a layer and
# is always allowed. A folder of SOURCE_ROOT that is no layer is an error too, so a new
# folder cannot escape the table. Every problem is printed, one line each
# ("src/lower/x.cc:12 includes runtime/plan.h: lower may include only schedule, device,
# ir"), then one FATAL_ERROR.
cmake_minimum_required(VERSION 3.16)

if(NOT SOURCE_ROOT OR NOT TABLE)
  message(FATAL_ERROR "usage: cmake -DSOURCE_ROOT=<src> -DTABLE=<braze_layers.cmake> "
                      "[-DSTAMP=<file>] [-DDISPLAY_ROOT=<dir>] -P check_layers.cmake")
endif()
if(NOT EXISTS "${TABLE}")
  message(FATAL_ERROR "check_layers: no layer table ${TABLE} (configure the project first)")
endif()
if(NOT IS_DIRECTORY "${SOURCE_ROOT}")
  message(FATAL_ERROR "check_layers: ${SOURCE_ROOT} is not a folder")
endif()
include("${TABLE}")
if(NOT BRAZE_LAYER_DIRS)
  message(FATAL_ERROR "check_layers: ${TABLE} declares no layers (BRAZE_LAYER_DIRS)")
endif()
get_filename_component(SOURCE_ROOT "${SOURCE_ROOT}" ABSOLUTE)
if(NOT DISPLAY_ROOT)
  get_filename_component(DISPLAY_ROOT "${SOURCE_ROOT}" DIRECTORY)
endif()
if(STAMP)
  file(REMOVE "${STAMP}")  # a failed check leaves no stamp, so the next build reruns it
endif()

set(problems)
set(checked 0)
file(GLOB entries LIST_DIRECTORIES true RELATIVE "${SOURCE_ROOT}" "${SOURCE_ROOT}/*")
list(SORT entries)
foreach(layer IN LISTS entries)
  if(NOT IS_DIRECTORY "${SOURCE_ROOT}/${layer}")
    continue()
  endif()
  file(RELATIVE_PATH shown_dir "${DISPLAY_ROOT}" "${SOURCE_ROOT}/${layer}")
  if(NOT layer IN_LIST BRAZE_LAYER_DIRS)
    list(APPEND problems
         "${shown_dir}/ is the folder of no layer: declare it with braze_layer in CMakeLists.txt")
    continue()
  endif()
  set(allowed ${BRAZE_ALLOW_${layer}})
  if(allowed)
    string(REPLACE ";" ", " rule "${layer} may include only ${allowed}")
  else()
    set(rule "${layer} may include no other layer")
  endif()

  file(GLOB_RECURSE files "${SOURCE_ROOT}/${layer}/*.h" "${SOURCE_ROOT}/${layer}/*.cc"
                          "${SOURCE_ROOT}/${layer}/*.def" "${SOURCE_ROOT}/${layer}/*.inc")
  list(SORT files)
  foreach(file IN LISTS files)
    math(EXPR checked "${checked} + 1")
    file(READ "${file}" content)
    # An include directive at the start of a line (CMake regexes have no multi-line
    # mode: the newline before it is part of the match).
    string(REGEX MATCHALL "(^|\n)[ \t]*#[ \t]*include[ \t]*[\"<][^\">\n]+[\">]"
           includes "${content}")
    if(NOT includes)
      continue()
    endif()
    get_filename_component(file_dir "${file}" DIRECTORY)
    file(RELATIVE_PATH shown "${DISPLAY_ROOT}" "${file}")
    set(search_from 0)
    foreach(directive IN LISTS includes)
      string(REGEX REPLACE ".*[\"<]([^\">\n]+)[\">]$" "\\1" path "${directive}")
      set(target "${path}")
      if(path MATCHES "(^|/)\\.\\.?/")  # "../runtime/plan.h": where it really points
        get_filename_component(resolved "${file_dir}/${path}" ABSOLUTE)
        file(RELATIVE_PATH target "${SOURCE_ROOT}" "${resolved}")
      endif()
      if(NOT target MATCHES "^([^/.][^/]*)/")
        continue()  # a file beside this one, or outside SOURCE_ROOT
      endif()
      set(to "${CMAKE_MATCH_1}")
      if(to STREQUAL layer OR NOT to IN_LIST BRAZE_LAYER_DIRS OR to IN_LIST allowed)
        continue()
      endif()
      # The line number: newlines before the directive (found from the previous
      # reported one, so a repeated include is reported at each place).
      string(SUBSTRING "${content}" ${search_from} -1 rest)
      string(FIND "${rest}" "${directive}" at)
      math(EXPR at "${search_from} + ${at}")
      string(LENGTH "${directive}" length)
      math(EXPR search_from "${at} + ${length}")
      math(EXPR upto "${at} + 1")
      string(SUBSTRING "${content}" 0 ${upto} before)
      string(REGEX MATCHALL "\n" newlines "${before}")
      list(LENGTH newlines line)
      math(EXPR line "${line} + 1")
      list(APPEND problems "${shown}:${line} includes ${path}: ${rule}")
    endforeach()
  endforeach()
endforeach()

list(LENGTH problems count)
if(count GREATER 0)
  # One unwrapped line per problem (FATAL_ERROR would rewrap them), then the failure.
  foreach(problem IN LISTS problems)
    message("${problem}")
  endforeach()
  message(FATAL_ERROR "layering: ${count} problem(s) in ${SOURCE_ROOT}. A layer may "
          "include its own folder, include/braze/ and the layers its braze_layer(... DEPS "
          "...) line in CMakeLists.txt reaches (docs/ARCHITECTURE.md, \"Layers\").")
endif()
if(STAMP)
  file(WRITE "${STAMP}" "${checked} files, no forbidden include\n")
endif()
