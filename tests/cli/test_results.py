# SPDX-License-Identifier: Apache-2.0
"""pmkit.results, the one results format of bench/ and tests/real: a file written through it
reads back as written; every earlier schema, and every results file in the tree, is upgraded on
reading (the file untouched); a file that is not a results file is refused with its name and
the reason; the statistics and number formats the report quotes."""

from __future__ import annotations

import copy
import json

import pytest
from conftest import ROOT
from pmkit import results

MACHINE = {"cpu_model": "Test CPU 9000", "cores": 3}
COMMIT = {"sha": "0123456789abcdef" * 2, "dirty": False}


def envelope_v1(benchmark: str) -> dict:
    return {"schema": 1, "benchmark": benchmark, "description": "test",
            "date": "2031-02-03T04:05:06+00:00", "machine": MACHINE, "commit": COMMIT}  # fmt: skip


def suite_v1() -> dict:
    """A bench/suite.py file as schema 1 had it: workload and threads in each record, the
    variants as names, the thread counts a parameter of their own."""
    runs, medians = [], []
    for t in (1, 2):
        for v, x in (("volatile", 100.0), ("pmdk", 25.0)):
            xs = [x * (1 + k / 10) for k in range(3)]
            runs += [{"repetition": k, "order": 0, "suite": "ds", "workload": "hashmap",
                      "threads": t, "variant": v, "command": [], "result": {"ops_per_sec": y}}
                     for k, y in enumerate(xs)]  # fmt: skip
            medians.append({"suite": "ds", "workload": "hashmap", "threads": t, "variant": v,
                            "median": xs[1], "min": xs[0], "max": xs[2], "n": 3})  # fmt: skip
    return {**envelope_v1("suite"), "duration_s": 12.5,
            "parameters": {"suite": "ds", "variants": ["volatile", "pmdk"], "threads": [1, 2],
                           "repetitions": 3, "scale": "full", "seconds": 1, "workloads": {}},
            "load_seconds": {}, "runs": runs, "medians": medians}  # fmt: skip


def test_write_and_load_round_trip(tmp_path):
    """A harness's file: the envelope read when the run starts, the body its layout's; it
    loads back equal, in the current schema."""
    rec = results.start("demo", tmp_path / "no-build")
    assert rec.machine["cores"] and "load_average_1min" in rec.machine
    assert rec.commit["sha"] != "unknown"  # the checkout this package is in
    runs = [{"repetition": k, "order": 0, "config": {"size": 64}, "variant": v,
             "result": {"ops": x * (k + 1)}}
            for k in range(2) for v, x in (("a", 10.0), ("b", 20.0))]  # fmt: skip
    medians = [{"config": {"size": 64}, "variant": v,
                **results.summary([r["result"]["ops"] for r in runs if r["variant"] == v])}
               for v in ("a", "b")]  # fmt: skip
    params = {"repetitions": 2, "axes": {"size": [64]}, "metric": {"field": "ops"},
              "variants": [{"name": "a"}, {"name": "b"}]}  # fmt: skip
    doc = rec.document("runs", "a test", params, quick=True, notes=["n"], runs=runs,
                       medians=medians, targets=[])  # fmt: skip
    path = results.write(doc, tmp_path / "out" / "demo.json")
    assert not list(path.parent.glob("*.part"))
    back = results.load(path)
    assert back == doc
    assert back["schema"] == results.SCHEMA and back["layout"] == "runs" and back["quick"]
    assert back["date"] == rec.started.isoformat(timespec="seconds")
    assert back["duration_s"] >= 0 and back["notes"] == ["n"]
    assert back["medians"][0] == {"config": {"size": 64}, "variant": "a", "median": 15.0,
                                  "min": 10.0, "max": 20.0, "n": 2}  # fmt: skip
    assert results.paired_ratios(back, "b", "a", {"size": 64}) == [2.0, 2.0]
    # A harness cannot write what the report would refuse.
    with pytest.raises(results.ResultsError, match=r"runs\[0\]\.result has no 'ops'"):
        rec.document("runs", "", params, runs=[{**runs[0], "result": {}}], medians=medians)


