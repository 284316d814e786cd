"""Kernel configs: the knobs of each kind of kernel and their legal values.

A `KernelConfig` holds what a user or a tuner may choose for one kernel:
tile sizes, the matmul program grouping, warps and pipeline stages, and how
its loops are scheduled. A knob left `None` is kgc's choice. Configs are
immutable; `kg-tile` reads them from kg.kernel's `config` attribute
(`from_attribute`: a knob the kind does not have, or a flag where a size
goes, is refused here; the dialect checks only the attribute's form) and
from its options, and the planner fills in the knobs left open, so that the config
of a tiled kernel (`KernelPlan.config`) names every choice it was made with.

Legality, checked by `canonical` against the kernel's extents (the sizes of
the axes that the tile knobs tile):

* a tile size is a power of two, or covers its axis; a size at or above its
  axis's extent is the whole axis, and is written as the extent;
* a tile knob of an axis the kernel does not have (`block_m` of a 1-D
  pointwise kernel, `block_x` of a reduction to a scalar) is dropped;
* `group_m` is a power of two; it is 1 when the grid has a single tile
  along m or along n, where programs have nothing to group;
* `num_warps` is a power of two up to 32, `num_stages` a positive integer;
* `num_programs` (persistent programs that loop over the kernel's tiles) is
  a positive integer; at or above the number of tiles it is that number
  (the planner writes it so, as the tiles depend on the other knobs);
* `split_k` (a matmul's k loop shared out between that many programs per
  tile, `kgc.tiling.split_k`) is a positive integer; 1 is no split and is
  written as unset; the planner lowers it to the count of splits that each
  get k steps.
* flags (`warp_specialize`, `flatten`, `tma` of matmuls) are true or false.

An illegal value raises `ConfigError`, naming the kernel, the knob, the
value and the legal values; nothing is clamped silently. Two configs that
give the same kernel have equal canonical forms.

`space(extents, element, target)` lists the configs a tuner should try for
a kernel of those extents and element type on a GPU (a `kgc.targets.Target`:
persistent programs and splits are sized by its SM count): finite,
canonical, without duplicates. `seeds(extents, element, precision, target)`
names a few of them known to do well on such kernels (whose matmuls have
that `kg.matmul` precision, None when unset), which a tuner tries first.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any, ClassVar, Mapping

from kgc.element_types import element_bits
from kgc.targets import Target, target_for
from kgc.tiling.index_maps import ceil_div, next_power_of_two

WARPS = (1, 2, 4, 8, 16, 32)


@dataclasses.dataclass(frozen=True)
class KnobOption:
    """How kg-tile offers a knob as a pass option (for every kernel whose
    kind has the knob): what the knob sets, and for a flag whether `false`
    turns it off (`auto` then leaves it to kgc) or only leaves it to the
    kernel's config (the option can turn it on, not off)."""

    help: str
    false_turns_off: bool = True


class ConfigError(ValueError):
    """A knob value that no kernel of its kind can take; the message names
    the kernel, the knob, the value and the legal values."""


def _is_power_of_two(value: int) -> bool:
    return value >= 1 and value & (value - 1) == 0


