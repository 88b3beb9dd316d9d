# Added to mixed4.hx by tests/exec/run_emulate.sh: the machine --emulate runs
# on, named by an emulation block and used by no node, twice as fast as
# "cpu-fast", so every rank runs slower than the machine (slowdowns 2 and 6).
gpu "host" { tflops = 0.06; memory = 8 GiB; efficiency = 1 }
emulation { host = "host" }
