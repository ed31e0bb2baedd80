# SPDX-License-Identifier: Apache-2.0
"""The explorer's litmus suite: one tiny program per persistency shape (tests/explorer/litmus.c),
explored under every model with --require-exhaustive, and the set of outcomes its checker saw
compared for equality with the set the model allows. An outcome is the values of the shape's
variables in one crash image, over every crash point of the run.

The models, as docs/explorer.md states them:
  x86       per 8-byte word: any unflushed word may persist or not, independently (any subset);
  x86-line  per 64-byte line: a line persists a prefix of its words in store order;
  eadr      persistent caches: a prefix of the store order, a multi-word write torn to a prefix
            of its words; non-temporal stores wait for a fence;
  strict    every prefix of the store order, non-temporal stores included, with a crash point
            before every event: the reference of --robustness.
"""

from __future__ import annotations

import itertools
import json
import subprocess

import pytest
from conftest import BUILD

LIT = BUILD / "tests" / "explorer"
MODELS = ["x86", "x86-line", "eadr", "strict"]

pytestmark = pytest.mark.skipif(
    not (LIT / "litmus").exists(), reason="traced builds need the pass plugin (PMKIT_BUILD_PASSES)"
)


def fmt(vals) -> str:
    return ",".join(f"{v:x}" for v in vals)


def subsets(*new):
    """Every image that keeps any subset of the words (initially 0)."""
    return {fmt(c) for c in itertools.product(*[(0, v) for v in new])}


def prefixes(*new):
    """Every image that keeps the first j words, j = 0..n."""
    return {fmt(list(new[:j]) + [0] * (len(new) - j)) for j in range(len(new) + 1)}


def line_prefixes(words, per_line=8):
    """A prefix of each line's words, independently per line."""
    lines = [words[i : i + per_line] for i in range(0, len(words), per_line)]
    out = set()
    for cut in itertools.product(*[range(len(ln) + 1) for ln in lines]):
        vals = []
        for ln, j in zip(lines, cut, strict=True):
            vals += list(ln[:j]) + [0] * (len(ln) - j)
        out.add(fmt(vals))
    return out


def same(s):
    return dict.fromkeys(MODELS, s)


def unordered(*new):
    """Two stores on different lines, nothing orders their persistence (x86, x86-line)."""
    return {"x86": subsets(*new), "x86-line": subsets(*new), "eadr": prefixes(*new),
            "strict": prefixes(*new)}  # fmt: skip


ORDERED = same(prefixes(1, 1))  # x persisted before y is stored
SIXTEEN = list(range(1, 17))
RMW_PM = {"0,0,0", "1,0,0", "1,0,1", "1,1,0", "1,1,1"}  # (x, y, z): z and y after x's fence
RMW_PM_EADR = {"0,0,0", "1,0,0", "1,0,1", "1,1,1"}  # prefixes of x, z, y

