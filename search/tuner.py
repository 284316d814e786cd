"""superoptimize: search a graph's variants, check each, time, keep the best.

    graph = kgc.superoptimize(g)          # or g.superoptimize(), kgc tune FILE
    graph(x, w)                           # the fastest checked variant
    graph.config                          # the choice, as JSON-able data

The stages, each a module of this package:

1. the variant space (`space`): kg-fuse's candidate partitions, the kernels
   they make (each by content, tuned once however many partitions make
   it), and the configs to try for each kernel;
2. lowering each (kernel, config) to TTIR here, then compiling to cubin in
   worker processes of the target (`kgc.pipeline.triton_stage.worker_pool`),
   all of them side by side, each within a timeout (a kernel found in the
   kernel cache, `kgc.pipeline.kernel_cache`, when one is on, is not
   compiled again); or both as tasks of a Ray cluster (`farm`);
3. checking and timing each compiled candidate on the GPUs (`profile`):
   skipped when it exceeds the device's resources, rejected when its results
   differ from torch's, timed otherwise;
4. choosing: each kernel's fastest config, each partition's time as the sum
   of its kernels', the fastest partition; the whole chosen graph is then
   checked and timed once more beside kgc's default compile of the graph,
   and the default is kept unless the choice is faster; the report
   (`SearchReport`) has a row for every candidate, these two included, with
   its status (timed, rejected, skipped, ...) and the reason for a
   rejection, and the search logs a warning naming how many were rejected;
5. the cache (`cache`): the choice and its compiled kernels are stored under
   a key of the graph, the device and the versions, so a later search of the
   same graph compiles and times nothing.

`budget_s` bounds the search's wall time: the default config of every
kernel is compiled and timed first, so a search cut short still returns
something no slower than the default compile.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import pathlib
import tempfile
import time
from typing import Callable, Mapping, Sequence

from mlir import ir

from kgc.diagnostics import KgcError
from kgc.search.farm import Farm
from kgc.search.cache import EVIDENCE, Cache, CacheKey, Entry, installed_versions
from kgc.pipeline.config import GraphConfig
from kgc.pipeline.triton_stage import compile_jobs
from kgc.search.profile import REJECTED, TIMED, KernelTrial, Outcome, TrialSettings
from kgc.search.trials import close_workers, run_trials
from kgc.search.kernels import FUNCTION, compile_candidate
from kgc.search.space import EFFORT_CONFIGS, KernelVariants, variant_space
from kgc.tuned_defaults import resolve as resolve_tuned_defaults

_LOG = logging.getLogger(__name__)
FAILED, OVER_BUDGET, PRUNED = "failed", "over budget", "pruned"
# The signature of the rows of the whole graphs checked and timed last.
GRAPH = "graph"
# Partitions whose kernels at their default configs take more than this
# times the fastest partition's are not tuned further.
PRUNE = 1.5


@dataclasses.dataclass
class CandidateRow:
    """One line of the search's table."""

    kernel: str  # its name in the first partition that made it; @function: the whole graph
    signature: str  # the kernel by content (names repeat across partitions); GRAPH
    config: dict
    default: bool  # kgc's own choice for the kernel
    status: str  # timed, rejected, skipped, failed, over budget, pruned
    time_us: float | None = None
    reason: str = ""
    device: int | None = None


