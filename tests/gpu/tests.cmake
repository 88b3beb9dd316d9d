# The CUDA kernels against the CPU kernels (tests/gpu/check_kernels.cu).
# Built whenever CUDA is on, so CI compiles and links it; it needs a GPU to
# run and exits 77 without one, which ctest reports as skipped (never as
# passed). tests/gpu/run.sh is the one command for a machine with a GPU.
if(HEXIC_CUDA)
  add_executable(check_kernels ${HX_TESTS_DIR}/gpu/check_kernels.cu)
  target_compile_options(check_kernels PRIVATE
    "$<$<COMPILE_LANGUAGE:CUDA>:${HX_CUDA_WARNINGS}>")
  target_link_libraries(check_kernels PRIVATE hexic_kernels_cuda)
  add_test(NAME gpu.kernels COMMAND check_kernels)
  set_tests_properties(gpu.kernels PROPERTIES
    SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 600
    ENVIRONMENT "OPENBLAS_NUM_THREADS=1")

  # The same program and the kernels' own source on the host emulator of
  # tests/gpu/emulate/ (x86-64: its coroutine switch is assembly), so that
  # a machine without a GPU still runs every kernel against the CPU. The
  # slow cases are left to tests/gpu/emulate/run.sh: here the attention of
  # the tiny model (hd 16, tiled) and a GQA TP shard at hd 64 (tiled and
  # tensor-core, a sequence that is no multiple of the tiles), both layers,
  # the tiny layer holding some tokens at their positions (seq: RoPE by
  # position, attention through the local hook, fp32 views in bf16), the
  # strided copies of the hooks (copy_rows) and the block attention by
  # positions at hd 40 on a TP shard.
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    find_package(Python3 REQUIRED COMPONENTS Interpreter)
    set(emu_dir ${HX_TESTS_DIR}/gpu/emulate)
    set(emu_sources ${emu_dir}/emu_runtime.cpp)
    foreach(cu ${HX_CUDA_KERNEL_SOURCES} ${HX_TESTS_DIR}/gpu/check_kernels.cu)
      get_filename_component(name ${cu} NAME_WE)
      set(out ${CMAKE_CURRENT_BINARY_DIR}/emulate/${name}.cpp)
      add_custom_command(OUTPUT ${out}
        COMMAND ${Python3_EXECUTABLE} ${emu_dir}/transform.py ${cu} ${out}
        DEPENDS ${cu} ${emu_dir}/transform.py VERBATIM)
      list(APPEND emu_sources ${out})
    endforeach()
    add_executable(check_kernels_emu ${emu_sources})
    set_target_properties(check_kernels_emu PROPERTIES
      CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
    target_compile_options(check_kernels_emu PRIVATE
      -include ${emu_dir}/cuda_emu.h -O1 -Wall -Wextra -Werror
      -Wno-attributes -Wno-unknown-pragmas -Wno-unused-function)
    target_include_directories(check_kernels_emu PRIVATE
      ${CMAKE_SOURCE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
    target_link_libraries(check_kernels_emu PRIVATE hexic_kernels)
    add_test(NAME gpu.emulated COMMAND check_kernels_emu)
    set_tests_properties(gpu.emulated PROPERTIES
      LABELS "gpu-emulated;kernels" TIMEOUT 600
      ENVIRONMENT "OPENBLAS_NUM_THREADS=1;HEXIC_CHECK_ONLY=hd16,hd64.shard,tiny,wide,seq,block.hd40.shard")
  endif()
endif()