def test_suite_schema_1_upgraded(tmp_path):
    """bench/suite.py's records of schema 1 come back in the runs layout, numbers unchanged;
    the file on disk is not rewritten."""
    old = suite_v1()
    path = tmp_path / "suite-20310203-040506-0123456789ab.json"
    path.write_text(json.dumps(old))
    before = path.read_bytes()
    doc = results.load(path)
    assert path.read_bytes() == before
    assert doc["schema"] == results.SCHEMA and doc["layout"] == "runs"
    assert doc["quick"] is False and doc["notes"] == [] and doc["duration_s"] == 12.5
    p = doc["parameters"]
    assert p["axes"] == {"workload": ["hashmap"], "threads": [1, 2]} and "threads" not in p
    assert results.variant_names(doc) == ["volatile", "pmdk"]
    assert p["metric"]["field"] == "ops_per_sec"
    c = {"workload": "hashmap", "threads": 2}
    assert results.median_of(doc, "pmdk", c)["median"] == pytest.approx(27.5)
    assert results.paired_ratio(doc, "pmdk", "volatile", c) == pytest.approx(0.25)
    assert doc["runs"][0]["suite"] == "ds"  # what the records held besides stays
    assert old == suite_v1()  # the upgrade copies, it does not change its input


def test_other_old_schemas_upgraded():
    """Schema 1 of bench/run.py, bench/ssapp_insns.py and tests/real/realtier.py, and
    robust-analysis's schema 1 (the base setting alone) and 2 (per setting)."""
    run_py = {**envelope_v1("arp"), "quick": False, "duration_s": 1.0, "targets": [],
              "notes": ["kept"],
              "parameters": {"repetitions": 1, "seconds": 1, "axes": {"workload": ["cq"]},
                             "metric": {"field": "ops_per_sec"}, "variants": [{"name": "scp"}]},
              "runs": [{"repetition": 0, "order": 0, "config": {"workload": "cq"},
                        "variant": "scp", "result": {"ops_per_sec": 5.0}}],
              "medians": [{"config": {"workload": "cq"}, "variant": "scp", "median": 5.0,
                           "min": 5.0, "max": 5.0, "n": 1}]}  # fmt: skip
    doc = results.upgrade(run_py)
    assert doc["layout"] == "runs" and doc["notes"] == ["kept"] and doc["runs"] == run_py["runs"]
    insns = {**envelope_v1("ssapp-insns"),
             "parameters": {"ops": 1, "keys": 1, "variants": ["volatile"], "repetitions": 1},
             "runs": [{"workload": "btree", "insns_per_op": {"volatile": 400.0}}]}  # fmt: skip
    doc = results.upgrade(insns)
    assert doc["layout"] == "workloads" and doc["parameters"]["variants"] == [{"name": "volatile"}]
    assert doc["quick"] is False and doc["duration_s"] is None
    real = {**envelope_v1("real-wpp"), "date": "2031-02-03T04:05:06+0000",
            "programs": {"evkv": {"verdict": "ok"}}}  # fmt: skip
    doc = results.upgrade(real)
    assert doc["layout"] == "programs" and doc["parameters"] == {}
    assert doc["date"] == "2031-02-03T04:05:06+0000"  # as written: the report quotes it
    counts = {"clwb": 3, "sfence": 2, "range_calls": 1}
    dyn = {"ops": 200, "flushes_per_op": 1.5, "fences_per_op": 1.0}
    record = {"workload": "btree", "source_lines": 10, "hand_static": {}, "hand_dynamic": {}}
    v1 = {**envelope_v1("robust-analysis"), "parameters": {"repetitions_of_opt": 5},
          "runs": [{**record, "analysis_seconds": 0.002, "opt_seconds": 0.08,
                    "robust_static": counts, "robust_dynamic": dyn}]}  # fmt: skip
    doc = results.upgrade(v1)
    base = {"analysis_seconds": 0.002, "opt_seconds": 0.08, "static": counts, "dynamic": dyn}
    assert doc["runs"] == [{**record, "settings": {"base": base}}]
    v2 = {**v1, "schema": 2, "runs": [{**record, "settings": {"base": base, "flit": base}}]}
    assert results.upgrade(v2)["runs"] == v2["runs"]
    for d in (run_py, insns, real, v1, v2):
        results.check(results.upgrade(d))