@dataclasses.dataclass
class SearchReport:
    rows: list[CandidateRow]
    partitions: list[dict]  # partition, origin, kernels, time_us (sum of best kernel times)
    chosen_us: float | None
    default_us: float | None
    wall_s: float
    cached: bool = False
    # Seconds spent lowering to TTIR, compiling to cubin, and checking and
    # timing on the GPUs (where a search's wall time goes).
    phases_s: dict = dataclasses.field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Candidates by status, the whole-graph checks of the last step
        included (a rejected count is kgc kernels that gave wrong results)."""
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row.status] = counts.get(row.status, 0) + 1
        return counts

    def rejected(self) -> list[CandidateRow]:
        """The candidates whose results failed the check against torch
        (`kgc.search.verify`), each with its reason."""
        return [row for row in self.rows if row.status == REJECTED]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SearchReport":
        data = dict(data)
        data["rows"] = [CandidateRow(**row) for row in data["rows"]]
        return cls(**data)

    def table(self) -> str:
        lines = [f"{'kernel':<36} {'status':<11} {'time us':>9}  config / reason"]
        for row in sorted(self.rows, key=lambda r: (r.kernel, r.time_us is None, r.time_us or 0)):
            knobs = " ".join(f"{k}={v}" for k, v in row.config.items() if k != "kind")
            time_text = f"{row.time_us:9.2f}" if row.time_us is not None else f"{'-':>9}"
            lines.append(f"{row.kernel:<36} {row.status:<11} {time_text}  {knobs}"
                         + (f"  ({row.reason})" if row.reason else ""))
        return "\n".join(lines)


def superoptimize(source, *, function: str | None = None, target: str | int | None = None,
                  warmup_iters: int = 16, profile_iters: int = 1000,
                  budget_s: float | None = None, effort: str = "default",
                  jobs: int | None = None, timeout_s: float = 120.0,
                  configs: Mapping[str, Sequence] | None = None, cache: bool | str | Cache = True,
                  devices: Sequence[int] | None = None, verbose: bool = True,
                  cluster: str | None = None, tamper: Callable | None = None):
    """Searches the variants of `source` (a kgc.Graph, MLIR text or an .mlir
    path) on this machine's GPU and returns the fastest checked one as a
    compiled graph (`kgc.runtime.CompiledGraph`) with `.config` (a
    GraphConfig) and `.report` (a SearchReport). See the module docstring.

    `effort` ("low", "default", "high") sets how many configs of each
    kernel are tried; `configs` adds configs of your own by kernel kind
    ({"matmul": [MatmulConfig(...)]}); `jobs` is the number of compile
    workers (default: `compile_jobs()`, one per CPU); `timeout_s` bounds
    one candidate's compile; `cache=False` neither reads nor writes the cache (nor the
    kernel cache), and `cache="redis://host:port/db"` shares both through
    that server (as `KGC_CACHE_URL` does); `devices` picks the GPUs
    (default: every visible one, of one model); `cluster` ("ray", or a Ray
    cluster's address) lowers and compiles the candidates as tasks of that
    cluster (`farm`), the checking and timing staying on this machine's
    GPUs; `verbose` shows a progress bar. `tamper` is a test hook (see
    profile.TrialSettings).
    """
    from kgc.parsing import canonical_source
    from kgc.pipeline.stages import parse_target
    from kgc.runtime import cuda_available

    _check_arguments(warmup_iters, profile_iters, budget_s, effort, jobs, timeout_s)
    if cluster is not None:
        Farm.require(cluster)
    if not cuda_available():
        raise KgcError("superoptimize runs and times candidates on a GPU: it needs a CUDA device, "
                       "and torch sees none")
    import torch

    started = time.monotonic()
    visible = torch.cuda.device_count()
    if devices is not None:
        devices = list(devices)
        if not devices or any(isinstance(d, bool) or not isinstance(d, int)
                              or not 0 <= d < visible for d in devices):
            raise KgcError(f"superoptimize: devices must be indices of visible GPUs (0 to "
                           f"{visible - 1}), got {devices}")
    text, function, _ = canonical_source(source, function)
    device = (devices or [torch.cuda.current_device()])[0]
    major, minor = torch.cuda.get_device_capability(device)
    arch = parse_target(target) if target is not None else parse_target(major * 10 + minor)
    store = (cache if isinstance(cache, Cache) else Cache(remote=cache) if isinstance(cache, str)
             else Cache() if cache else None)
    key = CacheKey(text, torch.cuda.get_device_name(device), (major, minor), installed_versions(),
                   (("effort", effort), ("function", function), ("target", str(arch)),
                    # The default compile the choice is checked against.
                    ("tuned_defaults", _tuned_defaults_fingerprint(arch)),
                    ("configs", repr(sorted((k, sorted(map(repr, v))) for k, v in
                                            (configs or {}).items())))))
    search = _Search(text, function, arch, effort, configs or {}, jobs or compile_jobs(),
                     timeout_s, TrialSettings(warmup_iters, profile_iters, None, tamper),
                     devices, budget_s, verbose, started, cluster)
    if cache is False:
        search.kernel_cache = False
    elif isinstance(cache, str):
        search.kernel_cache = cache
    if store is None:
        return search.run()
    with store.locked(key):
        entry = store.load(key)
        if entry is not None:
            _LOG.info("superoptimize: cache hit for @%s (%s)", function, store.path(key))
            return _from_entry(entry, function, time.monotonic() - started)
        graph = search.run()
        store.store(key, _to_entry(graph, key))
        return graph


def _tuned_defaults_fingerprint(sm: int) -> str:
    """The tuned-defaults table a default compile for sm_<sm> reads here
    (`kgc.tuned_defaults`), by content; "none" for the heuristics alone."""
    table = resolve_tuned_defaults(None, sm)
    return "none" if table is None else table.fingerprint()


def _check_arguments(warmup_iters, profile_iters, budget_s, effort, jobs, timeout_s) -> None:
    def positive_int(name, value, least):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise KgcError(f"superoptimize: {name} must be an integer >= {least}, got {value!r}")

    positive_int("warmup_iters", warmup_iters, 0)
    positive_int("profile_iters", profile_iters, 1)
    if jobs is not None:
        positive_int("jobs", jobs, 1)
    if effort not in EFFORT_CONFIGS:
        raise KgcError(f"superoptimize: effort must be one of {', '.join(EFFORT_CONFIGS)}, got "
                       f"{effort!r}")
    for name, value in (("budget_s", budget_s), ("timeout_s", timeout_s)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not value > 0):
            raise KgcError(f"superoptimize: {name} must be a positive number of seconds, got "
                           f"{value!r}")


class _Search:
    def __init__(self, text, function, target, effort, configs, jobs, timeout_s, settings,
                 devices, budget_s, verbose, started, cluster=None):
        self.text, self.function, self.target = text, function, target
        self.cluster = cluster  # None: lower here, compile in this machine's workers
        # The kernel cache of the candidates' compiles (KernelCache.resolve):
        # by default the one KGC_CACHE_URL or KGC_KERNEL_CACHE=1 asks for.
        self.kernel_cache = None
        self.effort, self.extra_configs = effort, configs
        self.jobs, self.timeout_s, self.settings = jobs, timeout_s, settings
        self.devices, self.budget_s, self.verbose, self.started = devices, budget_s, verbose, started
        self.rows: list[CandidateRow] = []
        self.phases_s: dict[str, float] = {}
        # Each GPU's worker process (kgc.search.isolation), kept from the
        # first round of checks to the whole graphs' check.
        self.workers: dict = {}

    def over_budget(self) -> bool:
        return self.budget_s is not None and time.monotonic() - self.started > self.budget_s

    def run(self):
        try:
            return self._run()
        finally:
            close_workers(self.workers)

    def _run(self):
        partitions, kernels = variant_space(self.text, self.function, self.effort,
                                             self.target)
        for variants in kernels.values():
            extra = [c for c in self.extra_configs.get(variants.kind, [])
                     if c not in variants.configs]
            variants.configs.extend(extra)
        total = sum(len(v.configs) for v in kernels.values())
        best: dict[str, tuple[int, float]] = {}
        with _Progress(total, self.verbose) as progress:
            # Round 1: every kernel's default config, which prices every
            # partition; round 2: the other configs of the kernels of the
            # partitions within PRUNE of the fastest.
            first = [(signature, 0) for signature in kernels]
            self._measure(kernels, first, best, progress)
            kept = self._promising(partitions, best)
            second = [(signature, index) for signature, variants in kernels.items()
                      if signature in kept for index in range(1, len(variants.configs))]
            for signature, variants in kernels.items():
                if signature not in kept:
                    for config in variants.configs[1:]:
                        self._row(variants, config, PRUNED, progress=progress)
            self._measure(kernels, second, best, progress)
        chosen = self._choose(partitions, kernels, best)
        return self._finish(chosen, partitions, kernels, best)

    def _measure(self, kernels, selection, best, progress) -> None:
        if self.cluster is not None:
            with self._phase("compile"):
                compiled = self._compile_on_cluster(kernels, selection, progress)
            with self._phase("profile"):
                timed = self._profile(kernels, compiled, progress)
            self._keep_best(timed, best)
            return
        with self._phase("lower"):
            candidates = self._lower(kernels, selection, progress)
        with self._phase("compile"):
            compiled = self._compile(kernels, candidates, progress)
        with self._phase("profile"):
            timed = self._profile(kernels, compiled, progress)
        self._keep_best(timed, best)

    @staticmethod
    def _keep_best(timed, best) -> None:
        for signature, (index, time_us) in timed.items():
            if signature not in best or time_us < best[signature][1]:
                best[signature] = (index, time_us)

    @contextlib.contextmanager
    def _phase(self, name: str):
        started = time.monotonic()
        try:
            yield
        finally:
            self.phases_s[name] = self.phases_s.get(name, 0.0) + time.monotonic() - started

    def _promising(self, partitions, best) -> set[str]:
        """The kernels of the partitions whose default configs come within
        PRUNE of the fastest partition's."""
        totals = []
        for variant in partitions:
            if all(signature in best for _, signature in variant.kernels):
                totals.append((sum(best[s][1] for _, s in variant.kernels), variant))
        if not totals:
            return set()
        fastest = min(total for total, _ in totals)
        return {signature for total, variant in totals if total <= PRUNE * fastest
                for _, signature in variant.kernels}

    # -- 2. lowering and compiling ---------------------------------------------

    def _lower(self, kernels: dict[str, KernelVariants], selection, progress) -> dict:
        """(signature, config index) -> the kernel's CompiledModule at TTIR,
        for each selected candidate that lowers (a failed row otherwise)."""
        lowered = {}
        for signature, index in selection:
            variants = kernels[signature]
            config = variants.configs[index]
            if index > 0 and self.over_budget():
                self._row(variants, config, OVER_BUDGET, progress=progress)
                continue
            try:
                lowered[signature, index] = compile_candidate(variants.launch_text, config,
                                                              self.target, emit="ttir")
            except KgcError as error:
                self._row(variants, config, FAILED, reason=_first_line(error),
                          progress=progress)
        return lowered

    def _compile(self, kernels, lowered: dict, progress) -> dict:
        import triton

        from kgc.pipeline.artifact import Artifact, content_hash
        from kgc.pipeline.kernel_cache import KernelCache
        from kgc.pipeline.triton_stage import worker_pool

        store = KernelCache.resolve(self.kernel_cache)
        pool = worker_pool(self.target, self.jobs)
        futures = {}
        for key, module in lowered.items():
            # Most candidates are one kernel; a schedule may make more (a
            # split-KV attention and the kernel combining its splits).
            futures[key] = []
            for kernel in module.kernels.values():
                if kernel.library is not None:
                    continue  # a library kernel is a call: nothing to compile
                ttir, options = kernel.asm["ttir"], kernel.options
                request = content_hash(ttir, options, self.target, triton.__version__)
                cached = store.load(request) if store else None
                futures[key].append((kernel, request, cached if cached is not None else
                                     pool.submit(ttir, options, self.target, self.timeout_s)))
        compiled = {}
        for key, pending in futures.items():
            signature, index = key
            variants = kernels[signature]
            outcomes = []
            for kernel, request, future in pending:
                if isinstance(future, Artifact):
                    outcomes.append((kernel, future))
                    continue
                outcome = future.result().outcome
                if store is not None and isinstance(outcome, Artifact):
                    store.stats["compiled"] += 1
                    store.store(outcome, request)
                outcomes.append((kernel, outcome))
            failed = [outcome for _, outcome in outcomes if not isinstance(outcome, Artifact)]
            if failed:
                self._row(variants, variants.configs[index], FAILED,
                          reason=_first_line(failed[0].message), progress=progress)
                continue
            module = lowered[key]
            for kernel, outcome in outcomes:
                kernel.artifact = outcome
                kernel.asm = dict(outcome.asm)
                kernel.shared = outcome.shared
            module.emitted = "cubin"
            compiled[key] = module
            progress.count("compiled")
        return compiled

    def _compile_on_cluster(self, kernels, selection, progress) -> dict:
        """`_lower` and `_compile` as tasks of the Ray cluster (`farm`)."""
        requests, keys = [], []
        for signature, index in selection:
            variants = kernels[signature]
            if index > 0 and self.over_budget():
                self._row(variants, variants.configs[index], OVER_BUDGET, progress=progress)
                continue
            keys.append((signature, index))
            requests.append((variants.launch_text, variants.configs[index], self.target,
                             self.timeout_s, self.kernel_cache))
        if not requests:
            return {}
        results = Farm.connect(self.cluster).lower_and_compile(requests)
        compiled = {}
        for (signature, index), result in zip(keys, results):
            variants = kernels[signature]
            if isinstance(result, str):
                self._row(variants, variants.configs[index], FAILED, reason=result,
                          progress=progress)
                continue
            compiled[signature, index] = result
            progress.count("compiled")
        return compiled

    # -- 3. checking and timing ---------------------------------------------------

    def _profile(self, kernels, compiled: dict, progress) -> dict[str, tuple[int, float]]:
        trials = []
        for signature, variants in kernels.items():
            candidates = [(f"{signature}:{index}", module) for (s, index), module
                          in sorted(compiled.items(), key=lambda item: item[0][1]) if s == signature]
            if candidates:
                trials.append(KernelTrial(signature, FUNCTION, variants.inline_text,
                                          candidates))

        def done(trial: KernelTrial, outcomes: list[Outcome]) -> None:
            variants = kernels[trial.signature]
            for outcome in outcomes:
                index = int(outcome.candidate.rsplit(":", 1)[1])
                self._row(variants, variants.configs[index], outcome.status, outcome.time_us,
                          outcome.reason, outcome.device, progress)

        if not trials:
            return {}
        results = run_trials(trials, self.settings, self.devices, done, self.workers)
        best: dict[str, tuple[int, float]] = {}
        for signature, outcomes in results.items():
            timed = [(int(o.candidate.rsplit(":", 1)[1]), o.time_us) for o in outcomes
                     if o.status == TIMED]
            if timed:
                best[signature] = min(timed, key=lambda item: (item[1], item[0]))
        return best

    # -- 4. choosing ----------------------------------------------------------------

    def _choose(self, partitions, kernels, best) -> GraphConfig:
        self.partition_rows = []
        choice, choice_time = None, None
        for variant in partitions:
            if all(signature in best for _, signature in variant.kernels):
                total = sum(best[signature][1] for _, signature in variant.kernels)
            else:
                total = None
            self.partition_rows.append({"partition": variant.partition, "origin": variant.origin,
                                        "kernels": [name for name, _ in variant.kernels],
                                        "time_us": total})
            if total is not None and (choice_time is None or total < choice_time):
                choice, choice_time = variant, total
        if choice is None:
            raise KgcError(f"superoptimize: no variant of @{self.function} compiled and passed "
                           f"the check against torch; first reasons: {self._first_reasons()}")
        return GraphConfig(self.function, choice.partition,
                           {name: kernels[signature].configs[best[signature][0]]
                            for name, signature in choice.kernels})

    def _compile_graph(self, config: GraphConfig | None):
        from kgc.pipeline.compiler import compile_module
        from kgc.runtime import CompiledGraph

        with ir.Context() as context:
            context.allow_unregistered_dialects = True
            module = ir.Module.parse(self.text).operation
            compiled = compile_module(module, target=self.target, config=config, jobs=self.jobs,
                                      cache=self.kernel_cache)
        return CompiledGraph(compiled, self.function)

    def _finish(self, chosen: GraphConfig, partitions, kernels, best):
        default_config = GraphConfig(self.function)
        candidates = [(chosen, self._compile_graph(chosen)),
                      (default_config, self._compile_graph(None))]
        trial = KernelTrial(GRAPH, self.function, self.text,
                            [(str(i), graph.module) for i, (_, graph) in enumerate(candidates)])
        settings = dataclasses.replace(self.settings, tamper=None)
        import torch

        device = (self.devices or [torch.cuda.current_device()])[0]
        outcomes = run_trials([trial], settings, [device], workers=self.workers)[GRAPH]
        # The whole graphs are candidates too: a rejection here (a choice
        # whose kernels pass alone but not together) is counted and said.
        for (config, _), outcome in zip(candidates, outcomes, strict=True):
            self.rows.append(CandidateRow(
                f"@{self.function}", GRAPH, config.to_dict(), config is default_config,
                outcome.status, outcome.time_us, outcome.reason, outcome.device))
        times = [o.time_us if o.status == TIMED else None for o in outcomes]
        if times[0] is not None and (times[1] is None or times[0] < times[1]):
            config, graph = candidates[0]
        else:
            if times[1] is None:
                raise KgcError(f"superoptimize: the default compile of @{self.function} failed "
                               f"its check: {outcomes[1].reason}")
            config, graph = candidates[1]
            _LOG.info("superoptimize: the default compile (%.2f us) is at least as fast as the "
                      "search's choice (%s us); keeping it", times[1], times[0])
        graph.config = config
        graph.report = SearchReport(self.rows, self.partition_rows, times[0], times[1],
                                    time.monotonic() - self.started,
                                    phases_s={k: round(v, 3) for k, v in self.phases_s.items()})
        rejected = graph.report.rejected()
        if rejected:
            _LOG.warning("superoptimize: %d candidate(s) of @%s gave wrong results and were "
                         "rejected; first reasons: %s", len(rejected), self.function,
                         self._first_reasons(statuses=(REJECTED,)))
        return graph

    def _first_reasons(self, count: int = 3, statuses: tuple[str, ...] | None = None) -> str:
        """The first distinct reasons candidates (of `statuses`, default
        all) were turned down for, those of kgc's own configs first: what a
        user can act on when none passed."""
        rows = sorted((r for r in self.rows if r.reason
                       and (statuses is None or r.status in statuses)),
                      key=lambda r: not r.default)
        reasons: dict[str, str] = {}
        for row in rows:
            if row.reason not in reasons:
                reasons[row.reason] = (f"{row.kernel}{' (default config)' if row.default else ''} "
                                       f"{row.status}: {row.reason}")
            if len(reasons) == count:
                break
        return "; ".join(reasons.values()) or "none recorded"

    def _row(self, variants: KernelVariants, config, status, time_us=None, reason="",
             device=None, progress=None) -> None:
        self.rows.append(CandidateRow(variants.name, variants.signature, config.to_dict(),
                                      config == variants.configs[0], status, time_us, reason,
                                      device))
        if progress is not None:
            progress.count(status, time_us)


class _Progress:
    """A tqdm bar over the candidates with counts by status and the best
    time so far; silent when not verbose."""

    def __init__(self, total: int, verbose: bool):
        self.total, self.verbose = total, verbose
        self.counts: dict[str, int] = {}
        self.best: float | None = None
        self.bar = None

    def __enter__(self):
        if self.verbose:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, desc="superoptimize", unit="candidate")
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()

    def count(self, status: str, time_us: float | None = None) -> None:
        self.counts[status] = self.counts.get(status, 0) + 1
        if time_us is not None:
            self.best = time_us if self.best is None else min(self.best, time_us)
        _LOG.debug("candidate %s %s", status, time_us)
        if self.bar is None:
            return
        if status != "compiled":
            self.bar.update(1)
        postfix = {k: v for k, v in sorted(self.counts.items())}
        if self.best is not None:
            postfix["best_us"] = f"{self.best:.2f}"
        self.bar.set_postfix(postfix, refresh=False)


