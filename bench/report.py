"""The results of a `kgc bench` run: a table, JSON and a bar chart.

A `Row` holds one workload's measurements: the GPU time of each contender
(or why it has none), the floor, and kgc's status (ok, failed to compile or
run, or wrong: its result differs from eager's and it was not timed). What
follows from them is computed here and nowhere else:

    best torch   the fastest of eager, torch.compile, max-autotune
    speedup      best torch time / kgc time       (> 1: kgc is faster)
    default vs searched
                 kgc default time / kgc time      (> 1: the search found
                                                   faster kernels than kgc's
                                                   default compile)
    % of floor   floor / kgc time * 100           (100: kgc is at the floor)
    target met   speedup >= the workload's target, and for the targets
                 that bound it, kgc time <= floor_ratio * floor

It also says where a run's minutes went: kgc's search time per workload
and whether its choice came from the cache, and each torch.compile mode's
compile time (its first call), so that a run that outgrows a host's time
limit shows its long pole.

`BenchResult.to_dict()` is the JSON (`SCHEMA_VERSION` names its layout;
"provenance" says what produced it: `kgc.bench.provenance`),
`header()` and `table()` the text and `write_chart(path)` the PNG.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

from kgc.bench.floor import describe
from kgc.bench.runners import KGC, KGC_DEFAULT, LABELS, RUNNERS, TORCH_RUNNERS
from kgc.bench.workloads import Target

# 2: the peaks are the best of several probes ("memory_GB_per_s" and each
# probe's rate, where 1 had "copy_GB_per_s"); rows have "compile_s".
# 3: kgc's default compile beside the searched one: "kgc-default" among the
# runners and times, rows have "kgc_default_status", "kgc_default_compile_s"
# and "default_vs_searched".
# 4: "provenance" (kgc.bench.provenance: commit, GPU, versions, date,
# command) replaces the settings' "versions".
SCHEMA_VERSION = 4
OK, FAILED, WRONG = "ok", "failed", "wrong"


@dataclasses.dataclass
class Row:
    workload: str
    title: str
    kind: str
    target: Target
    floor_us: float
    bytes: int
    flops: int
    times_us: dict[str, float] = dataclasses.field(default_factory=dict)
    errors: dict[str, str] = dataclasses.field(default_factory=dict)  # runner -> why no time
    kgc_status: str = OK
    kgc_kernels: int | None = None
    kgc_cached: bool | None = None  # the choice came from the search cache
    # superoptimize's wall time, seconds (the cache's look-up and loading
    # the kernels when cached)
    kgc_search_s: float | None = None
    # kgc's choice (a GraphConfig as JSON data) and the search's report
    # (every candidate's status, time and device), to explain a row later.
    kgc_config: dict | None = None
    kgc_search: dict | None = None
    # A torch contender's first call (its compile for torch.compile), seconds.
    compile_s: dict[str, float] = dataclasses.field(default_factory=dict)
    # kgc's default compile (no search): its status (None: not run) and the
    # compile's wall time, seconds; its time is times_us["kgc-default"].
    kgc_default_status: str | None = None
    kgc_default_compile_s: float | None = None

    @property
    def best_torch(self) -> tuple[str, float] | None:
        timed = [(self.times_us[r], r) for r in TORCH_RUNNERS if r in self.times_us]
        if not timed:
            return None
        time_us, runner = min(timed)
        return runner, time_us

    @property
    def speedup(self) -> float | None:
        best = self.best_torch
        if best is None or KGC not in self.times_us:
            return None
        return best[1] / self.times_us[KGC]

    @property
    def default_vs_searched(self) -> float | None:
        """kgc's default compile's time over the searched kernel's (1.0: the
        search found nothing faster)."""
        if KGC not in self.times_us or KGC_DEFAULT not in self.times_us:
            return None
        return self.times_us[KGC_DEFAULT] / self.times_us[KGC]

    @property
    def floor_ratio(self) -> float | None:
        """kgc's time in floors (1.0: at the floor)."""
        if KGC not in self.times_us or not self.floor_us > 0:
            return None
        return self.times_us[KGC] / self.floor_us

    @property
    def percent_of_floor(self) -> float | None:
        ratio = self.floor_ratio
        return None if ratio is None else 100.0 / ratio

    @property
    def target_met(self) -> bool | None:
        if self.kgc_status != OK:
            return False
        return self.target.met(self.speedup, self.floor_ratio)

    def to_dict(self) -> dict:
        best = self.best_torch
        return {
            "workload": self.workload, "title": self.title, "kind": self.kind,
            "bytes": self.bytes, "flops": self.flops, "floor_us": self.floor_us,
            "times_us": dict(self.times_us), "errors": dict(self.errors),
            "kgc_status": self.kgc_status, "kgc_kernels": self.kgc_kernels,
            "kgc_cached": self.kgc_cached, "kgc_search_s": self.kgc_search_s,
            "kgc_config": self.kgc_config, "kgc_search": self.kgc_search,
            "compile_s": dict(self.compile_s),
            "kgc_default_status": self.kgc_default_status,
            "kgc_default_compile_s": self.kgc_default_compile_s,
            "default_vs_searched": self.default_vs_searched,
            "best_torch": None if best is None else {"runner": best[0], "time_us": best[1]},
            "speedup": self.speedup, "percent_of_floor": self.percent_of_floor,
            "target": {"speedup": self.target.speedup, "floor_ratio": self.target.floor_ratio,
                       "text": self.target.describe()},
            "target_met": self.target_met,
        }


