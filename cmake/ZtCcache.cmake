# Use ccache when present. The sloppiness settings let ccache cache translation
# units compiled with a precompiled header (GCC checks the .gch itself).
find_program(ZT_CCACHE ccache)
if(ZT_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER
      ${CMAKE_COMMAND} -E env CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
      ${ZT_CCACHE})
  message(STATUS "zerotorch: using ccache at ${ZT_CCACHE}")
endif()
