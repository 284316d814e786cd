"""The CPU executor of tiled kernels on hand-written tile programs: it finds
the mask bugs it exists to find, runs every grid axis and dot precision as
a GPU would, and refuses what it cannot run with a clear error."""

from __future__ import annotations

import pytest

from kgc.diagnostics import KgcError
from kgc.execution import TileProgramError, run_tiled

torch = pytest.importorskip("torch")

INT32_MIN = -(2**31)


def exp_kernel(load_mask: str | None, store_mask: str | None, padding: str = "padding 0.0") -> str:
    """exp of 10 elements in tiles of 4 (3 programs; the last tile has 2
    lanes past the end), with the given `lower, upper` mask bounds on the
    load and the store (None: unmasked)."""
    lines = [
        "func.func @f(%x: tensor<10xf32>) -> tensor<10xf32> {",
        "  %y = kg.kernel @exp_0(%x) attributes {grid = array<i64: 3, 1, 1>, "
        "iteration = array<i64: 10>, padded, tile = array<i64: 4>} : "
        "(tensor<10xf32>) -> tensor<10xf32> {",
        "  ^bb0(%a: memref<10xf32>, %out: memref<10xf32>):",
        "    %pid = kg.program_id 0 : i32",
        "    %c4 = arith.constant 4 : i32",
        "    %o = arith.muli %pid, %c4 : i32",
    ]
    load = "    %t = kg.tile_load %a[%o] : memref<10xf32> -> tensor<4xf32>"
    if load_mask is not None:
        lines.append(f"    %lm = kg.tile_mask [%o] lower [{load_mask.split(',')[0]}] "
                     f"upper [{load_mask.split(',')[1].strip()}] : tensor<4xi1>")
        load = f"    %t = kg.tile_load %a[%o] mask %lm {padding} : memref<10xf32> -> tensor<4xf32>"
    lines += [load, "    %e = kg.exp %t : tensor<4xf32>"]
    store = "    kg.tile_store %e, %out[%o] : tensor<4xf32>, memref<10xf32>"
    if store_mask is not None:
        lines.append(f"    %sm = kg.tile_mask [%o] lower [{store_mask.split(',')[0]}] "
                     f"upper [{store_mask.split(',')[1].strip()}] : tensor<4xi1>")
        store = "    kg.tile_store %e, %out[%o] mask %sm : tensor<4xf32>, memref<10xf32>"
    lines += [store, "    kg.yield", "  }", "  return %y : tensor<10xf32>", "}"]
    return "\n".join(lines) + "\n"


def line_of(text: str, fragment: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), start=1) if fragment in line)


@pytest.fixture
def x():
    return torch.randn(10, generator=torch.Generator().manual_seed(0)) + 3.0


def test_exact_masks_give_the_reference(x):
    result = run_tiled(exp_kernel("0, 10", "0, 10"), "f", x)
    torch.testing.assert_close(result, torch.exp(x))


def test_unmasked_load_past_the_end_names_the_lane_op_and_program(x):
    text = exp_kernel(None, "0, 10")
    with pytest.raises(TileProgramError) as error:
        run_tiled(text, "f", x)
    message = str(error.value)
    assert message.startswith(f"<string>:{line_of(text, 'kg.tile_load')}:")
    assert "kernel @exp_0, program (2, 0, 0): kg.tile_load:" in message
    assert "lane (2,) of the tile of [4] at offsets [8] reads index (10,) outside memref<10xf32>" \
        in message
    assert "(2 such lanes); no mask guards it" in message


def test_mask_one_past_the_end_lets_a_lane_read_outside(x):
    with pytest.raises(TileProgramError, match=r"reads index \(10,\) outside memref<10xf32> "
                                               r"\(1 such lane\); its mask lets it through"):
        run_tiled(exp_kernel("0, 11", "0, 10"), "f", x)


