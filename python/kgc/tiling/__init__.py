"""How kgc turns a kernel's graph ops into a tile program.

`index_maps` relates the iteration space of a kernel to the index of every
value in it; `iteration` holds what a plan is and how values are read in
it; `config` the knobs of each kind of kernel (`KernelConfig`); a
`schedule` decides the iteration space, the tile sizes and the launch
grid of a kernel (and whether a group of ops can be one kernel at all):
`plan` holds the matmul, reduction and pointwise ones, `attention` and
`split_k` their own, and `registry` lists them all in one place and plans
a group with them (`plan_group`); a `planner.Planner` plans each group
once for the passes of a pipeline run. `generate` writes the tile program
through a builder (`mlir_builder` writes kg tile ops). `kernel_ops` reads
kg.kernel ops and `constants` holds what the generator and the lowering
passes agree on; neither imports the generator. Imports go one way:
registry -> plan, attention -> schedule -> generate -> iteration ->
config, index_maps, graph_model. `kg-fuse` asks the run's planner which groups
are kernels; `kg-tile` asks it for the plan, and the plan's schedule for the
tile program.
"""
