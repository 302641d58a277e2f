# Detects the CUDA toolkit and NCCL. Nothing requires them: the CPU build is
# complete without. PSTRAIN_HAVE_CUDA / PSTRAIN_HAVE_NCCL tell later modules
# whether the GPU code can be compiled.
set(PSTRAIN_HAVE_CUDA OFF)
set(PSTRAIN_HAVE_NCCL OFF)
option(PSTRAIN_ENABLE_CUDA "Build the GPU code when CUDA is found" ON)
if(PSTRAIN_ENABLE_CUDA)
  if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(PSTRAIN_HAVE_CUDA ON)
    # NCCL_ROOT: where NCCL lies outside the toolkit, e.g. PyTorch's pip
    # package (site-packages/nvidia/nccl), which ships only libnccl.so.2.
    set(NCCL_ROOT "" CACHE PATH "NCCL's folder (include/, lib/) when not under the CUDA toolkit")
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS}
                                            /usr/local/cuda/include)
    find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2
                 HINTS ${NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      set(PSTRAIN_HAVE_NCCL ON)
    endif()
  endif()
endif()
message(STATUS "pstrain: CUDA ${PSTRAIN_HAVE_CUDA}, NCCL ${PSTRAIN_HAVE_NCCL}")
