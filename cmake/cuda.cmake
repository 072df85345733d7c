# The CUDA backend (framework/backend/cuda), switched by MINIDL_CUDA:
#   AUTO (default)  built when nvcc (check_language) and the CUDA toolkit
#                   (find_package(CUDAToolkit)) are both found
#   ON              required: configuring fails without them
#   OFF             not built; the build needs no CUDA header
# Included from CMakeLists.txt before the library is defined; call
# minidl_add_cuda_backend(<target>) after it. Sets MINIDL_CUDA_ENABLED.
set(MINIDL_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO (when the toolkit is found), ON, OFF")
set_property(CACHE MINIDL_CUDA PROPERTY STRINGS AUTO ON OFF)

set(MINIDL_CUDA_ENABLED OFF)
string(TOUPPER "${MINIDL_CUDA}" _minidl_cuda_mode)
if(_minidl_cuda_mode STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      set(MINIDL_CUDA_ENABLED ON)
    endif()
  endif()
  if(NOT MINIDL_CUDA_ENABLED)
    message(STATUS "minidl: CUDA backend off (no nvcc or CUDA toolkit found; MINIDL_CUDA=AUTO)")
  endif()
elseif(MINIDL_CUDA)
  set(MINIDL_CUDA_ENABLED ON)
elseif(NOT _minidl_cuda_mode MATCHES "^(OFF|FALSE|NO|0|N)$")
  message(FATAL_ERROR "MINIDL_CUDA must be AUTO, ON or OFF, got '${MINIDL_CUDA}'")
endif()

if(MINIDL_CUDA_ENABLED)
  # Ampere (80) and Hopper (90) machine code, plus PTX for newer GPUs to JIT.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80-real;90-real;90-virtual")
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 for nvcc; the .cu files need 17
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_EXTENSIONS OFF)
  message(STATUS "minidl: CUDA backend on (toolkit ${CUDAToolkit_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES})")
endif()

# Adds the backend's sources to `target` (a library) and links the toolkit
# privately: minidl's public headers need no CUDA header. Without CUDA, the
# stub (framework/backend/no_cuda) answers framework/cuda.h instead.
function(minidl_add_cuda_backend target)
  if(NOT MINIDL_CUDA_ENABLED)
    target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/framework/backend/no_cuda/cuda.cpp)
    return()
  endif()
  file(GLOB cuda_sources CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/framework/backend/cuda/*.cu
       ${PROJECT_SOURCE_DIR}/framework/backend/cuda/*.cpp)
  target_sources(${target} PRIVATE ${cuda_sources})
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--extended-lambda -Xcompiler=-Wall,-Wextra>)
  # cuDNN (backend/cuda/conv_cudnn.cpp) where cudnn.h is found; libcudnn.so.9
  # is opened at first use, not linked. Without the header, convolutions on
  # CUDA take im2col + cuBLAS only.
  find_path(MINIDL_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(MINIDL_CUDNN_INCLUDE_DIR)
    set_source_files_properties(${PROJECT_SOURCE_DIR}/framework/backend/cuda/conv_cudnn.cpp
      TARGET_DIRECTORY ${target} PROPERTIES COMPILE_DEFINITIONS MINIDL_CUDNN
      INCLUDE_DIRECTORIES ${MINIDL_CUDNN_INCLUDE_DIR})
    message(STATUS "minidl: cuDNN convolutions on (${MINIDL_CUDNN_INCLUDE_DIR}/cudnn.h)")
  else()
    message(STATUS "minidl: cudnn.h not found: CUDA convolutions use im2col + cuBLAS only")
  endif()
  # cuBLAS is opened at first use (backend/cuda/context.cpp), not linked.
  target_link_libraries(${target} PRIVATE CUDA::cudart ${CMAKE_DL_LIBS})
  # The shared runtime, as CUDA::cudart is; not also the static one CMake
  # would add for a target with CUDA sources.
  set_target_properties(${target} PROPERTIES CUDA_RUNTIME_LIBRARY Shared)
endfunction()
