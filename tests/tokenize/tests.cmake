# hexic-tokenize (issue 27, item 2): documents and a Hugging Face tokenizer in,
# llm.c shards out. tool: folders, JSONL and Parquet against `tokenizers`' own
# encode with EOS after each document, the seeded split, uint32 version-7
# shards past 65536 tokens, refusals; train: hexic trains on both widths.
# Skipped (exit 77) without Python's optional `tokenizers` (scripts/setup.sh).
set(HX_TOKENIZE_TESTS ${HX_TESTS_DIR}/tokenize)

add_test(NAME tokenize.tool
  COMMAND python3 ${HX_TOKENIZE_TESTS}/tokenize_check.py tool
          ${CMAKE_SOURCE_DIR}/rtlib/tools/hexic-tokenize.py ${CMAKE_CURRENT_BINARY_DIR}/tokenize-tool)
set_tests_properties(tokenize.tool PROPERTIES SKIP_RETURN_CODE 77 LABELS tokenize TIMEOUT 120)

add_test(NAME tokenize.train
  COMMAND bash ${HX_TOKENIZE_TESTS}/run_train.sh ${CMAKE_CURRENT_BINARY_DIR}/tokenize-train
          ${CMAKE_SOURCE_DIR} ${HX_BIN})
# builds the runtime and runs MPI jobs on both cores
set_tests_properties(tokenize.train PROPERTIES SKIP_RETURN_CODE 77 LABELS "tokenize;mpi"
  TIMEOUT 300 PROCESSORS 2)
