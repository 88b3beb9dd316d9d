# Runtime library services: data, checkpoints, logging, world check, watchdog.
set(HX_RT_TESTS ${HX_TESTS_DIR}/rtlib)

foreach(t test_rt_data test_rt_ckpt test_rt_log_world test_rt_limits test_rt_emulate)
  add_executable(${t} ${HX_RT_TESTS}/${t}.c)
  target_link_libraries(${t} PRIVATE hexic_rt)
  add_test(NAME rtlib.${t} COMMAND ${t})
endforeach()
set_tests_properties(rtlib.test_rt_data rtlib.test_rt_ckpt rtlib.test_rt_log_world rtlib.test_rt_limits
  rtlib.test_rt_emulate PROPERTIES LABELS rtlib TIMEOUT 60)

# hexic-shard: text in, byte-level shard out, read back by rt_shard_check.
add_test(NAME rtlib.hexic_shard
  COMMAND bash ${HX_RT_TESTS}/run_shard_tool.sh $<TARGET_FILE:hexic-shard>
          $<TARGET_FILE:rt_shard_check> ${CMAKE_CURRENT_BINARY_DIR}/rtlib-shard)
add_executable(rt_shard_check ${HX_RT_TESTS}/rt_shard_check.c)
target_link_libraries(rt_shard_check PRIVATE hexic_rt)
set_tests_properties(rtlib.hexic_shard PROPERTIES LABELS rtlib TIMEOUT 60)

# mpirun scenarios (2 ranks, 4 for watchdog_chain; oversubscribed, as root).
add_executable(rt_mpi_probe ${HX_RT_TESTS}/rt_mpi_probe.c)
target_link_libraries(rt_mpi_probe PRIVATE hexic_rt)
foreach(c world_ok world_count world_order world_fingerprint watchdog_hang watchdog_die watchdog_chain
          watchdog_bad_env ckpt transport_fault wait_until)
  add_test(NAME rtlib.mpi.${c}
    COMMAND bash ${HX_RT_TESTS}/run_mpi_case.sh ${c} ${MPIEXEC_EXECUTABLE}
            $<TARGET_FILE:rt_mpi_probe> ${CMAKE_CURRENT_BINARY_DIR}/rtlib-ckpt-${c})
  set_tests_properties(rtlib.mpi.${c} PROPERTIES LABELS "rtlib;mpi" TIMEOUT 90)
endforeach()

# The backends (rtlib/cpu/, rtlib/cuda/). The CUDA backend's pure rules
# (binding.c, staging.c: no CUDA in them) run on any machine.
add_executable(test_rt_cuda_rules ${HX_RT_TESTS}/test_rt_cuda_rules.c
  ${CMAKE_SOURCE_DIR}/rtlib/cuda/binding.c ${CMAKE_SOURCE_DIR}/rtlib/cuda/staging.c)
target_include_directories(test_rt_cuda_rules PRIVATE ${CMAKE_SOURCE_DIR} ${CBLAS_INCLUDE_DIR})
target_link_libraries(test_rt_cuda_rules PRIVATE m)
add_test(NAME rtlib.cuda_rules COMMAND test_rt_cuda_rules)
set_tests_properties(rtlib.cuda_rules PROPERTIES LABELS rtlib TIMEOUT 60)
# One rank training through hx_rt_main on each backend (run_backend.sh): the
# CPU one always; the CUDA one against it, labelled gpu, skipped (exit 77)
# without a GPU. tests/rtlib/emulate_backend.sh runs it on a host emulation.
add_executable(rt_backend_cpu ${HX_RT_TESTS}/rt_backend_main.c)
target_link_libraries(rt_backend_cpu PRIVATE hexic_rt hexic_rt_cpu)
add_test(NAME rtlib.backend_cpu
  COMMAND bash ${HX_RT_TESTS}/run_backend.sh ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:rt_backend_cpu> -
          $<TARGET_FILE:weights_cmp> ${CMAKE_CURRENT_BINARY_DIR}/rtlib-backend-cpu)
set_tests_properties(rtlib.backend_cpu PROPERTIES LABELS "rtlib;mpi" TIMEOUT 120)
if(HEXIC_CUDA)
  add_executable(rt_backend_cuda ${HX_RT_TESTS}/rt_backend_main.c)
  target_compile_definitions(rt_backend_cuda PRIVATE HX_TEST_CUDA)
  target_link_libraries(rt_backend_cuda PRIVATE hexic_rt hexic_rt_cuda)
  add_test(NAME rtlib.backend_cuda
    COMMAND bash ${HX_RT_TESTS}/run_backend.sh ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:rt_backend_cpu>
            $<TARGET_FILE:rt_backend_cuda> $<TARGET_FILE:weights_cmp>
            ${CMAKE_CURRENT_BINARY_DIR}/rtlib-backend-cuda)
  set_tests_properties(rtlib.backend_cuda PROPERTIES
    SKIP_RETURN_CODE 77 LABELS "gpu;rtlib" TIMEOUT 300)
endif()

