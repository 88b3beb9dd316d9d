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