def test_mask_below_the_start_lets_a_lane_read_outside(x):
    # Lower bounds matter where offsets are shifted down (a concat's inputs).
    text = exp_kernel("0, 10", "0, 10").replace("%o = arith.muli %pid, %c4 : i32",
                                                "%p = arith.muli %pid, %c4 : i32\n"
                                                "    %o = arith.subi %p, %c4 : i32")
    with pytest.raises(TileProgramError, match=r"program \(0, 0, 0\): kg.tile_load: lane \(0,\) "
                                               r".* reads index \(-4,\)"):
        run_tiled(text.replace("lower [0]", f"lower [{INT32_MIN}]"), "f", x)


def test_unmasked_store_past_the_end(x):
    text = exp_kernel("0, 10", None)
    with pytest.raises(TileProgramError) as error:
        run_tiled(text, "f", x)
    assert str(error.value).startswith(f"<string>:{line_of(text, 'kg.tile_store')}:")
    assert "writes index (10,) outside memref<10xf32> (2 such lanes); no mask guards it" \
        in str(error.value)


def test_load_mask_one_short_drops_a_lane_and_changes_the_result(x):
    result = run_tiled(exp_kernel("0, 9", "0, 10"), "f", x)
    differs = ~torch.isclose(result, torch.exp(x))
    assert differs.nonzero().flatten().tolist() == [9]
    assert result[9].item() == 1.0  # exp of the padding


def test_store_mask_one_short_leaves_an_element_unwritten(x):
    text = exp_kernel("0, 10", "0, 9")
    with pytest.raises(TileProgramError) as error:
        run_tiled(text, "f", x)
    assert str(error.value).startswith(f"<string>:{line_of(text, 'kg.kernel')}:")
    assert "kernel @exp_0 leaves 1 of 10 elements of result #0 (tensor<10xf32>) unwritten, the " \
           "first at index (9,)" in str(error.value)


def test_unspecified_padding_poisons_what_reads_it(x):
    text = exp_kernel("0, 10", "0, 10", padding="").replace(
        "%e = kg.exp %t : tensor<4xf32>",
        "%s = kg.reduce sum %t dims [0] keepdim : tensor<4xf32> -> tensor<1xf32>\n"
        "    %e = kg.add %t, %s : (tensor<4xf32>, tensor<1xf32>) -> tensor<4xf32>")
    result = run_tiled(text, "f", x)
    assert not result[:8].isnan().any() and result[8:].isnan().all()


GRID_KERNEL = """
func.func @f(%x: tensor<3x5x7xf32>) -> tensor<3x5x7xf32> {
  %y = kg.kernel @double_0(%x) attributes {grid = array<i64: GRID>, iteration = array<i64: 3, 5, 7>, padded, tile = array<i64: 1, 2, 4>} : (tensor<3x5x7xf32>) -> tensor<3x5x7xf32> {
  ^bb0(%a: memref<3x5x7xf32>, %out: memref<3x5x7xf32>):
    %x0 = kg.program_id 0 : i32
    %x1 = kg.program_id 1 : i32
    %x2 = kg.program_id 2 : i32
    %c2 = arith.constant 2 : i32
    %c4 = arith.constant 4 : i32
    %o1 = arith.muli %x1, %c2 : i32
    %o2 = arith.muli %x0, %c4 : i32
    %m = kg.tile_mask [%x2, %o1, %o2] lower [0, 0, 0] upper [3, 5, 7] : tensor<1x2x4xi1>
    %t = kg.tile_load %a[%x2, %o1, %o2] mask %m padding 0.0 : memref<3x5x7xf32> -> tensor<1x2x4xf32>
    %two = kg.constant 2.0 : tensor<1x1x1xf32>
    %r = kg.mul %t, %two : (tensor<1x2x4xf32>, tensor<1x1x1xf32>) -> tensor<1x2x4xf32>
    kg.tile_store %r, %out[%x2, %o1, %o2] mask %m : tensor<1x2x4xf32>, memref<3x5x7xf32>
    kg.yield
  }
  return %y : tensor<3x5x7xf32>
}
"""


def test_every_grid_axis_has_its_program_id():
    x = torch.randn(3, 5, 7)
    # Axis 0 of the grid tiles the 7 columns by 4, axis 1 the 5 rows by 2,
    # axis 2 walks the 3 planes.
    result = run_tiled(GRID_KERNEL.replace("GRID", "2, 3, 3"), "f", x)
    torch.testing.assert_close(result, x * 2)


