"""The pass base class and the one registry of kgc's Python passes.

A pass is a subclass of `Pass` with a command-line `argument`, a `summary`
and typed `Option`s; `@register_pass` makes it usable by name everywhere a
built-in pass is: `kgc-opt --my-pass`, `--pass-pipeline=...`, and
`kgc.pipeline.Pipeline`. A plain function becomes a pass with
`@function_pass("my-pass")`.
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap
from typing import Any, Callable, ClassVar

from mlir import ir


class PassFailure(Exception):
    """Raised by a pass to fail with a diagnostic at `location`."""

    def __init__(self, message: str, location: ir.Location | None = None):
        super().__init__(message)
        self.message = message
        self.location = location


def dynamic_extent_failure(op: ir.Operation, argument: str) -> PassFailure | None:
    """The error of pass `argument`, which plans static extents only, at the
    first value in `op` whose type has a dynamic extent; None if none has."""

    def dynamic(value: ir.Value) -> bool:
        try:
            shaped = ir.ShapedType(value.type)
        except ValueError:  # not a shaped type
            return False
        return shaped.has_rank and not shaped.has_static_shape

    def failure(value: ir.Value, what: str, location: ir.Location) -> PassFailure:
        return PassFailure(
            f"{argument} plans static extents only: {what} has type {value.type}, with a "
            "dynamic extent (`?`)",
            location)

    found: list[PassFailure] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        for region in inner.regions:
            for block in region.blocks:
                for index, argument_value in enumerate(block.arguments):
                    if dynamic(argument_value):
                        owner = (f"@{ir.StringAttr(inner.attributes['sym_name']).value}"
                                 if "sym_name" in inner.attributes else inner.name)
                        found.append(failure(argument_value, f"argument #{index} of {owner}",
                                             argument_value.location))
                        return ir.WalkResult.INTERRUPT
        for index, result in enumerate(inner.results):
            if dynamic(result):
                found.append(failure(result, f"result #{index} of {inner.name}",
                                     inner.location))
                return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    # Pre-order, so that a function's arguments come before its body.
    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found[0] if found else None


class OptionError(ValueError):
    """An option that a pass does not have, or a value of the wrong type."""


@dataclasses.dataclass(frozen=True)
class Option:
    """A typed pass option. `kind` is int, float, bool, str or `list[int]`.

    In textual pipelines options are written `{name=value other=1,2,3}`;
    from Python, as keyword arguments with `-` spelled `_`.
    """

    kind: Any
    default: Any
    help: str
    # The values allowed, where not every value of `kind` makes sense.
    choices: tuple = ()

    def check(self, name: str, value: Any, owner: str) -> Any:
        """`value`, or OptionError where it is not one of `choices`."""
        if self.choices and value not in self.choices:
            allowed = ", ".join(self.render(choice) for choice in self.choices)
            raise OptionError(f"option '{name}' of pass '{owner}' must be one of {allowed}; "
                              f"got '{self.render(value)}'")
        return value

    def parse(self, name: str, text: str) -> Any:
        try:
            if self.kind is bool:
                lowered = text.strip().lower()
                if lowered in ("", "true", "1", "on"):
                    return True
                if lowered in ("false", "0", "off"):
                    return False
                raise ValueError(text)
            if self.kind == list[int]:
                return [int(part) for part in text.split(",") if part.strip()]
            return self.kind(text)
        except ValueError:
            raise OptionError(
                f"option '{name}' expects {self.type_name()}, got '{text}'"
            ) from None

    def type_name(self) -> str:
        if self.kind == list[int]:
            return "a comma-separated list of integers"
        return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}[
            self.kind
        ]

    def render(self, value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (list, tuple)):
            return ",".join(str(v) for v in value)
        return str(value)


class Pass:
    """Base class of a kgc pass.

    Subclasses set `argument` and `summary`, may declare `Option`s as class
    attributes, and implement `run(op)`, which rewrites `op` (the module the
    pipeline runs on, or each op of a nested anchor) in place. A pass fails
    by raising `PassFailure`.
    """

    argument: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    # Set by passes that create ops of dialects this build does not register
    # (Triton's tt); the pipeline then allows them before it runs, since a
    # context cannot change that while passes run on several threads.
    creates_unregistered_ops: ClassVar[bool] = False
    # Set by passes that plan kernels (kg-fuse, kg-tile): a pipeline run
    # gives each of them its one `kgc.tiling.planner.Planner` (`planner`),
    # so that they plan each kernel once between them.
    plans_kernels: ClassVar[bool] = False
    # The run's planner while a pipeline runs the pass; None otherwise (the
    # pass then plans with one of its own).
    planner: Any = None
    # Set by passes that plan or lower kernels from static extents: the
    # pipeline refuses to run them on IR with a dynamic extent (`?`), with
    # an error at the first value that has one (`dynamic_extent_failure`).
    static_extents_only: ClassVar[bool] = False

    def __init__(self, **options: Any):
        known = self.option_specs()
        for key, value in options.items():
            name = key.replace("_", "-")
            if name not in known:
                raise OptionError(self._unknown_option(name))
            setattr(self, name.replace("-", "_"), known[name].check(name, value, self.argument))
        for name, spec in known.items():
            attr = name.replace("-", "_")
            if attr not in self.__dict__:
                setattr(self, attr, spec.default)

    @classmethod
    def option_specs(cls) -> dict[str, Option]:
        specs: dict[str, Option] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                if isinstance(value, Option):
                    specs[attr.replace("_", "-")] = value
        return specs

    @classmethod
    def from_textual_options(cls, options: dict[str, str]) -> "Pass":
        """Builds the pass from `{name=value}` options of a textual pipeline."""
        specs = cls.option_specs()
        parsed = {}
        for name, text in options.items():
            if name not in specs:
                raise OptionError(cls._unknown_option(name))
            parsed[name.replace("-", "_")] = specs[name].parse(name, text)
        return cls(**parsed)

    @classmethod
    def _unknown_option(cls, name: str) -> str:
        known = ", ".join(cls.option_specs()) or "none"
        return f"pass '{cls.argument}' has no option '{name}' (options: {known})"

    def textual_options(self) -> dict[str, str]:
        """The options that differ from their defaults, as text."""
        out = {}
        for name, spec in self.option_specs().items():
            value = getattr(self, name.replace("-", "_"))
            if value != spec.default:
                out[name] = spec.render(value)
        return out

    @classmethod
    def display_name(cls) -> str:
        """The name MLIR shows in IR dumps and timing reports: the class
        name, so a pass class is named as its dumps should read."""
        return cls.__name__

    @classmethod
    def description(cls) -> str:
        return textwrap.dedent(inspect.getdoc(cls) or cls.summary)

    def run(self, op: ir.Operation) -> None:  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__}.run")


_REGISTRY: dict[str, type[Pass]] = {}


def register_pass(cls: type[Pass]) -> type[Pass]:
    """Class decorator: makes `cls` available by its `argument`."""
    if not cls.argument:
        raise ValueError(f"{cls.__name__} needs an `argument` to be registered")
    existing = _REGISTRY.get(cls.argument)
    if existing is not None and existing is not cls:
        raise ValueError(
            f"pass argument '{cls.argument}' is taken by {existing.__module__}."
            f"{existing.__name__}"
        )
    _REGISTRY[cls.argument] = cls
    return cls


def function_pass(argument: str, summary: str = "") -> Callable[[Callable], type[Pass]]:
    """Decorator: registers `fn(op)` as a pass without options."""

    def wrap(fn: Callable[[ir.Operation], None]) -> type[Pass]:
        name = "".join(part.capitalize() for part in argument.replace("_", "-").split("-"))
        cls = type(
            name,
            (Pass,),
            {
                "argument": argument,
                "summary": summary or (inspect.getdoc(fn) or "").split("\n")[0],
                "__doc__": inspect.getdoc(fn),
                "run": lambda self, op: fn(op),
                "__module__": fn.__module__,
            },
        )
        return register_pass(cls)

    return wrap


class PluginError(Exception):
    """A pass plugin that cannot be found or fails while it loads."""


def load_pass_plugin(source: str) -> list[str]:
    """Imports a Python module of passes, as mlir-opt's `--load-pass-plugin`
    loads a shared library of them: `source` is a file (`my_passes.py`) or
    a module name (`my_package.passes`). The module registers its passes
    on import (`@register_pass`, `@function_pass`); returns the arguments
    of the passes it added. Loading a module a second time adds nothing."""
    import importlib
    import importlib.util
    import pathlib
    import sys

    before = set(_REGISTRY)
    path = pathlib.Path(source)
    try:
        if source.endswith(".py") or path.is_file():
            if not path.is_file():
                raise PluginError(f"cannot load pass plugin '{source}': no such file")
            resolved = path.resolve()
            # One module per file: loading the same file twice registers
            # the same classes, which the registry accepts.
            name = f"kgc_pass_plugin_{abs(hash(str(resolved))):x}"
            module = sys.modules.get(name)
            if module is None:
                spec = importlib.util.spec_from_file_location(name, resolved)
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                try:
                    spec.loader.exec_module(module)
                except BaseException:
                    del sys.modules[name]
                    raise
        else:
            importlib.import_module(source)
    except PluginError:
        raise
    except ModuleNotFoundError as error:
        if error.name and source.startswith(error.name):
            raise PluginError(f"cannot load pass plugin '{source}': no such file or module "
                              "(give a path ending in .py, or a module importable from "
                              "sys.path)") from None
        raise PluginError(f"cannot load pass plugin '{source}': {error}") from None
    except Exception as error:  # anything the user's module raises while it loads
        raise PluginError(f"cannot load pass plugin '{source}': "
                          f"{type(error).__name__}: {error}") from None
    return sorted(set(_REGISTRY) - before)


def get_pass(argument: str) -> type[Pass] | None:
    return _REGISTRY.get(argument)


def registered_passes() -> dict[str, type[Pass]]:
    """Every registered pass by argument, in argument order."""
    return dict(sorted(_REGISTRY.items()))
