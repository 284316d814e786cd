"""kg-tile: turn each kernel's graph ops into a tile program.

Argument: `kg-tile`. Options, the knobs of a kernel config (see
kgc.tiling.config) that the registered schedules' config classes offer
(`KernelConfig.OPTIONS`), 0 leaving a knob to kgc; the built-in ones:

    block-m, block-n   pointwise, matmul and attention tile sizes
    block-k, group-m   matmul: k step, row tiles per program group
    block-x, block-r   reduction: kept rows per program, reduced tile
    num-warps, num-stages
    num-programs       persistent programs, each looping over tiles
    split-k            matmul: programs sharing each tile's k loop; the
                       kernel becomes a partials kernel and a reduce kernel
                       (kgc.tiling.split_k)
    tma                matmul: copy operand tiles (and results) through TMA
                       tensor descriptors (kgc.tiling.tma); false leaves it
                       to the kernel's config
    kernel=NAME        apply the knobs to kernel @NAME only
    target=SM          the SM version planned for (default 90): kgc's
                       choices (split-K, split-KV, tile widths) fill that
                       GPU's SMs (kgc.targets.target_for)
    tuned-defaults=S   where kgc's choices come from for a kernel given no
                       knob: `on` (the table shipped for the target, where
                       there is one), `off` (the heuristics alone), or a
                       table file or folder of tables (kgc.tuned_defaults);
                       unset: the KGC_TUNED_DEFAULTS variable, else `on`

    kgc-opt graph.mlir --kg-tile='block-m=64 num-warps=8'

A knob applies to every kernel whose kind has it (block-m to pointwise and
matmul kernels, not to reductions); an option that applies to no kernel is
an error, as is a `kernel` that does not exist. A kernel's own config
attribute (`config = {block_m = 64, num_warps = 4}`, declared on kg.kernel;
what a user or a tuner wrote) gives the knobs the options leave unset; kgc
chooses the rest. For a kernel given no knob at all, kgc's choice is the
config the search chose on the nearest shape of the target's tuned-defaults
table (`tuned-defaults`), where the kernel's schedule finds one that suits
it (`Schedule.tuned_config`), and its heuristics otherwise; a kernel given
some knobs gets the heuristics for the rest. The dialect checks the
attribute's form, the kernel's schedule its contents: a knob its kind does
not have is an error, and so is an illegal value (a tile size that is
neither a power of two nor covers its axis, 3 warps), each naming the
kernel, the knob and the legal values; a tile at or above its axis's extent
is the whole axis.

Rewrite rules:

    kg.kernel @k(%x...) { graph ops; kg.yield %y... }
      =>  kg.kernel @k(%x...) attributes {kind, grid, iteration, tile,
                                          config = {num_warps, num_stages, block_*...}} {
          ^bb0(%x_buf: memref..., %y_buf: memref...):
            kg.program_id, memref.reinterpret_cast views of the buffers,
            kg.tile_load (marked tma: the k loop's operand tiles of a
            matmul whose tma knob is on), kg ops on tiles, kg.reduce, kg.tile_dot,
            scf.for loops over looped axes (marked kg.axis = N),
            kg.tile_store of every result
            kg.yield
          }
    a kernel whose schedule finishes it in more kernels (Schedule.tiled_form
    and Schedule.follow_up): the tiled kernel, then its follow-ups, tiled
    here when the schedule makes them in graph form. The built-in ones:
    kg.kernel @k(%x...) {matmul graph ops}  with split_k = S > 1
      =>  %p... = kg.kernel @k_partials(%x...) attributes {config = {split_k = S, ...}}
                  -> tensor<S x ... x f32>...  (one workspace per reduction
                  over k: the matmul accumulators, the sums of an RMSNorm)
          %y... = kg.kernel @k_reduce(%x used by the epilogue..., %p...)
                  (sums the S partials in order, then the epilogue)
    attention kernel with split_kv = S > 1
      =>  kg.kernel @k (tiled: each split's output and log-sum-exp, f32)
          kg.kernel @k_combine (tiled: their combination, the results of @k)
    kg.kernel already in tiled form  =>  unchanged
    kg.kernel with a dynamic extent (`?`), pointwise, reduction, gather or
    matmul
      =>  as above, planned as at EXTENT_HINT rows, with buffers
          memref<...x?x...>, views sized by memref.dim of a buffer along the
          dynamic axis, strides and offsets that depend on the size (the dims
          outside the `?`) computed from it and passed to the view as
          operands, attributes dynamic_axis and dynamic_grid
          (kgc.tiling.dynamic); a schedule that takes no dynamic extent, or
          a plan that holds at one size only, is an error naming the rule

The config attribute of a tiled kernel is its whole config, canonical.
A kernel whose body is a group that kg-fuse planned in the same pipeline
run, with the same knobs, gets kg-fuse's plan (the run's planner,
kgc.tiling.planner); any other kernel (kg-tile run alone on a fused file,
knobs set in between) is planned here.
Tiles may have any size here; `kg-pad-mask` pads them to powers of two and
masks the accesses of partial tiles. See the schedules (kgc.tiling.registry
lists them) for how the iteration space and tiles are chosen.
"""

