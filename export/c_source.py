"""A compiled kernel graph as a C header and source file over the CUDA
driver API.

What the export writes, for a graph named G (the .mlir file's stem, or the
name given) with functions F1, F2, ...:

    G.h   kgc_G_load(), kgc_G_unload(), and per function
          KGC_G_F_WORKSPACE_BYTES, kgc_G_F_workspace_bytes() and
          CUresult kgc_G_F(CUstream, CUdeviceptr per argument, CUdeviceptr
          per result, CUdeviceptr workspace), each argument documented
    G.c   the cubins as byte arrays and the code of those functions

How the generated code launches a kernel mirrors Triton 3.6's own launcher
(triton/backends/nvidia/driver.py and driver.c), so that a kernel gets the
parameters its cubin was compiled for:

- load: `cuModuleLoadData` of the cubin, `cuModuleGetFunction` of the
  entry name Triton recorded; a kernel that uses more than 48 KiB of shared
  memory gets `CU_FUNC_CACHE_PREFER_SHARED` and
  `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` = the device's opt-in
  maximum less the kernel's static shared memory, as Triton sets them.
- launch: `cuLaunchKernel` with the grid of the kernel's kg.launch, blocks
  of num_warps * 32 threads, Triton's `shared` bytes of dynamic shared
  memory, and as parameters a pointer to each tensor in the kernel's
  signature order (its inputs, then its outputs), then to the global
  scratch pointer and to the profile scratch pointer. The global scratch is
  0 unless the kernel asks for some (`global_scratch_size` > 0), in which
  case it points to grid size x that many bytes of the workspace; profile
  scratch is always 0 (kernels compiled for profiling are refused).
  A library kernel (a bare matmul kgc leaves to cuBLAS, kgc.tiling.library)
  is refused, naming it and how to compile without library kernels: the C
  would need cuBLAS linked and a handle per stream, which the driver-API-
  only export does not ask of its callers.
- a function with a dynamic extent (`?`) takes its size as `int32_t size`
  after the stream (at least 1; CUDA_ERROR_INVALID_VALUE otherwise). A kernel
  over the extent is launched on ceil(size / tile) * programs programs along
  x (its kg.launch's `dynamic_grid`; on its static grid where each program
  loops over the extent, a tile of 0) and gets the size as one more i32
  parameter after its tensors, as `Kernel.grid_at` and `Kernel.scalars_at`
  give the Python runtime. Its workspace is `kgc_G_F_workspace_bytes(size)`
  bytes: the intermediates one after another, each at a multiple of 256
  bytes (no reuse between them, which the runtime's per-size memory plan
  makes: a layout fixed for every size cannot follow the plan's choices).
  Kernels that need a launch Triton makes through `cuLaunchKernelEx`
  (clusters of CTAs, cooperative grids, programmatic dependent launch) or
  tensor descriptors are refused at export time, with the reason.

Buffers. The caller passes every argument and result as a device pointer
to a dense row-major tensor, 16-byte aligned (the kernels' TTIR promises
Triton that alignment). Intermediates, the tensors that are neither an
argument nor a result, live in one workspace the caller allocates, each
where the function's memory plan puts it (`kgc.pipeline.memory_plan`, the
plan the runtime follows too: offsets aligned to 256 bytes), followed by
any global scratch. A
result that is one of the arguments, or a tensor returned twice, is copied
into its result pointer with `cuMemcpyDtoDAsync` after the kernels. The
function checks pointers before launching anything and returns
CUDA_ERROR_INVALID_VALUE for a null or misaligned one, and
CUDA_ERROR_NOT_INITIALIZED before `kgc_G_load()`; every other failure is
the CUresult of the driver call that failed. Nothing aborts.

Names. The graph's and the functions' names become parts of C identifiers:
'-' and '.' turn into '_', and anything that still is not a C identifier
(a leading digit, other characters, a C keyword, two names that meet) is a
KgcError naming it. Arguments keep the names the source gives them where
those are identifiers, else they are `arg<i>`; results are `result<i>`.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import re

from kgc.diagnostics import KgcError
from kgc.element_types import ELEMENT_BYTES
from kgc.pipeline.compiler import CompiledModule, Function, make_output_folder
from kgc.pipeline.memory_plan import WORKSPACE_ALIGNMENT, intermediates_of
from kgc.pipeline.resources import check_resources

# What the kernels assume of every tensor's address (tt.divisibility = 16).
TENSOR_ALIGNMENT = 16
# Above this many bytes of shared memory a kernel must opt in (Triton's
# threshold, 48 KiB).
DEFAULT_SHARED_LIMIT = 49152

C_KEYWORDS = frozenset("""
    auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic
    _Imaginary _Noreturn _Static_assert _Thread_local bool true false alignas alignof
    static_assert thread_local nullptr""".split())
# Parameter names the generated functions use themselves.
RESERVED_PARAMETERS = frozenset({"stream", "workspace"})


def c_identifier(name: str, what: str) -> str:
    """`name` as a part of C identifiers: '-' and '.' become '_'. KgcError
    naming `what` where the result is not an identifier or is a keyword."""
    identifier = re.sub(r"[-.]", "_", name)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", identifier):
        raise KgcError(f"{what} '{name}' cannot be part of a C identifier: use letters, digits "
                       "and '_' (or '-' and '.', which become '_'), not starting with a digit")
    if identifier in C_KEYWORDS:
        raise KgcError(f"{what} '{name}' is a C keyword")
    return identifier


def _parameter_name(name: str | None, fallback: str, taken: set) -> str:
    """The argument's own name where it is a plain C identifier of its own,
    else `fallback`."""
    if name is not None and re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name) \
            and name not in C_KEYWORDS and name not in RESERVED_PARAMETERS \
            and not name.startswith("kgc_") and not name.startswith("KGC_") \
            and name not in taken and not re.fullmatch(r"(arg|result)\d+", name):
        return name
    return fallback


def tensor_bytes(shape, dtype: str) -> int:
    if dtype not in ELEMENT_BYTES:
        raise KgcError(f"cannot export a tensor of element type {dtype}")
    return math.prod(shape) * ELEMENT_BYTES[dtype]


def _aligned(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment


# -- the kernels ---------------------------------------------------------------


@dataclasses.dataclass
class CubinModule:
    """One cubin the export embeds, loaded once however many kernels of the
    graph are that artifact."""

    index: int
    kernel: str  # the first kernel of the graph that is this artifact
    entry: str
    cubin: bytes
    grid: tuple[int, int, int]  # part of the artifact's identity, so one per module
    shared: int
    num_warps: int
    global_scratch_bytes: int  # per program
    global_scratch_align: int
    num_tensors: int
    # [tile, programs per tile] of a kernel over the dynamic extent (its
    # kg.launch's, part of its code like `grid`): its grid along x is
    # ceil(size / tile) * programs (a tile of 0: `grid`, each program loops
    # over the extent), its last parameter the size. None: static.
    dynamic_grid: tuple[int, int] | None = None


def _check_launchable(kernel) -> None:
    """Refuses, naming the kernel, what the plain cuLaunchKernel path does
    not launch as Triton would."""
    if kernel.library is not None:
        raise KgcError(
            f"kernel @{kernel.name} is a library kernel (a bare matmul that cuBLAS computes "
            "through torch), which the C export does not call: compile with library kernels "
            "off (KGC_LIBRARY_KERNELS=0 in the environment, or kg-tile's option library=false) "
            "to export it as a Triton kernel")
    artifact = kernel.artifact
    if artifact is None:
        raise KgcError(f"kernel @{kernel.name} has no compiled artifact: compile down to cubin "
                       "to export C")
    metadata = artifact.metadata
    reasons = []
    if int(metadata.get("num_ctas", 1) or 1) != 1:
        reasons.append(f"it runs in clusters of {metadata['num_ctas']} CTAs")
    if metadata.get("launch_cooperative_grid"):
        reasons.append("it needs a cooperative grid")
    if metadata.get("launch_pdl"):
        reasons.append("it uses programmatic dependent launch")
    if metadata.get("tensordesc_meta"):
        reasons.append("it takes tensor descriptors")
    if int(metadata.get("profile_scratch_size") or 0) > 0:
        reasons.append("it was compiled for profiling (profile scratch)")
    signature = list(artifact.signature)
    if kernel.dynamic_grid is not None:
        # The dynamic extent's size, an i32 after the tensors.
        if signature[-1:] == ["i32"]:
            signature.pop()
        else:
            reasons.append("its signature does not end in the dynamic extent's size (i32)")
    non_pointers = [kind for kind in signature if not kind.startswith("*")]
    if non_pointers:
        reasons.append(f"its signature holds non-tensor parameters ({', '.join(non_pointers)})")
    if len(signature) != len(kernel.arguments):
        reasons.append(f"its signature has {len(signature)} tensor parameters for "
                       f"{len(kernel.arguments)} tensors")
    if reasons:
        raise KgcError(f"kernel @{kernel.name} cannot be exported as C: {'; '.join(reasons)}")


def _modules(compiled: CompiledModule, functions: list[Function]) -> dict[str, CubinModule]:
    """kernel name -> the cubin module it launches, for the kernels the
    functions launch, in first-launch order."""
    by_artifact: dict[tuple, CubinModule] = {}
    of_kernel: dict[str, CubinModule] = {}
    for function in functions:
        for launch in function.launches:
            if launch.kernel in of_kernel:
                continue
            kernel = compiled.kernels[launch.kernel]
            _check_launchable(kernel)
            artifact = kernel.artifact
            key = (artifact.hash, artifact.entry)
            if key not in by_artifact:
                metadata = artifact.metadata
                by_artifact[key] = CubinModule(
                    len(by_artifact), kernel.name, artifact.entry, artifact.cubin,
                    artifact.options.grid, artifact.shared, int(metadata.get("num_warps", artifact.options.num_warps)),
                    int(metadata.get("global_scratch_size") or 0),
                    int(metadata.get("global_scratch_align") or 1),
                    len(artifact.signature) - (kernel.dynamic_grid is not None),
                    kernel.dynamic_grid)
            of_kernel[launch.kernel] = by_artifact[key]
    return of_kernel


# -- one function ----------------------------------------------------------------


@dataclasses.dataclass
class Parameter:
    name: str  # the C parameter
    buffer: int
    role: str  # "argument" or "result"
    label: str  # how the graph names it, for the header's comment


@dataclasses.dataclass
class KernelLaunch:
    kernel: str
    module: CubinModule
    grid: tuple[int, int, int]
    operands: list[str]  # C expressions of the tensors' pointers, in signature order
    uses_scratch: bool


@dataclasses.dataclass
class FunctionPlan:
    """What the C function of one graph function does, as data."""

    function: Function
    identifier: str  # the function's part of the C names
    symbol: str  # kgc_<graph>_<function>
    macro: str  # KGC_<GRAPH>_<FUNCTION>
    parameters: list[Parameter]
    # buffer -> offset in the workspace (the memory plan's); for a dynamic
    # function, the intermediates in the order they follow one another.
    intermediates: dict[int, int]
    scratch_offset: int | None  # where the global scratch starts, if any kernel needs some
    workspace_bytes: int | None  # None: a function of the size (a dynamic function)
    workspace_alignment: int  # what the workspace's address must be a multiple of
    launches: list[KernelLaunch]
    copies: list[tuple[str, str, str]]  # (destination, source, C bytes) after the launches

    @property
    def is_dynamic(self) -> bool:
        return self.workspace_bytes is None

    @property
    def offset_slots(self) -> int:
        """The length of a dynamic function's array of intermediate offsets
        (one at least: C has no empty arrays)."""
        return max(len(self.intermediates), 1)


def plan_function(function: Function, identifier: str, graph: str,
                  modules: dict[str, CubinModule]) -> FunctionPlan:
    buffers = function.buffers
    names = function.argument_names or [None] * function.num_arguments
    parameters, taken = [], set()
    place: dict[int, str] = {}  # buffer -> the C expression of its pointer
    for index in range(function.num_arguments):
        name = _parameter_name(names[index], f"arg{index}", taken)
        taken.add(name)
        label = f"argument #{index}" + (f" '{names[index]}'" if names[index] not in (None, name)
                                        else "")
        parameters.append(Parameter(name, index, "argument", label))
        place[index] = name
    copies = []
    for position, buffer in enumerate(function.results):
        name = f"result{position}"
        parameters.append(Parameter(name, buffer, "result", f"result #{position}"))
        if buffer in place:  # an argument, or a tensor returned before
            copies.append((name, place[buffer], bytes_expression(buffers[buffer])))
        else:
            place[buffer] = name
    dynamic = function.is_dynamic
    if dynamic:
        intermediates = {buffer: 0 for buffer in intermediates_of(function)}
        offset, alignment = None, WORKSPACE_ALIGNMENT
    else:
        intermediates = function.memory.offsets()
        offset, alignment = function.memory.workspace_bytes, function.memory.alignment
    for buffer in intermediates:
        place[buffer] = f"kgc_buffer{buffer}"
    scratch_bytes, scratch_align = 0, alignment
    launches = []
    for launch in function.launches:
        module = modules[launch.kernel]
        if module.global_scratch_bytes:
            if dynamic:
                raise KgcError(f"kernel @{launch.kernel} of @{function.name} needs global "
                               "scratch, which the C export sizes for static grids only")
            scratch_bytes = max(scratch_bytes, math.prod(module.grid) * module.global_scratch_bytes)
            scratch_align = max(scratch_align, module.global_scratch_align)
        operands = [place[b] for b in launch.inputs + launch.outputs]
        if len(operands) != module.num_tensors:
            raise KgcError(f"@{function.name}: the launch of @{launch.kernel} passes "
                           f"{len(operands)} tensors; its kernel takes {module.num_tensors}")
        launches.append(KernelLaunch(launch.kernel, module, module.grid, operands,
                                     module.global_scratch_bytes > 0))
    scratch_offset = None
    if scratch_bytes:
        scratch_offset = _aligned(offset, scratch_align)
        offset = scratch_offset + scratch_bytes
    return FunctionPlan(function, identifier, f"kgc_{graph}_{identifier}",
                        f"KGC_{graph}_{identifier}".upper(), parameters, intermediates,
                        scratch_offset, offset, alignment, launches, copies)


def _bytes_per_size(spec) -> int:
    """A tensor's bytes over its static dimensions: all of them for a
    static tensor, those per unit of the size for a dynamic one."""
    return tensor_bytes([d for d in spec.shape if d is not None], spec.dtype)


def bytes_expression(spec) -> str:
    """The C expression of a tensor's bytes: a number, or a multiple of
    `size` for a tensor with the dynamic extent."""
    if not spec.is_dynamic:
        return str(_bytes_per_size(spec))
    return f"(size_t)size * {_bytes_per_size(spec)}"


# -- rendering -------------------------------------------------------------------


def _describe(spec, label: str, role: str, name: str) -> str:
    shape = "x".join("size" if s is None else str(s) for s in spec.shape) or "scalar"
    strides, step, sized = [], 1, False
    for extent in reversed(spec.shape):
        strides.append(f"size * {step}" if sized else str(step))
        if extent is None:
            sized = True
        else:
            step *= extent
    size = f"size * {_bytes_per_size(spec)}" if spec.is_dynamic else str(_bytes_per_size(spec))
    return (f" *   {name:<12} {role:<6} {spec.dtype}[{shape}] ({label}): "
            f"{size} bytes, row-major, strides [{', '.join(reversed(strides))}] elements")


def _function_comment(plan: FunctionPlan, graph_name: str) -> list[str]:
    function = plan.function
    lines = [f"/* @{function.name} of {graph_name}: {len(plan.launches)} kernel launch(es): "
             f"{', '.join(launch.kernel for launch in plan.launches) or 'none'}.", " *",
             " * Every tensor is a device pointer to dense row-major data, 16-byte aligned:"]
    for parameter in plan.parameters:
        role = "in" if parameter.role == "argument" else "out"
        lines.append(_describe(function.buffers[parameter.buffer], parameter.label, role,
                               parameter.name))
    lines.append(" *")
    if plan.is_dynamic:
        lines += [" * size: the dynamic extent, from 1 to 2147483647 (CUDA_ERROR_INVALID_VALUE",
                  " *   otherwise); every `size` above is this one.",
                  f" * workspace: {plan.symbol}_workspace_bytes(size) bytes of device memory, "
                  f"{plan.workspace_alignment}-byte aligned (cuMemAlloc's are), for the",
                  " *   intermediates (0 where there are none: pass 0); its content need not be",
                  " *   kept between calls."]
    elif plan.workspace_bytes:
        lines.append(f" * workspace: {plan.macro}_WORKSPACE_BYTES bytes of device memory, "
                     f"{plan.workspace_alignment}-byte aligned"
                     + (" (cuMemAlloc's are)," if plan.workspace_alignment <= 256 else ","))
        lines.append(" *   for the intermediates"
                     + (" and the kernels' global scratch" if plan.scratch_offset is not None
                        else "") + "; its content need not be kept between calls.")
    else:
        lines.append(" * workspace: none is needed (pass 0).")
    if plan.copies:
        lines.append(" * Results that are arguments or repeat another result are copied "
                     "(cuMemcpyDtoDAsync) after the kernels.")
    lines += [" * Results must not overlap the arguments or each other. Runs on `stream`,",
              " * asynchronously; returns the first failing CUresult, CUDA_ERROR_INVALID_VALUE",
              " * for a null or misaligned pointer, CUDA_ERROR_NOT_INITIALIZED before load. */"]
    return lines


def _signature(plan: FunctionPlan) -> str:
    parameters = ", ".join(["int32_t size"] * plan.is_dynamic
                           + [f"CUdeviceptr {p.name}" for p in plan.parameters])
    return (f"CUresult {plan.symbol}(CUstream stream, {parameters + ', ' if parameters else ''}"
            "CUdeviceptr workspace)")


def _workspace_signature(plan: FunctionPlan) -> str:
    return f"size_t {plan.symbol}_workspace_bytes({'int32_t size' if plan.is_dynamic else 'void'})"


def render_header(graph: str, graph_name: str, target: int, plans: list[FunctionPlan],
                  modules: list[CubinModule]) -> str:
    guard = f"KGC_{graph.upper()}_H"
    lines = [
        f"/* {graph}.h: the kernel graph {graph_name}, compiled by kgc for sm_{target}.",
        " * Generated code; compile it again rather than edit it.",
        " *",
        f" * Build: cc -c {graph}.c -I<dir of cuda.h>, link with -lcuda. The CUDA driver API",
        " * is all it needs at run time.",
        " *",
        f" * Use: with a CUDA context current, kgc_{graph}_load() once; then any function",
        f" * below, on any stream of that context; kgc_{graph}_unload() at the end.",
        " * Load and unload are not thread-safe; the functions may run concurrently,",
        " * each with its own workspace.",
        f" * {len(modules)} kernel module(s) embedded, cubins for sm_{target}: on another GPU",
        " * load returns the driver's error. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "",
        "#include <cuda.h>",
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        "/* Loads every kernel into the current context. Does nothing when loaded;",
        " * on failure frees what it loaded and returns the driver's error. */",
        f"CUresult kgc_{graph}_load(void);",
        "",
        "/* Frees the kernels' modules; returns the first error of cuModuleUnload. */",
        f"CUresult kgc_{graph}_unload(void);",
    ]
    for plan in plans:
        lines += ["", *_function_comment(plan, graph_name)]
        if not plan.is_dynamic:
            lines.append(f"#define {plan.macro}_WORKSPACE_BYTES ((size_t){plan.workspace_bytes})")
        lines += [f"{_workspace_signature(plan)};", f"{_signature(plan)};"]
    lines += ["", "#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {guard} */", ""]
    return "\n".join(lines)


def _byte_lines(data: bytes) -> list[str]:
    return ["  " + ", ".join(f"0x{b:02x}" for b in data[start:start + 16]) + ","
            for start in range(0, len(data), 16)]


def render_source(graph: str, graph_name: str, plans: list[FunctionPlan],
                  modules: list[CubinModule]) -> str:
    count = len(modules)
    lines = [f"/* {graph}.c: the kernels of {graph_name} and the code that launches them.",
             " * Generated by kgc; see the header. */",
             f'#include "{graph}.h"', "", "#include <stdint.h>", ""]
    for module in modules:
        lines += [f"/* @{module.kernel} (entry {module.entry}): {len(module.cubin)} bytes of "
                  f"cubin, {module.num_warps} warps, {module.shared} bytes of shared memory. */",
                  f"static _Alignas(64) const unsigned char kgc_cubin{module.index}[] = {{",
                  *_byte_lines(module.cubin), "};", ""]
    images = ", ".join(f"kgc_cubin{m.index}" for m in modules)
    entries = ", ".join(f'"{m.entry}"' for m in modules)
    shared = ", ".join(str(m.shared) for m in modules)
    lines += [
        f"#define KGC_MODULES {count}",
        f"static const unsigned char *const kgc_images[KGC_MODULES] = {{{images}}};",
        f"static const char *const kgc_entries[KGC_MODULES] = {{{entries}}};",
        f"static const int kgc_shared[KGC_MODULES] = {{{shared}}};",
        "static CUmodule kgc_modules[KGC_MODULES];",
        "static CUfunction kgc_functions[KGC_MODULES];",
        "static int kgc_loaded;",
        "",
        "/* Static, so that a failed load frees this library's modules even where another",
        " * library exports a function of the same name. */",
        "static CUresult kgc_unload_modules(void) {",
        "  CUresult first = CUDA_SUCCESS;",
        "  for (int i = 0; i < KGC_MODULES; ++i) {",
        "    if (kgc_modules[i] != NULL) {",
        "      CUresult status = cuModuleUnload(kgc_modules[i]);",
        "      if (first == CUDA_SUCCESS) first = status;",
        "      kgc_modules[i] = NULL;",
        "    }",
        "    kgc_functions[i] = NULL;",
        "  }",
        "  kgc_loaded = 0;",
        "  return first;",
        "}",
        "",
        f"CUresult kgc_{graph}_unload(void) {{",
        "  return kgc_unload_modules();",
        "}",
        "",
        "/* As Triton loads a kernel: above 48 KiB of shared memory it opts in to the",
        " * device's maximum, less the kernel's static shared memory. */",
        "static CUresult kgc_load_module(int i, int shared_optin) {",
        "  CUresult status = cuModuleLoadData(&kgc_modules[i], kgc_images[i]);",
        "  if (status != CUDA_SUCCESS) { kgc_modules[i] = NULL; return status; }",
        "  status = cuModuleGetFunction(&kgc_functions[i], kgc_modules[i], kgc_entries[i]);",
        "  if (status != CUDA_SUCCESS) return status;",
        f"  if (kgc_shared[i] > {DEFAULT_SHARED_LIMIT} && shared_optin > {DEFAULT_SHARED_LIMIT}) {{",
        "    int shared_static = 0;",
        "    status = cuFuncSetCacheConfig(kgc_functions[i], CU_FUNC_CACHE_PREFER_SHARED);",
        "    if (status != CUDA_SUCCESS) return status;",
        "    status = cuFuncGetAttribute(&shared_static, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,",
        "                                kgc_functions[i]);",
        "    if (status != CUDA_SUCCESS) return status;",
        "    status = cuFuncSetAttribute(kgc_functions[i],",
        "                                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,",
        "                                shared_optin - shared_static);",
        "    if (status != CUDA_SUCCESS) return status;",
        "  }",
        "  return CUDA_SUCCESS;",
        "}",
        "",
        f"CUresult kgc_{graph}_load(void) {{",
        "  if (kgc_loaded) return CUDA_SUCCESS;",
        "  CUdevice device;",
        "  int shared_optin = 0;",
        "  CUresult status = cuCtxGetDevice(&device);",
        "  if (status != CUDA_SUCCESS) return status;",
        "  status = cuDeviceGetAttribute(&shared_optin,",
        "                                CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device);",
        "  if (status != CUDA_SUCCESS) return status;",
        "  for (int i = 0; i < KGC_MODULES; ++i) {",
        "    status = kgc_load_module(i, shared_optin);",
        "    if (status != CUDA_SUCCESS) {",
        "      kgc_unload_modules();",
        "      return status;",
        "    }",
        "  }",
        "  kgc_loaded = 1;",
        "  return CUDA_SUCCESS;",
        "}",
        "",
        "/* The kernels read and write dense tensors at 16-byte-aligned addresses. */",
        "static inline int kgc_bad_pointer(CUdeviceptr pointer) {",
        f"  return pointer == 0 || pointer % {TENSOR_ALIGNMENT} != 0;",
        "}",
    ]
    for plan in plans:
        lines += ["", *_render_function(plan)]
    lines.append("")
    return "\n".join(lines)


def _layout_lines(plan: FunctionPlan) -> list[str]:
    """A dynamic function's workspace layout at `size`: a static function
    that writes each intermediate's offset and returns the bytes."""
    lines = [f"static size_t {plan.symbol}_layout(int32_t size, "
             f"size_t offsets[{plan.offset_slots}]) {{",
             "  size_t end = 0;"]
    if not plan.intermediates:
        lines += ["  (void)size;", "  offsets[0] = 0;"]
    for position, buffer in enumerate(plan.intermediates):
        spec = plan.function.buffers[buffer]
        align = plan.workspace_alignment
        lines += [f"  offsets[{position}] = (end + {align - 1}) / {align} * {align};",
                  f"  end = offsets[{position}] + {bytes_expression(spec)};"]
    lines += ["  return end;", "}"]
    return lines


