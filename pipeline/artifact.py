"""Compiled kernels as data: what `triton_stage.compile_kernel` returns,
what `kgc compile` writes and what the runtime launches.

An `Artifact` holds one kernel compiled by Triton: its code at every stage
(ttir, ttgir, llir, ptx, cubin), Triton's metadata (shared memory, warps,
stages, the entry name in the cubin, scratch sizes), the registers a thread
uses (read from the cubin), the launch signature in Triton's notation
(`*fp16` a pointer to f16, `i32` a 32-bit scalar) and the options it was
compiled and is launched with (`KernelOptions`: grid, warps, stages). It is
plain data: it pickles (to and from worker processes), and `save`/`load`
write and read it as files that a process which never compiles can run.

Identity. `Artifact.hash` is the sha256 of the kernel's TTIR with the
kernel's own symbol name replaced by a placeholder, of its options, of the
target and of Triton's version. Two kernels that differ only in their name
(the same kernel at another position of a graph, or in another graph) have
the same hash and are interchangeable: launching one artifact where the
other was asked for computes the same thing. The name stays what the IR
calls the kernel (`MLIR_ENABLE_DUMP=<name>` and diagnostics use it), and is
the entry point inside the cubin, so a launch looks the entry up by the
artifact's own name.

The TTIR is in Triton's custom assembly form, as Triton parsed and printed
it: the text it compiled, so the `loc(...)` entries of the later stages
give lines and columns in it. They name the file `<name>.ttir`, and
`save(directory)` names `<directory>/<name>.ttir`, the TTIR it writes
(`load` reads them back as `<name>.ttir`).

On disk. `save(directory)` writes `<name>.<stage>` for each stage and
`<name>.json`, the record: format version, name, hash, target, options,
signature, metadata, and for each stage file its size and sha256. `load`
checks every file against the record, so a truncated or altered file is a
KgcError naming it rather than a kernel that misbehaves.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import re
import struct

from kgc.diagnostics import KgcError

FORMAT = "kgc-artifact-1"
# Every stage an artifact may hold, in compile order.
ARTIFACT_STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin")
BINARY_STAGES = frozenset({"cubin"})
# Stages whose text locates its ops in the kernel's TTIR (file:line:col).
LOCATED_STAGES = frozenset({"ttgir", "llir", "ptx"})
# The kernel's own name in the TTIR, replaced by this before hashing.
NAME_PLACEHOLDER = "__kgc_kernel__"


@dataclasses.dataclass(frozen=True)
class KernelOptions:
    """How a kernel is compiled and launched: what its kg.launch says
    besides its operands. `num_warps` and `num_stages` go to Triton; `grid`
    is the number of programs along each axis."""

    grid: tuple[int, int, int]
    num_warps: int = 4
    num_stages: int = 3

    def __post_init__(self):
        grid = tuple(int(g) for g in self.grid)
        if len(grid) != 3 or any(g < 1 for g in grid):
            raise KgcError(f"a kernel's grid must be three positive sizes, got {list(self.grid)}")
        if self.num_warps < 1 or self.num_warps & (self.num_warps - 1):
            raise KgcError(f"num_warps must be a power of two, got {self.num_warps}")
        if self.num_stages < 1:
            raise KgcError(f"num_stages must be at least 1, got {self.num_stages}")
        object.__setattr__(self, "grid", grid)

    def triton_options(self) -> dict:
        return {"num_warps": self.num_warps, "num_stages": self.num_stages}

    def to_json(self) -> dict:
        return {"grid": list(self.grid), "num_warps": self.num_warps,
                "num_stages": self.num_stages}

    @classmethod
    def from_json(cls, data: dict) -> "KernelOptions":
        return cls(tuple(data["grid"]), data["num_warps"], data["num_stages"])


def kernel_symbol(ttir: str) -> str:
    """The name of the public tt.func of a kernel's TTIR, in the generic
    form kgc prints or in Triton's custom form."""
    match = (re.search(r'sym_name = "([^"]+)"\s*,\s*sym_visibility = "public"', ttir)
             or re.search(r'tt\.func\s+public\s+@([\w$.-]+)', ttir)
             or re.search(r'sym_name = "([^"]+)"', ttir))
    if match is None:
        raise KgcError("the kernel's TTIR has no tt.func to compile")
    return match.group(1)