def _powers_of_two(low: int, high: int) -> list[int]:
    values, value = [], low
    while value <= high:
        values.append(value)
        value *= 2
    return values


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """Knobs shared by every kind of kernel. Subclasses add their tile knobs
    and name in `TILE_AXES` the axis each tiles."""

    kind: ClassVar[str] = ""
    # tile knob -> the name of the axis it tiles (a key of the extents)
    TILE_AXES: ClassVar[dict[str, str]] = {}
    # knobs that are flags (true or false), not sizes
    FLAGS: ClassVar[tuple[str, ...]] = ()

    # The knobs that kg-tile offers as options, in the order it lists them
    # (a knob not here is set in the kernel's config only, as the loop
    # flags are).
    OPTIONS: ClassVar[dict[str, KnobOption]] = {
        "num_warps": KnobOption("warps per program"),
        "num_stages": KnobOption("software pipeline stages"),
        "num_programs": KnobOption("persistent programs that loop over the tiles"),
    }

    num_warps: int | None = None
    num_stages: int | None = None
    # Persistent programs: this many programs walk the kernel's tiles.
    num_programs: int | None = None

    # -- names ----------------------------------------------------------------

    @classmethod
    def knobs(cls) -> tuple[str, ...]:
        return tuple(field.name for field in dataclasses.fields(cls))

    def given(self) -> dict[str, Any]:
        """The knobs that are set, by name."""
        return {name: getattr(self, name) for name in self.knobs()
                if getattr(self, name) is not None}

    def merged(self, other: "KernelConfig") -> "KernelConfig":
        """This config with the knobs that `other` sets replaced."""
        if type(other) is not type(self):
            raise TypeError(f"cannot merge a {other.kind} config into a {self.kind} config")
        return dataclasses.replace(self, **other.given())

    # -- legality -------------------------------------------------------------

    def _error(self, kernel: str | None, knob: str, value: Any, legal: str) -> ConfigError:
        where = f"{self.kind} kernel @{kernel}" if kernel else f"{self.kind} kernel"
        return ConfigError(f"{where}: {knob} = {value} is not legal; {knob} must be {legal}")

    def canonical(self, extents: Mapping[str, int], kernel: str | None = None) -> "KernelConfig":
        """The config in canonical form for a kernel of `extents` (axis name
        -> size); raises ConfigError for an illegal value."""
        changes: dict[str, Any] = {}
        for knob, value in self.given().items():
            if knob in self.FLAGS:
                if not isinstance(value, bool):
                    raise self._error(kernel, knob, value, "true or false")
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise self._error(kernel, knob, value, "an integer")
            if knob in self.TILE_AXES:
                extent = extents.get(self.TILE_AXES[knob])
                if extent is None:
                    changes[knob] = None
                elif value < 1 or (value < extent and not _is_power_of_two(value)):
                    raise self._error(kernel, knob, value,
                                      f"a power of two, or at least {extent} to cover its axis")
                elif value > extent:
                    changes[knob] = extent
            elif knob == "num_warps" and value not in WARPS:
                raise self._error(kernel, knob, value,
                                  "a power of two up to 32 (" + ", ".join(map(str, WARPS)) + ")")
            elif knob in ("num_stages", "num_programs") and value < 1:
                raise self._error(kernel, knob, value, "a positive integer")
        config = dataclasses.replace(self, **changes) if changes else self
        return config._canonical_extra(extents, kernel)

    def _canonical_extra(self, extents: Mapping[str, int], kernel: str | None) -> "KernelConfig":
        return self

    # -- forms ----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.given()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> "KernelConfig":
        data = dict(data)
        kind = data.pop("kind", None)
        if kind not in CONFIG_CLASSES:
            raise ConfigError(f"kernel config kind {kind!r} is not one of "
                              f"{', '.join(CONFIG_CLASSES)}")
        cls = CONFIG_CLASSES[kind]
        unknown = sorted(set(data) - set(cls.knobs()))
        if unknown:
            raise ConfigError(f"{kind} kernels have no knob {', '.join(unknown)} (knobs: "
                              f"{', '.join(cls.knobs())})")
        return cls(**data)

    @staticmethod
    def from_json(text: str) -> "KernelConfig":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"kernel config is not JSON: {error}") from None
        if not isinstance(data, dict):
            raise ConfigError("a kernel config in JSON is an object of knobs and a \"kind\"")
        return KernelConfig.from_dict(data)

    def to_attribute(self):
        """The set knobs as kg.kernel's `config` attribute: a dictionary of
        i64 integers and booleans (flags), in the form the dialect checks.
        Needs an MLIR context."""
        from mlir import ir

        i64 = ir.IntegerType.get_signless(64)
        return ir.DictAttr.get(
            {name: ir.BoolAttr.get(value) if name in self.FLAGS else ir.IntegerAttr.get(i64, value)
             for name, value in self.given().items()})

    @classmethod
    def from_attribute(cls, config, kernel: str | None = None) -> "KernelConfig":
        """The config that kg.kernel's `config` attribute (a DictionaryAttr,
        or None for none) holds. The dialect has checked its form (integers
        and booleans); which knobs a kernel of this kind has, and whether
        each is a flag or a size, is this class's to check."""
        from mlir import ir

        where = f"{cls.kind} kernel @{kernel}" if kernel else f"{cls.kind} kernel"
        values: dict[str, Any] = {}
        dictionary = None if config is None else ir.DictAttr(config)
        entries = [] if dictionary is None else [dictionary[i] for i in range(len(dictionary))]
        for entry in entries:
            name, attribute = entry.name, entry.attr
            if name not in cls.knobs():
                raise ConfigError(f"{where}: its config has no knob {name} (the knobs of "
                                  f"{cls.kind} kernels: {', '.join(cls.knobs())})")
            if name in cls.FLAGS and isinstance(attribute, ir.BoolAttr):
                values[name] = ir.BoolAttr(attribute).value
            elif name not in cls.FLAGS and isinstance(attribute, ir.IntegerAttr) \
                    and not isinstance(attribute, ir.BoolAttr):
                values[name] = ir.IntegerAttr(attribute).value
            else:
                what = "true or false" if name in cls.FLAGS else "an integer"
                raise ConfigError(f"{where}: config knob {name} must be {what}, got {attribute}")
        return cls(**values)

    # -- search space ---------------------------------------------------------

    @classmethod
    def space(cls, extents: Mapping[str, int], element: str,
              target: Target | None = None) -> list["KernelConfig"]:
        """Configs worth trying for a kernel of `extents` whose widest
        operand has element type `element`, on `target` (None: the default
        target, `kgc.targets.target_for`): canonical and distinct."""
        cls._check_space_arguments("space", extents, element)
        target = target_for(target)
        seen: dict[KernelConfig, None] = {}
        candidates = cls._candidates(extents, element, target)
        for values in itertools.product(*candidates.values()):
            config = cls(**dict(zip(candidates, values)))
            if not config._worth_trying(extents, element, target):
                continue
            seen.setdefault(config.canonical(extents), None)
        return list(seen)

    @classmethod
    def _check_space_arguments(cls, method: str, extents, element) -> None:
        """A clear ConfigError for arguments `space` and `seeds` cannot
        take: the space is one kind's, and the extents name their axes."""
        if not cls.kind:
            kinds = ", ".join(c.__name__ for c in CONFIG_CLASSES.values())
            raise ConfigError(f"KernelConfig.{method}: the configs of one kind of kernel; call it "
                              f"on {kinds}")
        axes = list(dict.fromkeys(cls.TILE_AXES.values()))
        example = "{" + ", ".join(f"'{axis}': {size}" for axis, size in
                                  zip(axes, (128, 768, 3072))) + "}"
        if not isinstance(extents, Mapping):
            raise ConfigError(
                f"{cls.__name__}.{method}: extents must map each axis name to its size, as "
                f"{example} ({cls.kind} kernels tile the axes {', '.join(axes)}); got "
                f"{extents!r} ({type(extents).__name__})")
        for axis, size in extents.items():
            if not isinstance(axis, str) or not isinstance(size, int) or isinstance(size, bool):
                raise ConfigError(f"{cls.__name__}.{method}: extents must map axis names to "
                                  f"integer sizes, as {example}; got {axis!r}: {size!r}")
        if not isinstance(element, str):
            raise ConfigError(f"{cls.__name__}.{method}: element must be an element type name "
                              f"such as 'f16', got {element!r} ({type(element).__name__})")

    @classmethod
    def _candidates(cls, extents: Mapping[str, int], element: str,
                    target: Target) -> dict[str, tuple]:
        raise NotImplementedError

    def _worth_trying(self, extents: Mapping[str, int], element: str | None = None,
                      target: Target | None = None) -> bool:
        return True

    @classmethod
    def seeds(cls, extents: Mapping[str, int], element: str, precision: str | None = None,
              target: Target | None = None) -> list["KernelConfig"]:
        """Configs of `space` known to do well on kernels of these extents,
        whose widest operand is `element` and whose matmuls have `precision`
        ("ieee", "tf32", "fast_accum"; None when unset or not the same for
        all), on `target` (None: the default), canonical, best guess first
        (none by default)."""
        return []


