# The tree's house rules: includes only go down or sideways, every folder is in
# the README's layout table, no folder over 16 files (issue 11).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
add_test(NAME layout.floors
  COMMAND ${Python3_EXECUTABLE} ${HX_TESTS_DIR}/layout/check_layout.py ${CMAKE_SOURCE_DIR})
