"""The tuned-defaults tables shipped with kgc: `sm_<N>.json`, one per target,
each built by `python -m kgc.bench.tune_defaults build` on a GPU of that
target and read by `kgc.tuned_defaults` (see its docstring for the format).
A target without a file here compiles with kgc's heuristics alone."""