def test_a_grid_that_misses_tiles_leaves_elements_unwritten():
    with pytest.raises(TileProgramError, match=r"leaves 35 of 105 elements .* unwritten, the "
                                               r"first at index \(2, 0, 0\)"):
        run_tiled(GRID_KERNEL.replace("GRID", "2, 3, 2"), "f", torch.randn(3, 5, 7))


DOT_KERNEL = """
func.func @f(%a: tensor<16x16xf32>, %b: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @mm_0(%a, %b) attributes {grid = array<i64: 1, 1, 1>, iteration = array<i64: 16, 16, 16>, padded, tile = array<i64: 16, 16, 16>} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %w: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    %va = memref.reinterpret_cast %x to offset: [0], sizes: [16, 16, 1], strides: [16, 1, 0] : memref<16x16xf32> to memref<16x16x1xf32, strided<[16, 1, 0]>>
    %vb = memref.reinterpret_cast %w to offset: [0], sizes: [1, 16, 16], strides: [0, 16, 1] : memref<16x16xf32> to memref<1x16x16xf32, strided<[0, 16, 1]>>
    %vc = memref.reinterpret_cast %out to offset: [0], sizes: [16, 1, 16], strides: [16, 0, 1] : memref<16x16xf32> to memref<16x1x16xf32, strided<[16, 0, 1]>>
    %ta = kg.tile_load %va[%c0, %c0, %c0] : memref<16x16x1xf32, strided<[16, 1, 0]>> -> tensor<16x16x1xf32>
    %tb = kg.tile_load %vb[%c0, %c0, %c0] : memref<1x16x16xf32, strided<[0, 16, 1]>> -> tensor<1x16x16xf32>
    %acc = kg.constant 1.0 : tensor<16x1x16xf32>
    %d = kg.tile_dot %ta, %tb, %acc precision = PRECISION : (tensor<16x16x1xf32>, tensor<1x16x16xf32>, tensor<16x1x16xf32>) -> tensor<16x1x16xf32>
    kg.tile_store %d, %vc[%c0, %c0, %c0] : tensor<16x1x16xf32>, memref<16x1x16xf32, strided<[16, 0, 1]>>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}
"""


def test_dot_accumulates_through_strided_views():
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    result = run_tiled(DOT_KERNEL.replace("PRECISION", "ieee"), "f", a, b)
    torch.testing.assert_close(result, a @ b + 1.0)


def test_tf32_dot_rounds_its_operands():
    # 1 + 2^-12 needs 12 mantissa bits: f32 keeps it, TF32 (10 bits) does not.
    a, b = torch.full((16, 16), 1.0 + 2.0**-12), torch.ones(16, 16)
    ieee = run_tiled(DOT_KERNEL.replace("PRECISION", "ieee"), "f", a, b)
    tf32 = run_tiled(DOT_KERNEL.replace("PRECISION", "tf32"), "f", a, b)
    assert (ieee == 17.0 + 16 * 2.0**-12).all()
    assert (tf32 == 17.0).all()


def test_offsets_that_overflow_i32_are_an_error(x):
    text = exp_kernel("0, 10", "0, 10").replace("%c4 = arith.constant 4 : i32",
                                                "%c4 = arith.constant 1073741824 : i32")
    with pytest.raises(TileProgramError, match=r"program \(2, 0, 0\): arith.muli: 2 and "
                                               r"1073741824 give 2147483648, which does not fit "
                                               r"in i32"):
        run_tiled(text, "f", x)


def test_an_op_the_executor_cannot_run_is_named():
    text = exp_kernel("0, 10", "0, 10").replace(
        "%e = kg.exp %t : tensor<4xf32>", "%e = kg.softmax %t dim 0 : tensor<4xf32>")
    with pytest.raises(TileProgramError) as error:
        run_tiled(text, "f", torch.randn(10))
    assert str(error.value).startswith(f"<string>:{line_of(text, 'kg.softmax')}:")
    assert "kernel @exp_0: the CPU executor cannot run kg.softmax in a tile program" \
        in str(error.value)


