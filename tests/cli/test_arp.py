# SPDX-License-Identifier: Apache-2.0
"""arp mode end to end: every workload of bench/arp runs with 8 workers, the work allocator and
two antagonists and checks consistent; a traced run records acquires, releases and sequence points
(volatile ones flagged) that `pmkit sim` turns into the paper's comparison, whose persists per
epoch must order SCP <= RCBSP <= ARP <= ARP+VA <= Ideal; the explorer finds every crash image of
each workload consistent under the x86 model when the pass lowered it and under the arp model
without it, and inconsistent images without the pass (x86) or without its sequence points (arp);
bad input ends in one line, exit 2."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import BUILD

ARP = BUILD / "bench" / "arp"
WORKLOADS = ["cq", "pc", "sps", "tatp", "tpcc", "ycsb"]


@pytest.mark.parametrize("w", WORKLOADS)
def test_workload_runs_and_checks(w, shm):
    pool = shm / f"arp-{w}.pool"
    r = subprocess.run(
        [str(ARP / "arp_bench"), w, "--ops", "3000", "--pool", str(pool), "--pool-mib", "64"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["workload"] == w and out["ops"] == 3000 and out["workers"] == 8
    c = subprocess.run(
        [str(ARP / "arp_bench"), w, "--check", str(pool)], capture_output=True, text=True
    )
    assert c.returncode == 0 and "consistent" in c.stdout, c.stdout + c.stderr


@pytest.fixture(scope="module")
def sps_trace(tmp_path_factory):
    traced = ARP / "arp_bench-traced"
    if not traced.exists():
        pytest.skip("traced builds need the pass plugin")
    d = tmp_path_factory.mktemp("arp")
    trace = d / "sps.trace"
    subprocess.run(
        [str(traced), "sps", "--ops", "2000", "--pool", str(d / "sps.pool"), "--pool-mib", "64"],
        env={"PMKIT_TRACE": str(trace)},
        check=True,
        capture_output=True,
        timeout=120,
    )
    return trace


def test_trace_has_sync_events(run, sps_trace):
    r = run("explore", "--dump", "--trace", str(sps_trace))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(" acquire " in x and "persistent" in x for x in lines)
    assert any(" release " in x and "volatile" in x for x in lines)  # task queues, antagonists
    assert any(" seqpoint " in x for x in lines)  # the undo log


def test_sim_orders_the_models(run, sps_trace, tmp_path):
    out = tmp_path / "sim.json"
    r = run("sim", "--mark", "arp-run", "--json", str(out), str(sps_trace))
    assert r.returncode == 0, r.stderr
    assert "arp+va" in r.stdout
    res = {m["model"]: m for m in json.loads(out.read_text())["models"]}
    ppe = [res[m]["persists_per_epoch"] for m in ["scp", "rcbsp", "arp", "arp+va", "ideal"]]
    assert ppe[0] == 1.0
    # rcbsp and arp group this workload's persists almost alike, and which groups more depends
    # on the recorded interleaving (rcbsp 1.762 against arp 1.759, and 1.732 against 1.714, in
    # runs under load): their order is not a property of every trace; they are held to 3%.
    assert ppe[0] <= ppe[1] and ppe[3] <= ppe[4] and ppe[2] <= ppe[3], ppe
    assert ppe[2] >= 0.97 * ppe[1], ppe
    assert ppe[3] > ppe[1]  # the annotations and directions matter on this workload
    # The ideal model stalls the cores least. Its run is faster than scp's unless the busiest
    # core's own work bounds both: a trace recorded under load, whose work allocator spun on
    # full queues (126,538 sync ops against 61-80 thousand), ended every model at 1349.9 us.
    assert res["ideal"]["core_stall_ps"] < res["scp"]["core_stall_ps"], res
    assert res["ideal"]["time_ps"] <= res["scp"]["time_ps"], res
    assert len({m["persists"] for m in res.values()}) == 1


@pytest.mark.parametrize(
    "args, words",
    [
        (["--model", "tso"], "unknown model 'tso'"),
        (["--machine", "dram"], "unknown machine 'dram'"),
        (["--set", "banks"], "--set needs K=V"),
        (["--mark", "nothing"], "no operation marked 'nothing'"),
    ],
)
def test_sim_bad_input(run, sps_trace, args, words):
    r = run("sim", *args, str(sps_trace))
    assert r.returncode == 2
    assert words in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_bad_workload_and_options(shm):
    for args, words in [([], "which workload"), (["btree"], "no workload 'btree'"),
                        (["cq", "--ops", "many"], "needs a number")]:  # fmt: skip
        r = subprocess.run([str(ARP / "arp_bench"), *args], capture_output=True, text=True)
        assert r.returncode == 2 and words in r.stderr, r.stderr


def test_sim_foreign_file(run, tmp_path):
    f = tmp_path / "x.trace"
    f.write_bytes(b"not a trace at all, just some bytes here to pass the size check" * 2)
    r = run("sim", str(f))
    assert r.returncode == 2 and "not a pmkit trace" in r.stderr


# (build, explorer model, PMKIT_ARP_BREAK, consistent?)
EXPLORE_CASES = [
    ("traced", "x86", "", True),  # lowered by the pass: x86 keeps ARP's order
    ("unflushed", "x86", "", False),  # without the pass nothing is written back
    ("unflushed", "arp", "", True),  # the program is correct under ARP itself
    ("traced", "arp", "", True),  # the lowering's write-backs: not ARP alone (a note says so)
    ("unflushed", "arp", "seqpoints", False),  # and needs its sequence points
]


def explore(run, shm, tmp_path, build, model, w, budget=3000, brk="", stop=0):
    """`pmkit explore` on a small run of workload w (2 workers, 1 antagonist, 40 tasks); with
    `stop`, it ends once that many images failed (a must-fail case needs one)."""
    exe = ARP / f"arp_bench-{build}"
    if not exe.exists():
        pytest.skip("traced builds need the pass plugin")
    return run(
        "explore", "--model", model, "--no-progress", "--mark", "arp-run",
        "--budget", str(budget), "--per-point", "256",
        *(["--stop-after", str(stop)] if stop else []), "--save-dir", str(tmp_path / "failures"),
        "--check", f"{exe} {w} --check {{pool}}", "--", str(exe), w, "--ops", "40",
        "--workers", "2", "--antagonists", "1", "--scale", "0.01",
        "--pool", str(shm / f"x-{w}.pool"), "--pool-mib", "16",
        env={"PMKIT_ARP_BREAK": brk} if brk else None,
    )  # fmt: skip


@pytest.mark.parametrize("w", WORKLOADS)
@pytest.mark.parametrize("build, model, brk, ok", EXPLORE_CASES)
def test_explore(run, shm, tmp_path, w, build, model, brk, ok):
    """Every crash image of a small run of each workload, under the x86 model (the lowering) and
    the arp model (the language rules), with the must-fail controls beside them."""
    r = explore(run, shm, tmp_path, build, model, w, brk=brk, stop=0 if ok else 1)
    assert r.returncode == (0 if ok else 1), r.stdout + r.stderr
    assert ("result: FAILED" in r.stdout) == (not ok)
    # Under x86 the verdict is the build's order, which is more than ARP's; under arp, a lowered
    # build's write-backs persist stores early: either way the report says what it covered.
    assert ("note: the trace holds" in r.stdout) == (model != "arp" or build == "traced"), r.stdout
    scope = ("(as this build orders writes, not under ARP)" if model != "arp"
             else "(with the program's write-backs, not ARP alone)")  # fmt: skip
    assert (scope in r.stdout) == (ok and (model != "arp" or build == "traced")), r.stdout


def test_explore_arp_undo_log(run, shm, tmp_path):
    """The case the arp model found: a disarm lost while the next transaction's log entry is
    half written (tag old, address new) rolled back the wrong word. Entries carry a checksum now;
    20000 images cover it (3000 did not)."""
    r = explore(run, shm, tmp_path, "unflushed", "arp", "sps", budget=20000)
    assert r.returncode == 0 and "result: FAILED" not in r.stdout, r.stdout + r.stderr


def test_explore_arp_needs_releases(run, shm, tmp_path):
    """Array swaps under the arp model with every release recorded as volatile: a swap's writes
    are no longer ordered after the previous holder's, and recovery finds the loss."""
    r = explore(run, shm, tmp_path, "unflushed", "arp", "sps", brk="releases", stop=1)
    assert r.returncode == 1 and "result: FAILED" in r.stdout, r.stdout + r.stderr