def _tile_candidates(low: int, high: int, extent: int | None) -> tuple:
    """Powers of two from `low` to `high`, none beyond the one that covers
    `extent` (None: the axis is absent)."""
    if extent is None:
        return (None,)
    cover = next_power_of_two(extent)
    return tuple(v for v in _powers_of_two(low, high) if v <= cover) or (min(low, cover),)


@dataclasses.dataclass(frozen=True)
class PointwiseConfig(KernelConfig):
    """2-D tiles of the last two axes of the output (`m`: rows, `n`: the
    last axis); one program per tile."""

    kind: ClassVar[str] = "pointwise"
    TILE_AXES: ClassVar[dict[str, str]] = {"block_m": "m", "block_n": "n"}
    OPTIONS: ClassVar[dict[str, KnobOption]] = {
        "block_m": KnobOption("rows of a tile"), "block_n": KnobOption("columns of a tile"),
        **KernelConfig.OPTIONS}

    block_m: int | None = None
    block_n: int | None = None

    @classmethod
    def _candidates(cls, extents, element, target):
        return {"block_m": _tile_candidates(1, 64, extents.get("m")),
                "block_n": _tile_candidates(64, 4096, extents.get("n")),
                "num_warps": (1, 2, 4, 8), "num_stages": (1,)}

    def _worth_trying(self, extents, element: str | None = None, target=None) -> bool:
        return (self.block_m or 1) * self.block_n <= 16384