def test_graph_ops_outside_kernels_are_refused():
    text = """
func.func @f(%x: tensor<10xf32>) -> tensor<10xf32> {
  %y = kg.exp %x : tensor<10xf32>
  return %y : tensor<10xf32>
}
"""
    with pytest.raises(TileProgramError, match=r"<string>:3:8: error: @f: kg.exp is outside every "
                                               r"kernel; the CPU executor runs only tiled"):
        run_tiled(text, "f", torch.randn(10))


def test_kernels_in_graph_form_are_refused():
    text = """
func.func @f(%x: tensor<10xf32>) -> tensor<10xf32> {
  %y = kg.kernel @exp_0(%x) : (tensor<10xf32>) -> tensor<10xf32> {
  ^bb0(%a: tensor<10xf32>):
    %e = kg.exp %a : tensor<10xf32>
    kg.yield %e : tensor<10xf32>
  }
  return %y : tensor<10xf32>
}
"""
    with pytest.raises(TileProgramError, match="kernel @exp_0 is not tiled; run kg-tile and "
                                               "kg-pad-mask first"):
        run_tiled(text, "f", torch.randn(10))


@pytest.mark.parametrize("arguments,message", [
    ((), r"@f takes 1 tensors, got 0"),
    ((torch.randn(11),), r"@f: argument #0 must be \(10,\) f32, got \(11,\) torch.float32"),
    ((torch.randn(10).half(),), r"@f: argument #0 must be \(10,\) f32, got \(10,\) torch.float16"),
    (([0.0] * 10,), r"@f: argument #0 must be a torch.Tensor, got list"),
])
def test_arguments_are_checked(arguments, message):
    with pytest.raises(KgcError, match=message):
        run_tiled(exp_kernel("0, 10", "0, 10"), "f", *arguments)


def test_function_names_are_checked():
    with pytest.raises(KgcError, match=r"no function @g \(have: f\)"):
        run_tiled(exp_kernel("0, 10", "0, 10"), "g", torch.randn(10))


SCALAR_KERNEL = """
func.func @f(%x: tensor<9x8xf32>) -> tensor<9x8xf32> {
  %y = kg.kernel @scaled_0(%x) attributes {grid = array<i64: 2, 1, 1>, iteration = array<i64: 9, 8>, padded, tile = array<i64: 2, 8>, scalars = array<i64: TILES>} : (tensor<9x8xf32>) -> tensor<9x8xf32> {
  ^bb0(%in: memref<9x8xf32>, %out: memref<9x8xf32>):
    %c0 = arith.constant 0 : i32
    %c2 = arith.constant 2 : i32
    %pid = kg.program_id 0 : i32
    %tiles = kg.scalar_arg 0 : i32
    scf.for %t = %pid to %tiles step %c2 : i32 {
      %row = arith.muli %t, %c2 : i32
      %m = kg.tile_mask [%row, %c0] lower [0, 0] upper [9, 8] : tensor<2x8xi1>
      %v = kg.tile_load %in[%row, %c0] mask %m padding 0.0 : memref<9x8xf32> -> tensor<2x8xf32>
      %e = kg.exp %v : tensor<2x8xf32>
      kg.tile_store %e, %out[%row, %c0] mask %m : tensor<2x8xf32>, memref<9x8xf32>
    }
    kg.yield
  }
  return %y : tensor<9x8xf32>
}
"""


def test_scalar_arguments_are_the_kernels_scalars():
    # Two persistent programs walk the 5 row tiles that the launch's i32
    # argument counts: 0, 2, 4 and 1, 3.
    x = torch.randn(9, 8)
    torch.testing.assert_close(run_tiled(SCALAR_KERNEL.replace("TILES", "5"), "f", x),
                               torch.exp(x))


def test_a_scalar_argument_too_small_leaves_the_last_tile_unwritten():
    # The value is read, not assumed: 4 tiles stop at row 8.
    with pytest.raises(TileProgramError, match=r"leaves 8 of 72 elements .* unwritten, the first "
                                               r"at index \(8, 0\)"):
        run_tiled(SCALAR_KERNEL.replace("TILES", "4"), "f", torch.randn(9, 8))


