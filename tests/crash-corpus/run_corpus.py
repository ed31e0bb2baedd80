# SPDX-License-Identifier: Apache-2.0
"""Run `pmkit explore` on the crash corpus and compare its verdicts with corpus.json.

For every program, variant (fixed: <prog>, buggy: <prog>-buggy) and model listed in corpus.json
it runs

    python -m pmkit explore --model MODEL --jobs 2 --check '<exe> check {pool}' -- <exe> run POOL

(and, for programs marked check_lib, the same with --check-lib <exe>-check.so) in a scratch
directory, maps the exit status to a verdict (0 pass, 1 fail, anything else error) and prints a
table. Before exploring it checks, for every program, that an untraced complete run of each
variant leaves a pool its checker accepts, and that the buggy executable's code differs from the
fixed one's (a checker library does not contain the operations -DBUGGY changes, so the two may
be equal). Exit status 0 if everything matches, 1 on any mismatch, explorer error or failed
sanity check, 2 on a usage error. Usage: run_corpus.py BUILD_DIR [--only PROG]... [--model M]...
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERDICTS = {0: "pass", 1: "fail"}
SANITY_TIMEOUT = 60
EXPLORE_TIMEOUT = 300


@dataclass
class Row:
    program: str
    variant: str
    model: str
    checker: str
    expected: str
    got: str
    images: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.got == self.expected


def elf_text(path: Path) -> bytes:
    """The bytes of the .text section of an ELF64 little-endian file."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path} is not a little-endian ELF64 file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i: int) -> tuple[int, int, int]:
        name, _, _, _, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, off, size

    _, stroff, _ = section(shstrndx)
    for i in range(shnum):
        name, off, size = section(i)
        end = data.index(b"\0", stroff + name)
        if data[stroff + name : end] == b".text":
            return data[off : off + size]
    raise ValueError(f"{path} has no .text section")


def sanity(bindir: Path, program: str, scratch: Path) -> list[str]:
    """Problems with a program's builds, without the explorer: [] if none."""
    problems = []
    for suffix in ("", "-buggy"):
        exe = bindir / f"{program}{suffix}"
        for f in (exe, bindir / f"{program}{suffix}-check.so"):
            if not f.is_file():
                problems.append(f"{f} is missing (build the crash-corpus target)")
        if problems:
            continue
        pool = scratch / f"sanity{suffix}.pool"
        for cmd in (["run"], ["check"]):
            r = subprocess.run(
                [str(exe), *cmd, str(pool)],
                capture_output=True,
                text=True,
                timeout=SANITY_TIMEOUT,
                env={k: v for k, v in os.environ.items() if k != "PMKIT_TRACE"},
            )
            if r.returncode != 0:
                out = (r.stdout + r.stderr).strip().replace("\n", " | ")
                problems.append(
                    f"{exe.name} {cmd[0]} after a complete run: exit " f"{r.returncode}: {out}"
                )
                break
    # Only the executables: a checker library does not contain the operations -DBUGGY changes.
    buggy = f"{program}-buggy"
    try:
        if not problems and elf_text(bindir / program) == elf_text(bindir / buggy):
            problems.append(f"{buggy} has the same code as {program}: -DBUGGY changed nothing")
    except (OSError, ValueError) as e:
        problems.append(f"cannot compare {program} with {buggy}: {e}")
    return problems


IMAGES_RE = re.compile(r"images:.*?(\d+) checked")


