# Launch resources of the CUDA kernels (issue 23, defect 2): every kernel's
# registers and shared memory as ptxas compiles it for sm_80, sm_89 and
# sm_90, against the launches kernels/cuda/'s launchers make at the largest
# shapes --target=cuda accepts (hxc_launch_table, printed by launch_table):
# threads x registers within the SM's 65536, shared memory within 48 KiB or
# the architecture's opt-in limit, grid within its limits; a kernel no
# launch names fails; the tensor-core attention must spill nothing and fit
# 2 blocks an SM (MIN_BLOCKS). ptxas's reports are made at build time, one
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

# Scratch reserved once (issue 23, defect 3): gpu.emulated.backend_frozen,
# registered in tests/rtlib/tests.cmake with the other runs of the CUDA
# backend on the host emulator, which share one build of it.