# hexic-profile: measures this machine (tiny sizes, well under a second each)
# and writes a cluster .hx that hexic --check accepts, on one rank and on two.
add_test(NAME rtlib.hexic_profile
  COMMAND bash ${HX_RT_TESTS}/run_profile_tool.sh $<TARGET_FILE:hexic-profile>
          $<TARGET_FILE:hexic> ${MPIEXEC_EXECUTABLE} ${CMAKE_SOURCE_DIR}/examples/models/tiny.hx
          ${CMAKE_CURRENT_BINARY_DIR}/rtlib-profile)
set_tests_properties(rtlib.hexic_profile PROPERTIES LABELS "rtlib;mpi" TIMEOUT 60)

# Gradient sync overlapped with the backward (issue 13): the trace of starts
# against backwards, and the same sums as the blocking path.
add_test(NAME rtlib.sync_overlap
  COMMAND bash ${HX_RT_TESTS}/run_sync_overlap.sh ${CMAKE_CURRENT_BINARY_DIR}/rtlib-sync-overlap
          $<TARGET_FILE:emit_fixture>)
set_tests_properties(rtlib.sync_overlap PROPERTIES LABELS "rtlib;mpi" TIMEOUT 300 PROCESSORS 2)

# rtlib/seq's attention hook (context and head parallelism) on real MPI
# ranks against the whole-sequence kernels, one layout per test (CASE:RANKS),
# and broken tables refused with the reason; whole decoder layers with the
# hook against the whole-sequence layer (layer_*); the layouts on
# rtlib/cuda's staged transport, its CUDA calls on host memory
# (seq_staged_shim.c), the ring by sendrecv (cp4) and by alltoallv (ragged);
# and messages cut into chunks of 37 floats (HEXIC_MPI_MAX_COUNT).
# hx_seq_test(NAME RANKS PROGRAM ARGS... [ENV VAR=VALUE...])
function(hx_seq_test name np program)
  cmake_parse_arguments(PARSE_ARGV 3 opt "" "" "ENV")
  add_test(NAME rtlib.seq.${name}
    COMMAND ${CMAKE_COMMAND} -E env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
            OMPI_MCA_rmaps_base_oversubscribe=1 ASAN_OPTIONS=detect_leaks=0 ${opt_ENV}
            ${MPIEXEC_EXECUTABLE} --oversubscribe -np ${np} $<TARGET_FILE:${program}>
            ${opt_UNPARSED_ARGUMENTS})
  set_tests_properties(rtlib.seq.${name} PROPERTIES LABELS "rtlib;mpi" TIMEOUT 60)
endfunction()
add_executable(test_rt_seq ${HX_RT_TESTS}/test_rt_seq.c)
target_link_libraries(test_rt_seq PRIVATE hexic_rt hexic_rt_cpu)
foreach(c cp2:2 cp4:4 hp3:3 usp:4 ragged:6 planner:6 tp2:6 gqa8:8 refuse:1)
  string(REPLACE ":" ";" parts ${c})
  list(GET parts 0 case)
  list(GET parts 1 np)
  hx_seq_test(${case} ${np} test_rt_seq ${case})
endforeach()
hx_seq_test(layer_planner 6 test_rt_seq planner layer)
hx_seq_test(layer_cp4_recompute 4 test_rt_seq cp4 layer recompute)
hx_seq_test(layer_hp3_recompute 3 test_rt_seq hp3 layer recompute)
if(HEXIC_CUDA)
  add_executable(test_rt_seq_staged ${HX_RT_TESTS}/test_rt_seq.c ${HX_RT_TESTS}/seq_staged_shim.c
    ${CMAKE_SOURCE_DIR}/rtlib/cuda/transport_mpi_staged.c ${CMAKE_SOURCE_DIR}/rtlib/cuda/staging.c)
  target_include_directories(test_rt_seq_staged PRIVATE ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES})
  target_link_libraries(test_rt_seq_staged PRIVATE hexic_rt)
  hx_seq_test(staged_cp4 4 test_rt_seq_staged cp4)
  hx_seq_test(staged_ragged 6 test_rt_seq_staged ragged)
endif()
hx_seq_test(chunked 6 test_rt_seq planner ENV HEXIC_MPI_MAX_COUNT=37)
# A rank of the planner's layout (rank 3, in the last group) stops answering:
# the job ends within the watchdog bound and the reports name it.
add_test(NAME rtlib.seq.stall
  COMMAND bash ${HX_RT_TESTS}/run_seq_stall.sh ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:test_rt_seq>
          planner 6 3)
set_tests_properties(rtlib.seq.stall PROPERTIES LABELS "rtlib;mpi" TIMEOUT 90)

# The checkpoint readers facing hostile files (issue 24): FIFOs and devices
# refused, linear parsing with named bounds, duplicates, escaped names.
add_executable(test_ckpt_readers ${HX_RT_TESTS}/test_ckpt_readers.c)
target_link_libraries(test_ckpt_readers PRIVATE hexic_rt)
add_test(NAME rtlib.ckpt_readers COMMAND test_ckpt_readers)
set_tests_properties(rtlib.ckpt_readers PROPERTIES LABELS rtlib TIMEOUT 90)