@dataclasses.dataclass(frozen=True)
class ReductionConfig(KernelConfig):
    """Programs walk the kept axes (`x`: the innermost, `block_x` rows per
    program); the innermost reduced axis `r` is one tile of `block_r` when
    that covers it, a loop of `block_r` steps otherwise."""

    kind: ClassVar[str] = "reduction"
    TILE_AXES: ClassVar[dict[str, str]] = {"block_x": "x", "block_r": "r"}
    OPTIONS: ClassVar[dict[str, KnobOption]] = {
        "block_x": KnobOption("kept rows per program"),
        "block_r": KnobOption("reduced lanes per tile"), **KernelConfig.OPTIONS}

    block_x: int | None = None
    block_r: int | None = None

    @classmethod
    def _candidates(cls, extents, element, target):
        return {"block_x": _tile_candidates(1, 64, extents.get("x")),
                "block_r": _tile_candidates(256, 8192, extents.get("r")),
                "num_warps": (1, 2, 4, 8, 16), "num_stages": (1, 2, 3)}

    def _worth_trying(self, extents, element: str | None = None, target=None) -> bool:
        looped = self.block_r < extents["r"]
        # A loop is pipelined by its stages; a single tile has none to pipeline.
        if not looped and self.num_stages != 1:
            return False
        return (self.block_x or 1) * next_power_of_two(self.block_r) <= 16384


