# CUDA support: nvcc, cuBLAS and NCCL. BRAID_ENABLE_CUDA defaults to ON
# where all three are found and to OFF otherwise, with the reason printed;
# the CPU-only build and its tests never need any of them. Asking for
# -DBRAID_ENABLE_CUDA=ON where something is missing is an error that names
# it.
#
# Sets, when enabled: the CUDA language (CMAKE_CUDA_ARCHITECTURES from
# BRAID_CUDA_ARCHITECTURES, default 90 for H100/H200), the targets
# CUDA::cudart and CUDA::cublas (FindCUDAToolkit) and braid_nccl (NCCL's
# library and header).
include(CheckLanguage)

set(BRAID_CUDA_ARCHITECTURES 90 CACHE STRING
  "CUDA architectures to compile for (sm_90: H100/H200)")

# nvcc outside the PATH, where the toolkit installs it.
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(BRAID_NVCC nvcc
    HINTS ENV CUDA_PATH ENV CUDA_HOME PATH_SUFFIXES bin
    PATHS /usr/local/cuda/bin)
  if(BRAID_NVCC)
    set(CMAKE_CUDA_COMPILER ${BRAID_NVCC} CACHE FILEPATH "CUDA compiler")
  endif()
endif()

# nvcc accepts only host compilers it knows; a Clang newer than the toolkit
# (this project builds with clang-22) is refused, a distribution GCC is not.
if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER AND NOT DEFINED ENV{CUDAHOSTCXX}
   AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  find_program(BRAID_CUDA_HOST_CXX NAMES g++-14 g++-13 g++-12 g++-11 g++)
  if(BRAID_CUDA_HOST_CXX)
    set(CMAKE_CUDA_HOST_COMPILER ${BRAID_CUDA_HOST_CXX} CACHE FILEPATH
      "Host compiler for nvcc")
  endif()
endif()

set(_braid_cuda_missing "")
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  set(_braid_cuda_missing "nvcc (set CUDACXX or put the toolkit's bin on PATH)")
else()
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cublas OR
     NOT TARGET CUDA::cublasLt)
    set(_braid_cuda_missing "the CUDA toolkit's cudart, cuBLAS and cuBLASLt")
  else()
    # NCCL: beside the toolkit (lib/ or lib64/), or the distribution's.
    find_library(BRAID_NCCL_LIBRARY nccl
      HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib
        ${CUDAToolkit_LIBRARY_ROOT}/lib64 ENV NCCL_HOME PATH_SUFFIXES lib)
    find_path(BRAID_NCCL_INCLUDE_DIR nccl.h
      HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME PATH_SUFFIXES include)
    if(NOT BRAID_NCCL_LIBRARY OR NOT BRAID_NCCL_INCLUDE_DIR)
      set(_braid_cuda_missing "NCCL (libnccl and nccl.h; set NCCL_HOME)")
    endif()
  endif()
endif()

if(_braid_cuda_missing STREQUAL "")
  set(_braid_cuda_default ON)
else()
  set(_braid_cuda_default OFF)
endif()
option(BRAID_ENABLE_CUDA "Build the CUDA backend (nvcc, cuBLAS, NCCL)"
  ${_braid_cuda_default})

if(BRAID_ENABLE_CUDA AND NOT _braid_cuda_missing STREQUAL "")
  message(FATAL_ERROR "BRAID_ENABLE_CUDA is ON but ${_braid_cuda_missing} "
    "was not found; install it or configure with -DBRAID_ENABLE_CUDA=OFF")
elseif(NOT BRAID_ENABLE_CUDA)
  if(_braid_cuda_missing STREQUAL "")
    message(STATUS "CUDA backend: off (BRAID_ENABLE_CUDA=OFF)")
  else()
    message(STATUS "CUDA backend: off (not found: ${_braid_cuda_missing})")
  endif()
  return()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES ${BRAID_CUDA_ARCHITECTURES})
endif()
enable_language(CUDA)
add_library(braid_nccl INTERFACE)
target_link_libraries(braid_nccl INTERFACE ${BRAID_NCCL_LIBRARY})
target_include_directories(braid_nccl SYSTEM INTERFACE
  ${BRAID_NCCL_INCLUDE_DIR})
message(STATUS "CUDA backend: on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, host "
  "compiler ${CMAKE_CUDA_HOST_COMPILER}, sm_${CMAKE_CUDA_ARCHITECTURES}, "
  "NCCL ${BRAID_NCCL_LIBRARY})")
