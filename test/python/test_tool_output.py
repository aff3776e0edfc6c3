"""Every tool's output file (``mxlower-opt -o``, ``mxlower-run -o``, ``mxlower-translate -o``,
``mxlower-cast --plot``) is written as a normal write would write it, but never half: a new
file gets ``0666 & ~umask``, an existing one keeps its mode, a symbolic link's target is
replaced (never the link), a FIFO or a device is written directly (issues 21 and 22)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import numpy as np
import pytest

from mxlower.tools import cast, opt, run, translate
from mxlower.tools.source import write_output

MODULE = """
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


@pytest.fixture
def inputs(tmp_path):
    m = tmp_path / "in.mlir"
    m.write_text(MODULE)
    x = tmp_path / "x.npy"
    np.save(x, np.arange(4, dtype=np.float32))
    data = tmp_path / "d.npy"
    np.save(data, np.linspace(-3, 3, 64, dtype=np.float32))
    return m, x, data


def _tool(name, inputs, out):
    """Run one tool writing ``out``; its exit code and the first bytes its output must hold."""
    m, x, data = inputs
    if name == "opt":
        return opt.main([str(m), "-o", str(out)]), b"module"
    if name == "translate":
        return translate.main([str(m), "--emit", "mlir", "-p", "builtin.module(mxlower-verify-mx)",
                               "-o", str(out)]), b"module"
    if name == "run":
        return run.main([str(m), "-i", str(x), "-o", str(out), "--no-print"]), b"PK"
    return cast.main([str(data), "-d", "mxfp8_e4m3", "--plot", str(out)]), b"<svg"


TOOLS = ["opt", "translate", "run", "cast"]
SUFFIX = {"opt": ".mlir", "translate": ".ll", "run": ".npz", "cast": ".svg"}


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("mask", [0o002, 0o022, 0o077])
def test_a_new_output_gets_the_umask_mode(tool, mask, inputs, tmp_path, umask, capsys):
    umask(mask)
    out = tmp_path / ("out" + SUFFIX[tool])
    rc, head = _tool(tool, inputs, out)
    assert rc == 0, capsys.readouterr().err
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~mask
    assert out.read_bytes().lstrip().startswith(head)


@pytest.mark.parametrize("tool", TOOLS)
def test_an_existing_output_keeps_its_mode(tool, inputs, tmp_path, umask, capsys):
    out = tmp_path / ("out" + SUFFIX[tool])
    out.write_text("old")
    out.chmod(0o640)
    rc, head = _tool(tool, inputs, out)
    assert rc == 0, capsys.readouterr().err
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert out.read_bytes().lstrip().startswith(head)


@pytest.mark.parametrize("tool", TOOLS)
def test_a_symlink_output_writes_its_target(tool, inputs, tmp_path, capsys):
    target = tmp_path / "sub" / ("target" + SUFFIX[tool])
    target.parent.mkdir()
    target.write_text("old")
    target.chmod(0o604)
    hop = tmp_path / ("hop" + SUFFIX[tool])
    hop.symlink_to(target)
    link = tmp_path / ("link" + SUFFIX[tool])
    link.symlink_to(hop)  # a chain of two links
    rc, head = _tool(tool, inputs, link)
    assert rc == 0, capsys.readouterr().err
    assert link.is_symlink() and hop.is_symlink()
    assert os.readlink(link) == str(hop)
    assert target.read_bytes().lstrip().startswith(head)
    assert stat.S_IMODE(target.stat().st_mode) == 0o604
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # no temporary


def test_a_dangling_symlink_creates_its_target(tmp_path, umask):
    umask(0o022)
    link = tmp_path / "link.mlir"
    link.symlink_to(tmp_path / "new.mlir")
    write_output(str(link), "module {}\n")
    assert link.is_symlink() and (tmp_path / "new.mlir").read_text() == "module {}\n"
    assert stat.S_IMODE((tmp_path / "new.mlir").stat().st_mode) == 0o644


@pytest.mark.parametrize("tool", TOOLS)
def test_a_fifo_output_is_written_not_replaced(tool, inputs, tmp_path, capsys):
    fifo = tmp_path / ("pipe" + SUFFIX[tool])
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    rc, head = _tool(tool, inputs, fifo)
    reader.join(timeout=60)
    assert rc == 0, capsys.readouterr().err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and got[0].lstrip().startswith(head)


def _char_device(tmp_path: Path, suffix: str) -> Path:
    """A copy of /dev/null in ``tmp_path`` named with ``suffix`` (mknod needs root)."""
    dev = tmp_path / ("null" + suffix)
    try:
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null on Linux
    except OSError as e:
        pytest.skip(f"cannot make a character device here: {e.strerror}")
    return dev


@pytest.mark.parametrize("tool", TOOLS)
def test_a_character_device_output_is_written_not_replaced(tool, inputs, tmp_path, capsys):
    dev = _char_device(tmp_path, SUFFIX[tool])
    rdev = os.stat(dev).st_rdev
    rc, _ = _tool(tool, inputs, dev)
    assert rc == 0, capsys.readouterr().err
    st = os.lstat(dev)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == rdev
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".mxlower-")) == []



def test_a_failed_run_leaves_the_old_output(inputs, tmp_path, capsys):
    out = tmp_path / "out.mlir"
    out.write_text("old")
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f( {")
    assert opt.main([str(bad), "-o", str(out)]) == 1
    assert out.read_text() == "old"
    assert "error" in capsys.readouterr().err
