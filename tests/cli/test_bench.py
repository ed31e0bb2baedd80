# SPDX-License-Identifier: Apache-2.0
"""`pmkit bench`: usage errors, and a tiny suite run whose JSON the report turns into the suite's
table and figures."""

from __future__ import annotations

import json

import pytest
from conftest import BUILD, ROOT

pytestmark = pytest.mark.skipif(
    not (BUILD / "bench" / "hashmap" / "bench_hashmap-volatile").exists(),
    reason="benchmarks not built (PMKIT_BUILD_BENCH)",
)


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
