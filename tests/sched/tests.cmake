# The HexiScale scheduler (issue 4): unit tests of its phases, and
# command-line checks on seeded random clusters (determinism, never slower
# than the symmetric baseline, within 2% of the exhaustive planner, TP
# degrees in --plan files).
add_executable(test_sched ${HX_TESTS_DIR}/sched/test_sched.c)
target_link_libraries(test_sched PRIVATE hexic_core)
add_test(NAME sched_unit COMMAND test_sched)
set_tests_properties(sched_unit PROPERTIES TIMEOUT 120 LABELS sched)

# ZeRO-1 (issue 16): shards that follow free memory, each rank's memory
# against a closed form, the simulator's all-gathers and shard-only
# optimizer step, optimizer_sharding = none unchanged.
add_executable(test_zero1 ${HX_TESTS_DIR}/sched/test_zero1.c)
target_link_libraries(test_zero1 PRIVATE hexic_core)
add_test(NAME sched_zero1 COMMAND test_zero1)
set_tests_properties(sched_zero1 PROPERTIES TIMEOUT 60 LABELS sched)
add_test(NAME sched_zero1_off COMMAND sh ${HX_TESTS_DIR}/sched/zero1_off.sh ${HX_BIN}
  ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/sched_zero1_off)
set_tests_properties(sched_zero1_off PROPERTIES TIMEOUT 120 LABELS sched)

find_program(HX_PYTHON3 python3)
if(HX_PYTHON3)
  foreach(check determinism baseline exhaustive oracle plan_tp hexiseq limits tau mixed profile)
    add_test(NAME sched_${check}
      COMMAND ${HX_PYTHON3} ${HX_TESTS_DIR}/sched/check_plans.py ${check} ${HX_BIN}
              ${HX_TESTS_DIR}/..)
    set_tests_properties(sched_${check} PROPERTIES TIMEOUT 300 LABELS sched)
  endforeach()
endif()

# Issue 10: seeded random clusters of 1-4096 devices (flat, deep, one giant
# node, many tiny ones) planned without a crash: exit 0 or 3 only, no
# internal error or sanitizer report. 20 cases, 3 of 4096 devices: about 40 s
# under the sanitizers on 2 cores.
if(HX_PYTHON3)
  add_test(NAME sched_random_clusters
    COMMAND ${HX_PYTHON3} ${HX_TESTS_DIR}/sched/random_clusters.py ${HX_BIN} 20 10)
  set_tests_properties(sched_random_clusters PROPERTIES TIMEOUT 300 LABELS sched
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endif()

# Issue 18 item 3: two 4-GPU nodes in one pipeline, the network faster but
# of higher latency than the nodes' own links: every TP group inside a
# node, and no slower than any cross-node grouping of the same shape.
add_executable(test_placement ${HX_TESTS_DIR}/sched/test_placement.c)
target_link_libraries(test_placement PRIVATE hexic_core)
add_test(NAME sched_placement COMMAND test_placement)
set_tests_properties(sched_placement PROPERTIES TIMEOUT 60 LABELS sched)

# Issue 24 item 9: the plan depends on the inputs only. hexic_slow_clock is
# hexic with a clock that runs 1000 s per reading (tests/sched/slow_clock.c
# replaces passes/schedule/sched_clock.c): without --search-budget it writes
# the same bytes as hexic (a default clock limit cut its searches short and
# changed the plan); with --search-budget it warns. Then bounded output: a
# trace over its event limit is cut and says so; a program set over its
# row limit is refused with the limit and what to change.
add_executable(hexic_slow_clock ${HX_DRIVER_SOURCES} ${HX_TESTS_DIR}/sched/slow_clock.c)
target_link_libraries(hexic_slow_clock PRIVATE hexic_core)
add_test(NAME sched_clock COMMAND sh ${HX_TESTS_DIR}/sched/clock.sh ${HX_BIN}
  $<TARGET_FILE:hexic_slow_clock> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/sched_clock)
set_tests_properties(sched_clock PROPERTIES TIMEOUT 300 LABELS sched
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")

# Issue 25 items 5 (f) and 6: the planner's smaller misses, each judged by
# `hexic simulate` of the plans involved (tests/sched/misses.sh says which).
add_test(NAME sched_misses COMMAND sh ${HX_TESTS_DIR}/sched/misses.sh ${HX_BIN}
  ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/sched_misses)
set_tests_properties(sched_misses PROPERTIES TIMEOUT 240 LABELS sched)

# Issue 25 item 5: the searches' pricing (every long 1F1B pipeline's steady
# state extrapolated, cycles of several steps included) gives the
# step-by-step simulation's figures within 1e-9 on random plans (stages,
# uneven costs, hops, several pipelines, ZeRO-1, recompute).
add_executable(test_steady ${HX_TESTS_DIR}/sched/test_steady.c)
target_link_libraries(test_steady PRIVATE hexic_core)
add_test(NAME sched_steady COMMAND test_steady)
set_tests_properties(sched_steady PROPERTIES TIMEOUT 60 LABELS sched)