def test_the_branch_of_an_scf_if_that_its_condition_picks_runs():
    # Program 0 stores exp, the others neg; the last program stores only
    # through the branch without results.
    text = exp_kernel("0, 10", "0, 10").replace(
        "    %e = kg.exp %t : tensor<4xf32>\n",
        "    %c0 = arith.constant 0 : i32\n"
        "    %first = arith.cmpi eq, %pid, %c0 : i32\n"
        "    %e = scf.if %first -> (tensor<4xf32>) {\n"
        "      %ex = kg.exp %t : tensor<4xf32>\n"
        "      scf.yield %ex : tensor<4xf32>\n"
        "    } else {\n"
        "      %n = kg.neg %t : tensor<4xf32>\n"
        "      scf.yield %n : tensor<4xf32>\n"
        "    }\n")
    x = torch.randn(10)
    expected = torch.cat([torch.exp(x[:4]), -x[4:]])
    torch.testing.assert_close(run_tiled(text, "f", x), expected)
    guarded = text.replace(
        "    kg.tile_store %e, %out[%o] mask %sm : tensor<4xf32>, memref<10xf32>\n",
        "    %c2 = arith.constant 2 : i32\n"
        "    %last = arith.cmpi eq, %pid, %c2 : i32\n"
        "    kg.tile_store %e, %out[%o] mask %sm : tensor<4xf32>, memref<10xf32>\n"
        "    scf.if %last {\n"
        "      %twice = kg.add %e, %e : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
        "      kg.tile_store %twice, %out[%o] mask %sm : tensor<4xf32>, memref<10xf32>\n"
        "    }\n")
    expected[8:] *= 2
    torch.testing.assert_close(run_tiled(guarded, "f", x), expected)


WHILE_KERNEL = """
func.func @f(%x: tensor<9x8xf32>) -> tensor<1x8xf32> {
  %y = kg.kernel @column_sums_0(%x) attributes {grid = array<i64: 1, 1, 1>, iteration = array<i64: 9, 8>, padded, tile = array<i64: 2, 8>} : (tensor<9x8xf32>) -> tensor<1x8xf32> {
  ^bb0(%in: memref<9x8xf32>, %out: memref<1x8xf32>):
    %c0 = arith.constant 0 : i32
    %c2 = arith.constant 2 : i32
    %rows = arith.constant 9 : i32
    %zero = kg.constant 0.0 : tensor<2x8xf32>
    %end, %acc = scf.while (%row = %c0, %sum = %zero) : (i32, tensor<2x8xf32>) -> (i32, tensor<2x8xf32>) {
      %more = arith.cmpi slt, %row, %rows : i32
      scf.condition(%more) %row, %sum : i32, tensor<2x8xf32>
    } do {
    ^bb0(%r: i32, %s: tensor<2x8xf32>):
      %m = kg.tile_mask [%r, %c0] lower [0, 0] upper [9, 8] : tensor<2x8xi1>
      %v = kg.tile_load %in[%r, %c0] mask %m padding 0.0 : memref<9x8xf32> -> tensor<2x8xf32>
      %s2 = kg.add %s, %v : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
      %next = arith.addi %r, %c2 : i32
      scf.yield %next, %s2 : i32, tensor<2x8xf32>
    }
    %total = kg.reduce sum %acc dims [0] keepdim : tensor<2x8xf32> -> tensor<1x8xf32>
    kg.tile_store %total, %out[%c0, %c0] : tensor<1x8xf32>, memref<1x8xf32>
    kg.yield
  }
  return %y : tensor<1x8xf32>
}
"""


def test_an_scf_while_runs_until_its_condition_fails_and_carries_its_values():
    x = torch.randn(9, 8)
    torch.testing.assert_close(run_tiled(WHILE_KERNEL, "f", x), x.sum(0, keepdim=True))
    # A bound of 7 stops before the last row tile (rows 8 and 9).
    stopped = run_tiled(WHILE_KERNEL.replace("arith.constant 9 : i32", "arith.constant 7 : i32"),
                        "f", x)
    torch.testing.assert_close(stopped, x[:8].sum(0, keepdim=True))


