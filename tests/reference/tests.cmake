# The independent double-precision reference (ref_llama.c, written from
# docs/model-spec.md only: libc and libm, nothing from the project), its own
# self-checks, and the llm.c-style test of the generated program against it.
set(HX_REF_DIR ${HX_TESTS_DIR}/reference)
set(HX_REF_TEXT /usr/share/common-licenses/GPL-3)

add_executable(ref_llama ${HX_REF_DIR}/ref_llama.c)
target_link_libraries(ref_llama PRIVATE m)
# Fast even in the sanitizer build: 10 steps of the tiny model in about a second.
target_compile_options(ref_llama PRIVATE -O2)

# Finite-difference check of the whole model's gradient in double: 6 random
# coordinates of every tensor, relative error < 1e-6. Init std x10 so that
# every gradient is large enough for a 1e-6 relative comparison to be
# meaningful (at std 0.02 some attention gradients are ~1e-7 and the finite
# difference's rounding ~1e-13). Three shapes: grouped-query heads, tied
# embeddings with multi-head attention, one layer with a single kv head.
add_test(NAME reference_gradcheck_gqa
  COMMAND ref_llama --grad-check 6 --init-scale 10 --layers 2 --hidden 16 --ffn 24
          --heads 4 --kv-heads 2 --vocab 16 --seq-len 8 --global-batch 2 --seed 3)
add_test(NAME reference_gradcheck_tied
  COMMAND ref_llama --grad-check 6 --init-scale 10 --layers 2 --hidden 24 --ffn 40
          --heads 3 --kv-heads 3 --vocab 20 --seq-len 7 --global-batch 3 --seed 11
          --tie-embeddings 1 --rope-theta 500 --norm-eps 1e-6)
add_test(NAME reference_gradcheck_mqa
  COMMAND ref_llama --grad-check 6 --init-scale 10 --layers 1 --hidden 32 --ffn 48
          --heads 4 --kv-heads 1 --vocab 24 --seq-len 9 --global-batch 2 --seed 5)
set_tests_properties(reference_gradcheck_gqa reference_gradcheck_tied reference_gradcheck_mqa
  PROPERTIES PASS_REGULAR_EXPRESSION "gradcheck PASS" FAIL_REGULAR_EXPRESSION "gradcheck FAIL")

find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  # Fresh model: step-0 loss ~ ln(256); loss falls over 10 steps on real text.
  add_test(NAME reference_training
    COMMAND ${Python3_EXECUTABLE} ${HX_REF_DIR}/selfcheck.py training $<TARGET_FILE:ref_llama>
            ${HX_REF_TEXT} ${CMAKE_CURRENT_BINARY_DIR}/reference-training)
  # llm.c uint16 and uint32 shards and raw uint16 read the same; synthetic data.
  add_test(NAME reference_data_formats
    COMMAND ${Python3_EXECUTABLE} ${HX_REF_DIR}/selfcheck.py formats $<TARGET_FILE:ref_llama>
            ${HX_REF_TEXT} ${CMAKE_CURRENT_BINARY_DIR}/reference-formats)
  # The generated program (tiny.hx on cpu1.hx, 10 steps) against the reference.
  add_test(NAME reference_vs_generated
    COMMAND ${Python3_EXECUTABLE} ${HX_REF_DIR}/compare.py --hexic ${HX_BIN}
            --ref $<TARGET_FILE:ref_llama> --source ${CMAKE_SOURCE_DIR} --text ${HX_REF_TEXT}
            --workdir ${CMAKE_CURRENT_BINARY_DIR}/reference-vs-generated)
  set_tests_properties(reference_vs_generated PROPERTIES TIMEOUT 900)
else()
  message(WARNING "python3 not found: the reference's data and comparison tests are skipped")
endif()
