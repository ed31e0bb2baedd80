# SPDX-License-Identifier: Apache-2.0
"""`pmkit demo`: one small program, written with no flush, fence or log, carried through the
modes a newcomer should see first, each with the evidence for it.

The program is examples/tally/tally.c: a list of amounts and their running total in a pmkit
pool. Each step builds it one way and proves or refutes a property with the explorer, or
power-fails it:

  1. no mode: a volatile cache may write the count back before the amount it counts; the
     explorer (x86, every crash image of every crash point inside the appends) finds it;
  2. robust mode: the stores reach persistent memory in program order; the same exploration
     finds every image consistent, exhaustively;
  3. robust mode, atomicity: a crash between an append's total and its count leaves a total
     ahead of the count; ordering is not atomicity, and the exact check fails;
  4. clobber mode: each append is failure-atomic (recovery completes the interrupted one); the
     exact check holds on every image, exhaustively;
  5. wpp: the program unmodified, in ordinary memory, built with `pmkit wpp cc`, power-failed
     twice at random moments and resumed: its output is the output of an uninterrupted run;
  6. the same without WPP: each failure starts it over, and the output differs.

Every row says what it covered; the demo exits 0 only if every row came out as expected.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pmkit import paths

APPENDS = "4"  # appends explored (the first also sets up clobber mode's log)
COUNT = 300  # appends of the wpp run, a millisecond each


@dataclass
class Row:
    step: str
    build: str
    check: str
    expect: str  # "ok" or "failed"
    got: str = ""
    covered: str = ""
    why: str = ""

    @property
    def as_expected(self) -> bool:
        return self.got == self.expect


def _source(p: paths.Paths) -> Path:
    src = Path(__file__).resolve().parents[2] / "examples" / "tally" / "tally.c"
    if not src.exists():
        raise paths.EnvError(f"{src} is missing: the demo runs from a source checkout")
    return src


def _pmkit(*args: str) -> list[str]:
    return [sys.executable, "-m", "pmkit", *args]


def _build(src: Path, out: Path, args: list[str]) -> str:
    """Compile; the error output, empty on success."""
    r = subprocess.run([*args, str(src), "-o", str(out)], capture_output=True, text=True)
    return "" if r.returncode == 0 else (r.stderr or r.stdout or "failed")


def _explore(exe: Path, check: str, work: Path) -> tuple[str, str, str]:
    """pmkit explore under x86, crash points inside the appends: (result, covered, why)."""
    pool, rep = work / f"{exe.name}-{check}.pool", work / f"{exe.name}-{check}.json"
    pool.unlink(missing_ok=True)
    r = subprocess.run(
        _pmkit("explore", "--no-progress", "--model", "x86", "--mark", "append",
               "--stop-after", "1", "--save-dir", str(work / f"fail-{exe.name}"),
               "--json", str(rep), "--check", f"{exe} {check} {{pool}}", "--", str(exe),
               "run", str(pool), APPENDS),
        capture_output=True, text=True,
    )  # fmt: skip
    pool.unlink(missing_ok=True)
    if not rep.exists():
        return "error", "", (r.stderr or r.stdout).strip()[-300:]
    d = json.loads(rep.read_text())
    c = d["coverage"]
    covered = f"{d['images_checked']} images at {c['points_explored']} crash points, " + (
        "exhaustive" if c["exhaustive"] else f"{c['points_sampled']} sampled"
    )
    why = ""
    if d["failures"]:
        why = d["failures"][0].get("output", "").strip().splitlines()[0]
        covered = f"stopped at the first failing image ({d['images_checked']} checked)"
    result = {"ok": "ok", "failed": "failed"}.get(d["result"], d["result"])
    return result, covered, why


def _wpp_run(exe: Path, ctx: Path | None, rng: random.Random, runtime: float) -> tuple[bytes, int]:
    """Run `exe count COUNT` (in context ctx, or natively), power-failed twice at random moments,
    each time run again until it exits: (all its output, power failures that landed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PMKIT_WPP")}
    if ctx is not None:
        shutil.rmtree(ctx, ignore_errors=True)
        env.update(PMKIT_WPP_CONTEXT=str(ctx), PMKIT_WPP_QUIET="1")
    out, landed = b"", 0
    for attempt in range(12):
        p = subprocess.Popen([str(exe), "count", str(COUNT)], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env)  # fmt: skip
        if attempt < 2:
            try:
                p.wait(timeout=rng.uniform(0.2, 0.6) * runtime)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGPWR)
                landed += 1
        o, _ = p.communicate(timeout=120)
        out += o
        if p.returncode == 0:
            break
    return out, landed