FLIPPED = ("memref.reinterpret_cast %VIEWED to offset: [OFFSET], sizes: [10], strides: [-1] : "
           "memref<10xf32> to memref<10xf32, strided<[-1], offset: OFFSET>>")


def flipped_kernel(side: str, offset: int = 9) -> str:
    """exp_kernel with the load (side "load") or the store ("store") through
    a view that walks the buffer backwards."""
    text = exp_kernel("0, 10", "0, 10")
    viewed, old, new = {
        "load": ("%a", "kg.tile_load %a[%o]", "kg.tile_load %fa[%o]"),
        "store": ("%out", ", %out[%o]", ", %fa[%o]"),
    }[side]
    view_type = f"memref<10xf32, strided<[-1], offset: {offset}>>"
    flipped = FLIPPED.replace("%VIEWED", viewed).replace("OFFSET", str(offset))
    text = text.replace("    %pid = kg.program_id 0 : i32\n",
                        f"    %pid = kg.program_id 0 : i32\n    %fa = {flipped}\n")
    text = text.replace(old, new)
    line = next(line for line in text.splitlines() if new in line)
    return text.replace(line, line.replace(": memref<10xf32>", f": {view_type}").replace(
        ", memref<10xf32>", f", {view_type}"))


@pytest.mark.parametrize("side", ["load", "store"])
def test_a_view_with_a_negative_stride_reads_and_writes_backwards(side):
    x = torch.randn(10)
    # Tiles of 4 over 10 elements: the last tile is masked, so both the
    # whole-tile and the partial-tile paths walk the flipped view.
    torch.testing.assert_close(run_tiled(flipped_kernel(side), "f", x), torch.exp(x.flip(0)))


@pytest.mark.parametrize("side,verb", [("load", "tile_load"), ("store", "tile_store")])
def test_a_backwards_view_that_leaves_its_buffer_is_an_error(side, verb):
    # Offset 8: element 9 of the view lies at address -1.
    with pytest.raises(TileProgramError, match=rf"kg.{verb}: memref<10xf32, strided<\[-1\], "
                                               r"offset: 8>> puts lanes at elements \[-1, "):
        run_tiled(flipped_kernel(side, offset=8), "f", torch.randn(10))


def overlapping_stores(grid: int, store_offset: str) -> str:
    """exp_kernel with `grid` programs that load tile `pid mod 3` and store
    it at `store_offset` (an expression of %pid, %m3 = pid mod 3 and %c2,
    %c4)."""
    text = exp_kernel("0, 10", "0, 10").replace("grid = array<i64: 3, 1, 1>",
                                                f"grid = array<i64: {grid}, 1, 1>")
    text = text.replace("    %o = arith.muli %pid, %c4 : i32\n",
                        "    %c2 = arith.constant 2 : i32\n"
                        "    %c3 = arith.constant 3 : i32\n"
                        "    %m3 = arith.remsi %pid, %c3 : i32\n"
                        "    %o = arith.muli %m3, %c4 : i32\n"
                        f"    %s = arith.muli {store_offset} : i32\n")
    return text.replace("kg.tile_store %e, %out[%o]", "kg.tile_store %e, %out[%s]").replace(
        "%sm = kg.tile_mask [%o]", "%sm = kg.tile_mask [%s]")


def test_two_programs_storing_one_element_is_a_race():
    # Tiles loaded every 4 elements, stored every 2: program 1 stores
    # exp(x[4]) and exp(x[5]) where program 0 stored exp(x[2]), exp(x[3]).
    text = overlapping_stores(3, "%pid, %c2")
    with pytest.raises(TileProgramError) as error:
        run_tiled(text, "f", torch.randn(10))
    message = str(error.value)
    assert message.startswith(f"<string>:{line_of(text, 'kg.tile_store')}:")
    assert "kernel @exp_0, program (1, 0, 0): kg.tile_store: program (0, 0, 0) stored element " \
           "(2,) of result #0 (tensor<10xf32>) with another value (2 such elements in this " \
           "tile); programs run in no set order on a GPU" in message