@dataclasses.dataclass
class BenchResult:
    device: str
    peaks: dict  # DevicePeaks.to_dict()
    settings: dict  # effort, reps, quick, seed
    rows: list[Row]
    # What produced the result (kgc.bench.provenance.collect()); None only
    # for a result made up by hand.
    provenance: dict | None = None

    @property
    def failed(self) -> list[Row]:
        """The rows where kgc did not produce a checked time."""
        return [row for row in self.rows if row.kgc_status != OK]

    def to_dict(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "provenance": self.provenance,
                "device": self.device, "peaks": self.peaks,
                "settings": self.settings, "runners": {r: LABELS[r] for r in RUNNERS},
                "rows": [row.to_dict() for row in self.rows]}

    def write_json(self, path) -> None:
        pathlib.Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    def header(self, wall_s: float | None = None) -> str:
        """What the table was measured on and with: the device, the peaks
        the floors come from and the probes each is the best of, the
        settings, and the run's wall time when given."""
        settings = self.settings
        line = (f"kgc bench on {self.device}: effort {settings['effort']}, "
                f"{settings['reps']} reps, seed {settings['seed']}")
        if wall_s is not None:
            line += f", {wall_s:.0f} s"
        return line + "\nfloor from\n  " + describe(self.peaks, "\n  ")

    def table(self) -> str:
        """The rows as text: us per contender (kgc searched, kgc's default
        compile, the torch contenders), kgc's speedup over the best torch,
        % of floor, the target and whether it is met, and kgc's search time
        ("cached": its choice came from the cache); then the reasons of
        every missing time and each torch.compile mode's compile time."""
        # Each contender by its short name (max-autotune's label is long).
        headers = ["workload", *RUNNERS, "floor", "speedup", "% floor", "target", "met",
                   "kgc search"]
        lines = []
        for row in self.rows:
            cells = [row.workload]
            for runner in RUNNERS:
                if runner in row.times_us:
                    cells.append(f"{row.times_us[runner]:.1f}")
                elif (runner == KGC and row.kgc_status == WRONG) or \
                        (runner == KGC_DEFAULT and row.kgc_default_status == WRONG):
                    cells.append("WRONG")
                else:
                    cells.append("failed" if runner in row.errors else "-")
            speedup, percent = row.speedup, row.percent_of_floor
            met = row.target_met
            cells += [f"{row.floor_us:.1f}",
                      "-" if speedup is None else f"{speedup:.2f}x",
                      "-" if percent is None else f"{percent:.0f}%",
                      row.target.describe(), {True: "yes", False: "NO", None: "-"}[met],
                      _search_cell(row)]
            lines.append(cells)
        widths = [max(len(str(c)) for c in column) for column in zip(headers, *lines)]
        out = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                         for i, (h, w) in enumerate(zip(headers, widths)))]
        out += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                          for i, (c, w) in enumerate(zip(cells, widths))) for cells in lines]
        met = sum(row.target_met is True for row in self.rows)
        out.append(f"times in us (GPU time per call, median); speedup: best torch / kgc; "
                   f"% floor: floor / kgc; targets met: {met} of {len(self.rows)}")
        for row in self.rows:
            for runner, reason in row.errors.items():
                out.append(f"  {row.workload}: {LABELS[runner]}: {reason}")
        compiled = [row for row in self.rows if row.compile_s]
        if compiled:
            out.append("torch.compile's first call (its compile), s:")
            out += [f"  {row.workload}: " + ", ".join(
                f"{LABELS[r] if r != 'max-autotune' else r} {s:.1f}"
                for r, s in row.compile_s.items()) for row in compiled]
        return "\n".join(out)

    def write_chart(self, path) -> None:
        """A PNG bar chart: each workload's times relative to its best torch
        contender (lower is faster), one bar per contender and the floor."""
        import matplotlib

        matplotlib.use("Agg")  # headless: no display on GPU hosts or in CI
        import matplotlib.pyplot as plt

        series = [*RUNNERS, "floor"]
        tallest = 1.0
        width = 0.8 / len(series)
        figure, axes = plt.subplots(figsize=(max(6.0, 1.3 * len(self.rows) + 2), 4.5))
        for index, name in enumerate(series):
            heights, positions = [], []
            for position, row in enumerate(self.rows):
                best = row.best_torch
                value = row.floor_us if name == "floor" else row.times_us.get(name)
                if best is None or value is None:
                    continue
                heights.append(value / best[1])
                positions.append(position + (index - (len(series) - 1) / 2) * width)
            axes.bar(positions, heights, width, label=LABELS.get(name, name))
            tallest = max([tallest, *heights])
        for position, row in enumerate(self.rows):
            for runner, status in ((KGC, row.kgc_status), (KGC_DEFAULT, row.kgc_default_status)):
                if status in (OK, None):
                    continue
                # The runner's slot, where its bar is missing.
                offset = (series.index(runner) - (len(series) - 1) / 2) * width
                axes.annotate(f"{LABELS[runner]} {status}", (position + offset, 0.05),
                              ha="center", va="bottom", rotation=90, fontsize=8, color="red")
        axes.axhline(1.0, color="gray", linewidth=0.8, linestyle="--")
        axes.set_xticks(range(len(self.rows)), [row.workload for row in self.rows],
                        rotation=30, ha="right")
        axes.set_ylim(0, tallest * 1.3)  # room for the legend above the bars
        axes.set_ylabel("time / best torch (lower is faster)")
        axes.set_title(f"kgc bench on {self.device}")
        axes.legend(fontsize=8, ncols=3)
        figure.tight_layout()
        figure.savefig(path, format="png", dpi=120)
        plt.close(figure)


def _search_cell(row: Row) -> str:
    """kgc's search time, "cached" when its choice came from the cache."""
    if row.kgc_search_s is None:
        return "-"
    return f"{row.kgc_search_s:.1f}s" + (" cached" if row.kgc_cached else "")
