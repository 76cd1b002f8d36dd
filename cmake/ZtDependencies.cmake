# Third-party packages, all from Debian (scripts/setup.sh installs them) or from
# a newer LibTorch given with -DCMAKE_PREFIX_PATH=<libtorch or torch.utils.cmake_prefix_path>.
find_package(Torch REQUIRED)
find_package(absl REQUIRED)
find_package(nlohmann_json 3.9 REQUIRED)
find_package(Threads REQUIRED)

# ZT_WITH_CUDA defaults to whatever the LibTorch we found was built with.
set(_zt_torch_has_cuda OFF)
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES OR CAFFE2_USE_CUDA)
  set(_zt_torch_has_cuda ON)
endif()
option(ZT_WITH_CUDA "Build CUDA/NCCL code paths (default: on when LibTorch has CUDA)" ${_zt_torch_has_cuda})
if(ZT_WITH_CUDA AND NOT _zt_torch_has_cuda)
  message(FATAL_ERROR "ZT_WITH_CUDA=ON but the LibTorch found at ${Torch_DIR} has no CUDA. "
                      "Point CMAKE_PREFIX_PATH at a CUDA build of LibTorch, or drop -DZT_WITH_CUDA=ON.")
endif()

# Gloo: the CPU collective library under c10d. Debian ships its headers in
# libgloo-dev; LibTorch links the same libgloo.so.
find_path(ZT_GLOO_INCLUDE_DIR gloo/allgather.h)
find_library(ZT_GLOO_LIBRARY NAMES gloo)
if(NOT ZT_GLOO_INCLUDE_DIR OR NOT ZT_GLOO_LIBRARY)
  message(FATAL_ERROR "Gloo headers or library not found: install libgloo-dev (scripts/setup.sh does).")
endif()
add_library(zt_gloo_dep INTERFACE)
target_include_directories(zt_gloo_dep SYSTEM INTERFACE ${ZT_GLOO_INCLUDE_DIR})
target_link_libraries(zt_gloo_dep INTERFACE ${ZT_GLOO_LIBRARY})

if(ZT_WITH_URING)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(URING REQUIRED IMPORTED_TARGET liburing)
endif()

if(ZT_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(ZT_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
