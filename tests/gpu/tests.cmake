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

  # The kernels' speed (figures, not a test), for bench/gpu_throughput.sh;
  # tests/gpu/run.sh's kit carries it (ctest gpukit.throughput_no_gpu).
  add_executable(gpu_bench ${HX_TESTS_DIR}/gpu/gpu_bench.cu)
  target_compile_options(gpu_bench PRIVATE
    "$<$<COMPILE_LANGUAGE:CUDA>:${HX_CUDA_WARNINGS}>")
  target_link_libraries(gpu_bench PRIVATE hexic_kernels_cuda)

  # cuDNN's fused attention (rtlib/cuda/attention_cudnn.c, --cuda-attention=
  # cudnn), where cuDNN 9 is found ($CUDNN_HOME, the toolkit's, the system's):
  # gpu.cudnn_host builds and finalizes every descriptor of its graphs here
  # (no GPU needed) and checks its refusals; check_kernels_cudnn and
  # gpu_bench_cudnn are check_kernels and gpu_bench with its "cudnn" group
  # and rows (separate programs: without libcudnn on a GPU machine the plain
  # ones still start; tests/gpu/run.sh runs them where it finds cuDNN).
  find_path(CUDNN_INCLUDE_DIR cudnn.h
    HINTS $ENV{CUDNN_HOME}/include ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(CUDNN_LIBRARY cudnn
    HINTS $ENV{CUDNN_HOME}/lib $ENV{CUDNN_HOME}/lib64 ${CUDAToolkit_LIBRARY_DIR}
          /usr/local/cuda/lib64)
  if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
    message(STATUS "hexic: cuDNN at ${CUDNN_LIBRARY}: the cudnn attention checks are built")
    add_library(hexic_attention_cudnn STATIC ${CMAKE_SOURCE_DIR}/rtlib/cuda/attention_cudnn.c)
    target_compile_definitions(hexic_attention_cudnn PUBLIC HEXIC_ATTENTION_CUDNN)
    target_include_directories(hexic_attention_cudnn PUBLIC ${CUDNN_INCLUDE_DIR})
    target_link_libraries(hexic_attention_cudnn PUBLIC hexic_kernels_cuda ${CUDNN_LIBRARY})
    add_executable(cudnn_host ${HX_TESTS_DIR}/gpu/cudnn_host.c)
    target_link_libraries(cudnn_host PRIVATE hexic_attention_cudnn)
    add_test(NAME gpu.cudnn_host COMMAND cudnn_host)
    add_test(NAME gpu.cudnn_host_open COMMAND cudnn_host --open)
    set_tests_properties(gpu.cudnn_host gpu.cudnn_host_open PROPERTIES LABELS "gpu;cudnn" TIMEOUT 120)
    # no GPU: cudnnCreate's refusal, named with cuDNN's words; a GPU: it opens
    set_tests_properties(gpu.cudnn_host_open PROPERTIES PASS_REGULAR_EXPRESSION
      "cudnnCreate\\(&a->handle\\) failed at .*CUDNN_STATUS_[A-Z_]+|cudnn_host: opened on a GPU")
    foreach(prog check_kernels gpu_bench)
      add_executable(${prog}_cudnn ${HX_TESTS_DIR}/gpu/${prog}.cu)
      target_compile_options(${prog}_cudnn PRIVATE
        "$<$<COMPILE_LANGUAGE:CUDA>:${HX_CUDA_WARNINGS}>")
      target_link_libraries(${prog}_cudnn PRIVATE hexic_attention_cudnn)
    endforeach()
  else()
    message(STATUS "hexic: no cuDNN (cudnn.h, libcudnn): the cudnn attention checks are not built")
  endif()

  # The same program and the kernels' own source on the host emulator of
  # tests/gpu/emulate/ (x86-64: its coroutine switch is assembly), so that
  # a machine without a GPU still runs every kernel against the CPU. The
  # slow cases are left to tests/gpu/emulate/run.sh: here the attention of
  # the tiny model (hd 16, tiled) and a GQA TP shard at hd 64 (tiled and
  # tensor-core, a sequence that is no multiple of the tiles), hd 128 at
  # T 140 (the tensor-core kernel's hd-128 tiles, several key tiles adding
  # into each query tile's dQ), both layers,
  # the tiny layer holding some tokens at their positions (seq: RoPE by
  # position, attention through the local hook, fp32 views in bf16), the
  # strided copies of the hooks (copy_rows), the block attention by
  # positions at hd 40 on a TP shard, and the same shards split into
  # launches of one sequence (*.split: what a micro-batch past gridDim.z's
  # 65535 sequences gets), RMSNorm at dims 8192 and 16384, and the layer
  # sequence parallel over 2, 3 and 4 members (sp*: threads of one process,
  # uneven rows) against the unsplit CPU layer.
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    find_package(Python3 REQUIRED COMPONENTS Interpreter)
    set(emu_dir ${HX_TESTS_DIR}/gpu/emulate)
    set(emu_kernels ${emu_dir}/emu_runtime.cpp)
    set(emu_check)
    foreach(cu ${HX_CUDA_KERNEL_SOURCES} ${HX_TESTS_DIR}/gpu/check_kernels.cu)
      get_filename_component(name ${cu} NAME_WE)
      set(out ${CMAKE_CURRENT_BINARY_DIR}/emulate/${name}.cpp)
      add_custom_command(OUTPUT ${out}
        COMMAND ${Python3_EXECUTABLE} ${emu_dir}/transform.py ${cu} ${out}
        DEPENDS ${cu} ${emu_dir}/transform.py VERBATIM)
      if(name STREQUAL "check_kernels")
        set(emu_check ${out})
      else()
        list(APPEND emu_kernels ${out})
      endif()
    endforeach()
    # The kernels on the emulator, compiled once for both programs below.
    add_library(hexic_kernels_emu OBJECT ${emu_kernels})
    foreach(target hexic_kernels_emu check_kernels_emu)
      if(target STREQUAL "check_kernels_emu")
        add_executable(check_kernels_emu ${emu_check} $<TARGET_OBJECTS:hexic_kernels_emu>)
      endif()
      set_target_properties(${target} PROPERTIES
        CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
      target_compile_options(${target} PRIVATE
        -include ${emu_dir}/cuda_emu.h -O1 -Wall -Wextra -Werror
        -Wno-attributes -Wno-unknown-pragmas -Wno-unused-function)
      target_include_directories(${target} PRIVATE
        ${CMAKE_SOURCE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
    endforeach()
    target_link_libraries(check_kernels_emu PRIVATE hexic_kernels)
    add_test(NAME gpu.emulated COMMAND check_kernels_emu)
    set_tests_properties(gpu.emulated PROPERTIES
      LABELS "gpu-emulated;kernels" TIMEOUT 600
      ENVIRONMENT "OPENBLAS_NUM_THREADS=1;HEXIC_CHECK_ONLY=hd16,hd64.shard,hd64.shard.t70.split,hd128.gqa2.t140,tiny,wide,seq,sp2,sp3,sp4,block.hd40.shard,block.hd40.shard.split")

    # rtlib/seq's HexiSeq hook with the CUDA backend's kernel table
    # (rtlib/cuda/seq_cuda.c: the block kernels, hxc_copy_rows, positions on
    # the device) on the emulated kernels, across MPI ranks through the staged
    # transport (seq_emu_shim.c), against the whole-sequence CPU kernels:
    # tests/rtlib/test_rt_seq.c's layouts, built with HX_SEQ_TEST_CUDA. cp4:
    # the ring by sendrecv; ragged: CP x HP with groups of 1, 3 and 2 units
    # and GQA; tp2: a TP 2 share with one kv head per unit.
    add_executable(test_rt_seq_emu ${HX_TESTS_DIR}/rtlib/test_rt_seq.c
      ${HX_TESTS_DIR}/gpu/seq_emu_shim.c ${HX_TESTS_DIR}/rtlib/emu_backend_extra.cpp
      ${CMAKE_SOURCE_DIR}/rtlib/cuda/seq_cuda.c ${CMAKE_SOURCE_DIR}/rtlib/cuda/transport_mpi_staged.c
      ${CMAKE_SOURCE_DIR}/rtlib/cuda/staging.c $<TARGET_OBJECTS:hexic_kernels_emu>)
    set_target_properties(test_rt_seq_emu PROPERTIES
      CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
    target_compile_definitions(test_rt_seq_emu PRIVATE HX_SEQ_TEST_CUDA)
    target_include_directories(test_rt_seq_emu PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
    target_link_libraries(test_rt_seq_emu PRIVATE hexic_rt)
    foreach(case cp4:4 ragged:6 tp2:6)
      string(REPLACE ":" ";" case_np ${case})
      list(GET case_np 0 name)
      list(GET case_np 1 np)
      add_test(NAME gpu.emulated.seq_${name}
        COMMAND ${CMAKE_COMMAND} -E env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
                OMPI_MCA_rmaps_base_oversubscribe=1 ASAN_OPTIONS=detect_leaks=0
                OPENBLAS_NUM_THREADS=1
                ${MPIEXEC_EXECUTABLE} --oversubscribe -np ${np} $<TARGET_FILE:test_rt_seq_emu> ${name})
      set_tests_properties(gpu.emulated.seq_${name} PROPERTIES
        LABELS "gpu-emulated;mpi" TIMEOUT 120)
    endforeach()
  endif()
endif()