from __future__ import annotations

from mlir import ir

from kgc.passes.registry import Option, Pass, PassFailure, register_pass
from kgc.targets import DEFAULT_SM, SUPPORTED_SMS, Target, target_for
from kgc.tiling.config import ConfigError, KernelConfig
from kgc.tiling.dynamic import (DYNAMIC_AXIS_ATTRIBUTE, DYNAMIC_GRID_ATTRIBUTE, NotAtEverySize,
                                 dynamic_grid, has_dynamic_extent)
from kgc.tiling.graph_model import Node, nodes_from_ops
from kgc.tiling.kernel_ops import (CONFIG_ATTRIBUTE, config_attribute, is_tiled, kernel_name,
                                   kernels_in)
from kgc.tiling.mlir_builder import tiled_kernel
from kgc.tiling.iteration import KernelPlan, Unplannable
from kgc.tiling.planner import Planner
from kgc.tiling.registry import matching_schedules, schedule_for, schedules
from kgc.tiling.schedule import SourceKernel
from kgc.tuned_defaults import TunedTable, TunedTableError, resolve


def knob_options() -> dict[str, Option]:
    """The options of kg-tile that set knobs: every knob that a registered
    schedule's config class offers (`KernelConfig.OPTIONS`), the built-in
    schedules' first, each with the kinds of kernel that have it."""
    offered: dict[str, list] = {}
    for schedule in reversed(list(schedules().values())):
        for knob, option in schedule.config_class.OPTIONS.items():
            offered.setdefault(knob, []).append((schedule, option))
    options = {}
    for knob, offers in offered.items():
        kinds = [schedule.kind for schedule, _ in offers]
        kinds = ", ".join(kinds[:-1]) + " and " + kinds[-1] if len(kinds) > 1 else kinds[0]
        schedule, option = offers[0]
        if knob not in schedule.config_class.FLAGS:
            options[knob] = Option(int, 0, f"{kinds} kernels: {option.help} (0: kgc chooses)")
        elif option.false_turns_off:
            options[knob] = Option(str, "auto", f"{kinds} kernels: {option.help} (true, false, "
                                                "or auto: kgc chooses)",
                                   choices=("auto", "true", "false"))
        else:
            options[knob] = Option(bool, False, f"{kinds} kernels: {option.help} (false leaves "
                                                "it to the kernel's config)")
    return options


def kernel_graph(kernel: ir.Operation) -> list[Node]:
    """The output nodes of a kernel in graph form."""
    block = kernel.regions[0].blocks[0]
    ops = [op.operation for op in block.operations][:-1]
    _, by_value = nodes_from_ops(ops, inputs=list(block.arguments))
    return [by_value[value] for value in block.operations[len(ops)].operands]


# plan_kernel's table when none is given: the one KGC_TUNED_DEFAULTS names.
FROM_ENVIRONMENT = "environment"


