# Asymmetric parallel execution (issue 6): the generated programs under
# mpirun for DP x TP x PP plans — from emit_fixture's hand-built shapes, from
# hexic's own planners, and from hand-written plan.json files (--plan) —
# compared with one rank (losses and --dump-weights), and a rank killed with
# kill -9 mid-step; seq and seqfault: the same for HexiSeq plans (issue 14:
# context/head parallelism with uneven tokens and heads, mutated layouts
# refused, a CP rank killed).
set(HX_EXEC_TESTS ${HX_TESTS_DIR}/exec)

add_executable(weights_cmp ${HX_EXEC_TESTS}/weights_cmp.c)
target_link_libraries(weights_cmp PRIVATE m)

foreach(mode fixture hexic planfile limits options fault seq seqfault)
  add_test(NAME exec.${mode}
    COMMAND bash ${HX_EXEC_TESTS}/run_exec.sh ${mode} ${CMAKE_CURRENT_BINARY_DIR}/exec-${mode}
            ${CMAKE_SOURCE_DIR} ${HX_BIN} $<TARGET_FILE:emit_fixture> $<TARGET_FILE:weights_cmp>)
  # Each builds and runs MPI jobs on both cores.
  set_tests_properties(exec.${mode} PROPERTIES LABELS "exec;mpi" TIMEOUT 300 PROCESSORS 2)
endforeach()

# --emulate (issue 15, item 2): a mixed cluster's slow ranks carry their
# slowdown, and the emulated run trains exactly as the plain one.
add_test(NAME exec.emulate
  COMMAND bash ${HX_EXEC_TESTS}/run_emulate.sh ${CMAKE_CURRENT_BINARY_DIR}/exec-emulate
          ${CMAKE_SOURCE_DIR} ${HX_BIN})
set_tests_properties(exec.emulate PROPERTIES LABELS "exec;mpi" TIMEOUT 300 PROCESSORS 2)

# ZeRO-1 (issue 16): sharded optimizer state with uneven shards trains as the
# unsharded plan (train), its checkpoints resume sharded or not (ckpt), and
# the runtime's ZeRO-1 paths run clean under ASan + UBSan (asan), and the
# model-state bytes each rank allocates move with the simulator's memory
# per rank within 1% (bytes).
foreach(mode train ckpt asan bytes)
  add_test(NAME exec.zero1_${mode}
    COMMAND bash ${HX_EXEC_TESTS}/run_zero1.sh ${mode} ${CMAKE_CURRENT_BINARY_DIR}/exec-zero1-${mode}
            ${CMAKE_SOURCE_DIR} ${HX_BIN} $<TARGET_FILE:weights_cmp>)
  set_tests_properties(exec.zero1_${mode} PROPERTIES LABELS "exec;mpi" TIMEOUT 300 PROCESSORS 2)
endforeach()

# A run whose loss or gradient norm goes non-finite (issue 24, item 6) stops
# at that step on every rank, naming the step, the rank and the tensor,
# without its checkpoint: one rank, DP 2, TP 2, PP 2, ZeRO-1 and HexiSeq.
add_test(NAME exec.nonfinite
  COMMAND bash ${HX_EXEC_TESTS}/run_nonfinite.sh ${CMAKE_CURRENT_BINARY_DIR}/exec-nonfinite
          ${CMAKE_SOURCE_DIR} ${HX_BIN})
set_tests_properties(exec.nonfinite PROPERTIES LABELS "exec;mpi" TIMEOUT 300 PROCESSORS 2)

# Pipeline hops posted ahead as the simulator charges them, and the runtime
# trace HEXIC_TRACE (issue 25, item 4): PP 2 and an uneven PP 3 with TP train
# as one rank, and their traces show each receive posted under the compute
# before it.
add_test(NAME exec.trace
  COMMAND bash ${HX_EXEC_TESTS}/run_trace.sh ${CMAKE_CURRENT_BINARY_DIR}/exec-trace
          ${CMAKE_SOURCE_DIR} ${HX_BIN} $<TARGET_FILE:emit_fixture> $<TARGET_FILE:weights_cmp>)
set_tests_properties(exec.trace PROPERTIES LABELS "exec;mpi" TIMEOUT 300 PROCESSORS 2)

# Memory by kind (issue 25, item 1): every exec plan shape's measured peak
# per rank and kind (--memory-report) within 5% of plan.json's memory_by_kind.
add_test(NAME exec.memory
  COMMAND bash ${HX_EXEC_TESTS}/run_memory.sh ${CMAKE_CURRENT_BINARY_DIR}/exec-memory
          ${CMAKE_SOURCE_DIR} ${HX_BIN})
set_tests_properties(exec.memory PROPERTIES LABELS "exec;mpi" TIMEOUT 300 PROCESSORS 2)

# Evaluation and metrics (issue 27, items 3 and 4): --eval-only's loss is the
# first step's on TP + PP + uneven DP and HexiSeq plans and one rank's;
# --val-every leaves training as it is (loss); the last step's checkpoint,
# --resume and --eval-only after it, --metrics' JSON lines, the plot script
# and bad values (options).
foreach(mode loss options)
  add_test(NAME exec.eval_${mode}
    COMMAND bash ${HX_EXEC_TESTS}/run_eval.sh ${mode} ${CMAKE_CURRENT_BINARY_DIR}/exec-eval-${mode}
            ${CMAKE_SOURCE_DIR} ${HX_BIN} $<TARGET_FILE:emit_fixture>)
  set_tests_properties(exec.eval_${mode} PROPERTIES LABELS "exec;mpi" TIMEOUT 300 PROCESSORS 2)
endforeach()
