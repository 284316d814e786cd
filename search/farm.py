"""The search's compile farm: lowering and compiling candidates as Ray
tasks on a cluster's CPUs, while checking and timing stay on this
machine's GPUs.

    farm = Farm.connect("ray")               # or "ray://head:10001", "head:6379"
    results = farm.lower_and_compile([(launch_text, config, target, timeout, cache), ...])

Each candidate is one task (`lower_and_compile`): the kernel's launch
module parsed, its knobs set, lowered by kgc's pipeline to TTIR and its
kernels compiled by Triton, in a worker process of the target's own
(`kgc.pipeline.triton_stage.worker_pool`, which keeps one target per
process) inside the Ray worker. What comes back is plain data that pickles:
the `CompiledModule` with its `Artifact`s, or the first line of the error
(a failed row of the search's report).

`cluster="ray"` joins the cluster of `RAY_ADDRESS`, or the one this process
already joined (`ray.init` before the search), and otherwise starts a local
one on this machine's CPUs; any other string is the address of a cluster.
The Ray workers need kgc (and Triton) installed at the same version: what
they compile is keyed and cached by content, Triton's version included.
Without Ray installed, `connect` raises a KgcError naming the extra to
install.
"""

from __future__ import annotations

from kgc.diagnostics import KgcError

INSTALL_HINT = "pip install 'kgc[cluster]'"


def lower_and_compile(launch_text: str, config, target: int, timeout_s: float | None,
                      cache: bool | str | None = None):
    """One candidate of the search, lowered and compiled: its CompiledModule
    at cubin, or the first line of why it failed (a str). `cache` is the
    kernel cache of the worker's compile (`KernelCache.resolve`; by default
    the one the worker's environment asks for)."""
    from kgc.pipeline.triton_stage import compile_kernels
    from kgc.search.kernels import compile_candidate

    try:
        compiled = compile_candidate(launch_text, config, target, emit="ttir")
        # A library kernel is a call: nothing to compile.
        generated = [k for k in compiled.kernels.values() if k.library is None]
        requests = [(k.asm["ttir"], k.options) for k in generated]
        artifacts = compile_kernels(requests, target, timeout=timeout_s, cache=cache)
    except KgcError as error:
        text = str(error).strip()
        return text.splitlines()[0] if text else type(error).__name__
    for kernel, artifact in zip(generated, artifacts):
        kernel.artifact = artifact
        kernel.asm = dict(artifact.asm)
        kernel.shared = artifact.shared
    compiled.emitted = "cubin"
    return compiled


class Farm:
    """Candidates lowered and compiled as tasks of a Ray cluster."""

    def __init__(self, ray):
        self._ray = ray
        self._task = ray.remote(num_cpus=1)(lower_and_compile)

    @staticmethod
    def require(cluster) -> None:
        """Raises KgcError unless `cluster` names a Ray cluster and Ray is
        installed; starts nothing."""
        if not isinstance(cluster, str) or not cluster:
            raise KgcError(f"cluster must be 'ray' or a Ray cluster's address, got {cluster!r}")
        try:
            import ray  # noqa: F401
        except ImportError:
            raise KgcError(f"cluster={cluster!r} compiles on a Ray cluster, and Ray is not "
                           f"installed: {INSTALL_HINT}") from None

    @classmethod
    def connect(cls, cluster: str) -> "Farm":
        cls.require(cluster)
        import ray

        if not ray.is_initialized():
            address = None if cluster == "ray" else cluster
            try:
                ray.init(address=address, log_to_driver=False,
                         configure_logging=False, include_dashboard=False)
            except (ConnectionError, RuntimeError, ValueError) as error:
                raise KgcError(f"cannot join the Ray cluster {cluster!r}: {error}") from None
        return cls(ray)

    @property
    def cpus(self) -> int:
        return int(self._ray.cluster_resources().get("CPU", 0))

    def lower_and_compile(self, requests) -> list:
        """`lower_and_compile` of each (launch_text, config, target,
        timeout_s[, cache]), in order, as many at once as the cluster has CPUs."""
        futures = [self._task.remote(*request) for request in requests]
        return self._ray.get(futures)
