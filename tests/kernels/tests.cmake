# CPU kernels of the Llama decoder: gradient checks, layer composition, TP
# shards, init, optimizer, block attention by global positions (ring
# attention), RoPE by positions, the layer with positions and an attention
# hook (a 2-device ring in threads). Plain C programs linking hexic_kernels.
foreach(kt gradcheck forward layer init optim attention_block layer_seq)
  add_executable(test_kernels_${kt} ${HX_TESTS_DIR}/kernels/test_${kt}.c)
  target_link_libraries(test_kernels_${kt} PRIVATE hexic_kernels)
  add_test(NAME kernels_${kt} COMMAND test_kernels_${kt})
  # One BLAS thread: the tests are small, and the machine's 2 cores are shared.
  set_tests_properties(kernels_${kt} PROPERTIES
    ENVIRONMENT "OPENBLAS_NUM_THREADS=1" TIMEOUT 60 LABELS kernels)
endforeach()
