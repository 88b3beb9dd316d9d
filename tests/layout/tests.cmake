# The tree's house rules: includes only go down or sideways, every folder is in
# the README's layout table, no folder over 16 files (issue 11).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME layout.floors
  COMMAND ${Python3_EXECUTABLE} ${HX_TESTS_DIR}/layout/check_layout.py ${CMAKE_SOURCE_DIR})

# Docs that cannot drift: every option of every tool's --help is named in
# README.md or docs/, and every option the docs name in backquotes exists.
add_test(NAME layout.docs
  COMMAND ${Python3_EXECUTABLE} ${HX_TESTS_DIR}/layout/check_docs.py ${CMAKE_SOURCE_DIR}
          $<TARGET_FILE_DIR:hexic> ${CMAKE_CURRENT_BINARY_DIR}/layout-docs)
set_tests_properties(layout.docs PROPERTIES LABELS layout TIMEOUT 300)

# The README's commands run, its shown outputs and picture are what they print
# and write (check_readme.py: hexic compiles, make builds the tiny CPU set,
# launch.sh trains it 20 steps and evaluates the checkpoint).
add_test(NAME layout.readme
  COMMAND ${Python3_EXECUTABLE} ${HX_TESTS_DIR}/layout/check_readme.py ${CMAKE_SOURCE_DIR}
          $<TARGET_FILE_DIR:hexic> ${CMAKE_CURRENT_BINARY_DIR}/layout-readme)
set_tests_properties(layout.readme PROPERTIES LABELS layout TIMEOUT 900
  ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
