# scripts/: setup.sh's screen output (one line per step, tools' output in a
# log, its tail on failure) with stand-in apt-get, dpkg-query, sudo and pip.
add_test(NAME scripts.setup_quiet
  COMMAND bash ${HX_TESTS_DIR}/scripts/setup_quiet.sh ${CMAKE_SOURCE_DIR}
          ${CMAKE_CURRENT_BINARY_DIR}/scripts-setup)
set_tests_properties(scripts.setup_quiet PROPERTIES LABELS scripts TIMEOUT 60)
