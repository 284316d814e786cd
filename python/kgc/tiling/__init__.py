"""How kgc turns a kernel's graph ops into a tile program.

`index_maps` relates the iteration space of a kernel to the index of every
value in it; `plan` decides the iteration space, the tile sizes and the
launch grid of a kernel (and whether a group of ops can be one kernel at
all); `emit` writes the tile program. `kg-fuse` asks `plan` which groups are
kernels; `kg-tile` asks `plan` and `emit` for the tile program.
"""
