# ctest install_consumer: cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P this.
# Installs the build into WORK_DIR/prefix, builds SOURCE_DIR against it with
# find_package(braze), and runs the program (with the installed OpenCL probe). Any failing
# step fails the test.
file(REMOVE_RECURSE ${WORK_DIR})
function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer: ${what} failed (${rc})")
  endif()
endfunction()
step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
if(EXISTS ${WORK_DIR}/prefix/include/braze/../../src)
  message(FATAL_ERROR "install_consumer: sources leaked into the install")
endif()
step("configure" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G Ninja
     -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
step("build" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
# The OpenCL probe installed with the libraries (src/device/opencl_probe.h), run by hand
# and then as the program's probe: the library finds it by BRAZE_OPENCL_PROBE here, since
# this prefix is not the one the build was configured with.
set(probe ${WORK_DIR}/prefix/libexec/braze/braze-opencl-probe)
if(NOT EXISTS ${probe})
  message(FATAL_ERROR "install_consumer: ${probe} was not installed")
endif()
step("probe" ${probe})
step("run" ${CMAKE_COMMAND} -E env BRAZE_OPENCL_PROBE=${probe} ${WORK_DIR}/build/consumer)
