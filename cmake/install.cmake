# Packaging: `cmake --install build --prefix P` installs the public headers, one static
# library per layer and a CMake package, so a program outside this tree does
#   find_package(braze REQUIRED)            # in a project(... C CXX): Halide needs C
#   target_link_libraries(app PRIVATE braze::braze)
# The package finds Braze's own dependencies (Halide 14, Abseil, zlib, threads).
include(CMakePackageConfigHelpers)
set(BRAZE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/braze)

install(TARGETS ${BRAZE_LAYERS} braze EXPORT braze-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The OpenCL probe (src/device/opencl_probe.h), where the library looks for it by default;
# exported too (braze::braze-opencl-probe), so that a project using an install moved to
# another prefix can point BRAZE_OPENCL_PROBE at $<TARGET_FILE:braze::braze-opencl-probe>.
install(TARGETS braze-opencl-probe EXPORT braze-targets
        RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/braze)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/braze
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Stored schedules (docs/SCHEDULES.md): the runtime also looks here by default.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/schedules/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/braze/schedules FILES_MATCHING PATTERN "*.schedule"
        PATTERN "README*")
install(EXPORT braze-targets NAMESPACE braze:: DESTINATION ${BRAZE_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/brazeConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/brazeConfig.cmake INSTALL_DESTINATION ${BRAZE_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/brazeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/brazeConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/brazeConfigVersion.cmake
        DESTINATION ${BRAZE_CMAKE_DIR})

# The package as a user meets it: install this build into a scratch prefix, configure
# and build examples/consumer against it with find_package(braze), run its fused softmax.
add_test(NAME install_consumer
  COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR}
          -DSOURCE_DIR=${PROJECT_SOURCE_DIR}/examples/consumer
          -DWORK_DIR=${CMAKE_BINARY_DIR}/install_consumer
          -P ${PROJECT_SOURCE_DIR}/cmake/consumer_test.cmake)
set_tests_properties(install_consumer PROPERTIES TIMEOUT 600 LABELS package)
