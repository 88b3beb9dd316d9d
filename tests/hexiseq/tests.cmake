# HexiSeq planning and simulation (issue 7): the CP/HP cost model, the
# baselines and the scheduler, called from C (test_hexiseq), and the bench
# driver in quick mode (bench/hexiseq_bench.sh runs it on the paper-like settings).
add_executable(test_hexiseq ${HX_TESTS_DIR}/hexiseq/test_hexiseq.c)
target_link_libraries(test_hexiseq PRIVATE hexic_core)
add_test(NAME hexiseq_unit COMMAND test_hexiseq)
set_tests_properties(hexiseq_unit PROPERTIES TIMEOUT 120 LABELS hexiseq)

add_test(NAME hexiseq_bench_small COMMAND sh ${HX_TESTS_DIR}/hexiseq/bench_small.sh
  $<TARGET_FILE:hexiseq_bench> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/hexiseq_bench_work)
set_tests_properties(hexiseq_bench_small PROPERTIES TIMEOUT 120 LABELS hexiseq)

add_test(NAME hexiseq_auto_fallback COMMAND sh ${HX_TESTS_DIR}/hexiseq/auto_fallback.sh
  $<TARGET_FILE:hexic> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/hexiseq_auto_fallback)
set_tests_properties(hexiseq_auto_fallback PROPERTIES TIMEOUT 60 LABELS hexiseq)
