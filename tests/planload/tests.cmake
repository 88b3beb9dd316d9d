# plan.json round trips through --plan=FILE and `hexic simulate` (issue 7
# item 1): HexiSeq plans (context x head parallel stages, ragged all-to-all
# groups) re-simulate to the same figures, hand-edited ones that break the
# CP/HP tables get located errors, plans without sequence splits are
# unchanged.
add_test(NAME planload_roundtrip COMMAND sh ${HX_TESTS_DIR}/planload/roundtrip.sh ${HX_BIN}
  ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/planload_roundtrip)
set_tests_properties(planload_roundtrip PROPERTIES TIMEOUT 120 LABELS planload)

add_executable(test_planload ${HX_TESTS_DIR}/planload/test_planload.c)
target_link_libraries(test_planload PRIVATE hexic_core)
add_test(NAME planload_random COMMAND test_planload ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(planload_random PROPERTIES TIMEOUT 60 LABELS planload)

# Hand edits of a plain plan through both `hexic simulate` and --plan
# (issue 10, item 10): stale or missing gradient groups and a stage's
# recompute against the train block give the same located error, exit 1.
add_test(NAME planload_edits COMMAND sh ${HX_TESTS_DIR}/planload/edits.sh ${HX_BIN}
  ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/planload_edits)
set_tests_properties(planload_edits PROPERTIES TIMEOUT 120 LABELS planload)