def _first_line(error) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# -- the cache's entries ---------------------------------------------------------

def _to_entry(graph, key: CacheKey) -> Entry:
    with tempfile.TemporaryDirectory(prefix="kgc-entry-") as directory:
        graph.module.write(directory, graph.name)
        root = pathlib.Path(directory)
        files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
                 if p.is_file() and (p.name == "manifest.json" or p.parent.name == "kernels")}
    return Entry({"graph": graph.config.to_dict(), "report": graph.report.to_dict(),
                  EVIDENCE: _evidence(graph, key)}, files)


def _evidence(graph, key: CacheKey) -> dict:
    """What a machine that did not search needs to trust a result: the
    check's verdict on the whole graph kept, on a GPU of the key's model."""
    kept = graph.config.to_dict()
    rows = [row for row in graph.report.rows if row.signature == GRAPH and row.config == kept]
    row = rows[0] if rows else None
    return {"gpu": key.device, "capability": list(key.capability),
            "status": row.status if row else "unchecked",
            "time_us": row.time_us if row else None, "device": row.device if row else None}


def _from_entry(entry: Entry, function: str, wall_s: float):
    from kgc.pipeline.compiler import load_module
    from kgc.runtime import CompiledGraph

    with tempfile.TemporaryDirectory(prefix="kgc-entry-") as directory:
        root = pathlib.Path(directory)
        for name, data in entry.files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        graph = CompiledGraph(load_module(root), function)
    graph.config = GraphConfig.from_dict(entry.config["graph"])
    report = SearchReport.from_dict(entry.config["report"])
    graph.report = dataclasses.replace(report, wall_s=wall_s, cached=True)
    return graph