SHAPES = {
    "diff_lines": unordered(1, 1),
    "same_line": {
        "x86": subsets(1, 1),
        "x86-line": prefixes(1, 1),
        "eadr": prefixes(1, 1),
        "strict": prefixes(1, 1),
    },  # fmt: skip
    "clwb_sfence": ORDERED,
    "clflushopt_sfence": ORDERED,
    "clflush_nofence": ORDERED,  # clflush persists at once
    "clwb_nofence": unordered(1, 1),
    "clflushopt_nofence": unordered(1, 1),
    "mfence_noflush": unordered(1, 1),  # a fence alone writes nothing back
    "clwb_mfence": ORDERED,
    "clwb_sc_fence": ORDERED,
    "clwb_rmw_pm": {
        "x86": RMW_PM,
        "x86-line": RMW_PM,
        "eadr": RMW_PM_EADR,
        "strict": RMW_PM_EADR,
    },  # fmt: skip
    "clwb_rmw_dram": ORDERED,  # a locked instruction on DRAM still fences
    "clwb_xchg_pm": {
        "x86": RMW_PM,
        "x86-line": RMW_PM,
        "eadr": RMW_PM_EADR,
        "strict": RMW_PM_EADR,
    },  # fmt: skip
    "clwb_xchg_dram": ORDERED,  # a seq_cst store is an xchg: a fence
    "clwb_cas_fail": same({"0,0,0", "1,0,0", "1,1,0"}),  # a failed cmpxchg fences too
    "nt_sfence": ORDERED,
    # A non-temporal store waits for a fence, even on eADR; strict persistency orders it.
    "nt_nofence": {
        "x86": subsets(1, 1),
        "x86-line": subsets(1, 1),
        "eadr": subsets(1, 1),
        "strict": prefixes(1, 1),
    },  # fmt: skip
    "store16_line": {
        "x86": subsets(1, 2),
        "x86-line": prefixes(1, 2),
        "eadr": prefixes(1, 2),
        "strict": prefixes(1, 2),
    },  # fmt: skip
    "store16_cross": {
        "x86": subsets(1, 2),
        "x86-line": subsets(1, 2),
        "eadr": prefixes(1, 2),
        "strict": prefixes(1, 2),
    },  # fmt: skip
    "memcpy16": {
        "x86": subsets(1, 2),
        "x86-line": prefixes(1, 2),
        "eadr": prefixes(1, 2),
        "strict": prefixes(1, 2),
    },  # fmt: skip
    "memcpy128": {
        "x86": subsets(*SIXTEEN),
        "x86-line": line_prefixes(SIXTEEN),
        "eadr": prefixes(*SIXTEEN),
        "strict": prefixes(*SIXTEEN),
    },  # fmt: skip
    "memset64": {
        "x86": subsets(*[0x1111111111111111] * 8),
        "x86-line": prefixes(*[0x1111111111111111] * 8),
        "eadr": prefixes(*[0x1111111111111111] * 8),
        "strict": prefixes(*[0x1111111111111111] * 8),
    },  # fmt: skip
    "same_twice": same({"0", "1", "2"}),
    # x = 2 comes after the clwb: the fence makes only x = 1 durable.
    "store_after_clwb": {
        "x86": {"0,0", "1,0", "2,0", "1,1", "2,1"},
        "x86-line": {"0,0", "1,0", "2,0", "1,1", "2,1"},
        "eadr": {"0,0", "1,0", "2,0", "2,1"},
        "strict": {"0,0", "1,0", "2,0", "2,1"},
    },  # fmt: skip
    "clflush_wrong_line": unordered(1, 1),
    # Thread 2 persists y after reading thread 1's unflushed x: x may still be lost ...
    "read_noflush": unordered(1, 1),
    # ... unless thread 2 writes x back and fences before storing y.
    "read_flush": ORDERED,
    # Thread 2's fence does not order thread 1's clwb.
    "clwb_other_fence": unordered(1, 1),
}


def test_every_shape_has_expectations():
    listed = subprocess.run([str(LIT / "litmus"), "list"], capture_output=True, text=True)
    names = {ln.split()[0] for ln in listed.stdout.splitlines()}
    assert names == set(SHAPES) and len(names) >= 25


