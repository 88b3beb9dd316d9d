# Front-end tests: golden diagnostics and IR dumps, unit tests for units, JSON strings and
# the bandwidth table, an in-process mutation test, every example through
# `hexic --check`, and the command line. Regenerate the goldens with
#   UPDATE=1 ctest -R frontend.golden
set(HX_FE_DIR ${HX_TESTS_DIR}/frontend)
set(HX_FE_GOLDEN ${HX_FE_DIR}/run_golden.sh)

file(GLOB hx_fe_diag CONFIGURE_DEPENDS ${HX_FE_DIR}/diag/*.hx)
foreach(input ${hx_fe_diag})
  get_filename_component(name ${input} NAME_WE)
  add_test(NAME frontend.golden.diag.${name}
    COMMAND bash ${HX_FE_GOLDEN} ${HX_BIN} diag tests/frontend/diag/${name}.hx)
endforeach()

file(GLOB hx_fe_ir CONFIGURE_DEPENDS ${HX_FE_DIR}/ir/*.hx)
foreach(input ${hx_fe_ir})
  get_filename_component(name ${input} NAME_WE)
  add_test(NAME frontend.golden.ir.${name}
    COMMAND bash ${HX_FE_GOLDEN} ${HX_BIN} ir tests/frontend/ir/${name}.hx)
  if(EXISTS ${HX_FE_DIR}/ir/${name}.ast)
    add_test(NAME frontend.golden.ast.${name}
      COMMAND bash ${HX_FE_GOLDEN} ${HX_BIN} ast tests/frontend/ir/${name}.hx)
  endif()
endforeach()

foreach(t test_units test_mutate test_json)
  add_executable(fe_${t} ${HX_FE_DIR}/${t}.c)
  target_link_libraries(fe_${t} PRIVATE hexic_core)
  add_test(NAME frontend.${t} COMMAND fe_${t})
endforeach()

# Every example passes --check: each model with the case-study cluster, each
# cluster with the tiny model.
file(GLOB hx_fe_models CONFIGURE_DEPENDS ${HX_TESTS_DIR}/../examples/models/*.hx)
file(GLOB hx_fe_clusters CONFIGURE_DEPENDS ${HX_TESTS_DIR}/../examples/clusters/*.hx)
foreach(m ${hx_fe_models})
  get_filename_component(name ${m} NAME_WE)
  add_test(NAME frontend.example.model.${name}
    COMMAND ${HX_BIN} --check ${m} ${HX_TESTS_DIR}/../examples/clusters/case-study.hx)
endforeach()
foreach(c ${hx_fe_clusters})
  get_filename_component(name ${c} NAME_WE)
  add_test(NAME frontend.example.cluster.${name}
    COMMAND ${HX_BIN} --check ${HX_TESTS_DIR}/../examples/models/tiny.hx ${c})
  # --check is silent on a good input: no warnings in the examples either.
  set_tests_properties(frontend.example.cluster.${name} PROPERTIES FAIL_REGULAR_EXPRESSION "warning|error")
endforeach()

add_test(NAME frontend.cli COMMAND bash ${HX_FE_DIR}/test_cli.sh ${HX_BIN})
# Large inputs: far-apart duplicates and the cap on repeated warnings.
add_test(NAME frontend.scale COMMAND bash ${HX_FE_DIR}/test_scale.sh ${HX_BIN})

# Options before or after the arguments in every tool, `--`, bad options named.
add_test(NAME frontend.option_order
  COMMAND bash ${HX_FE_DIR}/option_order.sh ${HX_BIN} $<TARGET_FILE:hexic-ckpt>
          $<TARGET_FILE:hexic-shard> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/fe-option-order)
set_tests_properties(frontend.option_order PROPERTIES LABELS frontend TIMEOUT 60)
