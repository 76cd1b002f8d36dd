# Third-party packages, all from Debian (scripts/setup.sh installs them) or from
# a newer LibTorch given with -DCMAKE_PREFIX_PATH=<libtorch or torch.utils.cmake_prefix_path>.
find_package(Torch REQUIRED)
find_package(absl REQUIRED)
find_package(nlohmann_json 3.9 REQUIRED)
find_package(Threads REQUIRED)

# zerotorch has no GPU path: it builds against a CUDA LibTorch too, but runs
# on the CPU. Said at configure time so nobody expects otherwise.
set(ZT_TORCH_HAS_CUDA OFF)
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES OR CAFFE2_USE_CUDA)
  set(ZT_TORCH_HAS_CUDA ON)
  message(STATUS "zerotorch: this LibTorch has CUDA, but zerotorch has no GPU code path yet: training runs on the CPU")
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
