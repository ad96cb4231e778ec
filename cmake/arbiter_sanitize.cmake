# Sanitized and fuzzing builds of every arbiter target, through the interface
# target each of them links (arbiter_warnings) - never through global flags.
# All are for the GPU-free part of the tree (-DARBITER_CUDA=OFF), built in
# build trees of their own by scripts/sanitize.sh and scripts/fuzz.sh:
#
#   -DARBITER_SANITIZE=address,undefined   ASan + UBSan: every error stops the program
#   -DARBITER_SANITIZE=thread              TSan (with tests/sanitize/absl_tsan_annotations.cc
#                                          in every executable: see there why)
#   -DARBITER_FUZZ=ON                      libFuzzer targets under tests/fuzz (clang), every
#                                          target instrumented for coverage, with ASan + UBSan
set(ARBITER_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined or thread")
option(ARBITER_FUZZ "Build the libFuzzer targets under tests/fuzz (clang; implies ASan + UBSan)" OFF)

set(arbiter_sanitizers "${ARBITER_SANITIZE}")
if(ARBITER_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "ARBITER_FUZZ needs clang (libFuzzer): -DCMAKE_CXX_COMPILER=clang++-14")
  endif()
  if(arbiter_sanitizers STREQUAL "")
    set(arbiter_sanitizers "address,undefined")
  elseif(NOT arbiter_sanitizers STREQUAL "address,undefined")
    message(FATAL_ERROR "ARBITER_FUZZ runs under ASan + UBSan, not ARBITER_SANITIZE=${ARBITER_SANITIZE}")
  endif()
endif()
if(arbiter_sanitizers STREQUAL "")
  return()
endif()
if(ARBITER_WITH_CUDA)
  message(FATAL_ERROR "ARBITER_SANITIZE and ARBITER_FUZZ build the GPU-free part: add -DARBITER_CUDA=OFF")
endif()

if(arbiter_sanitizers STREQUAL "address,undefined")
  # No recovery: a test with undefined behaviour fails instead of printing and passing.
  target_compile_options(arbiter_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-sanitize-recover=undefined
                              -fno-omit-frame-pointer>)
  target_link_options(arbiter_warnings INTERFACE -fsanitize=address,undefined)
elseif(arbiter_sanitizers STREQUAL "thread")
  target_compile_options(arbiter_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=thread -fno-omit-frame-pointer>)
  target_link_options(arbiter_warnings INTERFACE -fsanitize=thread)
  # Every executable carries the abseil annotations and exports them, so that
  # the dynamic linker binds libgrpc's and libabsl's own calls to them as well.
  set(is_executable "$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>")
  target_sources(arbiter_warnings INTERFACE
    "$<${is_executable}:${PROJECT_SOURCE_DIR}/tests/sanitize/absl_tsan_annotations.cc>")
  target_link_options(arbiter_warnings INTERFACE "$<${is_executable}:-rdynamic>")
else()
  message(FATAL_ERROR "ARBITER_SANITIZE: expected address,undefined or thread, got ${ARBITER_SANITIZE}")
endif()
if(ARBITER_FUZZ)
  # Coverage for libFuzzer in every target; the fuzz executables add -fsanitize=fuzzer.
  target_compile_options(arbiter_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
endif()
message(STATUS "arbiter: sanitizers ${arbiter_sanitizers}, fuzz targets ${ARBITER_FUZZ}")