def kernel_knobs(kernel: ir.Operation) -> dict:
    """The knobs of `kernel`'s config attribute (name -> value), of whatever
    kind: they decide between schedules that match the same ops (a bare
    matmul's library call or Triton matmul)."""
    config = config_attribute(kernel)
    knobs = {}
    for index in range(0 if config is None else len(config)):
        entry = config[index]
        if isinstance(entry.attr, ir.BoolAttr):
            knobs[entry.name] = ir.BoolAttr(entry.attr).value
        elif isinstance(entry.attr, ir.IntegerAttr):
            knobs[entry.name] = ir.IntegerAttr(entry.attr).value
        else:
            knobs[entry.name] = entry.attr
    return knobs


def choose_schedule(kernel: ir.Operation, outputs: list[Node], options: KernelConfig | None,
                    target: Target | int | None,
                    table: TunedTable | None | str = FROM_ENVIRONMENT):
    """The schedule of a kernel in graph form: the kind of `options` where
    given, else the first matching schedule that takes the kernel with the
    knobs of its config attribute and the tuned-defaults `table` (as
    `plan_kernel` takes it)."""
    if options is not None:
        return schedule_for(outputs, kind=options.kind)
    dynamic = has_dynamic_extent(list(kernel.operands) + list(kernel.results))
    return schedule_for(outputs, kernel_knobs(kernel), target=target, dynamic=dynamic,
                        table=_table(table, target))


def _table(table: TunedTable | None | str, target: Target | int | None) -> TunedTable | None:
    """The table a setting names (`plan_kernel`'s `table`). Raises
    TunedTableError."""
    if not isinstance(table, str):
        return table
    return resolve(None if table == FROM_ENVIRONMENT else table, target_for(target).sm)


def _choice_knobs(outputs: list[Node], other_than=None) -> set[str]:
    """The knobs by which the schedules matching `outputs` (but
    `other_than`) decide whether they take the kernel (`library`)."""
    return {k for s in matching_schedules(outputs) if s is not other_than
            for k in s.choice_knobs}


def _without_other_choices(config, outputs: list[Node], schedule):
    """The config attribute less the knobs by which other matching
    schedules decide whether they take the kernel (`library = false` on a
    matmul that stays Triton's): they chose, and are not the chosen
    schedule's knobs."""
    if config is None:
        return None
    choosing = _choice_knobs(outputs, schedule) - set(schedule.config_class.knobs())
    kept = {config[i].name: config[i].attr for i in range(len(config))
            if config[i].name not in choosing}
    return ir.DictAttr.get(kept)


def plan_kernel(kernel: ir.Operation, options: KernelConfig | None = None,
                target: Target | int | None = None,
                planner: Planner | None = None,
                table: TunedTable | None | str = FROM_ENVIRONMENT
                ) -> tuple[KernelPlan, list[Node]]:
    """The plan of a kernel in graph form for `target` (a Target or an SM
    version; None: the default), with the knobs of its config attribute,
    overridden by those `options` sets: `planner`'s plan of a group of the
    same content and config (kg-fuse's, in the same pipeline run), else a
    new one. The kind of `options` picks the schedule where several match
    (a bare matmul: the library's or Triton's); without options, the knobs
    of the kernel's config and kgc's rules do. A kernel given no knob takes
    the tuned-defaults `table`'s config where it suits (a TunedTable, None
    for none, or a setting as kg-tile's `tuned-defaults` option takes it; by
    default the table `KGC_TUNED_DEFAULTS` names, `kgc.tuned_defaults`)."""
    name = kernel_name(kernel)
    outputs = kernel_graph(kernel)
    # A knob beside the config (the form before there was one) would be
    # ignored without a word.
    knobs = {k for s in schedules().values() for k in s.config_class.knobs()}
    stray = [n for n in kernel.attributes if n != CONFIG_ATTRIBUTE and n in knobs]
    if stray:
        value = kernel.attributes[stray[0]]
        raise PassFailure(f"kernel @{name}: knob {stray[0]} is set as an attribute of its own; "
                          f"knobs go in the kernel's config attribute: config = "
                          f"{{{stray[0]} = {value}}}", kernel.location)
    try:
        table = _table(table, target)
        schedule = choose_schedule(kernel, outputs, options, target, table)
        config = schedule.config_class.from_attribute(
            _without_other_choices(config_attribute(kernel), outputs, schedule), name)
        if options is not None:
            config = config.merged(options)
        plan = (planner if planner is not None else Planner()).plan(outputs, config, name,
                                                                    target, table)
    except TunedTableError as error:
        raise PassFailure(error.message, kernel.location) from None
    except ConfigError as error:
        raise PassFailure(str(error), kernel.location) from None
    except NotAtEverySize as reason:
        raise PassFailure(f"kernel @{name} cannot be tiled with a dynamic extent: {reason}",
                          kernel.location) from None
    except Unplannable as reason:
        raise PassFailure(f"kernel @{name} cannot be tiled: {reason}", kernel.location) from None
    return plan, outputs