def test_programs_that_store_the_same_bits_do_not_race():
    # Programs 3-5 compute and store the tiles of programs 0-2 again: the
    # order does not matter.
    x = torch.randn(10)
    torch.testing.assert_close(run_tiled(overlapping_stores(6, "%m3, %c4"), "f", x),
                               torch.exp(x))


def test_a_race_along_the_third_grid_axis_names_both_programs():
    # Every plane stores into plane 0.
    text = GRID_KERNEL.replace("GRID", "2, 3, 3").replace(
        "%c2 = arith.constant 2 : i32", "%c2 = arith.constant 2 : i32\n"
                                        "    %c0 = arith.constant 0 : i32").replace(
        "kg.tile_store %r, %out[%x2,", "kg.tile_store %r, %out[%c0,")
    with pytest.raises(TileProgramError, match=r"program \(0, 0, 1\): kg.tile_store: program "
                                               r"\(0, 0, 0\) stored element \(0, 0, 0\) of "
                                               r"result #0 .* with another value"):
        run_tiled(text, "f", torch.randn(3, 5, 7))


def test_one_program_storing_an_element_again_is_ordered():
    # Each program stores its tile once per loop step: the last step's
    # value stays, as it would on a GPU.
    text = exp_kernel("0, 10", "0, 10").replace(
        "    kg.tile_store %e, %out[%o] mask %sm : tensor<4xf32>, memref<10xf32>\n",
        "    %c0 = arith.constant 0 : i32\n"
        "    %c1 = arith.constant 1 : i32\n"
        "    %c3 = arith.constant 3 : i32\n"
        "    %one = kg.constant 1.0 : tensor<4xf32>\n"
        "    %last = scf.for %i = %c0 to %c3 step %c1 iter_args(%v = %t) -> (tensor<4xf32>) : i32 {\n"
        "      %w = kg.add %v, %one : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
        "      kg.tile_store %w, %out[%o] mask %sm : tensor<4xf32>, memref<10xf32>\n"
        "      scf.yield %w : tensor<4xf32>\n"
        "    }\n")
    x = torch.randn(10)
    torch.testing.assert_close(run_tiled(text, "f", x), x + 3.0)


SHARED_LANES_KERNEL = """
func.func @f(%x: tensor<4xf32>) -> tensor<1xf32> {
  %y = kg.kernel @spread_0(%x) attributes {grid = array<i64: 1, 1, 1>, iteration = array<i64: 4>, padded, tile = array<i64: 4>} : (tensor<4xf32>) -> tensor<1xf32> {
  ^bb0(%a: memref<4xf32>, %out: memref<1xf32>):
    %c0 = arith.constant 0 : i32
    %one = memref.reinterpret_cast %out to offset: [0], sizes: [4], strides: [0] : memref<1xf32> to memref<4xf32, strided<[0]>>
    %t = kg.tile_load %a[%c0] : memref<4xf32> -> tensor<4xf32>
    VALUE
    kg.tile_store %v, %one[%c0] : tensor<4xf32>, memref<4xf32, strided<[0]>>
    kg.yield
  }
  return %y : tensor<1xf32>
}
"""


def test_lanes_of_one_store_that_share_an_element_must_agree():
    x = torch.randn(4)
    text = SHARED_LANES_KERNEL.replace("VALUE", "%v = kg.exp %t : tensor<4xf32>")
    with pytest.raises(TileProgramError, match=r"program \(0, 0, 0\): kg.tile_store: lanes of the "
                                               r"tile of \[4\] through memref<4xf32, strided<\[0\]>> "
                                               r"store different values into element \(0,\) of "
                                               r"result #0 \(tensor<1xf32>\) \(1 such element\)"):
        run_tiled(text, "f", x)
    # A value that is the same on every lane (a broadcast sum) may.
    same = SHARED_LANES_KERNEL.replace(
        "VALUE", "%s = kg.reduce sum %t dims [0] keepdim : tensor<4xf32> -> tensor<1xf32>\n"
                 "    %v = kg.broadcast_to %s : tensor<1xf32> -> tensor<4xf32>")
    torch.testing.assert_close(run_tiled(same, "f", x), x.sum(0, keepdim=True))