def explore(
    build: Path, bindir: Path, program: str, variant: str, model: str, lib: bool, expected: str
) -> tuple[Row, str]:
    exe = bindir / (program if variant == "fixed" else f"{program}-buggy")
    with tempfile.TemporaryDirectory(prefix=f"corpus-{program}-") as tmp:
        if lib:
            check = ["--check-lib", f"{exe}-check.so"]
        else:
            check = ["--check", f"{exe} check {{pool}}"]
        cmd = [
            sys.executable,
            "-m",
            "pmkit",
            "explore",
            "--model",
            model,
            "--jobs",
            "2",
            # 64 images a point, as the verdicts were set with: the default
            # plan spends the whole budget on the runtime's sampled points.
            "--per-point",
            "64",
            # a must-fail run has its verdict at its first failing image
            *(["--stop-after", "1"] if expected == "fail" else []),
            *check,
            "--",
            str(exe),
            "run",
            f"{tmp}/pool",
        ]
        env = dict(os.environ, PMKIT_BUILD_DIR=str(build))
        env.pop("PMKIT_TRACE", None)
        start = time.monotonic()
        try:
            r = subprocess.run(
                cmd, cwd=tmp, capture_output=True, text=True, env=env, timeout=EXPLORE_TIMEOUT
            )
            status, out = r.returncode, r.stdout + r.stderr
        except subprocess.TimeoutExpired as e:
            status, out = -1, f"timed out after {EXPLORE_TIMEOUT} s: {e}"
        seconds = time.monotonic() - start
    m = IMAGES_RE.search(out)
    got = VERDICTS.get(status, f"error({status})")
    row = Row(
        program,
        variant,
        model,
        "lib" if lib else "cmd",
        expected,
        got,
        m.group(1) if m else "?",
        seconds,
    )
    return row, out


COLUMNS = ("program", "variant", "model", "checker", "expected", "got", "images", "seconds")


def fmt(row: Row | None) -> str:
    cells = (
        COLUMNS
        if row is None
        else (
            row.program,
            row.variant,
            row.model,
            row.checker,
            row.expected,
            row.got,
            row.images,
            f"{row.seconds:.2f}",
        )
    )
    widths = (20, 7, 5, 7, 8, 9, 6, 7)
    line = "  ".join(f"{c:<{w}}" for c, w in zip(cells[:-2], widths[:-2], strict=True))
    line += "  " + "  ".join(f"{c:>{w}}" for c, w in zip(cells[-2:], widths[-2:], strict=True))
    if row is not None and not row.ok:
        line += "  <-- MISMATCH"
    return line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", type=Path, help="the CMake build directory")
    ap.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PROG",
        help="explore only this program (repeatable)",
    )
    ap.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="MODEL",
        help="explore only under this model (repeatable)",
    )
    ap.add_argument("--corpus", type=Path, default=HERE / "corpus.json")
    args = ap.parse_args()
    build = args.build.resolve()
    bindir = build / "tests" / "crash-corpus"
    programs = json.loads(args.corpus.read_text())["programs"]
    unknown = set(args.only) - {p["program"] for p in programs}
    if unknown:
        ap.error(f"not in {args.corpus.name}: {', '.join(sorted(unknown))}")
    if args.only:
        programs = [p for p in programs if p["program"] in args.only]

    start = time.monotonic()
    problems: list[str] = []
    failures: list[tuple[Row, str]] = []
    with tempfile.TemporaryDirectory(prefix="corpus-sanity-") as tmp:
        for p in programs:
            scratch = Path(tmp) / p["program"]
            scratch.mkdir()
            problems += [f"sanity: {msg}" for msg in sanity(bindir, p["program"], scratch)]
    for msg in problems:
        print(msg)
    if problems:
        return 1
    print(f"sanity: {len(programs)} programs: complete runs check clean, buggy builds differ")

    rows: list[Row] = []
    print(fmt(None), flush=True)
    for p in programs:
        for model, variants in p["expect"].items():
            if args.model and model not in args.model:
                continue
            for variant in ("fixed", "buggy"):
                for lib in (False, True) if p.get("check_lib") else (False,):
                    row, out = explore(
                        build, bindir, p["program"], variant, model, lib, variants[variant]
                    )
                    rows.append(row)
                    print(fmt(row), flush=True)
                    if not row.ok:
                        failures.append((row, out))
    for row, out in failures:
        print(
            f"\n---- {row.program} {row.variant} --model {row.model} ({row.checker} checker): "
            f"expected {row.expected}, got {row.got} ----"
        )
        print("\n".join(out.splitlines()[:40]))
    bad = sum(not r.ok for r in rows)
    print(
        f"\n{len(rows)} explorations, {bad} mismatches, " f"{time.monotonic() - start:.1f} s in all"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
