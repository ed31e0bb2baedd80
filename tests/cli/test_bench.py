# SPDX-License-Identifier: Apache-2.0
"""`pmkit bench`: usage errors, a tiny suite run whose JSON the report turns into the suite's
table and figures, and the report's figures from results files written here (nothing run)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys

import pytest
from conftest import BUILD, ROOT

needs_benchmarks = pytest.mark.skipif(
    not (BUILD / "bench" / "hashmap" / "bench_hashmap-volatile").exists(),
    reason="benchmarks not built (PMKIT_BUILD_BENCH)",
)


@needs_benchmarks
def test_usage(run):
    r = run("bench")
    assert r.returncode == 2 and "bench needs an action: run or report" in r.stderr
    r = run("bench", "frobnicate")
    assert r.returncode == 2 and "invalid choice: 'frobnicate'" in r.stderr
    # the help is the harness's own options, under the name the user typed
    r = run("bench", "run", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: pmkit bench run ")
    suites = json.loads((ROOT / "bench" / "suite.json").read_text())["suites"]
    assert all(s in r.stdout for s in suites) and "--seconds S" in r.stdout
    r = run("bench", "report", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: pmkit bench report ")
    r = run("bench", "run", "--variants", "volatile,quantum")
    assert r.returncode == 2 and "unknown variant quantum" in r.stderr
    r = run("bench", "run", "--suite", "nosuch")
    assert r.returncode == 2 and "unknown suite" in r.stderr


@needs_benchmarks
def test_suite_run_and_report(run, tmp_path):
    results = tmp_path / "results"
    r = run(
        "bench", "run", "--only", "hashmap", "--scale", "quick", "--repeat", "2",
        "--threads", "1,2", "--seconds", "0.05", "--results-dir", str(results),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    (path,) = (results / "tmp").glob("suite-*.json")
    doc = json.loads(path.read_text())
    assert doc["benchmark"] == "suite" and doc["parameters"]["repetitions"] == 2
    assert len(doc["runs"]) == 2 * 2 * 4  # repetitions x thread counts x variants
    assert {m["variant"] for m in doc["medians"]} == {"volatile", "hand-adr", "hand-eadr", "pmdk"}
    assert all(m["median"] > 0 for m in doc["medians"])
    out = tmp_path / "docs" / "results.md"
    r = run("bench", "report", "--results-dir", str(results / "tmp"), "--out", str(out))
    assert r.returncode == 0, r.stderr
    md = out.read_text()
    assert "## suite: the workloads in every variant" in md and "| hashmap | 2 |" in md
    assert (out.parent / "figures" / "suite-normalised-1t.png").exists()
    assert (out.parent / "figures" / "suite-threads.png").exists()
    assert ROOT.exists()


@needs_benchmarks
def test_suite_against_another_build(run, tmp_path):
    """--against: each variant also runs from a second build, the two next to each other in
    an order that alternates by repetition; the report's compare section reads the file."""
    other = tmp_path / "other-build"
    for v in ("volatile", "hand-eadr"):
        b = other / "bench" / "hashmap" / f"bench_hashmap-{v}"
        b.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(BUILD / "bench" / "hashmap" / b.name, b)
    (other / "CMakeCache.txt").write_text(f"CMAKE_HOME_DIRECTORY:INTERNAL={ROOT}\n")
    results = tmp_path / "results"
    common = ("bench", "run", "--only", "hashmap", "--scale", "quick", "--repeat", "2",
              "--threads", "1", "--seconds", "0.05", "--variants", "volatile,hand-eadr",
              "--results-dir", str(results))  # fmt: skip
    r = run(*common, "--name", "compare")
    assert r.returncode == 2 and "--name compare needs --against DIR" in r.stderr
    r = run(*common, "--against", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "is not a CMake build" in r.stderr
    r = run(*common, "--against", str(BUILD))
    assert r.returncode == 2 and "--against names the build being measured" in r.stderr
    r = run(*common, "--against", str(other), "--name", "robust")
    assert r.returncode == 2 and "not --name robust" in r.stderr
    r = run(*common, "--against", str(other))
    assert r.returncode == 0, r.stderr
    (path,) = (results / "tmp").glob("compare-*.json")
    doc = json.loads(path.read_text())
    assert doc["benchmark"] == "compare"
    assert doc["parameters"]["against"]["commit"]["sha"] == doc["commit"]["sha"]
    names = ["volatile", "volatile@before", "hand-eadr", "hand-eadr@before"]
    assert [v["name"] for v in doc["parameters"]["variants"]] == names
    assert {m["variant"] for m in doc["medians"]} == set(names)
    # one variant at a time, its two builds back to back, the first alternating
    assert [r["variant"] for r in doc["runs"]] == [
        "volatile", "volatile@before", "volatile@before", "volatile",
        "hand-eadr", "hand-eadr@before", "hand-eadr@before", "hand-eadr",
    ]  # fmt: skip
    # a template pool per build, not one shared
    assert set(doc["load_seconds"]) == {"hand-eadr", "hand-eadr@before"}
    out = tmp_path / "docs" / "results.md"
    r = run("bench", "report", "--results-dir", str(results / "tmp"), "--out", str(out))
    assert r.returncode == 0, r.stderr
    md = out.read_text()
    sha = doc["commit"]["sha"][:10]
    assert f"## compare: {sha} against {sha} (volatile, hand-eadr)" in md
    assert "| `hand-eadr` | 1 |" in md and "| hashmap | 1 |" in md
    assert "(2 runs each): about 1 of these 2." in md
    (fig,) = (out.parent / "figures").glob("compare-*.png")
    assert fig.name == "compare-" + re.sub(r"[^0-9]", "", doc["date"])[:14] + ".png"


def arp_results(repetitions: int, dirty: bool) -> dict:
    """A bench/run.py results file of the arp benchmark: scp and eadr on two workloads, eadr
    twice as fast as scp in the first repetition, then 10% faster, then 10% slower."""
    runs, medians = [], []
    for w in ("cq", "pc"):
        per = {"scp": [], "eadr": []}
        for k in range(repetitions):
            for v, x in (("scp", 1000.0), ("eadr", 2000.0 * (1 + 0.1 * ((k + 1) % 3 - 1)))):
                runs.append({"repetition": k, "order": 0, "config": {"workload": w},
                             "variant": v, "result": {"ops_per_sec": x}})  # fmt: skip
                per[v].append(x)
        for v, xs in per.items():
            mid = sorted(xs)[len(xs) // 2]
            medians.append({"config": {"workload": w}, "variant": v, "n": len(xs),
                            "median": mid, "min": min(xs), "max": max(xs)})  # fmt: skip
    return {
        "schema": 1, "benchmark": "arp", "description": "test", "date": "2031-02-03T04:05:06+00:00",
        "machine": {"cpu_model": "Test CPU 9000", "cores": 3},
        "commit": {"sha": "0123456789abcdef" * 2, "dirty": dirty},
        "parameters": {
            "repetitions": repetitions, "seconds": 1,
            "metric": {"field": "ops_per_sec", "unit": "tasks per second"},
            "axes": {"workload": ["cq", "pc"]},
            "variants": [{"name": "scp"}, {"name": "eadr"}],
        },
        "runs": runs, "medians": medians,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("repetitions", "dirty", "spread"),
    [
        (3, False, "3 repetitions: median of the per-repetition ratios, whiskers min–max"),
        (1, True, "1 repetition, no spread"),
    ],
)
def test_report_figure_captions(run, tmp_path, repetitions, dirty, spread):
    """Each figure's caption, drawn into it and under it in the page, names the machine, the
    commit, the date and the repetitions (or says there is no spread)."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "arp.json").write_text(json.dumps(arp_results(repetitions, dirty)))
    out = tmp_path / "docs" / "results.md"
    stale = out.parent / "figures" / "gone.png"  # drawn by an earlier report, by nothing now
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"png")
    r = run("bench", "report", "--results-dir", str(results), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert not stale.exists()
    md = out.read_text()
    commit = "commit 0123456789" + (" with uncommitted changes" if dirty else "")
    line = f"*Test CPU 9000, 3 cores; {commit}; run 2031-02-03; {spread}.*"
    assert f"![arp lowerings](figures/arp-x86.png)\n\n{line}\n" in md
    assert "| cq | 1 k | 2 k | 2.00× |" in md  # the numbers of the text as they were
    assert (out.parent / "figures" / "arp-x86.png").stat().st_size > 10_000
    # the page says whether its sections come from one run (here one file: they do)
    assert (
        "Every section below was measured on one machine, from one commit: Test CPU 9000, "
        "3 cores, commit `0123456789" in md
    )
    other = arp_results(repetitions, dirty)
    other["benchmark"], other["commit"]["sha"] = "arpsim", "fedcba9876543210"
    (results / "arpsim.json").write_text(json.dumps(other))
    r = run("bench", "report", "--results-dir", str(results), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert (
        "**Not one run: these sections come from 2 machine/commit combinations**" in out.read_text()
    )


def test_report_ratio_ticks_and_whiskers(monkeypatch):
    """Log ratio axes get a few readable majors; a ratio bar spans its repetitions' ratios."""
    spec = importlib.util.spec_from_file_location("report", ROOT / "bench" / "report.py")
    report = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "report", report)
    spec.loader.exec_module(report)
    assert report.log_ticks(0.33, 4.2) == [0.5, 1, 2]
    assert report.log_ticks(0.013, 1.3) == [0.02, 0.05, 0.1, 0.2, 0.5, 1]
    assert report.log_ticks(1e4, 1e9) == [1e4, 1e5, 1e6, 1e7, 1e8, 1e9]
    assert len(report.log_ticks(0.85, 1.2)) >= 3
    doc = arp_results(3, False)
    ratios = report.paired_ratios(doc, "eadr", "scp", {"workload": "cq"})
    assert sorted(ratios) == pytest.approx([1.8, 2.0, 2.2])
    assert report.stat(ratios) == pytest.approx((2.0, 1.8, 2.2))
    assert report.stat([], 1.5) == (1.5, 1.5, 1.5) and report.stat([]) is None


@needs_benchmarks
def test_arp_simulator_campaign_quick():
    """bench/arp/simulate.py, make bench's arp simulator step, runs end to end in its quick
    form and writes a results file in the harness's shape: it once called a progress function
    bench/run.py no longer had, and only a full make bench found out."""
    out = ROOT / "bench" / "results" / "tmp" / "arpsim.json"
    out.unlink(missing_ok=True)
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "arp" / "simulate.py"), "--quick",
         "--build-dir", str(BUILD)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["quick"] and doc["benchmark"] == "arpsim"
    assert {x["config"]["workload"] for x in doc["runs"]} == {
        "cq", "pc", "sps", "tatp", "tpcc", "ycsb"
    }  # fmt: skip


@needs_benchmarks
@pytest.mark.skipif(not shutil.which("valgrind"), reason="needs valgrind")
def test_ssapp_instruction_count(tmp_path):
    """bench/ssapp_insns.py on one workload with few operations (3 s), as make bench runs it:
    it strips the one libpmkit the build made (the script now refuses to guess; it had looked
    in a folder the build no longer uses, unnoticed), counts every variant, and the
    instrumented builds execute more per operation than the volatile one."""
    out = tmp_path / "insns.json"
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ssapp_insns.py"), "--build-dir", str(BUILD),
         "--only", "hashmap", "--ops", "100", "--keys", "100", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    got = doc["runs"][0]["insns_per_op"]
    assert set(got) == {"volatile", "hand-eadr", "clobber-eadr", "ssapp", "ssapp-compiler"}, got
    assert all(got[v] > got["volatile"] > 0 for v in ("clobber-eadr", "ssapp")), got
