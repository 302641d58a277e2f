# The version (from project()) and the options this binary was built with,
# in one generated header; pstrain_build_info is the target that carries its
# include path. Included after cuda_nccl.cmake, whose results it reports.
set(PSTRAIN_BUILD_CUDA no)
set(PSTRAIN_BUILD_NCCL no)
set(PSTRAIN_BUILD_NATIVE no)
if(PSTRAIN_HAVE_CUDA)
  set(PSTRAIN_BUILD_CUDA yes)
endif()
if(PSTRAIN_HAVE_NCCL)
  set(PSTRAIN_BUILD_NCCL yes)
endif()
if(PSTRAIN_NATIVE)
  set(PSTRAIN_BUILD_NATIVE yes)
endif()
set(PSTRAIN_BUILD_TYPE "${CMAKE_BUILD_TYPE}")
if(NOT PSTRAIN_BUILD_TYPE)
  set(PSTRAIN_BUILD_TYPE "default")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/build_info.h.in
               ${PROJECT_BINARY_DIR}/generated/build_info.h @ONLY)
add_library(pstrain_build_info INTERFACE)
target_include_directories(pstrain_build_info INTERFACE ${PROJECT_BINARY_DIR}/generated)
