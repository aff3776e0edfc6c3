"""mxlower-cast: statistics against formulas written out here from the oracle's cast values,
saturation and flushing on inputs whose answer is known by construction, input formats, JSON,
the SVG plot, and every kind of bad input (one error line, exit 1, nothing written)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from mxlower import reference
from mxlower.tools import cast as tool

ROOT = Path(__file__).resolve().parents[2]


def run(*argv, capsys):
    rc = tool.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(*argv, capsys):
    rc, out, err = run(*argv, "--json", capsys=capsys)
    assert rc == 0, err

    def strict(c):
        raise AssertionError(f"non-standard JSON constant {c}")

    return json.loads(out, parse_constant=strict)


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((8, 64)) * np.exp2(rng.integers(-6, 6, (8, 1)))).astype(np.float32)
    path = tmp_path / "x.npy"
    np.save(path, x)
    return x, path


def _expected(x, y):
    """The statistics written out directly (float64), for comparison with the tool's."""
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    e = y64 - x64
    nz = x64 != 0
    return {"rmse": math.sqrt(np.mean(e * e)), "max_abs_error": np.max(np.abs(e)),
            "max_rel_error": np.max(np.abs(e[nz]) / np.abs(x64[nz])),
            "sqnr_db": 10 * math.log10(np.sum(x64 * x64) / np.sum(e * e)),
            "flushed_to_zero": np.mean((x64 != 0) & (y64 == 0))}


@pytest.mark.parametrize("dt,rm,sm", [("mxfp8_e4m3", "even", "max"), ("e3m4:e8m0_t32", "zero", "rceil"),
                                      ("nvfp4", "nearest", None), ("int4:e8m0_t16", "even", "midmax"),
                                      ("e5m6", "even", None),
                                      ("uint4:float32_uint8_t0", "even", None),
                                      ("mx6", "nearest", "rceil"),
                                      ("e2m1fo:e8m0_t8x32_s4x4o2", "even", "max")])
def test_statistics_match_the_formulas(data, capsys, dt, rm, sm):
    x, path = data
    doc = run_json(path, "-d", dt, "-r", rm, *(["--scalemode", sm] if sm else []), capsys=capsys)
    (res,) = doc["results"]
    y = reference.cast(x, dt, None, rm, sm or "max")
    for k, v in _expected(x, y).items():
        assert res[k] == pytest.approx(float(v), rel=1e-12, abs=1e-300), k
    assert res["nonfinite_results"] == 0
    assert res["scalemode"] == sm
    assert doc["shape"] == [8, 64] and doc["elements"] == 512 and doc["dtype"] == "float32"


def test_saturation_and_flushing_by_construction(tmp_path, capsys):
    # e4m3fn unscaled: max 448; 500 and -1000 are clipped, 1e-9 flushes, 0 does not count
    x = np.array([500, -1000, 1, 0, 1e-9, 448, -3], np.float32)
    np.save(tmp_path / "a.npy", x)
    (res,) = run_json(tmp_path / "a.npy", "-d", "e4m3fn", capsys=capsys)["results"]
    assert res["saturated"] == pytest.approx(2 / 7)
    assert res["flushed_to_zero"] == pytest.approx(1 / 7)
    # mxfp8_e4m3, scale mode max: amax 1.9 * 2^3 -> E = 3 - 8; 1.9 * 2^8 = 486.4 > 448 is
    # clipped, nothing else in its block; rceil picks a scale with room for it
    blk = np.full(32, 0.5, np.float32)
    blk[5] = 1.9 * 8
    np.save(tmp_path / "b.npy", blk)
    doc = run_json(tmp_path / "b.npy", "-d", "mxfp8_e4m3", "--scalemode", "max,rceil",
                   capsys=capsys)
    assert [r["saturated"] for r in doc["results"]] == [1 / 32, 0]
    # uint4 with a float scale and an integer zero point: the range covers every value
    (res,) = run_json(tmp_path / "b.npy", "-d", "uint4:float32_uint8_t0", capsys=capsys)["results"]
    assert res["saturated"] == 0


