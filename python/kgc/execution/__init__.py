"""Running kernel graphs in tiled form on the CPU, with torch.

This package owns the numeric check of kgc's lowering that needs no GPU.
A module whose kernels are tile programs (the IR after `kg-pad-mask`: the
`kg` stage of `kgc.pipeline.compiler.compile_module(..., emit="kg")`) runs
on CPU torch tensors:

    y = kgc.execution.run_tiled(module, "f", x, w)

Each tiled kg.kernel runs program by program over its `grid` (all three
axes), its body interpreted op by op on whole tiles: loads and stores with
their masks and padding, masks, selects, dots, reductions, loops and
branches (scf.for, scf.while, scf.if), the kernel's scalar arguments, the
offset arithmetic and every elementwise op (the latter as
`kgc.reference` computes them). What a GPU would get silently wrong is an
error naming the op, the kernel and the program (`TileProgramError`): an
unmasked lane (or a masked-in one) outside its buffer, an output element
that no program writes or that two programs write (a race), an i32 offset
that overflows.
"""

from kgc.execution.errors import TileProgramError
from kgc.execution.program import TileProgram
from kgc.execution.run import run_kernel, run_tiled

__all__ = ["TileProgram", "TileProgramError", "run_kernel", "run_tiled"]