@dataclasses.dataclass(frozen=True)
class MatmulConfig(KernelConfig):
    """Programs walk (batch, m, n) tiles of `block_m` x `block_n`, grouped
    `group_m` row tiles at a time; a loop walks k in steps of `block_k`.
    `warp_specialize` and `flatten` are passed to that loop for Triton
    (`tt.warp_specialize`, `tt.flatten`). `split_k` shares the k loop out
    between that many programs per tile, whose f32 partial results a
    second kernel sums before the epilogue (`kgc.tiling.split_k`). `tma`
    reads the operand tiles of the k loop, and writes the results, through
    TMA tensor descriptors (`kgc.tiling.tma` says where that is legal)."""

    kind: ClassVar[str] = "matmul"
    TILE_AXES: ClassVar[dict[str, str]] = {"block_m": "m", "block_n": "n", "block_k": "k"}
    FLAGS: ClassVar[tuple[str, ...]] = ("warp_specialize", "flatten", "tma")
    # The flags that go on the k loop for Triton (tt.<name>).
    LOOP_FLAGS: ClassVar[tuple[str, ...]] = ("warp_specialize", "flatten")
    OPTIONS: ClassVar[dict[str, KnobOption]] = {
        "block_m": KnobOption("rows of a tile"), "block_n": KnobOption("columns of a tile"),
        "block_k": KnobOption("k step of the loop"),
        "group_m": KnobOption("row tiles per program group"),
        **KernelConfig.OPTIONS,
        "split_k": KnobOption("programs sharing a tile's k loop, whose partial sums a second "
                              "kernel adds up; 1: no split"),
        "tma": KnobOption("read the k loop's operands and write the results through TMA "
                          "tensor descriptors", false_turns_off=False)}

    block_m: int | None = None
    block_n: int | None = None
    block_k: int | None = None
    group_m: int | None = None
    warp_specialize: bool | None = None
    flatten: bool | None = None
    split_k: int | None = None
    tma: bool | None = None

    def _canonical_extra(self, extents, kernel):
        # None leaves the split to kgc (kgc.tiling.split_k.default_count);
        # 1 asks for none.
        if self.split_k is not None and self.split_k < 1:
            raise self._error(kernel, "split_k", self.split_k, "a positive integer")
        if self.group_m is None:
            return self
        if not _is_power_of_two(self.group_m):
            raise self._error(kernel, "group_m", self.group_m, "a power of two")
        if self.block_m is not None and self.block_n is not None and self.group_m != 1 and (
                ceil_div(extents["m"], self.block_m) == 1 or ceil_div(extents["n"], self.block_n) == 1):
            return dataclasses.replace(self, group_m=1)
        return self

    @classmethod
    def _candidates(cls, extents, element, target):
        narrow = element_bits(element) <= 8
        return {"block_m": _tile_candidates(16, 256, extents.get("m")),
                "block_n": _tile_candidates(16, 256, extents.get("n")),
                "block_k": _tile_candidates(32 if narrow else 16, 256 if narrow else 128,
                                            extents.get("k")),
                "group_m": (1, 8), "num_warps": (4, 8), "num_stages": (2, 3, 4, 5),
                "split_k": (None, 1) + _split_k_candidates(extents, element),
                # Persistent programs: one per SM of the target.
                "tma": (None, True), "num_programs": (None, target.sm_count)}

    def _worth_trying(self, extents, element: str | None = None, target=None) -> bool:
        target = target_for(target)
        accumulator = self.block_m * self.block_n
        # Registers: one f32 accumulator of up to 128x256 lanes; 8 warps only
        # for accumulators of at least 128x128.
        if accumulator > 128 * 256 or (self.num_warps == 8 and accumulator < 128 * 128):
            return False
        if self.split_k == 1:
            # No split is worth a try only where kgc would split by itself.
            return element is not None and _kgc_splits(self, extents, element, target) and \
                dataclasses.replace(self, split_k=None)._worth_trying(extents, element, target)
        if self.split_k is not None and not _split_k_worth_trying(self, extents, target):
            return False
        # A split is for grids too small to fill the GPU, where persistent
        # programs have nothing to walk; with TMA it is not tried (untested).
        if self.split_k is not None and (self.tma or self.num_programs is not None):
            return False
        looped = self.block_k < extents["k"]
        if not looped and self.num_stages != 2:
            return False
        tiles = ceil_div(extents["m"], self.block_m) * ceil_div(extents["n"], self.block_n)
        # Persistent programs pay off when there are more tiles than SMs;
        # bulk copies for tiles of at least 64x64, where a copy engine
        # transfer replaces enough address arithmetic.
        if self.num_programs is not None and tiles <= self.num_programs:
            return False
        return not self.tma or accumulator >= 64 * 64

    @classmethod
    def seeds(cls, extents, element, precision=None, target=None):
        """For GEMMs of at least 1024 x 1024 outputs and a k loop: the
        Hopper configs of Triton's matmul tutorials (128x256 and 256x128
        tiles with 8 warps, 128x128 with 4 or 8; 3 to 5 stages; grouped
        tile order), each with TMA descriptors, persistent, both or
        neither; then three warp-specialized with TMA, and three persistent
        with TMA whose tile loop Triton flattens with the k loop. Their k
        step is 64, or 128 for 8-bit floats; 8-bit floats under fast_accum
        get each tile with both. Persistent programs are one per SM of
        `target`."""
        target = target_for(target)
        if streams_weights(extents, element):
            return _skinny_seeds(cls, extents, element, target)
        if extents.get("m", 0) < 1024 or extents.get("n", 0) < 1024 or extents.get("k", 0) < 256:
            return []
        # 8-bit floats take 128-deep k steps: each step's products are added
        # into the f32 accumulator after it (kgc's promotion interval), and
        # on an H100 at 4096^3 every 64-deep config measured 175 us or more
        # against 150 us for the 128-deep ones (benchmarks/NOTES.md, "FP8:
        # where the time goes"). Under fast_accum nothing is promoted, and
        # there both depths ran at about torch._scaled_mm's speed (128x256
        # tiles: 106.5-110.2 us 128-deep, 114 us 64-deep, against 104.7-107.2
        # for its fast mode), so both are seeded, the 128-deep one first.
        if element_bits(element) > 8:
            depths = (64,)
        elif precision == "fast_accum":
            depths = (128, 64)
        else:
            depths = (128,)
        tiles = [(128, 256, 8, 3), (256, 128, 8, 3), (128, 256, 8, 4), (128, 128, 8, 4),
                 (128, 128, 4, 4), (128, 128, 4, 5)]
        seeds: dict[KernelConfig, None] = {}
        for tma, persistent in ((True, False), (True, True), (None, False), (None, True)):
            for block_m, block_n, warps, stages in tiles:
                for block_k in depths:
                    config = cls(block_m=block_m, block_n=block_n, block_k=block_k, group_m=8,
                                 num_warps=warps, num_stages=stages, tma=tma,
                                 num_programs=target.sm_count if persistent else None)
                    if config._worth_trying(extents, element, target):
                        seeds.setdefault(config.canonical(extents), None)
        # Triton 3.6 warp-specializes k loops of descriptor loads on sm_90,
        # and flattens a persistent program's tile loop with its k loop.
        for block_m, block_n, warps, stages in tiles[:2] + tiles[4:5]:
            for block_k in depths:
                seeds.setdefault(cls(block_m=block_m, block_n=block_n, block_k=block_k,
                                     group_m=8, num_warps=warps, num_stages=stages, tma=True,
                                     warp_specialize=True).canonical(extents), None)
                flattened = cls(block_m=block_m, block_n=block_n, block_k=block_k, group_m=8,
                                num_warps=warps, num_stages=stages, tma=True, flatten=True,
                                num_programs=target.sm_count)
                if flattened._worth_trying(extents, element, target):
                    seeds.setdefault(flattened.canonical(extents), None)
        return list(seeds)


