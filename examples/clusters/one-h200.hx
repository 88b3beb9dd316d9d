# One NVIDIA H200 (Hopper, sm_90: 141 GB of HBM3e at 4.8 TB/s, 989 TFLOP/s
# dense bf16): the one-GPU example of --target=cuda.
#   hexic examples/models/tiny.hx examples/clusters/one-h200.hx --target=cuda -o out
#   make -C out && out/launch.sh --steps 20
# cuda_arch is written out although hexic knows "H200" by name: a GPU type
# whose name it does not know needs it (the compute capability x 10).
gpu "H200" { tflops = 989; memory = 141 GB; mem_bandwidth = 4.8 TB/s; cuda_arch = 90 }
node "gpu0" { gpu = "H200"; gpus = 1 }
