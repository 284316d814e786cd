"""What `kgc compile -o DIR` leaves in DIR: one compile's files, listed in
its manifest; what an earlier compile wrote there is removed, nothing else
is; `--emit kg` says what it wrote; `--name` names the files and the C
export."""

from __future__ import annotations

import json
import pathlib

import pytest

import kgc
import kgc.runtime
from kgc.pipeline.compiler import remove_earlier_output
from kgc.tools import cli

EXP = """func.func @f(%x: tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  %y = kg.exp %x : tensor<17x1000xf32>
  return %y : tensor<17x1000xf32>
}
"""


def compile_(*args: str, capsys) -> tuple[int, str, str]:
    status = cli.run(["compile", *args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return status, captured.out, captured.err


def files_in(folder: pathlib.Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_a_compile_removes_the_kernels_an_earlier_one_wrote(tmp_path, capsys):
    out = tmp_path / "out"
    assert compile_("-o", str(out), capsys=capsys)[0] == 0
    earlier = files_in(out)
    assert "kernels/rmsnorm_matmul_1_matmul.cubin" in earlier
    (out / "notes.txt").write_text("mine")
    (out / "kernels" / "mine.cubin").write_bytes(b"mine")
    source = tmp_path / "exp.mlir"
    source.write_text(EXP)
    assert compile_(str(source), "-o", str(out), capsys=capsys)[0] == 0
    manifest = json.loads((out / "manifest.json").read_text())
    # What is there is this compile's, as its manifest lists, and the user's files.
    assert files_in(out) == set(manifest["files"]) | {"manifest.json", "notes.txt",
                                                       "kernels/mine.cubin"}
    assert not any("rmsnorm" in name for name in files_in(out))
    assert [kernel["name"] for kernel in manifest["kernels"]] == ["f_0_pointwise"]
    assert kgc.runtime.load(out).name == "f"


def test_only_files_inside_the_folder_that_the_manifest_lists_are_removed(tmp_path):
    out, outside = tmp_path / "out", tmp_path / "keep.cubin"
    (out / "kernels").mkdir(parents=True)
    outside.write_bytes(b"x")
    (out / "kernels" / "k.cubin").write_bytes(b"x")
    (out / "kernels" / "other.ptx").write_text("x")
    (out / "manifest.json").write_text(json.dumps(
        {"format": "kgc-manifest-2", "files": ["kernels/k.cubin", "../keep.cubin", "/etc/passwd"]}))
    removed = remove_earlier_output(out)
    assert removed == [out / "kernels" / "k.cubin", out / "manifest.json"]
    assert outside.exists() and (out / "kernels" / "other.ptx").exists()


def test_a_manifest_before_the_file_list_still_names_its_kernels_files(tmp_path):
    out = tmp_path / "out"
    (out / "kernels").mkdir(parents=True)
    for suffix in ("ttir", "ttgir", "llir", "ptx", "cubin", "json"):
        (out / "kernels" / f"g_0_matmul.{suffix}").write_text("x")
    (out / "kernels" / "unrelated.cubin").write_text("x")
    (out / "manifest.json").write_text(json.dumps(
        {"format": "kgc-manifest-2", "kernels": [
            {"name": "g_0_matmul", "artifact": "kernels/g_0_matmul.json"}]}))
    remove_earlier_output(out)
    assert files_in(out) == {"kernels/unrelated.cubin"}


def test_a_folder_without_a_kgc_manifest_is_left_alone(tmp_path):
    (tmp_path / "manifest.json").write_text('{"files": ["a.cubin"]}')
    (tmp_path / "a.cubin").write_text("x")
    assert remove_earlier_output(tmp_path) == []
    assert (tmp_path / "a.cubin").exists()


def test_a_c_export_replaces_an_earlier_compile_s_output(tmp_path, capsys):
    out = tmp_path / "out"
    assert compile_("-o", str(out), capsys=capsys)[0] == 0
    assert compile_("-o", str(out), "--emit", "c", capsys=capsys)[0] == 0
    assert files_in(out) == {"rmsnorm_matmul.c", "rmsnorm_matmul.h"}


def test_emit_kg_says_what_it_wrote(tmp_path, capsys):
    out = tmp_path / "out"
    assert compile_("-o", str(out), capsys=capsys)[0] == 0
    status, printed, _ = compile_("-o", str(out), "--emit", "kg", capsys=capsys)
    assert status == 0
    assert "manifest.json describes the kernels" not in printed
    assert "wrote 2 files to" in printed and "manifest.json lists them" in printed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stages"] == ["kg"] and manifest["kernels"] == []
    assert manifest["files"] == ["rmsnorm_matmul.kg.mlir"]
    assert files_in(out) == {"manifest.json", "rmsnorm_matmul.kg.mlir"}
    with pytest.raises(kgc.KgcError, match=r"stopped at the kg stage \(--emit kg\), before there "
                                           r"are kernels: compile down to cubin to run it"):
        kgc.runtime.load(out)


def test_a_file_whose_stem_is_no_c_identifier_exports_with_a_name(tmp_path, capsys):
    source = tmp_path / "2graph.mlir"
    source.write_text(EXP)
    status, _, error = compile_(str(source), "--emit", "c", "-o", str(tmp_path / "c"),
                                capsys=capsys)
    assert status == 1
    assert "'2graph' cannot be part of a C identifier" in error
    assert "name the export with --name NAME" in error
    status, printed, error = compile_(str(source), "--emit", "c", "--name", "graph2", "-o",
                                      str(tmp_path / "c"), capsys=capsys)
    assert status == 0, error
    assert files_in(tmp_path / "c") == {"graph2.c", "graph2.h"}
    assert "kgc_graph2_f()" in printed
    assert "CUresult kgc_graph2_f(CUstream stream" in (tmp_path / "c" / "graph2.h").read_text()


def test_name_names_the_files_of_a_compile(tmp_path, capsys):
    source = tmp_path / "2graph.mlir"
    source.write_text(EXP)
    assert compile_(str(source), "--emit", "ttir", "--name", "exp", "-o", str(tmp_path / "o"),
                    capsys=capsys)[0] == 0
    assert {"exp.kg.mlir", "exp.ttir.mlir"} <= files_in(tmp_path / "o")


@pytest.mark.parametrize("name, message", [
    ("a/b", "--name 'a/b' must be a plain file name"),
    ("int", "--name 'int' is a C keyword"),
    ("my graph", "--name 'my graph' cannot be part of a C identifier"),
])
def test_a_name_that_cannot_be_used_is_refused_before_compiling(tmp_path, capsys, name, message):
    status, _, error = compile_("--emit", "c", "--name", name, "-o", str(tmp_path / "c"),
                                capsys=capsys)
    assert status == 1 and message in error
    assert not list((tmp_path / "c").glob("*.c")) if (tmp_path / "c").exists() else True
