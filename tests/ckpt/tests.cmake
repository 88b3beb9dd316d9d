# Checkpoints across plans and the Hugging Face formats (issue 17): resume
# under other plans of the same model (and refusals), an elastic restart on a
# smaller cluster; hexic-ckpt's export, import and import-hf, and --init-from.
set(HX_CKPT_TESTS ${HX_TESTS_DIR}/ckpt)

foreach(mode reshard elastic replicated hf gqa import_hf owner skipped integrity export_many
             hf_folder)
  add_test(NAME ckpt.${mode}
    COMMAND bash ${HX_CKPT_TESTS}/run_ckpt.sh ${mode} ${CMAKE_CURRENT_BINARY_DIR}/ckpt-${mode}
            ${CMAKE_SOURCE_DIR} ${HX_BIN} $<TARGET_FILE:weights_cmp>
            $<TARGET_FILE:emit_fixture>)
  # Each builds and runs MPI jobs on both cores.
  set_tests_properties(ckpt.${mode} PROPERTIES LABELS "ckpt;mpi" TIMEOUT 300 PROCESSORS 2)
endforeach()

# hexic-ckpt and hexic-shard facing hostile files (issue 24): FIFOs and
# /dev/zero refused (timeout: a hang fails), names escaped, import-hf's .hx.
add_test(NAME ckpt.hostile_files
  COMMAND bash ${HX_CKPT_TESTS}/hostile_files.sh $<TARGET_FILE:hexic-ckpt> $<TARGET_FILE:hexic-shard>
          ${HX_BIN} ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/ckpt-hostile-files)
set_tests_properties(ckpt.hostile_files PROPERTIES LABELS ckpt TIMEOUT 120)
