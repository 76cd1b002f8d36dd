# Compile settings for our own targets. Third-party headers come in as SYSTEM
# includes, so -Werror applies to our code only.

set(_zt_sanitize_flags "")
if(ZT_SANITIZE STREQUAL "address")
  set(_zt_sanitize_flags -fsanitize=address -fno-omit-frame-pointer)
elseif(ZT_SANITIZE STREQUAL "undefined")
  set(_zt_sanitize_flags -fsanitize=undefined -fno-sanitize-recover=undefined)
elseif(ZT_SANITIZE STREQUAL "address,undefined")
  set(_zt_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
elseif(ZT_SANITIZE STREQUAL "thread")
  set(_zt_sanitize_flags -fsanitize=thread)
elseif(NOT ZT_SANITIZE STREQUAL "")
  message(FATAL_ERROR "ZT_SANITIZE='${ZT_SANITIZE}': use address, undefined, address,undefined, thread or leave it empty.")
endif()
if(NOT ZT_SANITIZE STREQUAL "")
  # GCC 12's -Wmaybe-uninitialized fires inside LibTorch's inline code once the
  # sanitizers change inlining (false positives in c10::optional); keep it a
  # warning there. Every other warning stays an error.
  list(APPEND _zt_sanitize_flags -Wno-error=maybe-uninitialized)
  # -O1: instrumented code compiles much slower at -O2 (one batch of ckpt/
  # under ASan + UBSan: 80 s at -O2, 50 s at -O1), and -O1 is what
  # AddressSanitizer's documentation asks for at least. It comes after the
  # build type's -O2 on the command line, so it wins.
  list(APPEND _zt_sanitize_flags -O1)
endif()

# zt_target_defaults(<target> [TORCH]): warnings, sanitizers and, for targets that
# include LibTorch, the shared precompiled header.
function(zt_target_defaults target)
  cmake_parse_arguments(ARG "TORCH" "" "" ${ARGN})
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror ${_zt_sanitize_flags})
  target_link_options(${target} PRIVATE ${_zt_sanitize_flags})
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                              $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/zerotorch>)
  if(ARG_TORCH AND ZT_USE_PCH)
    target_precompile_headers(${target} REUSE_FROM zt_torch_pch)
  endif()
  # Libraries compile their sources in batches (ZT_UNITY_BUILD): one batch is
  # one translation unit, so the fixed cost of each (about 5 s of a LibTorch
  # one goes to the precompiled header's deferred template work alone) is
  # paid once a batch. Sources with their own compile options (the ISA
  # kernels, the OpenMP loop) stay on their own, as CMake keeps them.
  get_target_property(type ${target} TYPE)
  if(ZT_UNITY_BUILD AND type STREQUAL "STATIC_LIBRARY")
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${ZT_UNITY_BATCH})
  endif()
endfunction()

# One precompiled LibTorch header shared by every target that uses LibTorch:
# <torch/torch.h> costs ~20 s per translation unit on a 2-core machine.
if(ZT_USE_PCH)
  add_library(zt_torch_pch OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch_anchor.cc)
  target_link_libraries(zt_torch_pch PUBLIC torch absl::status)
  target_compile_options(zt_torch_pch PRIVATE -Wall -Wextra -Werror ${_zt_sanitize_flags})
  target_precompile_headers(zt_torch_pch PRIVATE ${PROJECT_SOURCE_DIR}/cmake/torch_pch.h)
endif()
