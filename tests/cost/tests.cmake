# Cost model, simulator, baseline and outputs (issue 3). test_cost fills the IR
# by hand; the command-line tests run hexic on the examples.
add_executable(test_cost ${HX_TESTS_DIR}/cost/test_cost.c)
target_link_libraries(test_cost PRIVATE hexic_core)
add_test(NAME cost_unit COMMAND test_cost)
set_tests_properties(cost_unit PROPERTIES TIMEOUT 60 LABELS cost)

add_test(NAME cost_cli COMMAND sh ${HX_TESTS_DIR}/cost/cli.sh ${HX_BIN}
  ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/cost_cli)
set_tests_properties(cost_cli PROPERTIES TIMEOUT 120 LABELS cost)

# Issue 18: the tensor-parallel cost model (default curve, monotone), measured
# profiles (interpolation, stages priced by them) and the TP model calibrated
# from a profile table (within 5% at TP 1, 2 and 4).
add_executable(test_tp ${HX_TESTS_DIR}/cost/test_tp.c)
target_link_libraries(test_tp PRIVATE hexic_core)
add_test(NAME cost_tp COMMAND test_tp)
set_tests_properties(cost_tp PROPERTIES TIMEOUT 60 LABELS cost)

# Issue 25: a gpu type's measured rates: backward_efficiency prices the
# layers' and the LM head's backward (unset or equal to efficiency, a backward
# is 2 forwards); copy_bandwidth ZeRO-1's weight pack and unpack.
add_executable(test_rates ${HX_TESTS_DIR}/cost/test_rates.c)
target_link_libraries(test_rates PRIVATE hexic_core)
add_test(NAME cost_rates COMMAND test_rates)
set_tests_properties(cost_rates PROPERTIES TIMEOUT 60 LABELS cost)

# Issue 25: the planner's fit check is plan.json's memory_by_kind (plus the
# reserve) on the exec-suite plans for both targets, and a plan the old,
# cruder check accepted on 64 GiB A800s is refused with its shortfall.
add_test(NAME cost_fit_check COMMAND sh ${HX_TESTS_DIR}/cost/fit_check.sh ${HX_BIN}
  ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/cost_fit_check)
set_tests_properties(cost_fit_check PROPERTIES TIMEOUT 120 LABELS cost)

# Issue 25: the fit check and a searched stage's memory are memory_by_kind
# plus the reserve (one function); the simulator charges sequence
# parallelism's norm-gain gradient sum over TP.
add_executable(test_fit ${HX_TESTS_DIR}/cost/test_fit.c)
target_link_libraries(test_fit PRIVATE hexic_core)
add_test(NAME cost_fit COMMAND test_fit)
set_tests_properties(cost_fit PROPERTIES TIMEOUT 60 LABELS cost)
