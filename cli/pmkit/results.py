# SPDX-License-Identifier: Apache-2.0
"""The benchmark results model: the one file format that every harness of the source tree
writes through (bench/run.py, bench/suite.py, bench/robust_stats.py, bench/ssapp_insns.py,
bench/arp/simulate.py, tests/real/realtier.py) and that bench/report.py reads, with the
statistics and number formats the report quotes.

A results file is JSON: an envelope (SCHEMA, the benchmark, its layout, what it measures,
whether it was a quick run, when, on what machine, from what commit, with what parameters)
and a body in one of LAYOUTS. A harness calls start() before its first run, then
Recording.document() and write(); the report calls load(), which accepts every earlier
version and upgrades it in memory (the file is left as it is), and refuses anything else with
a ResultsError naming the file and what is wrong. Each version's changes are listed in
bench/README.md, "Results files"; a change to the format bumps SCHEMA, adds an upgrade step
to UPGRADES and a line there.

The machine and commit records read the checkout this package sits in (the one whose .venv
`make setup` made), like the rest of the pmkit command.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SCHEMA = 3
# runs: one record per run of a variant on a configuration in a repetition, and the medians
# over the repetitions (bench/run.py, bench/suite.py, bench/arp/simulate.py); workloads: one
# record per workload, counted once (bench/robust_stats.py, bench/ssapp_insns.py); programs:
# one record per real program, by name (tests/real/realtier.py).
LAYOUTS = ("runs", "workloads", "programs")
SOURCE_TREE = Path(__file__).resolve().parents[2]
# What the harnesses and bench/report.py write: changes there do not make the measured code
# differ from the commit.
NOT_CODE = (":(exclude)bench/results", ":(exclude)docs/results.md", ":(exclude)docs/figures")
# The suite's one metric (bench/suite.py), named in its files since schema 3.
SUITE_METRIC = {"field": "ops_per_sec", "unit": "operations per second", "higher_is_better": True}


class ResultsError(Exception):
    """A results file that cannot be read: one line naming the file and what is wrong."""


# ---- the envelope: machine and commit -------------------------------------------------------


def cpu_info() -> dict:
    model, flags = platform.processor() or "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name":
                model = value.strip()
            elif key == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return {
        "cpu_model": model,
        "cores": os.cpu_count(),
        "cache_flush_instructions": [f for f in ("clwb", "clflushopt", "clflush") if f in flags],
    }


# What the machine record takes from a build's CMakeCache.txt, under which name.
CACHE_FIELDS = {"CMAKE_BUILD_TYPE": "build_type", "CMAKE_C_COMPILER": "c_compiler"}


def cmake_cache(build_dir: Path, wanted: dict = CACHE_FIELDS) -> dict:
    """Entries of a build's CMakeCache.txt, renamed by wanted; those it lacks left out."""
    out = {}
    try:
        for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
            key, _, value = line.partition("=")
            key = key.split(":")[0]
            if key in wanted:
                out[wanted[key]] = value
    except OSError:
        pass
    return out


def machine_info(build_dir: Path) -> dict:
    info = cpu_info()
    info["kernel"] = f"{platform.system()} {platform.release()}"
    libc = " ".join(platform.libc_ver()).strip()
    if libc:
        info["libc"] = libc
    info["python"] = platform.python_version()
    # what else ran: a figure measured beside busy processes is not what it seems
    info["load_average_1min"] = round(os.getloadavg()[0], 2)
    info.update(cmake_cache(build_dir))
    return info


