# arbiter_cuda_library(TARGET SOURCES files... [ARCHITECTURES archs] [PTXAS_OPTIONS opts...])
# A static library of hand-written CUDA device code and its host side: its own
# include interface (arbiter_headers), C++20 host code, and ptxas failing the
# build on any register spill or local-memory use (a performance bug here).
#   ARCHITECTURES  default "80;90": sm_80 SASS + PTX (JIT-compiled for newer
#                  GPUs) and native sm_90 SASS.
#   PTXAS_OPTIONS  extra ptxas options, e.g. -v to report registers and spills.
# The device code is C++17 (CMake 3.25 knows no C++20 flags for nvcc 13).
function(arbiter_cuda_library target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "ARCHITECTURES" "SOURCES;PTXAS_OPTIONS")
  if(NOT arg_ARCHITECTURES)
    set(arg_ARCHITECTURES "80;90")
  endif()
  add_library(${target} STATIC ${arg_SOURCES})
  arbiter_headers(${target})
  set_target_properties(${target} PROPERTIES
    CUDA_ARCHITECTURES "${arg_ARCHITECTURES}"
    CUDA_STANDARD 17
    CUDA_STANDARD_REQUIRED ON)
  target_compile_features(${target} PUBLIC cxx_std_20)
  list(APPEND arg_PTXAS_OPTIONS -warn-spills -warn-lmem-usage -Werror)
  list(JOIN arg_PTXAS_OPTIONS "," ptxas)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=${ptxas}>)
  # Host code of a family calls the CUDA runtime (cuda::Resources, Scratch,
  # CudaStatus); the device runtime sits below every kernel.
  target_link_libraries(${target}
    PUBLIC arbiter_engine CUDA::cudart
    PRIVATE arbiter_cuda arbiter_warnings)
endfunction()

# arbiter_add_cuda_family(NAME SOURCES files... [options of arbiter_cuda_library])
# The kernel family in the calling folder, kernels/NAME: the target
# arbiter_kernel_NAME, which includes the shared device code of kernels/common.
# A family is a kernel file, its launcher (a kernels/common Launcher) and its
# registration (kernels/common/family.h's MakeFamily); kernels/registry lists it.
function(arbiter_add_cuda_family name)
  arbiter_cuda_library(arbiter_kernel_${name} ${ARGN})
  target_link_libraries(arbiter_kernel_${name} PUBLIC arbiter_kernel_common)
endfunction()