def _render_function(plan: FunctionPlan) -> list[str]:
    if plan.is_dynamic:
        lines = [*_layout_lines(plan), "",
                 f"{_workspace_signature(plan)} {{",
                 f"  size_t offsets[{plan.offset_slots}];",
                 f"  return size < 1 ? 0 : {plan.symbol}_layout(size, offsets);", "}", "",
                 f"{_signature(plan)} {{",
                 "  if (!kgc_loaded) return CUDA_ERROR_NOT_INITIALIZED;",
                 "  if (size < 1) return CUDA_ERROR_INVALID_VALUE;"]
    else:
        lines = [f"{_workspace_signature(plan)} {{",
                 f"  return {plan.macro}_WORKSPACE_BYTES;", "}", "",
                 f"{_signature(plan)} {{",
                 "  if (!kgc_loaded) return CUDA_ERROR_NOT_INITIALIZED;"]
    for parameter in plan.parameters:
        spec = plan.function.buffers[parameter.buffer]
        # An empty tensor needs no address (size is at least 1).
        if _bytes_per_size(spec):
            lines.append(f"  if (kgc_bad_pointer({parameter.name})) "
                         "return CUDA_ERROR_INVALID_VALUE;")
    if plan.is_dynamic:
        lines += [f"  size_t kgc_offsets[{plan.offset_slots}];",
                  f"  if ({plan.symbol}_layout(size, kgc_offsets) != 0 && (workspace == 0 || "
                  f"workspace % {plan.workspace_alignment} != 0))",
                  "    return CUDA_ERROR_INVALID_VALUE;"]
    elif plan.workspace_bytes:
        lines.append(f"  if (workspace == 0 || workspace % {plan.workspace_alignment} != 0) "
                     "return CUDA_ERROR_INVALID_VALUE;")
    else:
        lines.append("  (void)workspace;")
    for position, (buffer, offset) in enumerate(plan.intermediates.items()):
        spec = plan.function.buffers[buffer]
        at = f"kgc_offsets[{position}]" if plan.is_dynamic else str(offset)
        shape = "x".join("size" if d is None else str(d) for d in spec.shape)
        lines.append(f"  CUdeviceptr kgc_buffer{buffer} = workspace + {at};"
                     f"  /* {spec.dtype}[{shape}] */")
    if plan.is_dynamic:
        lines.append("  int32_t kgc_size = size;")
    if plan.scratch_offset is not None:
        lines.append(f"  CUdeviceptr kgc_global_scratch = workspace + {plan.scratch_offset};")
    lines += ["  CUdeviceptr kgc_no_scratch = 0;",
              "  CUresult kgc_status = CUDA_SUCCESS;"]
    for number, launch in enumerate(plan.launches):
        module = launch.module
        scratch = "&kgc_global_scratch" if launch.uses_scratch else "&kgc_no_scratch"
        # Triton's launcher passes the tensors, then a kernel's i32 arguments
        # (the dynamic extent's size), then the global and the profile scratch.
        sized = ["&kgc_size"] if module.dynamic_grid is not None else []
        parameters = ", ".join([f"&{operand}" for operand in launch.operands] + sized
                               + [scratch, "&kgc_no_scratch"])
        grid_x, grid_y, grid_z = launch.grid
        lines += [f"  {{  /* launch {number}: @{launch.kernel} */",
                  f"    void *kgc_params[] = {{{parameters}}};"]
        if module.dynamic_grid is not None and module.dynamic_grid[0] != 0:
            # (a tile of 0: the programs loop over the extent, the grid is static)
            tile, programs = module.dynamic_grid
            grid_x = "(unsigned int)kgc_grid_x"
            lines += [f"    long long kgc_grid_x = ((long long)size + {tile - 1}) / {tile} * "
                      f"{programs};",
                      "    if (kgc_grid_x > 2147483647LL) return CUDA_ERROR_INVALID_VALUE;"]
        lines += [f"    kgc_status = cuLaunchKernel(kgc_functions[{module.index}], {grid_x}, "
                  f"{grid_y}, {grid_z}, {module.num_warps * 32}, 1, 1, {module.shared}, stream, "
                  "kgc_params, NULL);",
                  "    if (kgc_status != CUDA_SUCCESS) return kgc_status;",
                  "  }"]
    for destination, source, size in plan.copies:
        lines += [f"  kgc_status = cuMemcpyDtoDAsync({destination}, {source}, {size}, stream);",
                  "  if (kgc_status != CUDA_SUCCESS) return kgc_status;"]
    lines += ["  return kgc_status;", "}"]
    return lines


