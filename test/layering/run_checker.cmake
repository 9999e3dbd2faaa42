# The layering ctests (test/CMakeLists.txt): runs cmake/check_layers.cmake with the
# project's real layer table on a fixture tree and compares the outcome.
#
#   cmake -DCHECKER=<check_layers.cmake> -DTABLE=<build/braze_layers.cmake>
#         -DSOURCE_ROOT=<fixture>/src [-DEXPECTED=<file>] -P run_checker.cmake
#
# Without EXPECTED the check must pass. With it, the check must fail, every line of
# EXPECTED must appear in its message, and it must report exactly that many problems
# (so a good include reported as forbidden fails the test too).
#   good/  every kind of allowed include: own folder, DEPS, their closure, braze/,
#          outside libraries, a relative path within the layer, commented-out includes
#   bad/   lower -> runtime (twice), ir -> frontend, schedule -> ../device, runtime ->
#          frontend and api, and a folder no braze_layer declares; bad/expected.txt
cmake_minimum_required(VERSION 3.16)

foreach(var CHECKER TABLE SOURCE_ROOT)
  if(NOT ${var})
    message(FATAL_ERROR "run_checker.cmake: -D${var}=... is required")
  endif()
endforeach()

execute_process(
  COMMAND ${CMAKE_COMMAND} -DSOURCE_ROOT=${SOURCE_ROOT} -DTABLE=${TABLE} -P ${CHECKER}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(output "${out}${err}")
message("${output}")

if(NOT EXPECTED)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the layering check failed on ${SOURCE_ROOT}, which is clean (exit ${rc})")
  endif()
  message("the layering check passed on ${SOURCE_ROOT}, as expected")
  return()
endif()

if(rc EQUAL 0)
  message(FATAL_ERROR "the layering check passed on ${SOURCE_ROOT}, which has forbidden includes")
endif()
file(STRINGS "${EXPECTED}" expected_lines)
list(LENGTH expected_lines expected_count)
set(missing)
foreach(line IN LISTS expected_lines)
  string(FIND "${output}" "${line}" at)
  if(at EQUAL -1)
    string(APPEND missing "\n  ${line}")
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "the layering check failed, but its message lacks:${missing}")
endif()
string(FIND "${output}" "layering: ${expected_count} problem(s)" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the layering check reported other than the ${expected_count} "
                      "problems of ${EXPECTED}")
endif()
message("the layering check failed on ${SOURCE_ROOT} with the ${expected_count} expected problems")