def relocate_sources(text: str, name: str, folder: str = "") -> str:
    """`text` (a kernel's ttgir, llir or ptx) with its locations in the
    kernel's TTIR naming the file `<folder>/<name>.ttir` (`<name>.ttir`
    alone when `folder` is empty), wherever the TTIR was when Triton read
    it: a temporary file, or for a kernel from Triton's cache, that of the
    compile that filled it."""
    file = f"{name}.ttir"
    escaped = folder.replace("\\", "\\\\").replace('"', '\\"')
    path = f"{escaped}/{file}" if folder else file
    # LLVM's debug info keeps the folder apart from the file's name.
    text = re.sub(r'!DIFile\(filename: "(?:[^"\n]*/)?' + re.escape(file) + r'", directory: "[^"\n]*"\)',
                  lambda _: f'!DIFile(filename: "{file}", directory: "{escaped}")', text)
    return re.sub(r'(?<!filename: )"(?:[^"\n]*/)?' + re.escape(file) + '"', lambda _: f'"{path}"',
                  text)


def content_hash(ttir: str, options: KernelOptions, target: int, triton_version: str,
                 name: str | None = None) -> str:
    """The identity of a compiled kernel (see the module's docstring)."""
    name = name or kernel_symbol(ttir)
    normalized = re.sub(rf"(?<![\w$.-]){re.escape(name)}(?![\w$.-])", NAME_PLACEHOLDER, ttir)
    key = json.dumps({"ttir": normalized, "options": options.to_json(), "target": target,
                      "triton": triton_version}, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Artifact:
    name: str  # the kernel's symbol, and the entry point in its cubin
    hash: str  # content_hash: the artifact's identity
    target: int  # the SM version, 90 for sm_90
    options: KernelOptions
    signature: tuple[str, ...]  # Triton's type of each kernel argument, in order
    metadata: dict  # Triton's metadata of the compile, as JSON
    asm: dict  # stage -> text, or bytes for the cubin
    triton_version: str

    # -- what the metadata says ---------------------------------------------

    @property
    def entry(self) -> str:
        return self.metadata.get("name", self.name)

    @property
    def shared(self) -> int:
        """Bytes of shared memory a program of the kernel allocates."""
        return int(self.metadata.get("shared") or 0)

    @property
    def cubin(self) -> bytes:
        if "cubin" not in self.asm:
            raise KgcError(f"kernel @{self.name} was compiled down to "
                           f"{max(self.asm, key=ARTIFACT_STAGES.index)} only; it needs a cubin "
                           "to run")
        return self.asm["cubin"]

    @property
    def resources(self) -> dict:
        """`registers` and `local_memory` per thread, from the cubin (see
        `cubin_resources`); empty without a cubin."""
        return cubin_resources(self.asm["cubin"], self.entry) if "cubin" in self.asm else {}

    def exceeds(self, limits: dict) -> str | None:
        """Why the kernel cannot run on a device with these limits (as
        Triton's `driver.active.utils.get_device_properties` gives them:
        `max_shared_mem`, `max_num_regs` per block), or None if it fits."""
        threads = int(self.metadata.get("num_warps", self.options.num_warps)) * 32
        if self.shared > limits["max_shared_mem"]:
            return (f"needs {self.shared} bytes of shared memory per program; the device has "
                    f"{limits['max_shared_mem']}")
        if threads > 1024:
            return f"needs {threads} threads per program; a GPU runs at most 1024"
        registers = self.resources.get("registers")
        if registers is not None and registers * threads > limits["max_num_regs"]:
            return (f"needs {registers} registers x {threads} threads = {registers * threads} "
                    f"registers per program; the device has {limits['max_num_regs']}")
        return None

    def check_hash(self) -> None:
        """Raises if `hash` does not describe this artifact's TTIR and options."""
        expected = content_hash(self.asm["ttir"], self.options, self.target, self.triton_version,
                                self.name)
        if expected != self.hash:
            raise KgcError(f"artifact @{self.name}: its hash {self.hash[:16]}... does not match its "
                           f"TTIR, options and target ({expected[:16]}...)")

    # -- files ----------------------------------------------------------------

    def record(self) -> dict:
        """The JSON record `save` writes (without the file entries)."""
        return {"format": FORMAT, "name": self.name, "hash": self.hash,
                "target": self.target, "triton_version": self.triton_version,
                "options": self.options.to_json(), "signature": list(self.signature),
                "metadata": self.metadata, "resources": self.resources}

    def save(self, directory: str | pathlib.Path, stages=None,
             sources: str | None = None) -> pathlib.Path:
        """Writes `<name>.<stage>` for every stage (or those of `stages`) and
        the record `<name>.json`; returns the record's path. The TTGIR's,
        LLVM IR's and PTX's locations name the TTIR in `sources` (default:
        `directory`, where it is written; "" for the bare file name, which
        leaves the files the same wherever they are written)."""
        directory = pathlib.Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        files = {}
        for stage in ARTIFACT_STAGES:
            if stage not in self.asm or (stages is not None and stage not in stages):
                continue
            content = self.asm[stage]
            if stage in LOCATED_STAGES:
                # Their locations name the TTIR file written beside them.
                content = relocate_sources(content, self.name,
                                           str(directory) if sources is None else sources)
            data = content if isinstance(content, bytes) else content.encode()
            path = directory / f"{self.name}.{stage}"
            path.write_bytes(data)
            files[stage] = {"file": path.name, "bytes": len(data),
                            "sha256": hashlib.sha256(data).hexdigest()}
        record = dict(self.record(), files=files)
        path = directory / f"{self.name}.json"
        path.write_text(json.dumps(record, indent=2) + "\n")
        return path

    @classmethod
    def load(cls, path: str | pathlib.Path) -> "Artifact":
        """Reads an artifact from the record `save` wrote, checking every file
        it names. Raises KgcError naming the file that is missing, truncated
        or altered."""
        path = pathlib.Path(path)
        try:
            record = json.loads(path.read_text())
        except OSError as error:
            raise KgcError(f"cannot read artifact record '{path}': {error.strerror}") from None
        except (ValueError, UnicodeDecodeError) as error:
            raise KgcError(f"artifact record '{path}' is not valid JSON (truncated or altered?): "
                           f"{error}") from None
        if not isinstance(record, dict) or record.get("format") != FORMAT:
            found = record.get("format") if isinstance(record, dict) else None
            raise KgcError(f"'{path}' is not a kgc artifact record of format {FORMAT} "
                           f"(found {found!r})")
        try:
            asm = {}
            for stage, entry in record["files"].items():
                asm[stage] = _checked_file(path.parent / entry["file"], entry, stage)
                if stage in LOCATED_STAGES:
                    # In memory, as compiled: located in `<name>.ttir`.
                    asm[stage] = relocate_sources(asm[stage], record["name"])
            artifact = cls(record["name"], record["hash"], record["target"],
                           KernelOptions.from_json(record["options"]), tuple(record["signature"]),
                           record["metadata"], asm, record["triton_version"])
        except (KeyError, TypeError, ValueError) as error:
            raise KgcError(f"artifact record '{path}' lacks or garbles {error}") from None
        if "ttir" in asm:
            artifact.check_hash()
        return artifact


def _checked_file(path: pathlib.Path, entry: dict, stage: str):
    try:
        data = path.read_bytes()
    except OSError as error:
        raise KgcError(f"cannot read '{path}', the {stage} of an artifact: {error.strerror}") from None
    if len(data) != entry["bytes"]:
        raise KgcError(f"'{path}' holds {len(data)} bytes but its artifact record says "
                       f"{entry['bytes']}: the file is truncated or was changed")
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise KgcError(f"'{path}' does not match the sha256 its artifact record holds: the file "
                       "was altered")
    return data if stage in BINARY_STAGES else data.decode()


# Attributes of the .nv.info section of a cubin (ptxas' EIATTR_* codes):
# each applies to the symbol whose index is the first word of its value.
_EIATTR_REGCOUNT = 0x2F
_EIATTR_FRAME_SIZE = 0x11


def cubin_resources(cubin: bytes, entry: str) -> dict:
    """What ptxas allotted `entry`: `registers` (32-bit, per thread) and
    `local_memory` (the stack frame per thread in bytes; more than 0 means
    spilled registers or local arrays). Read from the `.nv.info` section of
    the ELF cubin; empty when the cubin does not say."""
    try:
        if cubin[:4] != b"\x7fELF" or cubin[4] != 2:  # a 64-bit ELF
            return {}
        section_offset, = struct.unpack_from("<Q", cubin, 0x28)
        entry_size, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, section_offset + i * entry_size)
                    for i in range(count)]

        def string(table: int, offset: int) -> bytes:
            start = sections[table][4] + offset
            return cubin[start:cubin.index(b"\0", start)]

        named = {string(names_index, s[0]): s for s in sections}
        symbols = named[b".symtab"]
        symbol = None
        for index in range(symbols[5] // 24):
            name, = struct.unpack_from("<I", cubin, symbols[4] + 24 * index)
            if string(symbols[6], name) == entry.encode():
                symbol = index
                break
        info = named[b".nv.info"]
        data = cubin[info[4]:info[4] + info[5]]
        found, position = {}, 0
        while position + 4 <= len(data):
            form, attribute, size = struct.unpack_from("<BBH", data, position)
            if form != 4:  # a value in the size field itself
                position += 4
                continue
            if size == 8:
                owner, value = struct.unpack_from("<II", data, position + 4)
                if owner == symbol and attribute == _EIATTR_REGCOUNT:
                    found["registers"] = value
                elif owner == symbol and attribute == _EIATTR_FRAME_SIZE:
                    found["local_memory"] = value
            position += 4 + size
        return found
    except (struct.error, IndexError, KeyError, ValueError):
        return {}
