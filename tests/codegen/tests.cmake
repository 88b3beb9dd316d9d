# The generated per-rank programs (codegen/programs.c, rtlib/rt_exec*.c):
# generated from hand-built plans (emit_fixture) and from hexic itself, built
# with the generated Makefile (-Wall -Wextra -Werror), checked by clang-format
# and libclang, and run under mpirun: training, kill -9 + resume, equivalence
# of DP/PP plans with one rank, refusals, and a failing rank being named.
set(HX_CG_TESTS ${HX_TESTS_DIR}/codegen)

add_executable(emit_fixture ${HX_CG_TESTS}/emit_fixture.c)
target_link_libraries(emit_fixture PRIVATE hexic_core)

find_path(LIBCLANG_INCLUDE_DIR clang-c/Index.h PATHS /usr/lib/llvm-14/include)
find_library(LIBCLANG_LIBRARY NAMES clang libclang PATHS /usr/lib/llvm-14/lib)
find_program(CLANG_FORMAT_EXECUTABLE clang-format)
if(NOT LIBCLANG_INCLUDE_DIR OR NOT LIBCLANG_LIBRARY OR NOT CLANG_FORMAT_EXECUTABLE)
  message(FATAL_ERROR "tests/codegen needs libclang-dev and clang-format (scripts/setup.sh)")
endif()
add_executable(parse_check ${HX_CG_TESTS}/parse_check.c)
target_include_directories(parse_check PRIVATE ${LIBCLANG_INCLUDE_DIR})
target_link_libraries(parse_check PRIVATE ${LIBCLANG_LIBRARY})

foreach(mode static train resume equiv refuse fault hexic)
  add_test(NAME codegen.${mode}
    COMMAND bash ${HX_CG_TESTS}/check_programs.sh ${mode} ${CMAKE_CURRENT_BINARY_DIR}/codegen-${mode}
            $<TARGET_FILE:emit_fixture> $<TARGET_FILE:hexic-shard> $<TARGET_FILE:parse_check>
            ${CMAKE_SOURCE_DIR} ${HX_BIN})
  # Each builds and runs MPI jobs on both cores.
  set_tests_properties(codegen.${mode} PROPERTIES LABELS "codegen;mpi" TIMEOUT 300 PROCESSORS 2)
endforeach()

# Hostile names (quotes, $(...), backticks, */, %s%n, #, \, ??/, spaces)
# through hexic -o: every file generated, compiled, parsed, and no command run.
add_test(NAME codegen.hostile_names
  COMMAND bash ${HX_CG_TESTS}/hostile_names.sh ${HX_BIN} $<TARGET_FILE:parse_check>
          ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/codegen-hostile)
set_tests_properties(codegen.hostile_names PROPERTIES LABELS "codegen" TIMEOUT 120)

# launch.sh --hostfile/--dry-run and slurm.sbatch across machines (issue 13):
# placement, the rank -> host -> GPU table, hostile host and node names;
# hostfiles that are FIFOs, devices, too big or too long, host names too
# long; options refused before mpirun or srun; every argument reaching every
# rank as given (stand-in mpirun, and srun reading the multi-prog file as
# documented: stub_srun.py).
add_test(NAME codegen.launch_hosts
  COMMAND bash ${HX_CG_TESTS}/launch_hosts.sh ${CMAKE_CURRENT_BINARY_DIR}/codegen-launch
          ${CMAKE_SOURCE_DIR} ${HX_BIN})
set_tests_properties(codegen.launch_hosts PROPERTIES LABELS "codegen" TIMEOUT 60)

# launch.sh's and slurm.sbatch's list of rank options against the ranks' own
# (hx_rt_main's usage, from rt_backend_cpu): they refuse any other option.
add_test(NAME codegen.rank_options
  COMMAND bash ${HX_CG_TESTS}/rank_options.sh ${HX_BIN} $<TARGET_FILE:rt_backend_cpu>
          ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/codegen-rank-options)
set_tests_properties(codegen.rank_options PROPERTIES LABELS "codegen" TIMEOUT 60)

# The escaping functions one by one (GNU make reads the Makefile escape back).
add_executable(cg_test_escape ${HX_CG_TESTS}/test_escape.c)
target_link_libraries(cg_test_escape PRIVATE hexic_core)
add_test(NAME codegen.escape COMMAND cg_test_escape)
set_tests_properties(codegen.escape PROPERTIES LABELS "codegen")

# --target=cuda without a GPU (issue 12): a program set of two architectures
# (TP 2 + PP 2 + uneven batches) and the one-H200 example built with nvcc and
# mpicc, warnings as errors, each kernel library once per architecture;
# launch.sh's GPU warnings; GPU names and refusals. Needs nvcc, not a GPU.
if(HEXIC_CUDA)
  add_test(NAME codegen.cuda_programs
    COMMAND bash ${HX_CG_TESTS}/cuda_programs.sh ${CMAKE_CURRENT_BINARY_DIR}/codegen-cuda
            ${CMAKE_SOURCE_DIR} ${HX_BIN} $<TARGET_FILE:parse_check>)
  set_tests_properties(codegen.cuda_programs PROPERTIES
    LABELS "codegen;cuda;mpi" TIMEOUT 600 PROCESSORS 2)
endif()

# plan.svg rendered by librsvg (rsvg-convert), parsed, every device's lane
# named, a hostile node name escaped, two runs byte for byte (exit 77 without
# rsvg-convert).
add_test(NAME codegen.plan_svg
  COMMAND bash ${HX_CG_TESTS}/plan_svg.sh ${HX_BIN} ${CMAKE_SOURCE_DIR}
          ${CMAKE_CURRENT_BINARY_DIR}/codegen-plan-svg)
set_tests_properties(codegen.plan_svg PROPERTIES LABELS "codegen" TIMEOUT 180 PROCESSORS 2
                     SKIP_RETURN_CODE 77)

# Floats in generated files: the shortest decimal that reads back, and what
# the user wrote comes out as written (lr = 2e-5 and latency = 20 us as 2e-05).
add_test(NAME codegen.float_text
  COMMAND bash ${HX_CG_TESTS}/float_text.sh ${HX_BIN} ${CMAKE_SOURCE_DIR}
          ${CMAKE_CURRENT_BINARY_DIR}/codegen-float-text)
set_tests_properties(codegen.float_text PROPERTIES LABELS "codegen" TIMEOUT 60)

# report.md: what the memory column holds (tensors + reserve of device, equal to
# plan.json's peaks), and no table or note that says nothing.
add_test(NAME codegen.report_md
  COMMAND bash ${HX_CG_TESTS}/report_md.sh ${HX_BIN} ${CMAKE_SOURCE_DIR}
          ${CMAKE_CURRENT_BINARY_DIR}/codegen-report-md)
set_tests_properties(codegen.report_md PROPERTIES LABELS "codegen" TIMEOUT 120)