def _wpp_rows(src: Path, work: Path, rng: random.Random) -> list[Row]:
    rows = [
        Row("5", "pmkit wpp cc", "output = uninterrupted run's", "ok"),
        Row("6", "pmkit wpp cc, run without WPP", "output = uninterrupted run's", "failed"),
    ]
    if not shutil.which("musl-gcc"):
        for r in rows:
            r.got, r.why = "not run", "musl-gcc missing (Debian package musl-tools)"
        return rows
    exe = work / "tally-wpp"
    err = _build(src, exe, _pmkit("wpp", "cc", "-O1", "-DTALLY_HEAP",
                                  f"-I{paths.find().include}"))  # fmt: skip
    if err:
        for r in rows:
            r.got, r.why = "error", err.strip()[-300:]
        return rows
    t0 = time.monotonic()
    want = subprocess.run([str(exe), "count", str(COUNT)], capture_output=True).stdout
    runtime = time.monotonic() - t0
    for row, ctx in zip(rows, (work / "ctx", None), strict=True):
        out, landed = _wpp_run(exe, ctx, rng, runtime)
        row.got = "ok" if out == want else "failed"
        row.covered = (
            f"{landed} power failure{'' if landed == 1 else 's'}, {len(want)} bytes of "
            "output compared"
        )
        if not landed:  # it ended before a failure came: nothing was shown
            row.got, row.why = "not shown", "the program ended before a power failure landed"
        if out != want:
            row.why = f"{len(out)} bytes against {len(want)}: the run started over"
    return rows


def run(seed: int = 1, keep: bool = False) -> int:
    p = paths.find()
    if not (p.plugin and p.tracelibdir):
        raise paths.EnvError("the demo needs the pass plugin and libpmkit-trace: build with passes")
    src = _source(p)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    work = Path(tempfile.mkdtemp(prefix="pmkit-demo-", dir=shm))
    print(
        f"pmkit demo: {src.relative_to(src.parents[2])}, a list of amounts and their total in a "
        "pmkit pool,\nwritten with no flush, fence or log, built in each mode and checked: the "
        f"explorer tries every crash image\nthe x86 model allows inside {APPENDS} appends "
        "(`check`: the amounts counted are written; `check-exact`:\nthe total is their sum), "
        "and whole-process persistence is power-failed. Work in "
        f"{work}.\n",
        flush=True,
    )
    builds = {
        "tally-plain": _pmkit("cc", "--trace", "-O1"),
        "tally-robust": _pmkit("cc", "--mode=robust", "--trace", "-O1"),
        "tally-clobber": _pmkit("cc", "--mode=clobber", "--trace", "-O1"),
    }
    with ThreadPoolExecutor(max_workers=3) as pool:
        errs = dict(zip(builds, pool.map(lambda n: _build(src, work / n, builds[n]), builds),
                        strict=True))  # fmt: skip
    for n, e in errs.items():
        if e:
            print(f"pmkit demo: building {n} failed:\n{e}")
            return 2
    rows = [
        Row("1", "no mode", "check", "failed"),
        Row("2", "--mode=robust", "check", "ok"),
        Row("3", "--mode=robust", "check-exact", "failed"),
        Row("4", "--mode=clobber", "check-exact", "ok"),
    ]
    exe = {"1": "tally-plain", "2": "tally-robust", "3": "tally-robust", "4": "tally-clobber"}
    for r in rows:
        print(f"  step {r.step}: {r.build}, {r.check} ...", flush=True)
        r.got, r.covered, r.why = _explore(work / exe[r.step], r.check, work)
    print("  steps 5 and 6: wpp, power failures ...", flush=True)
    rows += _wpp_rows(src, work, random.Random(seed))
    if not keep:
        shutil.rmtree(work, ignore_errors=True)

    print()
    head = ["step", "build", "check", "expected", "verdict", "covered"]
    table = [[r.step, r.build, r.check, r.expect, r.got, r.covered] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *table, strict=True)]
    for line in [head, ["-" * w for w in widths], *table]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)).rstrip())
    print()
    for r in rows:
        if r.why:
            print(f"step {r.step} ({r.build}, {r.check}): {r.why}")
    bad = [r.step for r in rows if not r.as_expected and r.got != "not run"]
    skipped = [r.step for r in rows if r.got == "not run"]
    if bad:
        print(f"\nresult: FAILED: step(s) {', '.join(bad)} did not come out as expected")
        return 1
    print(
        "\nresult: every step as expected: without a mode the explorer finds a lost write; "
        "robust mode orders the stores\n(but an append is not atomic); clobber mode makes "
        "each append atomic; whole-process persistence resumes\nthe program where the power "
        "failed" + (f" (steps {', '.join(skipped)} not run)" if skipped else "") + "."
    )
    return 0