# -- the entry points ------------------------------------------------------------


@dataclasses.dataclass
class CExport:
    """What `export_c` wrote and the C names it gave."""

    header: pathlib.Path
    source: pathlib.Path
    graph: str  # the identifier in every C name
    functions: dict[str, str]  # graph function -> C function
    # graph function -> bytes of its workspace (None: a function of the size)
    workspace_bytes: dict[str, int | None]


def export_module(compiled: CompiledModule, directory: str | pathlib.Path, name: str,
                  functions: list[str] | None = None) -> CExport:
    """Writes `<name>.h` and `<name>.c` for `functions` of `compiled` (by
    default all of them) into `directory`."""
    if compiled.emitted != "cubin":
        raise KgcError(f"the module was compiled down to {compiled.emitted}; exporting C needs "
                       "every kernel's cubin")
    graph = c_identifier(name, "graph name")
    chosen = list(compiled.functions) if functions is None else list(functions)
    for function in chosen:
        if function not in compiled.functions:
            raise KgcError(f"no function @{function} to export (have: "
                           f"{', '.join(compiled.functions)})")
    if not chosen:
        raise KgcError("the module holds no function to export")
    selected = [compiled.functions[f] for f in chosen]
    # The module may have been loaded from files another compile wrote: the
    # C code would only fail at launch with a kernel the target cannot run.
    check_resources([compiled.kernels[launch.kernel] for function in selected
                     for launch in function.launches], compiled.target,
                    compiled.stages.get("kg"))
    modules = _modules(compiled, selected)
    identifiers: dict[str, str] = {}
    for function in selected:
        identifier = c_identifier(function.name, "function name")
        if identifier in ("load", "unload") or identifier.endswith("_workspace_bytes"):
            raise KgcError(f"function @{function.name} would be named like the export's own "
                           f"kgc_{graph}_{identifier}: rename it")
        clash = [f for f, i in identifiers.items() if i.upper() == identifier.upper()]
        if clash:
            raise KgcError(f"functions @{clash[0]} and @{function.name} get the same C name "
                           f"kgc_{graph}_{identifier}: rename one")
        identifiers[function.name] = identifier
    plans = [plan_function(f, identifiers[f.name], graph, modules) for f in selected]
    unique = list({id(m): m for m in modules.values()}.values())
    if not unique:
        raise KgcError(f"nothing to export: {', '.join('@' + f.name for f in selected)} "
                       "launches no kernel")
    root = make_output_folder(directory)
    header, source = root / f"{graph}.h", root / f"{graph}.c"
    try:
        header.write_text(render_header(graph, name, compiled.target, plans, unique))
        source.write_text(render_source(graph, name, plans, unique))
    except OSError as error:
        raise KgcError(f"cannot write '{error.filename}': {error.strerror}") from None
    return CExport(header, source, graph, {p.function.name: p.symbol for p in plans},
                   {p.function.name: p.workspace_bytes for p in plans})


def export_c(compiled, directory: str | pathlib.Path, name: str | None = None) -> CExport:
    """Writes `<name>.h` and `<name>.c` for `compiled`: a
    `kgc.runtime.CompiledGraph` (its function; `name` defaults to the
    function's) or a `CompiledModule` (every function; `name` is needed)."""
    if isinstance(compiled, CompiledModule):
        if name is None:
            raise KgcError("give the export a name: a compiled module has no name of its own")
        return export_module(compiled, directory, name)
    module = getattr(compiled, "module", None)
    function = getattr(compiled, "function", None)
    if not isinstance(module, CompiledModule) or function is None:
        raise KgcError(f"export_c takes a compiled graph (kgc.compile's result) or a compiled "
                       f"module, not {type(compiled).__name__}")
    return export_module(module, directory, function.name if name is None else name,
                         [function.name])
