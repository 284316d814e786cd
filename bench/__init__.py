"""`kgc bench`: kgc against PyTorch on a catalogue of workloads, on one GPU.

    result = kgc.bench.run_bench(kgc.bench.select(["softmax"], quick=False))
    print(result.table()); result.write_json("bench.json"); result.write_chart("bench.png")

The package owns the benchmark and nothing else, one module per piece:
`workloads` (the catalogue: each workload as a kgc graph and as torch code,
its inputs, bytes, flops and target), `floor` (the device's memory
bandwidth and matmul peaks, each the best of a few probes measured in the
run), `timing` (GPU time per call from CUDA-graph replays), `runners` (kgc
after superoptimize, eager, torch.compile, max-autotune), `check` (kgc's
result against eager before timing), `report` (header, table, JSON, PNG
chart), `run` (the loop) and `provenance` (what produced a result: the
commit, GPU, versions, date and command, recorded in every result file that
`kgc bench` and the scripts in benchmarks/ write).

The model suite (`kgc bench --models`) is its other half: `models` (the
catalogue of transformers architectures from small configs, and the rows
each runs), `model_run` (each row checked against eager and a wider
reference, and timed, through `torch.compile(backend="kgc")`; or, with
`device="cpu"`, checked with kgc's kernels on the CPU executor; its table,
JSON and chart), `model_train` (the training and LoRA rows: one training
step, its gradients checked, its time and peak memory) and `lora` (the
low-rank adapters of the LoRA row).
"""

from kgc.bench.report import BenchResult, Row
from kgc.bench.run import run_bench
from kgc.bench.workloads import CATALOGUE, Target, Workload, select

__all__ = ["BenchResult", "CATALOGUE", "Row", "Target", "Workload", "run_bench", "select"]