# Rows of a matmul that streams its weights: one tile of rows, whose
# time is the time to read the other operand.
SKINNY_ROWS = 16


def weight_bytes(extents, element: str) -> int:
    """The bytes of a product's k x n operand (one batch's)."""
    return extents.get("k", 0) * extents.get("n", 0) * element_bits(element) // 8


def streams_weights(extents, element: str) -> bool:
    """A product of at most SKINNY_ROWS rows over at least DEFAULT_MIN_BYTES
    of weights (a decode step's projections, RMSNorm+MatMul of 16 rows)."""
    return extents.get("m", 1) <= SKINNY_ROWS and \
        weight_bytes(extents, element) >= DEFAULT_MIN_BYTES


def _skinny_seeds(cls, extents, element: str, target: Target) -> list:
    """Deeper k steps without kgc's split, the configs that read the weights
    fastest on an H100 (benchmarks/NOTES.md, "Skinny matmuls alone": at
    16x4096x6144, 1x4096x11008 and 8x4096x11008 the better of the first two
    came within 0.5% of the best of 32 configs, and 4-8% ahead of kgc's
    default; "LoRA on a rank axis": at 16x4096x4096 the third was the best
    of 54, bare and with LoRA's adapter): a 128-deep k step over 128 or 64
    columns with 4 stages, or over 32 columns with 6; 4 warps. Where kgc
    would not split, split_k stays unset, which is the same kernel."""
    block_m = min(SKINNY_ROWS, next_power_of_two(extents.get("m", 1)))
    seeds: dict[KernelConfig, None] = {}
    for block_n, stages in ((128, 4), (64, 4), (32, 6)):
        config = cls(block_m=block_m, block_n=block_n, block_k=128, group_m=1, num_warps=4,
                     num_stages=stages)
        if _kgc_splits(config, extents, element, target):
            config = dataclasses.replace(config, split_k=1)
        if config._worth_trying(extents, element, target):
            seeds.setdefault(config.canonical(extents), None)
    return list(seeds)


# Splits the search tries for a matmul that cannot fill the GPU with tiles
# (a grid of fewer programs than the target's SMs leaves some idle).
SPLIT_K_VALUES = (2, 4, 8, 16)


# kgc splits on its own only where the operands take longer to stream than
# the split costs: a second launch and the partials written and read back
# (about 3 us on an H100, which streams 8 MiB in that time).
DEFAULT_MIN_BYTES = 8 << 20
# The most splits kgc chooses on its own, and the fewest k steps it leaves
# each split (a shorter loop cannot fill its software pipeline).
DEFAULT_MAX_SPLITS = 16
DEFAULT_MIN_STEPS = 4


