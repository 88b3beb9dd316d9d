# The NCCL transport without a GPU (issue 23, item 4). nccl_shim.c is a
# test-only NCCL over MPI that reports what NCCL would deadlock on:
#   nccl.shim.*  its own checks on MPI (4 ranks for the calls' results,
#                2 for each deadlock report; run_shim_tests.sh);
#   nccl.emu.*   rtlib/cuda/transport_nccl.c over it on the host CUDA
#                emulator (emulate_nccl.sh): DP 2, TP 2, PP 2, DP 2 with
#                ZeRO-1, TP 2 + PP 2 beside a DP pipeline, ZeRO-1 over TP 2
#                beside a pipeline with a checkpoint resumed, and two HexiSeq
#                plans (4 and 8 ranks), each printing "transport: nccl" and training as the
#                same plan's CPU programs (fp32 losses and weights within
#                1e-5; two steps here); nccl.emu.sp: sequence parallelism's
#                TP reduce-scatter and all-gather (uneven blocks) of this
#                transport and the staged one against host sums, exact. nccl.emu.build builds the
#                emulator's library once (kernels/cuda/ through g++: minutes);
#                the runs share it, one at a time.
# Needs nccl.h and the CUDA runtime's headers (the toolkit, no GPU); the
# emulator is x86-64 only. Its objects and the emulated programs are built
# by the scripts without the sanitizers (the CPU kernels from each plan's own
# Makefile), so they run in scripts/test.sh's ASan build too; hexic and
# weights_cmp come from this build.
find_path(HX_SHIM_NCCL_INCLUDE nccl.h HINTS $ENV{CUDA_HOME}/include /usr/local/cuda/include)
if(HX_SHIM_NCCL_INCLUDE AND EXISTS ${HX_SHIM_NCCL_INCLUDE}/cuda_runtime_api.h)
  set(HX_NCCL_TESTS ${HX_TESTS_DIR}/nccl)
  add_executable(test_nccl_shim ${HX_NCCL_TESTS}/test_nccl_shim.c ${HX_NCCL_TESTS}/nccl_shim.c)
  target_include_directories(test_nccl_shim PRIVATE ${HX_SHIM_NCCL_INCLUDE})
  target_link_libraries(test_nccl_shim PRIVATE MPI::MPI_C)
  foreach(c ok order count missing unmatched)
    add_test(NAME nccl.shim.${c}
      COMMAND bash ${HX_NCCL_TESTS}/run_shim_tests.sh ${MPIEXEC_EXECUTABLE}
              $<TARGET_FILE:test_nccl_shim> ${c})
    set_tests_properties(nccl.shim.${c} PROPERTIES LABELS "nccl;mpi" TIMEOUT 90)
  endforeach()

  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    # HEXIC_EMU_FREEZE_AFTER: after step 1's first kernel, any cudaMalloc,
    # cudaFree or cudaDeviceSynchronize ends the rank (emu_runtime.cpp), so
    # these multi-rank runs (checkpoints and ZeRO-1 included) also check that
    # device memory is fixed at start, in the sanitized build too.
    set(nccl_emu_env HEXIC_NCCL_EMU_BUILD=${CMAKE_CURRENT_BINARY_DIR}/nccl-emu
                     HEXIC_CPU_BUILD=${CMAKE_BINARY_DIR} HEXIC_NCCL_STEPS=2
                     HEXIC_EMU_FREEZE_AFTER=embedding_forward_kernel)
    add_test(NAME nccl.emu.build
      COMMAND env ${nccl_emu_env} bash ${HX_NCCL_TESTS}/emulate_nccl.sh build)
    set_tests_properties(nccl.emu.build PROPERTIES FIXTURES_SETUP nccl_emu
      LABELS "gpu-emulated;mpi" TIMEOUT 1200 RESOURCE_LOCK nccl_emu PROCESSORS 2)
    foreach(p dp2 tp2 pp2 dp2z tp2pp2 zero1pp seq seq8 sp)
      add_test(NAME nccl.emu.${p}
        COMMAND env ${nccl_emu_env} bash ${HX_NCCL_TESTS}/emulate_nccl.sh ${p})
      set_tests_properties(nccl.emu.${p} PROPERTIES FIXTURES_REQUIRED nccl_emu
        LABELS "gpu-emulated;mpi" TIMEOUT 600 RESOURCE_LOCK nccl_emu PROCESSORS 2)
    endforeach()
  endif()
endif()
