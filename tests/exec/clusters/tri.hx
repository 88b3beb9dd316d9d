# Three fast CPU "devices" on one shared-memory node: with the exhaustive or
# symmetric planner the tiny6 model runs as one stage of TP 3.
gpu "cpu" { tflops = 0.02; memory = 4 GiB; efficiency = 1 }
node "host" { gpu = "cpu"; gpus = 3; bandwidth = 100 GB/s; latency = 1 us }
