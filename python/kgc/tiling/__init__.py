"""How kgc turns a kernel's graph ops into a tile program.

`index_maps` relates the iteration space of a kernel to the index of every
value in it; `iteration` holds what a plan is and how values are read in
it; `config` the knobs of each kind of kernel (`KernelConfig`); `plan` the
schedules, which decide the iteration space, the tile sizes and the launch
grid of a kernel (and whether a group of ops can be one kernel at all);
`generate` writes the tile program through a builder (`mlir_builder`
writes kg tile ops). Imports go one way: plan -> generate -> iteration ->
config, index_maps, graph_model. `kg-fuse` asks `plan` which groups are
kernels; `kg-tile` asks `plan` for the plan and its schedule for the tile
program.
"""