def default_split_k(tiles: int, batch: int, m: int, n: int, k: int, block_k: int,
                  element_bits: int, program_slots: int, bare: bool = True) -> int:
    """The splits kgc gives a matmul kernel whose `split_k` is left to it:
    enough that its `tiles` (batch x m x n tiles) times the splits fill the
    GPU's `program_slots` (its SMs, `kgc.targets.Target.sm_count`) once,
    for a kernel that streams at least DEFAULT_MIN_BYTES of operands, or,
    where its k loop carries nothing but its products (`bare`: no LoRA
    rank-r product, no norm's sum riding along), whose few tiles walk a
    long k loop (`_serial_loop_bound`); with every
    split at least DEFAULT_MIN_STEPS k steps, and the f32 partials (written
    and read once) at most a quarter of the operands' bytes. 1 (no split)
    otherwise."""
    operand_bytes = batch * (m * k + k * n) * element_bits // 8
    steps = ceil_div(k, block_k)
    if tiles >= program_slots or (operand_bytes < DEFAULT_MIN_BYTES and not (
            bare and _serial_loop_bound(tiles, k, program_slots))):
        return 1
    count = 1
    while (tiles * count < program_slots and count * 2 <= DEFAULT_MAX_SPLITS
           and steps >= DEFAULT_MIN_STEPS * count * 2
           and 2 * 4 * count * 2 * batch * m * n <= operand_bytes // 4):
        count *= 2
    return count


# A kernel of few tiles over a long k loop takes as long as one program's
# loop, whatever its bytes: LoRA's down-projection to rank 16, 512 x 4096 ->
# 16, ran as 4 programs of 64 k steps in 17.9 us, where the library took
# 7.0 (H200, benchmarks/NOTES.md stop 48), about a quarter of a microsecond
# a step: a loop of LONG_SERIAL_K costs several times what a split costs (a
# launch and the partials), so splitting pays under DEFAULT_MIN_BYTES too
# while the tiles fill at most half the SMs. A kernel of at most
# FEW_SERIAL_TILES tiles pays from half that depth: at 3072 deep, LoRA's
# x A of 32 or 128 rows to rank 16 (one tile) took 6.9 and 11.1 us, at 2048
# deep 4.9 and 6.7 (H200, benchmarks/NOTES.md stop 50).
LONG_SERIAL_K = 4096
FEW_SERIAL_TILES = 4


def _serial_loop_bound(tiles: int, k: int, program_slots: int) -> bool:
    return 2 * tiles <= program_slots and (
        k >= LONG_SERIAL_K or (tiles <= FEW_SERIAL_TILES and 2 * k >= LONG_SERIAL_K))


# The splits of a skinny product whose k loop is long, and the k steps
# each split keeps at least.
SKINNY_SPLITS = 4
SKINNY_SPLIT_STEPS = 4


def skinny_split_k(tiles: int, k: int, block_k: int, program_slots: int) -> int:
    """The splits kgc gives a skinny product (at most SKINNY_ROWS rows,
    weights under DEFAULT_MIN_BYTES) whose tiles leave SMs idle: SKINNY_SPLITS
    where each split keeps at least SKINNY_SPLIT_STEPS k steps, else none.
    (H100, 1 and 16 rows, weights stored either way, bias and residual
    after or none: 2048 -> 512 and 2048 -> 1024 took 15 to 48% less time in
    4 splits; over 1024 to 1376 deep, 4 splits tied one; 2 splits were
    slower than 4 in every case, and slower than none up to 1376 deep;
    benchmarks/NOTES.md, "Skinny products with a computed operand".)"""
    if tiles >= program_slots or ceil_div(k, block_k) < SKINNY_SPLITS * SKINNY_SPLIT_STEPS:
        return 1
    return SKINNY_SPLITS


def _kgc_splits(config: MatmulConfig, extents, element: str, target: Target) -> bool:
    """Whether kgc would split this config's kernel by itself (split_k
    None) on `target`, at one batch."""
    m, n, k = extents.get("m", 1), extents["n"], extents["k"]
    tiles = ceil_div(m, config.block_m or m) * ceil_div(n, config.block_n)
    return config.block_k < k and default_split_k(tiles, 1, m, n, k, config.block_k,
                                                  element_bits(element), target.sm_count) > 1


def _split_k_candidates(extents, element: str) -> tuple[int, ...]:
    """The splits whose f32 workspace (written and read once) moves at
    most a quarter of the operands' bytes: beyond that the partials cost
    more than the idle SMs they fill."""
    m, n, k = extents.get("m", 1), extents["n"], extents["k"]
    operand_bytes = (m * k + k * n) * element_bits(element) // 8
    return tuple(s for s in SPLIT_K_VALUES if 2 * 4 * s * m * n <= operand_bytes // 4)


def _split_k_worth_trying(config: MatmulConfig, extents, target: Target) -> bool:
    """Split-K pays where the (m, n) tiles cannot keep the target's SMs
    busy: with this config's tiles and with 128x128 ones (a big square
    matmul fills them either way), and where every split still gets two k
    steps or more."""
    m, n, k = extents.get("m", 1), extents["n"], extents["k"]
    tiles = ceil_div(m, config.block_m or m) * ceil_div(n, config.block_n)
    large_tiles = ceil_div(m, 128) * ceil_div(n, 128)
    slots = target.sm_count
    return (tiles < slots and large_tiles < slots
            and ceil_div(k, config.block_k) >= 2 * config.split_k
            and tiles * config.split_k <= 8 * slots)


@dataclasses.dataclass(frozen=True)
class AttentionConfig(KernelConfig):
    """softmax(Q K^T [* scale] [+ mask]) V as one kernel (flash attention).
    Programs walk (batch, heads, query tiles of `block_m`); a loop walks
    the keys (`n`) in steps of `block_n` with a running max, a running sum
    and an f32 accumulator. `split_kv` programs share the keys of one query
    tile, each writing a partial result (its output and log-sum-exp) that a
    second kernel combines (flash-decoding); 1 is one kernel. With grouped
    query heads (several query heads reading one key/value head, extent
    `g`), `pack_heads` makes the G query heads of one group the rows of
    the dot (a decoding query then gives a dot of G rows, not 1); its
    query tile is then one query."""

    kind: ClassVar[str] = "attention"
    TILE_AXES: ClassVar[dict[str, str]] = {"block_m": "m", "block_n": "n"}
    FLAGS: ClassVar[tuple[str, ...]] = ("pack_heads",)
    OPTIONS: ClassVar[dict[str, KnobOption]] = {
        "block_m": KnobOption("rows of a tile"), "block_n": KnobOption("columns of a tile"),
        **KernelConfig.OPTIONS,
        "split_kv": KnobOption("programs that share one query tile's keys, combined by a "
                               "second kernel; 1: one kernel"),
        "pack_heads": KnobOption("make the query heads of one key/value head the rows of a dot")}

    block_m: int | None = None
    block_n: int | None = None
    split_kv: int | None = None
    pack_heads: bool | None = None

    def _canonical_extra(self, extents, kernel):
        config = self
        if self.split_kv is not None:
            if self.split_kv < 1:
                raise self._error(kernel, "split_kv", self.split_kv, "a positive integer")
            # More splits than key tiles would leave programs without keys;
            # the planner writes the count it uses.
        if self.pack_heads is not None and extents.get("g", 1) == 1:
            # Without grouped heads there is nothing to pack.
            config = dataclasses.replace(config, pack_heads=None)
        if config.pack_heads:
            config = dataclasses.replace(config, block_m=None)
        return config

    @classmethod
    def _candidates(cls, extents, element, target):
        rows = extents.get("m", 1)
        decode = rows <= 16
        keys = extents.get("n", 1)
        return {"block_m": _tile_candidates(16, 128, rows) if not decode else (None,),
                "block_n": _tile_candidates(32, 128, keys),
                "num_warps": (4, 8) if not decode else (2, 4),
                "num_stages": (2, 3),
                # Splitting the keys pays when few query rows leave SMs idle.
                "split_kv": (1, 4, 8, 16, 32) if decode else (1,),
                "pack_heads": (False, True) if extents.get("g", 1) > 1 else (None,)}

    def _worth_trying(self, extents, element: str | None = None, target=None) -> bool:
        keys = extents.get("n", 1)
        return (self.split_kv or 1) * (self.block_n or 1) <= max(keys, self.block_n or 1) * 2


CONFIG_CLASSES: dict[str, type[KernelConfig]] = {
    cls.kind: cls for cls in (PointwiseConfig, ReductionConfig, MatmulConfig, AttentionConfig)}