@register_pass
class KgTile(Pass):
    argument = "kg-tile"
    summary = "Turn kernels in graph form into tile programs with chosen tile sizes and grid"
    plans_kernels = True

    kernel = Option(str, "", "apply the knobs to this kernel only (default: every kernel)")
    target = Option(int, DEFAULT_SM, "SM version to plan for (80, 86, 89, 90, ...): kgc's "
                                     "choices fill its SMs", choices=SUPPORTED_SMS)
    tuned_defaults = Option(str, "", "kgc's choice for a kernel given no knob: on (the "
                                     "target's shipped table), off (heuristics), or a table "
                                     "file or folder (default: KGC_TUNED_DEFAULTS, else on)")

    @classmethod
    def option_specs(cls) -> dict[str, Option]:
        # The knobs of the schedules registered when the pass is made.
        return {**{name.replace("_", "-"): option for name, option in knob_options().items()},
                **super().option_specs()}

    def _option_knobs(self) -> dict:
        """The knobs the options set."""
        knobs = {}
        for name, option in knob_options().items():
            value = getattr(self, name, option.default)
            if option.kind is int and value != 0:
                knobs[name] = value
            elif option.kind is str and value != "auto":
                knobs[name] = value == "true"
            elif option.kind is bool and value:
                knobs[name] = True
        return knobs

    def run(self, op: ir.Operation) -> None:
        knobs = self._option_knobs()
        kernels = [k for k in kernels_in(op) if not is_tiled(k)]
        if self.kernel and not any(kernel_name(k) == self.kernel for k in kernels):
            names = ", ".join("@" + kernel_name(k) for k in kernels) or "none"
            raise PassFailure(f"kg-tile: kernel={self.kernel} names no kernel in graph form "
                              f"(kernels: {names})", op.location)
        plans = []
        used: set[str] = set()
        for kernel in kernels:
            if self.kernel and kernel_name(kernel) != self.kernel:
                plans.append((kernel, None))
                continue
            try:
                outputs = kernel_graph(kernel)
                schedule = schedule_for(outputs, {**kernel_knobs(kernel), **knobs},
                                        target=self.target)
            except Unplannable as reason:
                raise PassFailure(f"kernel @{kernel_name(kernel)} cannot be tiled: {reason}",
                                  kernel.location) from None
            kind, cls = schedule.kind, schedule.config_class
            # A knob that chose between the schedules matching the kernel
            # (library=false keeping a bare matmul Triton) was used.
            choosing = _choice_knobs(outputs) & set(knobs)
            used |= choosing
            applicable = {k: v for k, v in knobs.items() if k in cls.knobs()}
            if self.kernel and len(applicable) + len(choosing - set(applicable)) < len(knobs):
                missing = ", ".join(k.replace("_", "-") for k in knobs
                                    if k not in applicable and k not in choosing)
                raise PassFailure(f"kg-tile: {kind} kernel @{self.kernel} has no knob {missing} "
                                  f"(its knobs: {', '.join(cls.knobs())})", kernel.location)
            used |= set(applicable)
            # The config's kind keeps the schedule chosen here, where the
            # options chose it.
            plans.append((kernel, cls(**applicable) if applicable or choosing else None))
        unused = [k for k in knobs if k not in used]
        if unused and kernels:
            kinds = [s.kind for s in schedules().values() if unused[0] in s.config_class.knobs()]
            raise PassFailure(f"kg-tile: option {unused[0].replace('_', '-')} applies to no kernel: "
                              f"only {' and '.join(kinds)} kernels have it", op.location)
        target = target_for(self.target)
        try:
            table = resolve(self.tuned_defaults, target.sm)
        except TunedTableError as error:
            raise PassFailure(error.message, op.location) from None
        # Outside a pipeline (or kg-tile on a file fused elsewhere) nothing
        # was planned: plan here.
        planner = self.planner if self.planner is not None else Planner()
        for kernel, options in plans:
            tile_kernel(kernel, options, target, planner, table)