def git_commit(source: Path = SOURCE_TREE) -> dict:
    """The commit checked out in source (this checkout by default), and whether code differs
    from it."""

    def git(*argv: str) -> str:
        return subprocess.run(
            ["git", "-C", str(source), *argv], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        sha = git("rev-parse", "HEAD")
        changed = git("diff", "HEAD", "--name-only", "--", ".", *NOT_CODE).splitlines()
        diff = subprocess.run(
            ["git", "-C", str(source), "diff", "HEAD", "--", ".", *NOT_CODE],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"sha": "unknown", "dirty": None}
    info = {"sha": sha, "dirty": bool(changed)}
    if changed:
        # Identify the uncommitted state that was measured, not just that there was one.
        info["changed_files"] = changed
        info["diff_sha256"] = hashlib.sha256(diff).hexdigest()
    return info


def build_commit(build_dir: Path) -> dict:
    """The commit of the checkout another CMake build was configured from (its source
    directory), for a results file that compares two builds."""
    source = cmake_cache(build_dir, {"CMAKE_HOME_DIRECTORY": "source"}).get("source")
    return git_commit(Path(source)) if source else {"sha": "unknown", "dirty": None}


# ---- writing ----------------------------------------------------------------------------------


@dataclass
class Recording:
    """A results file in the making: what is known before the first run. The machine (its load
    average above all) and the commit are read then, so that neither the run's own load nor a
    commit made while it runs is credited to it."""

    benchmark: str
    started: datetime.datetime
    machine: dict
    commit: dict

    def document(self, layout: str, description: str, parameters: dict, *, quick: bool = False,
                 notes: list[str] | None = None, **body) -> dict:  # fmt: skip
        """The whole file: the envelope, then the layout's body (runs and medians, or
        programs, and any extra keys a harness keeps). Checked as load() checks it."""
        now = datetime.datetime.now(datetime.UTC)
        doc = {
            "schema": SCHEMA,
            "benchmark": self.benchmark,
            "layout": layout,
            "description": description,
            "quick": bool(quick),
            "date": self.started.isoformat(timespec="seconds"),
            "duration_s": round((now - self.started).total_seconds(), 1),
            "machine": self.machine,
            "commit": self.commit,
            "parameters": parameters,
            "notes": list(notes or []),
            **body,
        }
        check(doc)
        return doc


def start(benchmark: str, build_dir: Path) -> Recording:
    """Begin a results file: the date, the machine (with the build's type and compiler) and
    the commit, now."""
    return Recording(
        benchmark, datetime.datetime.now(datetime.UTC), machine_info(build_dir), git_commit()
    )


def write(doc: dict, path: Path) -> Path:
    """Check doc and write it to path whole (through a .part file renamed over it), making the
    folder if need be."""
    check(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".json.part")
    part.write_text(json.dumps(doc, indent=1) + "\n")
    part.replace(path)
    return path


# ---- reading: check, upgrade, load ------------------------------------------------------------


def _require(cond: bool, what: str) -> None:
    if not cond:
        raise ResultsError(what)


def _variants_listed(p: dict) -> None:
    vs = p.get("variants", [])
    _require(isinstance(vs, list) and all(isinstance(v, dict) and "name" in v for v in vs),
             "parameters.variants is not a list of objects with a name")  # fmt: skip


def _check_runs(doc: dict) -> None:
    p = doc["parameters"]
    for key, kind in (("variants", list), ("metric", dict), ("axes", dict), ("repetitions", int)):
        _require(
            isinstance(p.get(key), kind), f"parameters.{key} is missing or not {kind.__name__}"
        )
    _variants_listed(p)
    field, axes = p["metric"].get("field"), set(p["axes"])
    _require(isinstance(field, str), "parameters.metric has no field")
    needs = {"runs": ("repetition", "config", "variant", "result"),
             "medians": ("config", "variant", "median", "min", "max", "n")}  # fmt: skip
    for part, keys in needs.items():
        _require(isinstance(doc.get(part), list), f"no list of {part}")
        for i, r in enumerate(doc[part]):
            _require(isinstance(r, dict), f"{part}[{i}] is not an object")
            missing = [k for k in keys if k not in r]
            _require(not missing, f"{part}[{i}] has no {', '.join(missing)}")
            _require(isinstance(r["config"], dict) and set(r["config"]) == axes,
                     f"{part}[{i}].config is not one value of each axis "
                     f"({', '.join(sorted(axes))})")  # fmt: skip
            if part == "runs":
                _require(isinstance(r["result"], dict) and field in r["result"],
                         f"runs[{i}].result has no {field!r} (the metric)")  # fmt: skip


def _check_workloads(doc: dict) -> None:
    _variants_listed(doc["parameters"])
    _require(isinstance(doc.get("runs"), list), "no list of runs")
    for i, r in enumerate(doc["runs"]):
        _require(isinstance(r, dict) and isinstance(r.get("workload"), str),
                 f"runs[{i}] names no workload")  # fmt: skip


def _check_programs(doc: dict) -> None:
    progs = doc.get("programs")
    _require(isinstance(progs, dict) and all(isinstance(r, dict) for r in progs.values()),
             "programs is not an object of one object per program")  # fmt: skip


CHECKS: dict[str, Callable[[dict], None]] = {
    "runs": _check_runs, "workloads": _check_workloads, "programs": _check_programs,
}  # fmt: skip
ENVELOPE = (("benchmark", str), ("description", str), ("quick", bool), ("date", str),
            ("machine", dict), ("commit", dict), ("parameters", dict), ("notes", list))  # fmt: skip


def check(doc: dict) -> None:
    """Raise ResultsError unless doc is a results file of the current SCHEMA: the envelope
    complete and the body its layout's."""
    _require(doc.get("schema") == SCHEMA, f"schema {doc.get('schema')!r}, not {SCHEMA}")
    for key, kind in ENVELOPE:
        _require(isinstance(doc.get(key), kind), f"{key} is missing or not {kind.__name__}")
    _require(bool(doc["benchmark"]), "benchmark is empty")
    d = doc.get("duration_s")
    _require(d is None or isinstance(d, int | float), "duration_s is not a number")
    _require(doc.get("layout") in LAYOUTS,
             f"layout {doc.get('layout')!r} is not one of {', '.join(LAYOUTS)}")  # fmt: skip
    CHECKS[doc["layout"]](doc)


def _from_1(doc: dict) -> dict:
    """Schema 1 to 2: robust-analysis's records held robust mode's base setting alone, as
    analysis_seconds, opt_seconds, robust_static and robust_dynamic; schema 2 keeps them per
    setting, under settings.<name>."""
    if doc["benchmark"] == "robust-analysis":
        runs = []
        for r in doc["runs"]:
            r = dict(r)
            base = {"analysis_seconds": r.pop("analysis_seconds"),
                    "opt_seconds": r.pop("opt_seconds"), "static": r.pop("robust_static"),
                    "dynamic": r.pop("robust_dynamic")}  # fmt: skip
            runs.append({**r, "settings": {"base": base}})
        doc = {**doc, "runs": runs}
    return {**doc, "schema": 2}


def _suite_runs(doc: dict) -> dict:
    """A bench/suite.py file of schema 1 or 2 in the runs layout: the workload and thread
    count of each record as its config, the variants named as objects, the axes and the
    metric in the parameters, quick from the scale."""
    p = dict(doc["parameters"])

    def configured(r: dict) -> dict:
        r = dict(r)
        config = {"workload": r.pop("workload"), "threads": r.pop("threads")}
        return {"config": config, **r}

    medians = [configured(m) for m in doc["medians"]]
    workloads = list(dict.fromkeys(m["config"]["workload"] for m in medians))
    p["variants"] = [{"name": v} for v in p["variants"]]
    p["axes"] = {"workload": workloads, "threads": p.pop("threads")}
    p["metric"] = dict(SUITE_METRIC)
    return {**doc, "quick": p.get("scale") == "quick", "parameters": p,
            "runs": [configured(r) for r in doc["runs"]], "medians": medians}  # fmt: skip


def _from_2(doc: dict) -> dict:
    """Schema 2 to 3: the envelope complete in every file (layout; quick, duration_s,
    parameters and notes where a harness left them out); bench/suite.py's records in the runs
    layout; variants listed as objects everywhere."""
    doc = dict(doc)
    if "programs" in doc:
        layout = "programs"
    elif "medians" in doc:
        layout = "runs"
        if "metric" not in doc.get("parameters", {}):
            doc = _suite_runs(doc)
    else:
        layout = "workloads"
        p = doc.get("parameters", {})
        vs = p.get("variants")
        if isinstance(vs, list) and all(isinstance(v, str) for v in vs):
            doc["parameters"] = {**p, "variants": [{"name": v} for v in vs]}
    doc.setdefault("quick", False)
    doc.setdefault("duration_s", None)
    doc.setdefault("parameters", {})
    doc.setdefault("notes", [])
    return {**doc, "schema": 3, "layout": layout}


# Upgrade steps: UPGRADES[n] takes a file of schema n to schema n + 1.
UPGRADES: dict[int, Callable[[dict], dict]] = {1: _from_1, 2: _from_2}


def upgrade(doc: dict) -> dict:
    """doc in the current SCHEMA, through every step from its own (doc itself unchanged)."""
    schema = doc.get("schema")
    _require(isinstance(schema, int) and not isinstance(schema, bool),
             f"schema {schema!r} is not a version number")  # fmt: skip
    _require(schema <= SCHEMA,
             f"schema {schema} is newer than this reader's ({SCHEMA}): update pmkit")  # fmt: skip
    _require(schema in UPGRADES or schema == SCHEMA, f"schema {schema} was never written")
    _require(isinstance(doc.get("benchmark"), str), "benchmark is missing or not str")
    while doc["schema"] < SCHEMA:
        try:
            doc = UPGRADES[doc["schema"]](doc)
        except KeyError as e:
            raise ResultsError(f"schema {doc['schema']}: cannot upgrade it: no {e}") from None
        except (TypeError, AttributeError) as e:
            raise ResultsError(f"schema {doc['schema']}: cannot upgrade it: {e}") from None
    return doc


def load(path: Path) -> dict:
    """The results file at path, upgraded to SCHEMA and checked; a ResultsError names the file
    and what is wrong with it."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as e:
        raise ResultsError(f"{path}: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ResultsError(f"{path}: not JSON: {e}") from None
    try:
        _require(isinstance(doc, dict), "not a JSON object")
        doc = upgrade(doc)
        check(doc)
    except ResultsError as e:
        raise ResultsError(f"{path}: not a results file: {e}") from None
    return doc


# ---- statistics ---------------------------------------------------------------------------------

# What a bar or point of a figure shows: (value drawn, lowest, highest) over the repetitions.
Stat = tuple[float, float, float]


def summary(xs: list[float]) -> dict:
    """A medians record's numbers: median, min, max and how many."""
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def stat(xs: list[float], value: float | None = None) -> Stat | None:
    """The median of xs (or the value given, when the text quotes another statistic) and the
    range of xs."""
    if not xs:
        return None if value is None else (value, value, value)
    return (statistics.median(xs) if value is None else value, min(xs), max(xs))


def geomean(xs: list[float]) -> float | None:
    """The geometric mean of the xs that are not 0 or None; None if none is."""
    logs = [math.log(x) for x in xs if x]
    return math.exp(statistics.mean(logs)) if logs else None


def ratios(a: dict, b: dict) -> list[float]:
    """a[k] / b[k] for every key the two share where b's is above 0."""
    return [a[k] / b[k] for k in a if k in b and b[k] > 0]


# ---- reading a results file (the runs layout) ----------------------------------------------------


def variant_names(doc: dict) -> list[str]:
    return [v["name"] for v in doc["parameters"]["variants"]]


def configs_where(doc: dict, where: dict) -> list[dict]:
    """The configurations of the medians whose values include where's, in their order."""
    seen = []
    for m in doc["medians"]:
        c = m["config"]
        if all(c.get(k) == v for k, v in where.items()) and c not in seen:
            seen.append(c)
    return seen


def median_of(doc: dict, variant: str, config: dict) -> dict | None:
    """The medians record of one variant and configuration."""
    for m in doc["medians"]:
        if m["variant"] == variant and m["config"] == config:
            return m
    return None


def run_values(doc: dict, variant: str, config: dict, key: str | None = None,
               part: str = "result") -> dict[int, float]:  # fmt: skip
    """One number of each repetition of a variant and configuration, by repetition: the field
    key (the metric by default) of the runs' result, or of another part of the run record
    (file_sizes); repetitions without it left out."""
    key = key or doc["parameters"]["metric"]["field"]
    return {
        r["repetition"]: r[part][key]
        for r in doc["runs"]
        if r["variant"] == variant and r["config"] == config
        and r.get(part, {}).get(key) is not None
    }  # fmt: skip


def run_median(doc: dict, variant: str, config: dict, key: str | None = None,
               part: str = "result") -> float | None:  # fmt: skip
    """The median over the repetitions of run_values (None if there are none)."""
    xs = list(run_values(doc, variant, config, key, part).values())
    return statistics.median(xs) if xs else None


def paired_ratios(doc: dict, variant: str, baseline: str, config: dict,
                  key: str | None = None) -> list[float]:  # fmt: skip
    """variant/baseline of each repetition, both measured in that repetition (the metric, or
    the field key of the results)."""
    return ratios(run_values(doc, variant, config, key), run_values(doc, baseline, config, key))


def paired_ratio(doc: dict, variant: str, baseline: str, config: dict,
                 key: str | None = None) -> float | None:  # fmt: skip
    """Median over repetitions of variant/baseline measured in the same repetition."""
    xs = paired_ratios(doc, variant, baseline, config, key)
    return statistics.median(xs) if xs else None


# ---- numbers as the report writes them ---------------------------------------------------------


def fmt_rate(x: float) -> str:
    for scale, suffix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if x >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


def fmt_ratio(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x:.2f}×" if x < 10 else f"{x:.1f}×"


def fmt_size(n: float) -> str:
    """Bytes in the largest binary unit they reach: whole where they are a whole number of it
    (a block size), else to 3 significant digits (a file size)."""
    for unit, suffix in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= unit:
            return f"{int(n // unit)} {suffix}" if n % unit == 0 else f"{n / unit:.3g} {suffix}"
    return f"{n:.0f} B"