def test_subtile_bits_and_range(tmp_path, capsys):
    # mx9: 8 element bits + 8 / 16 scale bits + 1 / 2 offset bit; an offset raises a pair's
    # range: with pairs (1, 1) (0.3, 0.3) ... the second pair's top is 127/64 * 2^-1, so 0.3
    # is inside it, and nothing saturates
    x = np.tile(np.array([1, 1] + [0.3] * 14, np.float32), (2, 4))
    np.save(tmp_path / "a.npy", x)
    res = run_json(tmp_path / "a.npy", "-d", "mx9,mx4", capsys=capsys)["results"]
    assert [r["bits_per_value"] for r in res] == [9, 4]
    assert [r["saturated"] for r in res] == [0, 0]


def test_exact_datatype_gives_inf_sqnr_as_a_string(data, capsys):
    _, path = data
    (res,) = run_json(path, "-d", "float32", capsys=capsys)["results"]
    assert res["sqnr_db"] == "inf" and res["rmse"] == 0 and res["max_abs_error"] == 0


def test_rows_for_every_combination(data, capsys):
    _, path = data
    doc = run_json(path, "-n", "e3m4,e2m1fo", "-s", "e8m0_t32,none", "-r", "even,stochastic",
                   "--scalemode", "max,nearest", capsys=capsys)
    rows = [(r["code"], r["roundmode"], r["scalemode"]) for r in doc["results"]]
    assert len(rows) == 12 and len(set(rows)) == 12
    assert ("e3m4", "even", None) in rows and ("e2m1fo:e8m0_t32", "stochastic", "nearest") in rows
    assert doc["seed"] == 0
    bits = {r["code"]: r["bits_per_value"] for r in doc["results"]}
    assert bits == {"e3m4:e8m0_t32": 8.25, "e3m4": 8, "e2m1fo:e8m0_t32": 4.25, "e2m1fo": 4}


def test_stochastic_uses_the_seeded_bits(data, capsys):
    x, path = data
    docs = [run_json(path, "-d", "mxfp4_e2m1", "-r", "stochastic", "--seed", s, capsys=capsys)
            for s in (3, 3, 4)]
    assert docs[0] == docs[1] and docs[0]["results"] != docs[2]["results"]
    r = np.random.default_rng(3).integers(0, 1 << 32, size=x.shape, dtype=np.uint32)
    y = reference.cast(x, "mxfp4_e2m1", None, "stochastic", "max", r)
    assert docs[0]["results"][0]["rmse"] == pytest.approx(_expected(x, y)["rmse"], rel=1e-12)


def test_table_output(data, capsys):
    _, path = data
    rc, out, err = run(path, "-d", "mxfp8_e4m3,nvfp4", "-n", "e5m6", capsys=capsys)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"# {path}: float32 [8, 64], 512 values")
    assert lines[1].split()[:4] == ["datatype", "round", "scale", "bits"]
    assert [ln.split()[0] for ln in lines[2:]] == ["mxfp8_e4m3", "nvfp4", "e5m6"]
    assert lines[3].split()[2] == "-"  # nvfp4: a float scale has no scale mode


def test_bf16_f16_f64_and_npz(tmp_path, capsys):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 32))
    np.save(tmp_path / "b.npy", x.astype(ml_dtypes.bfloat16))  # saved as |V2
    np.savez(tmp_path / "m.npz", a=x.astype(np.float16), b=x)
    for args, src in (([tmp_path / "b.npy"], x.astype(ml_dtypes.bfloat16)),
                      ([tmp_path / "m.npz", "--key", "a"], x.astype(np.float16))):
        doc = run_json(*args, "-d", "mxfp6_e2m3", capsys=capsys)
        assert doc["dtype"] == np.dtype(src.dtype).name
        y = reference.cast(src, "mxfp6_e2m3")
        assert y.dtype == src.dtype
        assert doc["results"][0]["rmse"] == pytest.approx(_expected(src, y)["rmse"], rel=1e-12)
    # float64: rounded to float32 for the cast, measured against the float64 values
    doc = run_json(tmp_path / "m.npz", "--key", "b", "-d", "float32", capsys=capsys)
    assert doc["dtype"] == "float64"
    e = x.astype(np.float32).astype(np.float64) - x
    assert doc["results"][0]["max_abs_error"] == pytest.approx(np.max(np.abs(e)), rel=1e-12)
    assert doc["results"][0]["max_abs_error"] > 0


