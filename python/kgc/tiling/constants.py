"""Values that the tile program's writers (the generator, the schedules)
and the passes that lower tile programs (kg-pad-mask, kg-to-ttir) must
agree on. A module of plain data, so that a pass can read them without
importing the code generator."""

# The bounds of an i32: a mask bound that never cuts (an unbounded side of
# a kg.tile_mask), and the range that index arithmetic must stay within.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

# Each reduction kind's neutral element (what masked-off lanes hold) and
# the elementwise op that combines two partial results.
NEUTRAL = {"sum": 0.0, "max": float("-inf"), "min": float("inf")}
COMBINE = {"sum": "add", "max": "maximum", "min": "minimum"}

# The attribute on an scf.for of a tile program naming the iteration axis
# it walks.
LOOP_AXIS_ATTRIBUTE = "kg.axis"

# The least size of each dimension of a tensor-core dot. kg-legalize-dot
# grows a smaller dot tile to it, which it can only do where the tile covers
# its axis (the grown lanes then fall outside the axis and are masked), so a
# schedule must not give a smaller tile that does not.
MIN_DOT_TILE = 16