def tile_kernel(kernel: ir.Operation, options: KernelConfig | None = None,
                target: Target | int | None = None,
                planner: Planner | None = None,
                table: TunedTable | None | str = FROM_ENVIRONMENT) -> ir.Operation:
    """Replaces `kernel` (in graph form) by the kernels its schedule makes of
    it: the tiled kernel, then the follow-ups (tiled here when they come in
    graph form, with kgc's heuristics: the search tunes the kernel they
    follow); returns the tiled kernel. `planner` gives the plans made
    before in the same pipeline run (None: none)."""
    plan, outputs = plan_kernel(kernel, options, target, planner, table)
    schedule = schedules()[plan.schedule]
    name = kernel_name(kernel)
    # A kernel over the dynamic extent was planned to hold at every size
    # (kgc.tiling.registry.plan_group), its dynamic axis found.
    axis = plan.dynamic_axis
    form = schedule.tiled_form(plan)
    kept = {n: kernel.attributes[n] for n in kernel.attributes if n != CONFIG_ATTRIBUTE}
    attributes = dict(kept)
    if form.suffix:
        attributes["sym_name"] = ir.StringAttr.get(name + form.suffix)
    attributes["kind"] = ir.StringAttr.get(plan.kind)
    attributes["grid"] = ir.DenseI64ArrayAttr.get(form.grid or plan.grid())
    attributes["iteration"] = ir.DenseI64ArrayAttr.get(list(plan.extents))
    attributes["tile"] = ir.DenseI64ArrayAttr.get(list(plan.tile))
    attributes[CONFIG_ATTRIBUTE] = plan.config.to_attribute()
    attributes.update(form.attributes)
    if plan.scalar_arguments:
        attributes["scalars"] = ir.DenseI64ArrayAttr.get(list(plan.scalar_arguments))
    if axis is not None:
        i64 = ir.IntegerType.get_signless(64)
        attributes[DYNAMIC_AXIS_ATTRIBUTE] = ir.IntegerAttr.get(i64, axis)
        attributes[DYNAMIC_GRID_ATTRIBUTE] = ir.DenseI64ArrayAttr.get(dynamic_grid(plan, axis))
    result_types = [r.type for r in kernel.results]
    with kernel.location, ir.InsertionPoint(kernel):
        tiled_types = result_types if form.results is None else [
            ir.RankedTensorType.get(list(shape), ir.Type.parse(element))
            for shape, element in form.results]
        tiled = tiled_kernel(list(kernel.operands), tiled_types, attributes, kernel.location,
                             lambda builder: schedule.generate(plan, builder),
                             dynamic_axis=axis)
    source = SourceKernel(name, list(kernel.operands), result_types,
                          {n: v for n, v in kept.items() if n != "sym_name"}, kernel.location,
                          options)
    with ir.InsertionPoint(kernel):
        results, follow_ups = schedule.follow_up(plan, list(tiled.results), source)
    for old, new in zip(kernel.results, results):
        old.replace_all_uses_with(new)
    kernel.erase()
    for follow_up in follow_ups:
        if not is_tiled(follow_up):
            tile_kernel(follow_up, target=target, planner=planner, table=None)
    return tiled