def test_nonfinite_inputs_are_left_out(tmp_path, capsys):
    x = np.ones(64, np.float32)
    x[3], x[40] = np.nan, np.inf
    np.save(tmp_path / "n.npy", x)
    doc = run_json(tmp_path / "n.npy", "-d", "mxfp8_e4m3", capsys=capsys)
    assert doc["nonfinite_inputs"] == 2
    (res,) = doc["results"]
    # both blocks hold a NaN/Inf: every finite element's cast is NaN
    assert res["nonfinite_results"] == 1 and res["rmse"] == "nan"
    doc = run_json(tmp_path / "n.npy", "-d", "e4m3fn", capsys=capsys)
    assert doc["results"][0]["nonfinite_results"] == 0 and doc["results"][0]["rmse"] == 0
    rc, out, _ = run(tmp_path / "n.npy", "-d", "e4m3fn", capsys=capsys)
    assert "(2 not finite: left out)" in out.splitlines()[0]


def test_svg_plot(data, tmp_path, capsys):
    _, path = data
    rc, _, err = run(path, "-d", "mxfp8_e4m3,mxfp4_e2m1", "-r", "even,zero", "--plot",
                     tmp_path / "p.svg", capsys=capsys)
    assert rc == 0, err
    root = ET.parse(tmp_path / "p.svg").getroot()
    ns = "{http://www.w3.org/2000/svg}"
    lines = root.findall(f"{ns}polyline")
    assert len(lines) == 4
    labels = [p.find(f"{ns}title").text for p in lines]
    assert labels == ["mxfp8_e4m3 even/max", "mxfp8_e4m3 zero/max", "mxfp4_e2m1 even/max",
                      "mxfp4_e2m1 zero/max"]
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert all(lab in texts for lab in labels)
    # every series is a step line over the same bins: 2 points per bin plus the two ends
    assert all(len(p.get("points").split()) == 2 * tool.BINS + 2 for p in lines)


def _svg_series(root):
    """Per polyline: (label, bin heights in pixels above its baseline)."""
    ns = "{http://www.w3.org/2000/svg}"
    out = []
    for p in root.findall(f"{ns}polyline"):
        pts = [tuple(map(float, q.split(","))) for q in p.get("points").split()]
        base = pts[0][1]
        out.append((p.find(f"{ns}title").text, np.array([base - y for _, y in pts[1:-1:2]])))
    return out


def _mass_bins(h, share=0.9):
    """The fewest bins that hold ``share`` of a series' mass."""
    c = np.cumsum(np.sort(h)[::-1])
    return int(np.searchsorted(c, share * c[-1]) + 1)


@pytest.mark.parametrize("long_labels", [False, True])
def test_svg_plot_geometry(tmp_path, capsys, long_labels):
    """Every text (legend entries with long labels included) lies inside the canvas, and with
    formats of very different precision (mxfp4 ... float16) every series spreads over a
    reasonable number of its panel's bins instead of a shared range squeezing the precise ones
    into two or three."""
    x = np.random.default_rng(3).standard_normal((32, 256)).astype(np.float32)
    np.save(tmp_path / "n.npy", x)
    if long_labels:
        args = ["-n", "e4m3b8fnuz,e2m1fo", "-s", "e8m0_t32x32,e8m0_t16", "-r", "even,stochastic",
                "--scalemode", "midmax,rceil"]
    else:
        args = ["-d", "mxfp4_e2m1,mxfp6_e2m3,mxfp8_e4m3,bfloat16,float16"]
    rc, _, err = run(tmp_path / "n.npy", *args, "--plot", tmp_path / "p.svg", capsys=capsys)
    assert rc == 0, err
    root = ET.parse(tmp_path / "p.svg").getroot()
    W, H = float(root.get("width")), float(root.get("height"))
    ns = "{http://www.w3.org/2000/svg}"
    series = _svg_series(root)
    labels = {lab for lab, _ in series}
    for t in root.iter(f"{ns}text"):
        x0, y0, w = float(t.get("x")), float(t.get("y")), tool.text_width(t.text)
        if t.get("transform"):  # the rotated y-axis label: its extent is vertical
            assert 0 <= y0 - w / 2 and y0 + w / 2 <= H, t.text
            continue
        lo = {"middle": x0 - w / 2, "end": x0 - w}.get(t.get("text-anchor"), x0)
        assert 0 <= lo and lo + w <= W, (t.text, lo, w, W)
        assert 0 < y0 <= H, t.text
    assert labels <= {t.text for t in root.iter(f"{ns}text")}
    for lab, h in series:
        assert _mass_bins(h) >= 6, (lab, _mass_bins(h))
    # the legend's estimate of the text width is an upper bound for these labels in
    # DejaVu Sans / Liberation Sans at 12 px (about 7 px per character on average)
    assert tool.text_width("e4m3b8fnuz:e8m0_t32x32 stochastic/midmax") >= 41 * 7.0