def explore_outcomes(run, shm, tmp_path, shape, model):
    pool = shm / f"litmus-{shape}-{model}.pool"
    pool.unlink(missing_ok=True)
    subprocess.run([str(LIT / "litmus"), "init", str(pool)], check=True)
    out = tmp_path / f"{shape}-{model}.out"
    big = shape == "memcpy128" and model == "x86"  # 2^16 images at one point
    r = run(
        "explore", "--no-progress", "--model", model, "--require-exhaustive",
        "--per-point", "70000" if big else "256", "--budget", "2000000" if big else "20000",
        "--check-lib", str(LIT / "litmus-check.so"),
        "--", str(LIT / "litmus"), "run", shape, str(pool),
        env={"PMKIT_LITMUS_SHAPE": shape, "PMKIT_LITMUS_OUT": str(out)},
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "result: ok (exhaustive)" in r.stdout, r.stdout
    return set(out.read_text().split()) if out.exists() else set()


# Known holes, each to be closed by its fix (strict: an unexpected pass fails the suite).
XFAIL: dict[tuple[str, str], str] = {}


def cases():
    for shape in sorted(SHAPES):
        for model in MODELS:
            why = XFAIL.get((shape, model))
            marks = [pytest.mark.xfail(reason=why, strict=True)] if why else []
            yield pytest.param(shape, model, marks=marks, id=f"{shape}-{model}")


@pytest.mark.parametrize("shape, model", cases())
def test_litmus(run, shm, tmp_path, shape, model):
    got = explore_outcomes(run, shm, tmp_path, shape, model)
    want = SHAPES[shape][model]
    assert (
        got == want
    ), f"{shape} under {model}: missing {sorted(want - got)[:8]}, extra {sorted(got - want)[:8]}"


def robust_cases():
    for shape in sorted(SHAPES):
        for model in ("x86", "x86-line", "eadr"):
            if shape == "memcpy128" and model == "x86":
                continue  # 2^16 images, one checker process each: the set test covers it
            why = XFAIL.get((shape, model))
            marks = [pytest.mark.xfail(reason=why, strict=True)] if why else []
            yield pytest.param(shape, model, marks=marks, id=f"{shape}-{model}")


@pytest.mark.parametrize("shape, model", robust_cases())
def test_litmus_robustness(run, shm, tmp_path, shape, model):
    """--robustness flags a shape exactly when the model allows an outcome strict persistency
    does not, judged on what the checker reads (it records its loads), and names the pair."""
    pool = shm / f"robust-{shape}-{model}.pool"
    pool.unlink(missing_ok=True)
    subprocess.run([str(LIT / "litmus"), "init", str(pool)], check=True)
    report = tmp_path / "report.json"
    r = run(
        "explore", "--no-progress", "--model", model, "--robustness", "--require-exhaustive",
        "--per-point", "256", "--json", str(report),
        "--check", f"{LIT / 'litmus'} check {shape} {{pool}}",
        "--", str(LIT / "litmus"), "run", shape, str(pool),
    )  # fmt: skip
    doc = json.loads(report.read_text())
    rob = doc["robustness"]
    assert rob["whole_image"] is False, "the checker's loads were not recorded"
    extra = SHAPES[shape][model] - SHAPES[shape]["strict"]
    if extra:
        assert r.returncode == 1 and rob["violating"] > 0, r.stdout
        assert "result: FAILED" in r.stdout and doc["images_failed"] == 0
        assert all("litmus.c" in v["lost"] and "litmus.c" in v["kept"] for v in rob["violations"])
    else:
        assert r.returncode == 0 and rob["violating"] == 0, r.stdout
        assert "result: ok (exhaustive)" in r.stdout


RARE = ["group24", "chain", "wide300", "mixed24", "mixed300", "late"]


@pytest.mark.parametrize("shape", RARE)
def test_sampler_finds_rare_bugs(run, shm, tmp_path, shape):
    """Each program of tests/explorer/rare.c shows its bug in at most 1 of 64 images of one
    sampled crash point; default settings must find it with at least 19 of seeds 1-20. Every
    seed explores the same trace; --stop-after 1 ends a run at its first failure, which leaves
    the images before it those of a full run."""
    pool, trace = shm / f"rare-{shape}.pool", tmp_path / "rare.trace"
    pool.unlink(missing_ok=True)
    subprocess.run([str(LIT / "rare"), "init", str(pool)], check=True)
    env = {"PMKIT_RARE_SHAPE": shape}
    lib = str(LIT / "rare-check.so")
    r = run(
        "explore", "--no-progress", "--check-lib", lib, "--stop-after", "1",
        "--keep-trace", str(trace), "--", str(LIT / "rare"), "run", shape, str(pool), env=env,
    )  # fmt: skip
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert "sampled" in r.stdout, r.stdout  # the bug's point is sampled, not enumerated
    caught = [r.returncode == 1]
    for seed in range(2, 21):
        r = run(
            "explore", "--no-progress", "--check-lib", lib, "--stop-after", "1",
            "--seed", str(seed), "--trace", str(trace), env=env,
        )  # fmt: skip
        assert r.returncode in (0, 1), r.stdout + r.stderr
        caught.append(r.returncode == 1)
    assert sum(caught) >= 19, f"{shape}: caught with {sum(caught)} of seeds 1-20"


def test_unseen_write_names_the_call(run, shm, tmp_path):
    """A pool written behind the tracer's back: the warning names the bytes (the pool file still
    holds what the program left) and the uninstrumented call; once the file has changed, it says
    the bytes are unknown."""
    pool = shm / "unseen.pool"
    pool.unlink(missing_ok=True)
    subprocess.run([str(LIT / "unseen"), "init", str(pool)], check=True)
    trace = tmp_path / "unseen.trace"
    r = run(
        "explore", "--no-progress", "--check", "true {pool}", "--keep-trace", str(trace),
        "--", str(LIT / "unseen"), "run", str(pool),
    )  # fmt: skip
    # No verdict: the images explored are not the program's.
    assert r.returncode == 2 and "result: INCOMPLETE: no failure in" in r.stdout, r.stdout
    assert "the trace missed writes to a pool: no verdict" in r.stderr, r.stderr
    warn = [ln for ln in r.stdout.splitlines() if "warning:" in ln]
    assert len(warn) == 1 and "differs from the traced writes" in warn[0], r.stdout
    assert "tests/explorer/unseen.c:30:3" in warn[0] and "pmkit:" not in warn[0], warn[0]
    # fill_opaque's 64 bytes, at the root (the pointer the call was given)
    at = warn[0].split("pointer pool 0+")[1].split(")")[0]
    assert f"64 bytes differ, at pool 0+{at}..{hex(int(at, 16) + 63)} (64 bytes);" in warn[0]
    with open(pool, "r+b") as f:  # the file moves on: its bytes no longer tell
        f.seek(int(at, 16))
        f.write(b"\xff")
    r = run("explore", "--no-progress", "--check", "true {pool}", "--trace", str(trace))
    warn = [ln for ln in r.stdout.splitlines() if "warning:" in ln]
    assert len(warn) == 1 and "no longer holds that content" in warn[0], r.stdout
