# `cmake --install`: the public headers, the static libraries and a CMake
# package, so that an outside project writes
#
#   find_package(zerotorch REQUIRED)        # with CMAKE_PREFIX_PATH=<prefix>
#   target_link_libraries(app PRIVATE zerotorch::zerotorch)
#
# and gets LibTorch, Abseil, Gloo, liburing and OpenMP through the package's
# own find_dependency calls (docs/api.md).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ZT_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/zerotorch)
set(ZT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/zerotorch)

# The public headers are exactly what the umbrella header includes, directly
# or not, from this tree (the compiler lists them); internal headers such as
# engine/engine_impl.h stay out. Paths are kept, so the installed tree reads
# like the source tree: <prefix>/include/zerotorch/engine/engine.h.
set(_zt_dep_args -std=c++17 -MM -MT x -I${PROJECT_SOURCE_DIR})
foreach(_dir ${TORCH_INCLUDE_DIRS})
  list(APPEND _zt_dep_args -isystem ${_dir})
endforeach()
execute_process(
  COMMAND ${CMAKE_CXX_COMPILER} ${_zt_dep_args} ${PROJECT_SOURCE_DIR}/zerotorch/zerotorch.h
  OUTPUT_VARIABLE _zt_deps RESULT_VARIABLE _zt_deps_rc ERROR_VARIABLE _zt_deps_err)
if(NOT _zt_deps_rc EQUAL 0)
  message(FATAL_ERROR "zerotorch: listing the public headers failed: ${_zt_deps_err}")
endif()
string(REPLACE "\\\n" " " _zt_deps "${_zt_deps}")
string(REGEX REPLACE "^x:" "" _zt_deps "${_zt_deps}")
separate_arguments(_zt_deps UNIX_COMMAND "${_zt_deps}")
set(ZT_PUBLIC_HEADERS "")
foreach(_h ${_zt_deps})
  file(RELATIVE_PATH _rel ${PROJECT_SOURCE_DIR} ${_h})
  if(NOT _rel MATCHES "^\\.\\./")
    list(APPEND ZT_PUBLIC_HEADERS ${_rel})
    get_filename_component(_rel_dir ${_rel} DIRECTORY)
    install(FILES ${PROJECT_SOURCE_DIR}/${_rel} DESTINATION ${ZT_INSTALL_INCLUDEDIR}/${_rel_dir} COMPONENT dev)
  endif()
endforeach()
list(LENGTH ZT_PUBLIC_HEADERS _zt_public_count)
message(STATUS "zerotorch: ${_zt_public_count} public headers (the umbrella zerotorch/zerotorch.h and what it includes)")

# Everything zerotorch::zerotorch links, in one export set (static libraries
# carry their own dependencies).
add_library(zerotorch INTERFACE)
target_link_libraries(zerotorch INTERFACE zt_engine zt_models zt_lora zt_lora_record zt_ckpt zt_data zt_monitor)
target_include_directories(zerotorch INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                               $<INSTALL_INTERFACE:${ZT_INSTALL_INCLUDEDIR}>)
add_library(zerotorch::zerotorch ALIAS zerotorch)
set(ZT_INSTALLED_TARGETS zerotorch zt_engine zt_models zt_model_catalog zt_lora zt_lora_options zt_lora_record zt_zero zt_comm zt_launcher zt_ops zt_offload zt_ckpt zt_ckpt_format zt_plan
                         zt_config zt_lr_scheduler zt_monitor zt_data zt_tokenizer zt_template zt_util zt_gloo_dep)
install(TARGETS ${ZT_INSTALLED_TARGETS} EXPORT zerotorchTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(EXPORT zerotorchTargets NAMESPACE zerotorch:: DESTINATION ${ZT_INSTALL_CMAKEDIR} COMPONENT dev)
install(TARGETS zt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT dev)
install(TARGETS zt-torch RUNTIME DESTINATION ${ZT_TORCH_PROGRAM_DIR} COMPONENT dev)  # cli/programs.h

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/zerotorchConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/zerotorchConfig.cmake INSTALL_DESTINATION ${ZT_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/zerotorchConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/zerotorchConfig.cmake ${PROJECT_BINARY_DIR}/zerotorchConfigVersion.cmake
        DESTINATION ${ZT_INSTALL_CMAKEDIR} COMPONENT dev)

# A Debian package of the same files: `cpack -G DEB` in the build directory.
set(CPACK_PACKAGE_NAME zerotorch-dev)
set(CPACK_PACKAGE_CONTACT "zerotorch maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "ZeRO sharded training for LibTorch (C++17): headers, static libraries, CMake package, zt")
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libtorch-dev, libgloo-dev, libabsl-dev, nlohmann-json3-dev, liburing-dev")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)