def test_panels_group_similar_ranges():
    e = np.linspace(-1, 1, 101)
    rows = [tool.Row(None, "even", None, 8, {}, s * e) for s in (1.0, 0.5, 1e-3, 3e-3, 2.0)]
    rows.append(tool.Row(None, "even", None, 8, {}, np.zeros(0)))
    groups = tool.panels(rows, bins=9)
    assert [g for g, _, _ in groups] == [[0, 1, 4], [2, 3, 5]]
    for idx, edges, hists in groups:
        R = max(np.quantile(np.abs(rows[i].error), 0.999) for i in idx if rows[i].error.size)
        assert edges[-1] == pytest.approx(R) and len(hists) == len(idx)


def test_histograms_are_fractions_with_clipped_edges():
    rows = [tool.Row(None, "even", None, 8, {}, np.array([-100.0, -1, 0, 0, 1, 2])),
            tool.Row(None, "even", None, 8, {}, np.zeros(4))]
    edges, (h, z) = tool.histograms(rows, bins=5)
    R = np.quantile([100.0, 1, 0, 0, 1, 2], 0.999)
    assert edges[0] == -R and edges[-1] == R
    assert h.sum() == pytest.approx(1) and h[0] >= 1 / 6  # -100 counted in the first bin
    assert z[2] == 1 and z.sum() == 1


