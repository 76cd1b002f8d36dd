# Link with lld when the compiler accepts it (Debian's `lld`, installed by
# scripts/setup.sh). Every test binary and tool links LibTorch, gtest and our
# static libraries with line tables; GNU ld (bfd) took 5.6 s for one such
# link on the 2-core VM where lld took 1.3 s, and a clean build links about
# a hundred of them. -DZT_USE_LLD=OFF keeps the default linker.
option(ZT_USE_LLD "Link with lld when -fuse-ld=lld works" ON)
if(ZT_USE_LLD)
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-fuse-ld=lld" ZT_HAVE_LLD)
  if(ZT_HAVE_LLD)
    add_link_options(-fuse-ld=lld)
    message(STATUS "zerotorch: linking with lld")
  else()
    message(STATUS "zerotorch: lld not found, linking with the compiler's default linker")
  endif()
endif()
