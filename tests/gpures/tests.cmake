# Launch resources of the CUDA kernels (issue 23, defect 2): every kernel's
# registers and shared memory as ptxas compiles it for sm_80, sm_89 and
# sm_90, against the launches kernels/cuda/'s launchers make at the largest
# shapes --target=cuda accepts (hxc_launch_table, printed by launch_table):
# threads x registers within the SM's 65536, shared memory within 48 KiB or
# the architecture's opt-in limit, grid within its limits; a kernel no
# launch names fails. ptxas's reports are made at build time, one
# `nvcc -cubin --resource-usage` per .cu and architecture (no GPU needed).
if(HEXIC_CUDA)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  set(res_dir ${HX_TESTS_DIR}/gpures)
  add_executable(launch_table ${res_dir}/launch_table.cu)
  target_compile_options(launch_table PRIVATE
    "$<$<COMPILE_LANGUAGE:CUDA>:${HX_CUDA_WARNINGS}>")
  target_link_libraries(launch_table PRIVATE hexic_kernels_cuda)
  set(res_reports)
  set(res_args)
  foreach(arch 80 89 90)
    set(files)
    foreach(cu ${HX_CUDA_KERNEL_SOURCES})
      get_filename_component(name ${cu} NAME_WE)
      set(out ${CMAKE_CURRENT_BINARY_DIR}/gpures/${name}.sm${arch}.txt)
      add_custom_command(OUTPUT ${out}
        COMMAND ${Python3_EXECUTABLE} ${res_dir}/check_resources.py ptxas ${out}
                ${CMAKE_CUDA_COMPILER} -cubin -arch=sm_${arch} -std=c++17
                --resource-usage -I${CMAKE_SOURCE_DIR} -o ${out}.cubin ${cu}
        DEPENDS ${cu} ${CMAKE_SOURCE_DIR}/kernels/cuda/common.cuh
                ${CMAKE_SOURCE_DIR}/kernels/cuda/llama_cuda.h
                ${CMAKE_SOURCE_DIR}/kernels/cuda/cuda_check.h
        COMMENT "ptxas resources of ${name}.cu for sm_${arch}" VERBATIM)
      list(APPEND res_reports ${out})
      list(APPEND files ${out})
    endforeach()
    string(REPLACE ";" "," files "${files}")
    list(APPEND res_args sm_${arch}=${files})
  endforeach()
  add_custom_target(gpu_resources ALL DEPENDS ${res_reports})
  add_test(NAME gpu.resources
    COMMAND ${Python3_EXECUTABLE} ${res_dir}/check_resources.py check
            $<TARGET_FILE:launch_table> ${res_args})
  set_tests_properties(gpu.resources PROPERTIES LABELS gpu-resources TIMEOUT 60)
endif()

# Scratch reserved once (issue 23, defect 3): the one-rank run of the CUDA
# backend on the host emulator (tests/rtlib/emulate_backend.sh one: 3 steps
# in fp32 and bf16 against the CPU backend) with HEXIC_EMU_FREEZE_AFTER set,
# so any cudaMalloc, cudaFree or cudaDeviceSynchronize after step 1's first
# kernel ends the rank (tests/gpu/emulate/emu_runtime.cpp): everything the
# kernels need is allocated at start (rtlib/cuda/device_cuda.c reserves the
# context's scratch for the plan's shapes). The emulator is x86-64 only and
# its objects are not built with the sanitizers.
if(HEXIC_CUDA AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" AND NOT HEXIC_SANITIZE
   AND NOT HEXIC_FUZZ)
  add_test(NAME gpu.emulated.backend_frozen
    COMMAND env HEXIC_EMU_FREEZE_AFTER=embedding_forward_kernel
            HEXIC_EMU_BACKEND_BUILD=${CMAKE_CURRENT_BINARY_DIR}/emu-backend
            HEXIC_CPU_BUILD=${CMAKE_BINARY_DIR}
            bash ${HX_TESTS_DIR}/rtlib/emulate_backend.sh one)
  set_tests_properties(gpu.emulated.backend_frozen PROPERTIES
    LABELS "gpu-emulated;mpi" TIMEOUT 600 PROCESSORS 2)
endif()