BAD = [
    (["missing.npy", "-d", "mxfp8_e4m3"], "could not open input file"),
    (["corrupt.npy", "-d", "mxfp8_e4m3"], "could not read"),
    (["ints.npy", "-d", "mxfp8_e4m3"], "holds int32 data"),
    (["empty.npy", "-d", "mxfp8_e4m3"], "is empty"),
    (["two.npz", "-d", "mxfp8_e4m3"], "choose one with --key"),
    (["two.npz", "--key", "c", "-d", "mxfp8_e4m3"], "has no array 'c'"),
    (["x.npy", "--key", "a", "-d", "mxfp8_e4m3"], "is not one"),
    (["x.npy", "-d", "e9m2"], "e9m2"),
    (["x.npy", "-n", "e3m4", "-s", "e8m0_t33"], "power of two"),
    (["x.npy", "-d", "uint8:e8m0_t32"], "uint data is asymmetric"),
    (["x.npy", "-d", "mxfp8_e4m3", "-s", "e8m0_t32"], "--scale needs --number"),
    (["x.npy", "-d", "e4m3:e8m0_t128"], "does not divide dimension"),
    (["x.npy", "-d", "e4m3:e8m0_t2x2d0d0"], "must differ"),
    (["x.npy", "-d", "int8:e8m0_t16_s3o1"], "subtile size is a power of two"),
    (["x.npy", "-d", "int8:e8m0_t16_s2o9"], "1 to 8 bits"),
    (["x.npy", "-d", "int8:e4m3fn_t16_s2o1"], "below an exponent scale"),
    (["x.npy", "-n", "int8", "-s", "e8m0_t128_s2o1"], "does not divide dimension"),
    (["x.npy", "-d", "mxfp8_e4m3", "-r", "up"], "unknown rounding mode 'up'"),
    (["x.npy", "-d", "mxfp8_e4m3", "--scalemode", "floor"], "unknown scale mode 'floor'"),
    (["x.npy", "-d", "mxfp8_e4m3,"], "empty item"),
    (["x.npy"], "name at least one datatype"),
    ([], "no input file"),
    (["x.npy", "-d", "mxfp8_e4m3", "--seed", "-1"], "--seed"),
    (["x.npy", "-d", "mxfp8_e4m3", "--plot", "nodir/p.svg"], "no such directory"),
    (["f64big.npy", "-d", "mxfp8_e4m3"], "beyond float32's range"),
    (["x.npy", "-d", "mxfp8_e4m3", "--bogus"], "unrecognized arguments"),
    (["x.npy", "-d", "nf4:float32_uint8_t32"], "only uint data takes a zero point"),
    (["x.npy", "-n", "lut4_0123456789ab"], "cannot rebuild the table"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[m for _, m in BAD])
def test_bad_input_is_one_error_line(tmp_path, argv, message, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.ones((4, 64), np.float32))
    Path("corrupt.npy").write_bytes(b"\x93NUMPY\x01\x00garbage")
    np.save("ints.npy", np.arange(64, dtype=np.int32))
    np.save("empty.npy", np.zeros((0, 32), np.float32))
    np.save("f64big.npy", np.array([1e300, 1.0]))
    np.savez("two.npz", a=np.ones(32, np.float32), b=np.ones(32, np.float32))
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(SystemExit) if "--bogus" in argv else _nothing():
        rc, out, err = run(*argv, capsys=capsys)
        assert rc == 1 and out == ""
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("mxlower-cast: error: "), err
        assert message in lines[0], err
    if "--bogus" in argv:
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_png_without_matplotlib_is_refused_before_work(tmp_path, capsys):
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("matplotlib is installed")
    np.save(tmp_path / "x.npy", np.ones(32, np.float32))
    rc, out, err = run(tmp_path / "x.npy", "-d", "mxfp8_e4m3", "--plot", tmp_path / "p.png",
                       capsys=capsys)
    assert rc == 1 and "needs matplotlib" in err and not (tmp_path / "p.png").exists()


def test_type_names_are_shown_as_written(data, capsys):
    _, path = data
    doc = run_json(path, "-d", "bfloat16,e5m6:e8m0_t32,float16", capsys=capsys)
    assert [(r["datatype"], r["code"]) for r in doc["results"]] == [
        ("bfloat16", "e8m7"), ("e5m6:e8m0_t32", "e5m6:e8m0_t32"), ("float16", "e5m10")]


def test_lookup_tables(data, capsys):
    """nf4 (section 10.7) unscaled, with QLoRA's absmax scale and an exponent scale: the
    oracle's cast values."""
    x, path = data
    doc = run_json(path, "-d", "nf4,nf4:float32_t64", "-n", "nf4", "-s", "e8m0_t32",
                   capsys=capsys)
    rows = {r["code"]: r for r in doc["results"]}
    assert set(rows) == {"nf4", "nf4:e8m23_t64", "nf4:e8m0_t32"}
    for code, dt in (("nf4", "nf4"), ("nf4:e8m23_t64", "nf4:float32_t64"),
                     ("nf4:e8m0_t32", "nf4:e8m0_t32")):
        want = _expected(x, reference.cast(x, dt))
        assert rows[code]["rmse"] == pytest.approx(want["rmse"], rel=1e-12), code


def test_list_datatypes(capsys):
    rc, out, _ = run("--list-datatypes", capsys=capsys)
    assert rc == 0
    rows = dict(line.split() for line in out.splitlines())
    assert rows["nvfp4"] == "e2m1fo:e4m3fn_t16" and rows["mxint4"] == "int4:e8m0_t32"


def test_checkout_executable_runs_without_jax(tmp_path):
    """tools/mxlower-cast from anywhere; the tool never imports JAX or jaxlib."""
    np.save(tmp_path / "x.npy", np.ones(64, np.float32))
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "mxlower-cast"), "--help"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("usage: mxlower-cast")
    assert "SQNR dB" in r.stdout and "saturated" in r.stdout
    probe = ("import sys, mxlower.tools.cast as t; rc = t.main(sys.argv[1:]); "
             "bad = [m for m in ('jax', 'jaxlib') if m in sys.modules]; "
             "sys.exit(97 if bad else rc)")
    r = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "x.npy"), "-d",
                        "mxfp8_e4m3,nvfp4", "--plot", str(tmp_path / "p.svg")],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
