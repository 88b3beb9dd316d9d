# The GPU kit (tests/gpu/README.md): tests/gpu/table.sh's row, deadline and
# MFU logic without a GPU; and, where the CUDA toolkit is, a kit built by
# `tests/gpu/run.sh prepare` that takes nothing from the machine but glibc,
# the C++ runtime and the CUDA/NCCL libraries, whose own mpirun starts its
# CPU ranks, and whose `run` without a GPU prints its table and exits 2.
add_test(NAME gpukit.table COMMAND bash ${HX_TESTS_DIR}/gpukit/test_table.sh)
set_tests_properties(gpukit.table PROPERTIES LABELS gpukit TIMEOUT 60)
add_test(NAME gpukit.self_contained
  COMMAND bash ${HX_TESTS_DIR}/gpukit/check_kit.sh ${CMAKE_CURRENT_BINARY_DIR}/gpukit)
set_tests_properties(gpukit.self_contained PROPERTIES
  SKIP_RETURN_CODE 77 LABELS "gpukit;mpi" TIMEOUT 1200 RUN_SERIAL TRUE)

# bench/gpu_throughput.sh without a GPU: says it needs one and exits 2, with
# the kernels' bench program (CUDA builds: it probes the device) and without
# it; skipped where a GPU is visible (tests/gpu/run.sh runs it there).
if(HEXIC_CUDA)
  add_test(NAME gpukit.throughput_no_gpu
    COMMAND bash ${HX_TESTS_DIR}/gpukit/test_throughput.sh $<TARGET_FILE:gpu_bench>)
else()
  add_test(NAME gpukit.throughput_no_gpu
    COMMAND bash ${HX_TESTS_DIR}/gpukit/test_throughput.sh)
endif()
set_tests_properties(gpukit.throughput_no_gpu PROPERTIES
  SKIP_RETURN_CODE 77 LABELS gpukit TIMEOUT 60)