def test_every_results_file_in_the_tree_loads():
    """What the report reads: each committed file loads in the current schema."""
    paths = sorted((ROOT / "bench" / "results").glob("*.json"))
    assert paths
    for path in paths:
        doc = results.load(path)
        assert doc["schema"] == results.SCHEMA and doc["layout"] in results.LAYOUTS, path


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"benchmark": "x"}', "schema None is not a version number"),
        ('{"schema": 99, "benchmark": "x"}', r"schema 99 is newer than this reader's \(3\)"),
        ('{"schema": 0, "benchmark": "x"}', "schema 0 was never written"),
        ('{"schema": 1, "benchmark": "suite", "runs": [], "medians": [], "parameters": {}}',
         "schema 2: cannot upgrade it: no 'variants'"),
        ('{"schema": 1, "benchmark": "x", "description": "", "date": "d", "machine": {}, '
         '"commit": {}}', "no list of runs"),
    ],
)  # fmt: skip
def test_bad_files_refused(tmp_path, content, reason):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(results.ResultsError, match=f"^{path}: .*{reason}"):
        results.load(path)


def test_damaged_records_refused(tmp_path):
    """A current file whose records do not match its parameters, or lack a field."""
    doc = results.upgrade(suite_v1())
    path = tmp_path / "x.json"
    bad = copy.deepcopy(doc)
    del bad["runs"][3]["config"]["threads"]
    path.write_text(json.dumps(bad))
    with pytest.raises(results.ResultsError, match=r"runs\[3\]\.config is not one value of each"):
        results.load(path)
    bad = copy.deepcopy(doc)
    del bad["medians"][1]["n"]
    path.write_text(json.dumps(bad))
    with pytest.raises(results.ResultsError, match=r"medians\[1\] has no n"):
        results.load(path)
    bad = {**doc, "layout": "tables"}
    path.write_text(json.dumps(bad))
    with pytest.raises(results.ResultsError, match="layout 'tables' is not one of"):
        results.load(path)
    with pytest.raises(results.ResultsError, match=f"^{tmp_path / 'gone.json'}: "):
        results.load(tmp_path / "gone.json")


def test_report_refuses_a_bad_file(run, tmp_path):
    """`pmkit bench report` stops with status 2 and the loader's one line."""
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "arp.json").write_text('{"schema": 7, "benchmark": "arp"}')
    r = run("bench", "report", "--results-dir", str(folder), "--out", str(tmp_path / "r.md"))
    assert r.returncode == 2
    assert r.stderr.strip() == (
        f"report.py: {folder / 'arp.json'}: not a results file: schema 7 is newer than this "
        "reader's (3): update pmkit"
    )


def test_statistics_and_formats():
    assert results.summary([3.0, 1.0, 2.0, 10.0]) == {"median": 2.5, "min": 1.0, "max": 10.0,
                                                      "n": 4}  # fmt: skip
    assert results.stat([1.0, 3.0, 2.0]) == (2.0, 1.0, 3.0)
    assert results.stat([1.0, 3.0], 2.5) == (2.5, 1.0, 3.0) and results.stat([]) is None
    assert results.ratios({0: 2.0, 1: 3.0, 2: 1.0}, {0: 1.0, 1: 0.0}) == [2.0]
    assert results.geomean([2.0, 8.0, None, 0]) == pytest.approx(4.0)
    assert results.geomean([None]) is None
    # block sizes whole, file sizes to 3 digits, each in the largest unit it reaches
    sizes = [16, 1024, 4096, 1536, 677.4 * 2**20, 3 * 2**30, 1000.0]
    assert [results.fmt_size(n) for n in sizes] == [
        "16 B", "1 KiB", "4 KiB", "1.5 KiB", "677 MiB", "3 GiB", "1000 B"
    ]  # fmt: skip
    assert [results.fmt_rate(x) for x in (999.0, 1500.0, 2.5e6, 3e9)] == [
        "999", "1.5 k", "2.5 M", "3 G"
    ]  # fmt: skip
    assert [results.fmt_ratio(x) for x in (None, 0.456, 12.34)] == ["n/a", "0.46×", "12.3×"]