# The CUDA backend on the host emulator (tests/rtlib/emulate_backend.sh), in
# every build with CUDA on x86-64, scripts/test.sh's sanitized one included:
# the script builds the emulator's objects, the CPU kernels it links and the
# plans' programs without the sanitizers; hexic, rt_backend_cpu and
# weights_cmp come from this build. The emulator's library is built once, by
# tests/nccl's nccl.emu.build where it is registered (its nccl-emu folder is
# emulate_backend.sh's build plus an NCCL variant), else by
# gpu.emulated.build; the runs take that fixture's lock, one at a time.
#   gpu.emulated.backend_frozen  scratch reserved once (issue 23, defect 3):
#     emulate_backend.sh one (3 steps in fp32 and bf16 against the CPU
#     backend) with HEXIC_EMU_FREEZE_AFTER set, so any cudaMalloc, cudaFree
#     or cudaDeviceSynchronize after step 1's first kernel ends the rank
#     (tests/gpu/emulate/emu_runtime.cpp): everything the kernels need is
#     allocated at start (rtlib/cuda/device_cuda.c reserves the context's
#     scratch for the plan's shapes).
#   gpu.emulated.nonfinite  a blown-up run stops on the CUDA backend at the
#     CPU's step (issue 24, item 6): emulate_backend.sh nonfinite runs tiny
#     at lr 1e3 (one rank and PP 2) against the CPU programs, the same error
#     line and exit 1.
if(HEXIC_CUDA AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  if(TEST nccl.emu.build)
    set(emu_backend_dir ${CMAKE_CURRENT_BINARY_DIR}/nccl-emu)
    set(emu_backend_fixture nccl_emu)
  else()
    set(emu_backend_dir ${CMAKE_CURRENT_BINARY_DIR}/emu-backend)
    set(emu_backend_fixture hexic_emu_backend)
    add_test(NAME gpu.emulated.build
      COMMAND env HEXIC_EMU_BACKEND_BUILD=${emu_backend_dir} HEXIC_CPU_BUILD=${CMAKE_BINARY_DIR}
              bash ${HX_TESTS_DIR}/rtlib/emulate_backend.sh build)
    set_tests_properties(gpu.emulated.build PROPERTIES FIXTURES_SETUP hexic_emu_backend
      LABELS "gpu-emulated" TIMEOUT 1200 RESOURCE_LOCK hexic_emu_backend PROCESSORS 2)
  endif()
  set(emu_backend_env HEXIC_EMU_BACKEND_BUILD=${emu_backend_dir} HEXIC_CPU_BUILD=${CMAKE_BINARY_DIR})
  add_test(NAME gpu.emulated.backend_frozen
    COMMAND env ${emu_backend_env} HEXIC_EMU_FREEZE_AFTER=embedding_forward_kernel
            bash ${HX_TESTS_DIR}/rtlib/emulate_backend.sh one)
  add_test(NAME gpu.emulated.nonfinite
    COMMAND env ${emu_backend_env} bash ${HX_TESTS_DIR}/rtlib/emulate_backend.sh nonfinite)
  # gpu.emulated.seq  HexiSeq on the CUDA backend: emulate_backend.sh seq
  #   trains an 8-rank PP x TP x CP x HP plan's --target=cuda programs in
  #   fp32 (losses equal, weights within 1e-4 of the CPU programs') and in
  #   bf16 (losses within 2%).
  add_test(NAME gpu.emulated.seq
    COMMAND env ${emu_backend_env} bash ${HX_TESTS_DIR}/rtlib/emulate_backend.sh seq)
  set_tests_properties(gpu.emulated.backend_frozen gpu.emulated.nonfinite gpu.emulated.seq PROPERTIES
    FIXTURES_REQUIRED ${emu_backend_fixture} RESOURCE_LOCK ${emu_backend_fixture}
    LABELS "gpu-emulated;mpi" TIMEOUT 300 PROCESSORS 2)
  # gpu.emulated.memory  the CUDA backend's memory by kind (issue 25, item
  #   1): emulate_backend.sh memory trains --target=cuda plans (one rank,
  #   TP 2 + PP 2, ZeRO-1, full recompute, HexiSeq; fp32 and bf16) one step
  #   over tests/nccl's shim with --memory-report and holds every rank's
  #   peak of every kind to plan.json's memory_by_kind within 0.1%. It needs
  #   the NCCL variant of the emulator's library, so only where tests/nccl
  #   registers it.
  if(TEST nccl.emu.build)
    add_test(NAME gpu.emulated.memory
      COMMAND env ${emu_backend_env} bash ${HX_TESTS_DIR}/rtlib/emulate_backend.sh memory)
    set_tests_properties(gpu.emulated.memory PROPERTIES
      FIXTURES_REQUIRED ${emu_backend_fixture} RESOURCE_LOCK ${emu_backend_fixture}
      LABELS "gpu-emulated;mpi" TIMEOUT 300 PROCESSORS 2)
  endif()
endif()
