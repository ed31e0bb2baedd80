# SPDX-License-Identifier: Apache-2.0
"""Regenerate docs/results.md and docs/figures/*.png from bench/results/*.json only.

Each results file (written through pmkit.results by bench/run.py and the other harnesses, and
read through it here, whatever its schema) becomes one section of docs/results.md. A
benchmark gets a tailored section by adding a function `section_<name>(doc, out) -> list[str]`
to the SECTIONS table at the bottom; any other benchmark gets the generic table of medians.
Ratios are taken within one run: for each repetition the two variants ran back to back on the
same configuration, and the ratio quoted is the median of those per-repetition ratios. Nothing
here measures anything or reads anything but the JSON.

Usage: python bench/report.py [--results-dir DIR] [--out FILE]
(figures go to a figures/ folder beside FILE).
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
from pmkit import results  # noqa: E402
from pmkit.results import (  # noqa: E402
    Stat,
    configs_where,
    fmt_rate,
    fmt_ratio,
    fmt_size,
    geomean,
    median_of,
    paired_ratio,
    paired_ratios,
    run_median,
    run_values,
    stat,
    variant_names,
)

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent

COLORS = {
    "pmkit-adr": "#1f5fa8",
    "pmkit-eadr": "#6baed6",
    "glibc": "#7f7f7f",
    "pmdk": "#d95f02",
    "wpp": "#2ca25f",
    "native": "#7f7f7f",
    "untraced": "#1f5fa8",
    "traced-off": "#6baed6",
    "traced": "#d95f02",
    "in-process": "#1f5fa8",
    "command": "#d95f02",
    "volatile": "#7f7f7f",
    "hand-adr": "#1f5fa8",
    "hand-eadr": "#6baed6",
}


@dataclass
class Output:
    """Where a section writes: the markdown file and its figures folder."""

    md: Path
    figures: Path

    def link(self, fig: Path) -> str:
        return fig.relative_to(self.md.parent).as_posix()

    def figure(self, alt: str, fig: Figure) -> list[str]:
        """A figure in the page, its caption (machine, commit, date, repetitions) under it."""
        return [f"![{alt}]({self.link(fig.path)})", "", f"*{fig.caption}.*"]

    def figures_md(self, alt: str, figs: list[Figure]) -> list[str]:
        """Several figures, each with its caption, a blank line between them."""
        return [
            line for k, f in enumerate(figs) for line in ([""] if k else []) + self.figure(alt, f)
        ]


# ---- formatting -----------------------------------------------------------------------------


def table(header: list[str], rows: list[list[str]], align: str = "") -> list[str]:
    align = align or "l" + "r" * (len(header) - 1)
    marks = {"l": ":---", "r": "---:", "c": ":---:"}
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(marks[a] for a in align) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def provenance(doc: dict) -> list[str]:
    """Machine, commit, date and run parameters: the context every number needs."""
    m, c, p = doc["machine"], doc["commit"], doc["parameters"]
    info = m.get("bench_info", {})
    sha = c.get("sha", "unknown")
    dirty = ""
    if c.get("dirty"):
        files = c.get("changed_files", [])
        shown = ", ".join(f"`{f}`" for f in files[:6]) + (", ..." if len(files) > 6 else "")
        dirty = f" with uncommitted changes to {shown}" if files else " (with uncommitted changes)"
    cpu = f"{m.get('cpu_model', '?')}, {m.get('cores', '?')} cores"
    if "load_average_1min" in m:
        cpu += f", load average {m['load_average_1min']} at the start"
    flushes = ", ".join(m.get("cache_flush_instructions", [])) or "none"
    lines = [
        f"- Machine: {cpu} (flush instructions: {flushes}); {m.get('kernel', '?')}; "
        f"{m.get('libc', 'libc ?')}",
        f"- Build: CMAKE_BUILD_TYPE={m.get('build_type') or '(empty)'}, "
        f"{Path(m.get('c_compiler', '?')).name}",
        f"- Commit: `{sha[:12]}`{dirty}; run {doc['date']}"
        + (f", {doc['duration_s']} s" if doc.get("duration_s") is not None else ""),
        f"- Runs: {p['repetitions']} repetition(s) × "
        + (f"{p['seconds']} s per run" if p.get("seconds") is not None else "fixed work per run")
        + ", variants interleaved (order rotated per configuration); medians over repetitions",
    ]
    if p.get("constants"):
        lines.append("- Constants: " + ", ".join(f"{k}={v}" for k, v in p["constants"].items()))
    if info:
        extra = ", ".join(f"{k}={v}" for k, v in info.items())
        lines.append(f"- Reported by the binary: {extra}")
    if doc.get("quick"):
        lines.append("- **Quick smoke-test run: too short to quote.**")
    return lines


def notes(doc: dict) -> list[str]:
    return ["Notes:", "", *(f"- {n}" for n in doc["notes"]), ""] if doc.get("notes") else []


def section_intro(doc: dict, title: str) -> list[str]:
    """A section's heading, description, provenance, variants and notes."""
    by_name = {v["name"]: v for v in doc["parameters"]["variants"]}
    return [
        f"## {title}",
        "",
        doc.get("description", ""),
        "",
        *provenance(doc),
        "",
        "Variants:",
        "",
        *(f"- `{v}`: {d.get('description', '')}" for v, d in by_name.items()),
        "",
        *notes(doc),
    ]


# ---- figures ------------------------------------------------------------------------------
# Every figure ends in finish_figure: one legend for all its panels, below them; a caption line
# naming the machine, commit, date and repetitions; saved at DPI. Bars and points are drawn at
# the value the text quotes, with a whisker from the lowest to the highest repetition wherever
# the JSON holds more than one. Ratio axes go through ratio_axis, other log axes through
# log_axis, linear ones through linear_axis.

DPI = 110
FIG_WIDTH = (10.0, 14.0)  # inches, narrowest and widest
FIG_HEIGHT = 4.2
WHISKERS = {"fmt": "none", "color": "#222222", "elinewidth": 0.9, "capsize": 2.5,
            "capthick": 0.9, "zorder": 3}  # fmt: skip
CAPTION_STYLE = {"fontsize": 7.5, "color": "#555555"}
LABEL_BOX = {"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8}  # value labels


@dataclass
class Figure:
    """A saved figure and its caption (the same line is drawn under the plot)."""

    path: Path
    caption: str


def median_stat(m: dict | None) -> Stat | None:
    """A doc['medians'] entry as a Stat."""
    return (m["median"], m["min"], m["max"]) if m else None


def figure_width(groups: int, per_group: float = 1.1, extra: float = 2.0) -> float:
    return min(FIG_WIDTH[1], max(FIG_WIDTH[0], extra + per_group * groups))


def spread_note(doc: dict, shows: str = "median", spread: str = "min–max") -> str:
    """What the marks and whiskers of a figure show, with the number of repetitions."""
    n = doc.get("parameters", {}).get("repetitions")
    if n == 1:
        return "1 repetition, no spread"
    return f"{n} repetitions: {shows}, whiskers {spread}"


def caption(doc: dict, spread: str) -> str:
    """One line: the machine, the commit, the date of the run and what the marks show."""
    m, c = doc["machine"], doc["commit"]
    dirty = " with uncommitted changes" if c.get("dirty") else ""
    return (
        f"{m.get('cpu_model', '?')}, {m.get('cores', '?')} cores; "
        f"commit {c.get('sha', 'unknown')[:10]}{dirty}; run {str(doc.get('date', '?'))[:10]}; "
        f"{spread}"
    )


def draw_bars(ax, groups: int, series: list[tuple[str, list[Stat | None]]]) -> list[float]:
    """Grouped bars, a group per category and a bar per series, each with a min-max whisker
    where the repetitions spread. Returns every value drawn, whisker ends included."""
    width = 0.8 / max(1, len(series))
    drawn = []
    for i, (label, stats) in enumerate(series):
        xs = [k + (i - (len(series) - 1) / 2) * width for k in range(groups)]
        ax.bar(xs, [s[0] if s else math.nan for s in stats], width, label=label,
               color=COLORS.get(label))  # fmt: skip
        whiskers(ax, [(x, s) for x, s in zip(xs, stats, strict=True) if s])
        drawn += [v for s in stats if s for v in s]
    return drawn


def whiskers(ax, points: list[tuple[float, Stat]], horizontal: bool = False) -> None:
    """Min-max whiskers at (position, Stat), only where the values spread."""
    pts = [(x, s) for x, s in points if s[2] > s[1]]
    if not pts:
        return
    pos, val = [x for x, _ in pts], [s[0] for _, s in pts]
    err = [[max(0.0, s[0] - s[1]) for _, s in pts], [max(0.0, s[2] - s[0]) for _, s in pts]]
    if horizontal:
        ax.errorbar(val, pos, xerr=err, **WHISKERS)
    else:
        ax.errorbar(pos, val, yerr=err, **WHISKERS)


def log_ticks(lo: float, hi: float) -> list[float]:
    """Readable major ticks of a log axis from lo to hi: steps of 1, 2 and 5; decades when
    those are too many; finer steps when too few."""

    def ticks(mantissas: tuple[float, ...]) -> list[float]:
        out = []
        for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
            out += [t for m in mantissas if lo <= (t := float(f"{m * 10.0**e:.6g}")) <= hi]
        return out

    best = ticks((1, 2, 5))
    if len(best) > 9:
        return ticks((1,))
    for finer in ((1, 1.5, 2, 3, 5, 7), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)):
        if len(best) >= 3:
            break
        best = ticks(finer)
    if len(best) >= 3:
        return best
    locator = matplotlib.ticker.MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10])
    return [float(f"{t:.3g}") for t in locator.tick_values(lo, hi) if lo <= t <= hi]


def log_axis(ax, values: list[float], axis: str = "y", fmt: Callable = "{:g}".format) -> None:
    """A log axis over the values, with fixed readable major ticks (log_ticks), no minor ones,
    and gridlines at the majors."""
    vals = [v for v in values if v and v > 0 and math.isfinite(v)] or [1.0]
    lo, hi = min(vals) / 1.3, max(vals) * 1.3
    a = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    (ax.set_ylim if axis == "y" else ax.set_xlim)(lo, hi)
    a.set_major_locator(matplotlib.ticker.FixedLocator(log_ticks(lo, hi)))
    a.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda t, _: fmt(t)))
    a.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.grid(axis=axis, which="major", alpha=0.35)
    ax.set_axisbelow(True)


def linear_axis(ax, top: float, axis: str = "y", fmt: Callable = "{:g}".format) -> None:
    """A linear axis from 0 to top with matplotlib's MaxNLocator and gridlines at its ticks."""
    a = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_ylim if axis == "y" else ax.set_xlim)(0, top or 1)
    a.set_major_locator(matplotlib.ticker.MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
    a.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda t, _: fmt(t)))
    ax.grid(axis=axis, which="major", alpha=0.35)
    ax.set_axisbelow(True)


def rate_axis(ax, top: float, label: str, axis: str = "y") -> None:
    """A linear axis of rates from 0 to top, its ticks in thousands, millions or billions as
    the label says."""
    scale, word = next(
        ((s, w) for s, w in ((1e9, "billions"), (1e6, "millions"), (1e3, "thousands")) if top >= s),
        (1.0, ""),
    )
    linear_axis(ax, top, axis, fmt=lambda t: f"{t / scale:g}")
    (ax.set_ylabel if axis == "y" else ax.set_xlabel)(f"{label}, {word}" if word else label)


def ratio_axis(ax, values: list[float], label: str, axis: str = "y", log: bool | None = None):
    """An axis of ratios with a line at 1×: log scale with readable fixed majors (0.5×, 1×,
    2×) when the values span a factor of 4 or more (or log says so), else linear from 0."""
    vals = [v for v in values if v and v > 0 and math.isfinite(v)] + [1.0]
    log = max(vals) / min(vals) >= 4 if log is None else log
    (ax.axhline if axis == "y" else ax.axvline)(1.0, color="#333333", linewidth=0.9, zorder=2.5)
    if log:
        log_axis(ax, vals, axis, fmt=lambda t: f"{t:g}×")
    else:
        linear_axis(ax, max(vals) * 1.12, axis, fmt=lambda t: f"{t:g}×")
    (ax.set_ylabel if axis == "y" else ax.set_xlabel)(label + (" (log scale)" if log else ""))


def category_axis(ax, labels: list[str]) -> None:
    """Category labels under groups of bars (finish_figure slants them only if they collide)."""
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlim(-0.6, len(labels) - 0.4)


def slant_if_crowded(ax, renderer) -> bool:
    """Slant the x tick labels of ax if neighbours overlap; True if it did."""
    texts = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
    boxes = [t.get_window_extent(renderer) for t in texts]
    if not any(a.x1 + 4 > b.x0 for a, b in zip(boxes, boxes[1:], strict=False)):
        return False
    for t in texts:
        t.set_rotation(30)
        t.set_horizontalalignment("right")
        t.set_rotation_mode("anchor")
    return True


def finish_figure(fig, doc: dict, out: Output, name: str, spread: str, ncol: int = 0) -> Figure:
    """The common end of every figure: the layout, one legend for all panels below them (in
    columns, centred), the caption line below it, saved as out.figures/<name>.png."""
    axs = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    handles, labels = [], []
    for ax in axs:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    if any([slant_if_crowded(ax, renderer) for ax in axs]):
        fig.tight_layout()
    to_fig = fig.transFigure.inverted()
    x = (min(ax.get_position().x0 for ax in axs) + max(ax.get_position().x1 for ax in axs)) / 2
    gap = 6 / 72 / fig.get_figheight()  # 6 points, in figure coordinates
    y = to_fig.transform((0, min(ax.get_tightbbox(renderer).y0 for ax in axs)))[1] - gap
    if handles:
        legend = fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(x, y),
                            ncol=ncol or min(len(labels), 6), frameon=False, fontsize=9,
                            columnspacing=1.6, handlelength=1.8)  # fmt: skip
        y = to_fig.transform((0, legend.get_window_extent(renderer).y0))[1] - gap
    text = caption(doc, spread)
    fig.text(x, y, text, ha="center", va="top", **CAPTION_STYLE)
    out.figures.mkdir(parents=True, exist_ok=True)
    path = out.figures / f"{name}.png"
    fig.savefig(path, dpi=DPI, bbox_inches="tight", pad_inches=0.12)
    plt.close(fig)
    return Figure(path, text)


# ---- generic section --------------------------------------------------------------------------


def section_generic(doc: dict, out: Output) -> list[str]:
    metric = doc["parameters"]["metric"]
    variants = variant_names(doc)
    axes = list(doc["parameters"]["axes"])
    rows = []
    for config in configs_where(doc, {}):
        row = [str(config[a]) for a in axes]
        for v in variants:
            m = median_of(doc, v, config)
            row.append(fmt_rate(m["median"]) if m else "n/a")
        rows.append(row)
    return [
        f"## {doc['benchmark']}",
        "",
        doc.get("description", ""),
        "",
        *provenance(doc),
        "",
        *notes(doc),
        f"Median {metric.get('unit', metric['field'])}:",
        "",
        *table(axes + variants, rows),
    ]


# ---- alloc ----------------------------------------------------------------------------------


def figure_alloc(doc: dict, out: Output) -> Figure:
    variants = variant_names(doc)
    threads = doc["parameters"]["axes"]["threads"]
    sizes = doc["parameters"]["axes"]["size"]
    width = figure_width(len(threads) * len(sizes), per_group=1.1)
    fig, axs = plt.subplots(1, len(threads), figsize=(width, FIG_HEIGHT), sharey=True,
                            squeeze=False)  # fmt: skip
    drawn = []
    for ax, t in zip(axs[0], threads, strict=True):
        drawn += draw_bars(ax, len(sizes), [
            (v, [median_stat(median_of(doc, v, {"threads": t, "size": s})) for s in sizes])
            for v in variants
        ])  # fmt: skip
        category_axis(ax, [fmt_size(s) for s in sizes])
        ax.set_xlabel("block size")
        ax.set_title(f"{t} thread{'s' if t > 1 else ''}", fontsize=10)
    for ax in axs[0]:
        log_axis(ax, drawn, fmt=fmt_rate)
    axs[0][0].set_ylabel(f"{doc['parameters']['metric']['unit']} (log scale)")
    return finish_figure(fig, doc, out, "alloc", spread_note(doc))


def section_alloc(doc: dict, out: Output) -> list[str]:
    p = doc["parameters"]
    variants = variant_names(doc)
    sizes = p["axes"]["size"]
    threads = p["axes"]["threads"]
    by_name = {v["name"]: v for v in p["variants"]}

    # Targets: one column per (variant, baseline) pair, a verdict per target and variant.
    columns, verdicts = [], []
    for tg in doc.get("targets", []):
        cfgs = configs_where(doc, tg.get("where", {}))
        for v in tg["variants"]:
            ratios = [paired_ratio(doc, v, tg["baseline"], c) for c in cfgs]
            ratios_by_size = {c["size"]: r for c, r in zip(cfgs, ratios, strict=True)}
            columns.append((v, tg, ratios_by_size))
            met = sum(1 for r in ratios if r is not None and r >= tg["min_ratio"])
            known = [r for r in ratios if r is not None]
            verdict = "**met**" if known and met == len(ratios) else "**missed**"
            span = f"{fmt_ratio(min(known))} – {fmt_ratio(max(known))}" if known else "n/a"
            verdicts.append([tg["text"], v, span, f"{met}/{len(ratios)}", verdict])

    ratio_rows = []
    for s in sizes:
        row = [fmt_size(s)]
        for _, tg, rs in columns:
            r = rs.get(s)
            mark = "" if r is None else (" ✓" if r >= tg["min_ratio"] else " ✗")
            row.append(fmt_ratio(r) + mark)
        ratio_rows.append(row)
    ratio_header = ["size"] + [
        f"{v} / {tg['baseline']} (≥ {tg['min_ratio']}×)" for v, tg, _ in columns
    ]

    rate_rows = []
    spreads = []
    for t in threads:
        for s in sizes:
            row = [str(t), fmt_size(s)]
            for v in variants:
                m = median_of(doc, v, {"threads": t, "size": s})
                row.append(fmt_rate(m["median"]) if m else "n/a")
                if m and m["min"] > 0 and m["n"] > 1:
                    spreads.append((m["max"] / m["min"] - 1, v, t, s))
            rate_rows.append(row)

    fig = figure_alloc(doc, out)
    lines = [
        "## alloc: allocator throughput",
        "",
        doc.get("description", ""),
        "",
        *provenance(doc),
        "",
        "Variants:",
        "",
        *(f"- `{v}`: {by_name[v].get('description', '')}" for v in variants),
        "",
        *notes(doc),
        "### Targets (1 thread)",
        "",
        "A target is met when it holds at every block size. Ratio = median over "
        "repetitions of the two variants' throughputs measured back to back in the "
        "same repetition.",
        "",
        *table(["target", "variant", "ratio range", "sizes met", "verdict"], verdicts, "lllrl"),
        "",
        "Ratios at 1 thread, per block size:",
        "",
        *table(ratio_header, ratio_rows),
        "",
        "### Median throughput (alloc+free pairs per second)",
        "",
        *table(["threads", "size"] + variants, rate_rows),
        "",
    ]
    if spreads:
        spreads.sort()
        worst = spreads[-1]
        mid = statistics.median(x[0] for x in spreads)
        lines += [
            f"Spread across repetitions (max/min − 1): median {mid:.0%}; widest {worst[0]:.0%} "
            f"({worst[1]}, {worst[2]} thread(s), {fmt_size(worst[3])}).",
            "",
        ]
    lines += out.figure("alloc+free pairs per second", fig)
    return lines


# ---- trace ----------------------------------------------------------------------------------


def figure_trace(doc: dict, out: Output, baseline: str) -> Figure:
    variants = variant_names(doc)
    configs = configs_where(doc, {})
    axes = list(doc["parameters"]["axes"])
    fig, ax = plt.subplots(figsize=(figure_width(len(configs) * len(variants), 1.6), FIG_HEIGHT))
    series = [(v, [median_stat(median_of(doc, v, c)) for c in configs]) for v in variants]
    drawn = draw_bars(ax, len(configs), series)
    width = 0.8 / len(variants)
    for i, (v, stats) in enumerate(series):
        for k, (c, st) in enumerate(zip(configs, stats, strict=True)):
            r = paired_ratio(doc, v, baseline, c) if v != baseline and st else None
            if r is not None:  # above the whisker
                ax.annotate(fmt_ratio(r), (k + (i - (len(variants) - 1) / 2) * width, st[2]),
                            xytext=(0, 3), textcoords="offset points", ha="center",
                            va="bottom", fontsize=8)  # fmt: skip
    for tg in doc.get("targets", []):
        if tg["baseline"] != baseline:
            continue
        for k, c in enumerate(configs):
            b = median_of(doc, baseline, c)
            if b and all(c.get(a) == w for a, w in tg.get("where", {}).items()):
                y = b["median"] * tg["min_ratio"]
                ax.hlines(y, k - 0.45, k + 0.45, colors="#444444", linestyles="dashed", lw=0.8)
                ax.annotate(
                    f"target {tg['min_ratio']}× {baseline}",
                    (k - 0.45, y),
                    xytext=(0, 2),
                    textcoords="offset points",
                    ha="left",
                    va="bottom",
                    fontsize=7,
                    color="#444444",
                )
    category_axis(ax, ["\n".join(f"{a}={c[a]}" for a in axes) for c in configs])
    rate_axis(ax, max(drawn, default=1) * 1.18, doc["parameters"]["metric"].get("unit", "ops/s"))
    ax.set_title(f"hashmap workload: tracing overhead (labels: ratio to {baseline})", fontsize=10)
    return finish_figure(fig, doc, out, "trace", spread_note(doc))


def section_trace(doc: dict, out: Output) -> list[str]:
    p = doc["parameters"]
    variants = variant_names(doc)
    by_name = {v["name"]: v for v in p["variants"]}
    axes = list(p["axes"])
    baseline = "untraced" if "untraced" in variants else variants[0]
    configs = configs_where(doc, {})

    verdicts = []
    for tg in doc.get("targets", []):
        for c in configs_where(doc, tg.get("where", {})):
            for v in tg["variants"]:
                r = paired_ratio(doc, v, tg["baseline"], c)
                ok = r is not None and r >= tg["min_ratio"]
                shown = ", ".join(f"{a}={c[a]}" for a in axes)
                verdicts.append(
                    [tg["text"], shown, fmt_ratio(r), "**met**" if ok else "**missed**"]
                )

    rows = []
    for c in configs:
        for v in variants:
            m = median_of(doc, v, c)
            if not m:
                continue
            r = paired_ratio(doc, v, baseline, c) if v != baseline else 1.0
            size = run_median(doc, v, c, "trace_bytes", part="file_sizes")
            rows.append(
                [str(c[a]) for a in axes]
                + [
                    f"`{v}`",
                    fmt_rate(m["median"]),
                    f"{fmt_rate(m['min'])} – {fmt_rate(m['max'])}",
                    fmt_ratio(r),
                    fmt_size(size) if size is not None else "–",
                ]
            )

    # A traced variant that recorded nothing would make the ratio meaningless.
    warnings = []
    for v in variants:
        flags = {r["result"].get("tracing") for r in doc["runs"] if r["variant"] == v}
        wants = 1 if "PMKIT_TRACE" in by_name[v].get("env", {}) else 0
        if flags - {wants, None}:
            warnings.append(
                f"**Warning: `{v}` runs reported tracing={sorted(flags)}, expected {wants}.**"
            )

    fig = figure_trace(doc, out, baseline)
    return [
        *section_intro(doc, "trace: tracing overhead"),
        *([*warnings, ""] if warnings else []),
        "### Target",
        "",
        "Ratio = median over repetitions of the two variants' throughputs measured back to "
        "back in the same repetition.",
        "",
        *table(["target", ", ".join(axes), "ratio", "verdict"], verdicts, "llrl"),
        "",
        f"### Median throughput ({p['metric'].get('unit', p['metric']['field'])})",
        "",
        *table(
            axes + ["variant", "median", "min – max", f"/ {baseline}", "trace size"],
            rows,
            "l" * (len(axes) + 1) + "rrrr",
        ),
        "",
        *out.figure("tracing overhead", fig),
    ]


def figure_explore(doc: dict, out: Output) -> Figure:
    variants = variant_names(doc)
    configs = configs_where(doc, {})
    fig, ax = plt.subplots(figsize=(figure_width(len(configs) * len(variants)), FIG_HEIGHT))
    series = [(v, [median_stat(median_of(doc, v, c)) for c in configs]) for v in variants]
    drawn = draw_bars(ax, len(configs), series)
    for tg in doc.get("targets", []):
        if "min_value" in tg:
            drawn.append(tg["min_value"])
            ax.axhline(tg["min_value"], color="#444", linestyle="--", linewidth=0.8)
            ax.annotate(
                f"target {tg['min_value']:,}/s", (len(configs) - 0.6, tg["min_value"]),
                xytext=(0, 3), textcoords="offset points", ha="right", fontsize=8,
            )  # fmt: skip
    category_axis(ax, [f"{c['jobs']} job{'s' if c['jobs'] != 1 else ''}" for c in configs])
    rate_axis(ax, max(drawn, default=1) * 1.12, "checked crash images per second")
    ax.set_title("pmkit explore: checker throughput (KV store, 8 MiB pool, x86 model)", fontsize=10)
    return finish_figure(fig, doc, out, "explore", spread_note(doc))


def section_explore(doc: dict, out: Output) -> list[str]:
    p = doc["parameters"]
    variants = variant_names(doc)
    by_name = {v["name"]: v for v in p["variants"]}
    axes = list(p["axes"])
    configs = configs_where(doc, {})
    verdicts = []
    for tg in doc.get("targets", []):
        for c in configs_where(doc, tg.get("where", {})):
            for v in tg["variants"]:
                m = median_of(doc, v, c)
                ok = m is not None and m["median"] >= tg["min_value"]
                shown = ", ".join(f"{a}={c[a]}" for a in axes)
                got = fmt_rate(m["median"]) if m else "–"
                verdicts.append([tg["text"], shown, got, "**met**" if ok else "**missed**"])
    rows = []
    for c in configs:
        for v in variants:
            m = median_of(doc, v, c)
            if not m:
                continue
            r = paired_ratio(doc, v, "command", c) if v != "command" else None
            rows.append(
                [str(c[a]) for a in axes]
                + [
                    f"`{v}`",
                    fmt_rate(m["median"]),
                    f"{fmt_rate(m['min'])} – {fmt_rate(m['max'])}",
                    fmt_ratio(r) if r is not None else "–",
                ]
            )
    fig = figure_explore(doc, out)
    return [
        "## explore: crash-state explorer throughput",
        "",
        doc.get("description", ""),
        "",
        *provenance(doc),
        "",
        "Variants:",
        "",
        *(f"- `{v}`: {by_name[v].get('description', '')}" for v in variants),
        "",
        *notes(doc),
        "### Target",
        "",
        *table(["target", ", ".join(axes), "median", "verdict"], verdicts, "llrl"),
        "",
        f"### Median throughput ({p['metric'].get('unit', p['metric']['field'])})",
        "",
        *table(
            axes + ["variant", "median", "min – max", "/ command"],
            rows,
            "l" * (len(axes) + 1) + "rrr",
        ),
        "",
        *out.figure("explorer throughput", fig),
    ]


# ---- the workload suite (bench/suite.py) ---------------------------------------------------


def suite_config(workload: str, threads: int) -> dict:
    """The configuration of a bench/suite.py run: a workload at a thread count."""
    return {"workload": workload, "threads": threads}


PAIRED = "median of the per-repetition ratios"  # what a ratio bar shows (spread_note)


def figure_ratio_bars(doc: dict, out: Output, name: str, labels: list[str],
                      series: list[tuple[str, list[Stat | None]]], ylabel: str, title: str,
                      spread: str = "", log: bool | None = None) -> Figure:  # fmt: skip
    """Grouped bars of ratios, a group per label: series is [(legend, [Stat per label])]
    (ratio_axis: 1× drawn as a line, a log axis if they span a factor of 4 or more)."""
    width = figure_width(len(labels), per_group=0.3 + 0.32 * len(series))
    fig, ax = plt.subplots(figsize=(width, FIG_HEIGHT))
    drawn = draw_bars(ax, len(labels), series)
    category_axis(ax, labels)
    ratio_axis(ax, drawn, ylabel, log=log)
    ax.set_title(title, fontsize=10)
    return finish_figure(fig, doc, out, name, spread or spread_note(doc, PAIRED))


def suite_ratio_stats(doc: dict, names: list[str], threads: int, variant: str, base: str):
    """Per workload, the Stat of variant/base over the repetitions (1 for base itself)."""
    return [stat(paired_ratios(doc, variant, base, suite_config(n, threads))) if variant != base
            else (1.0, 1.0, 1.0) for n in names]  # fmt: skip


def figure_suite_normalised(doc: dict, out: Output, threads: int) -> Figure:
    names, variants = doc["parameters"]["axes"]["workload"], variant_names(doc)
    return figure_ratio_bars(
        doc, out, f"suite-normalised-{threads}t", names,
        [(v, suite_ratio_stats(doc, names, threads, v, "volatile")) for v in variants],
        "throughput / volatile",
        f"Workloads at {threads} thread{'s' if threads > 1 else ''}, normalised to volatile",
    )  # fmt: skip


def figure_suite_threads(doc: dict, out: Output) -> Figure:
    p = doc["parameters"]
    names, variants, threads = p["axes"]["workload"], variant_names(doc), p["axes"]["threads"]
    cols = min(4, len(names))
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(figure_width(3 * cols, 1.0, 0), 2.8 * rows),
                             squeeze=False)  # fmt: skip
    for k, n in enumerate(names):
        ax = axes[k // cols][k % cols]
        top = 0.0
        for v in variants:
            pts = [(t, (m["median"] / 1e6, m["min"] / 1e6, m["max"] / 1e6))
                   for t in threads if (m := median_of(doc, v, suite_config(n, t)))]  # fmt: skip
            ax.plot([t for t, _ in pts], [st[0] for _, st in pts], marker="o", label=v,
                    color=COLORS.get(v))  # fmt: skip
            whiskers(ax, pts)
            top = max([top, *(st[2] for _, st in pts)])
        ax.set_title(n, fontsize=10)
        ax.set_xticks(threads)
        ax.set_xlim(min(threads) - 0.3, max(threads) + 0.3)
        ax.set_xlabel("threads")
        linear_axis(ax, top * 1.1)
        ax.grid(axis="x", alpha=0.2)
        if k % cols == 0:
            ax.set_ylabel("Mops/s")
    for k in range(len(names), rows * cols):
        axes[k // cols][k % cols].axis("off")
    return finish_figure(fig, doc, out, "suite-threads", spread_note(doc))


def section_suite(doc: dict, out: Output) -> list[str]:
    p = doc["parameters"]
    variants = variant_names(doc)
    rows = []
    for n in p["axes"]["workload"]:
        for t in p["axes"]["threads"]:
            row = [n, str(t)]
            c = suite_config(n, t)
            for v in variants:
                m = median_of(doc, v, c)
                r = paired_ratio(doc, v, "volatile", c) if v != "volatile" else None
                cell = f"{m['median'] / 1e6:.3g}" if m else "–"
                if r is not None:
                    cell += f" ({fmt_ratio(r)})"
                row.append(cell)
            rows.append(row)
    figs = [figure_suite_normalised(doc, out, t) for t in p["axes"]["threads"]]
    figs.append(figure_suite_threads(doc, out))
    metas = p.get("workloads", {})
    wrows = [
        [n, metas[n].get("suite", ""), " ".join(f"{k}={v}" for k, v in
         metas[n].get(p["scale"], metas[n].get("full", {})).items()),
         metas[n].get("description", "")]
        for n in p["axes"]["workload"] if n in metas
    ]  # fmt: skip
    return [
        "## suite: the workloads in every variant",
        "",
        doc.get("description", ""),
        "",
        *provenance(doc),
        f"- Scale: {p['scale']} (sizes from each workload's workload.json)",
        "",
        *table(["workload", "suite", "sizes", "what"], wrows, "llll"),
        "",
        "Median throughput in Mops/s; in brackets the median ratio to `volatile` measured in "
        "the same repetition.",
        "",
        "How to read it: the pools live in /dev/shm, which is DRAM here, so `hand-eadr` costs "
        "what the code costs on DRAM with the pmkit allocator, and `hand-adr` adds only what "
        "clwb and sfence cost on DRAM (on real PM a write-back is slower). `volatile` "
        "allocates with glibc malloc, which places 256-byte values between the nodes of the "
        "trees, while the pmkit allocator keeps each size class in chunks of its own; on the "
        "pointer-chasing workloads that locality gap can make the persistent variants faster "
        "than `volatile`. `pmdk` runs every operation as a libpmemobj transaction "
        "(lock-free workloads: Mirror-style replicas, no transactions).",
        "",
        *table(["workload", "threads", *variants], rows, "ll" + "r" * len(variants)),
        "",
        *out.figures_md("suite", figs),
    ]


# ---- the document -------------------------------------------------------------------------


# Robust mode's settings: the variant names of bench/suite.py and the paper's geomean overheads
# against the hand-placed originals (PMRobust, Sec. VIII).
ROBUST_SETTINGS = [("base", "robust", 11.21), ("opt", "robust-opt", 6.41),
                   ("flit", "robust-flit", 0.26)]  # fmt: skip
# pmkit's targets for robust mode (geomean overhead against hand-adr, in percent), and the
# workloads whose operations update many escaped locations under an undo log, where strict
# persistency needs a fence per location (docs/modes/robust.md, "Limits").
ROBUST_TARGETS = {"opt": 8.0, "flit": 1.0}
ROBUST_MANY_LOCATIONS = ("tpcc", "vacation")


def section_robust(doc: dict, out: Output) -> list[str]:
    """Robust mode against hand-adr: the ratio of each setting per workload and thread count,
    and geomeans."""
    p = doc["parameters"]
    settings = [(s, v, paper) for s, v, paper in ROBUST_SETTINGS if v in variant_names(doc)]
    names = p["axes"]["workload"]
    rows, by_setting, by_setting_rest = [], {}, {}
    for n in names:
        for t in p["axes"]["threads"]:
            h = median_of(doc, "hand-adr", suite_config(n, t))
            if not h:
                continue
            row = [n, str(t), f"{h['median'] / 1e6:.3g}"]
            for s, v, _ in settings:
                ratio = paired_ratio(doc, v, "hand-adr", suite_config(n, t))
                row.append(fmt_ratio(ratio) if ratio else "-")
                if ratio:
                    by_setting.setdefault((s, t), []).append(ratio)
                    if n not in ROBUST_MANY_LOCATIONS:
                        by_setting_rest.setdefault((s, t), []).append(ratio)
            rows.append(row)
    geo = {k: geomean(xs) for k, xs in by_setting.items()}
    geo_rest = {k: geomean(xs) for k, xs in by_setting_rest.items()}

    def overhead(g: float) -> float:  # extra time per operation, in percent
        return (1 / g - 1) * 100

    many = " and ".join(ROBUST_MANY_LOCATIONS)
    verdicts = []
    for s, limit in ROBUST_TARGETS.items():
        for t in p["axes"]["threads"]:
            if (s, t) not in geo:
                continue
            met = overhead(geo[(s, t)]) <= limit
            rest = f"; without {many}: " + (
                f"{overhead(geo_rest[(s, t)]):+.1f}%" if (s, t) in geo_rest else "n/a"
            )
            verdicts.append(
                f"- {s}, {t} thread{'s' if t > 1 else ''}: geomean overhead "
                f"{overhead(geo[(s, t)]):+.1f}% against a target of {limit:g}%: "
                f"**{'met' if met else 'missed'}**{rest}"
            )
    for t in p["axes"]["threads"]:
        rows.append(["**geomean**", str(t), ""] + [
            f"**{fmt_ratio(geo[(s, t)])}** ({overhead(geo[(s, t)]):+.1f}%)"
            if (s, t) in geo else "-" for s, _, _ in settings
        ])  # fmt: skip
    figs = [
        figure_ratio_bars(
            doc, out, f"robust-overhead-{t}t", names,
            [(s, suite_ratio_stats(doc, names, t, v, "hand-adr")) for s, v, _ in settings],
            "robust mode / hand-adr",
            f"Robust mode's settings against hand-placed flushes, {t} thread"
            f"{'s' if t > 1 else ''} (1× = as fast)",
        )
        for t in p["axes"]["threads"]
    ]  # fmt: skip
    paper = ", ".join(f"{s} {pp:.2f}%" for s, _, pp in settings)
    return [
        "## robust: robust mode against hand-placed flushes",
        "",
        doc.get("description", ""),
        "",
        *provenance(doc),
        f"- Scale: {p['scale']} (sizes from each workload's workload.json)",
        "",
        "hand-adr: median throughput in Mops/s. Each setting: its throughput over hand-adr's, "
        "the median of the ratios measured in the same repetition (1.00x = as fast); the "
        "geomean rows give the extra time per operation in parentheses.",
        "",
        *table(
            ["workload", "threads", "hand-adr", *(s for s, _, _ in settings)],
            rows,
            "llr" + "r" * len(settings),
        ),  # fmt: skip
        "",
        f"The paper's geomean overheads (Optane PM, its benchmarks): {paper}. pmkit's targets:",
        "",
        *verdicts,
        "",
        "hand-adr orders only what each workload's recovery needs (an undo entry is fenced "
        "once, not field by field), while robust mode makes every execution strictly "
        f"persistent: where an operation writes many escaped locations ({many}) that "
        "costs a fence per location, and each fence waits for the write-back before it. "
        "Without FliT (base, opt) every atomic load of the lock-free workloads (harris, "
        "lfhash, nmbst) is written back, and the next store's fence waits for all of them.",
        "",
        *out.figures_md("robust", figs),
    ]


def section_robust_analysis(doc: dict, out: Output) -> list[str]:
    """bench/robust_stats.py: analysis time, code size, static and dynamic counts per
    setting (a file of schema 1 has the base setting alone)."""
    names = [s for s, _, _ in ROBUST_SETTINGS if all(s in r["settings"] for r in doc["runs"])]
    shown = " / ".join(names)
    rows, dyn = [], []
    for r in doc["runs"]:
        h, hd, st = r["hand_static"], r["hand_dynamic"], r["settings"]
        rows.append([
            r["workload"], str(r["source_lines"]),
            " / ".join(f"{st[s]['analysis_seconds'] * 1e3:.0f}" for s in names),
            f"{max(st[s]['opt_seconds'] for s in names) * 1e3:.0f}",
            f"{h['flush_calls'] + h['persist_calls']} / {h['fence_calls'] + h['persist_calls']}",
            *(f"{st[s]['static']['clwb']} + {st[s]['static']['range_calls']} / "
              f"{st[s]['static']['sfence']}" for s in names),
        ])  # fmt: skip
        dyn.append([
            r["workload"], f"{hd['flushes_per_op']:.1f} / {hd['fences_per_op']:.1f}",
            *(f"{st[s]['dynamic']['flushes_per_op']:.1f} / {st[s]['dynamic']['fences_per_op']:.1f}"
              for s in names),
        ])  # fmt: skip
    worst = max(st["opt_seconds"] for r in doc["runs"] for st in r["settings"].values())
    return [
        "## robust-analysis: what robust mode costs to compile and what it inserts",
        "",
        doc.get("description", ""),
        "",
        *provenance({**doc, "parameters": {"repetitions": 5}})[:3],
        "",
        f"Static: source lines, the pass's time in each setting ({shown}), the longest "
        "whole `opt` run, and flush / fence sites in the binaries (robust: inlined clwb + calls "
        "of the range write-back / sfence).",
        "",
        *table(
            [
                "workload",
                "source lines",
                f"analysis ms ({shown})",
                "opt ms (all)",
                "hand: flush / fence sites",
                *(f"{s}: clwb + range / sfence" for s in names),
            ],
            rows,
            "lrrrr" + "r" * len(names),
        ),  # fmt: skip
        "",
        "At run time: flushes / fences per operation (fences include locked instructions, "
        "among them FliT's counter updates and the locks' own).",
        "",
        *table(["workload", "hand-adr", *names], dyn, "lr" + "r" * len(names)),
        "",
        "Source lines: the workload's files plus "
        + ", ".join(doc["parameters"].get("common_sources", ["driver.c", "bench.h"]))
        + " of bench/common (non-blank). "
        "Analysis: the pmkit-robust pass on the linked whole-program bitcode, the median of 5 "
        "`opt` runs minus the same pipeline without it (at the noise level of the measurement "
        "when it is a few milliseconds); opt (all) includes reading and writing the bitcode. "
        f"The longest whole `opt` run took {worst * 1e3:.0f} ms, against a target of 10 s per "
        "benchmark (the paper's Table I: 10-200 s on larger code bases). Sites are counted in "
        "the disassembled binaries (hand-adr calls libpmkit's pmkit_flush and pmkit_fence; "
        "robust mode inlines clwb and sfence and calls __pmkit_flush_range for memcpy, memset "
        "and large new objects); per operation counts come from a traced run of the load and "
        "200 operations at the exploration sizes of each workload.json. The opt setting's "
        "fences are fewer where the stores are few and far between; it may also fence where "
        "only some paths left a write-back pending (the analysis merges paths), and such a "
        "fence, with nothing to wait for, costs little.",
    ]


# Clobber mode's target: its throughput over pmdk's, geomean over the workloads (per domain and
# thread count); and the paper's reported gains (Clobber-NVM, ASPLOS'21).
CLOBBER_TARGET = 1.5
DOMAIN_NAMES = {"adr": "ADR", "eadr": "eADR"}
CLOBBER_PAPER = ("up to 41.5x fewer log bytes and 2-6.7x fewer fences than undo logging, up to "
                 "2.7x the throughput of PMDK")  # fmt: skip


def section_clobber(doc: dict, out: Output) -> list[str]:
    """Clobber mode: throughput against pmdk, undo and hand per domain; log bytes and fences
    per operation against the undo setting."""
    p = doc["parameters"]
    names = p["axes"]["workload"]
    domains = [d for d in ("adr", "eadr") if f"clobber-{d}" in variant_names(doc)]
    rows, geo, counts, below = [], {}, [], {"log bytes": [], "fences": []}
    for n in names:
        for t in p["axes"]["threads"]:
            row = [n, str(t)]
            for v in ("pmdk", *(f"{k}-{d}" for d in domains for k in ("hand", "undo", "clobber"))):
                m = median_of(doc, v, suite_config(n, t))
                row.append(f"{m['median'] / 1e6:.3g}" if m else "-")
            for d in domains:
                r = paired_ratio(doc, f"clobber-{d}", "pmdk", suite_config(n, t))
                row.append(fmt_ratio(r))
                if r:
                    geo.setdefault((d, t), []).append(r)
            rows.append(row)
            # Log and fences per operation: the same in every repetition up to the mix of
            # operations; ADR (under eADR there are no fences to count).
            c = {v: (run_median(doc, f"{v}-adr", suite_config(n, t), "log_bytes_per_op"),
                     run_median(doc, f"{v}-adr", suite_config(n, t), "fences_per_op"),
                     run_median(doc, f"{v}-adr", suite_config(n, t), "vlog_bytes_per_op"))
                 for v in ("clobber", "undo")}  # fmt: skip
            if None in c["clobber"] or None in c["undo"]:
                continue
            (cl, cf, cv), (ul, uf, _) = c["clobber"], c["undo"]
            below["log bytes"].append(cl < ul)
            below["fences"].append(cf < uf)
            counts.append([
                n, str(t), f"{cl:.1f}", f"{ul:.1f}", fmt_ratio(ul / cl) if cl else "∞",
                f"{cv:.0f}", f"{cf:.2f}", f"{uf:.2f}", fmt_ratio(uf / cf) if cf else "∞",
            ])  # fmt: skip
    gm = {k: geomean(xs) for k, xs in geo.items()}
    for t in p["axes"]["threads"]:
        rows.append(["**geomean**", str(t)] + [""] * (1 + 3 * len(domains)) + [
            f"**{fmt_ratio(gm[(d, t)])}**" if (d, t) in gm else "-" for d in domains
        ])  # fmt: skip
    verdicts = [
        f"- {DOMAIN_NAMES[d]}, {t} thread{'s' if t > 1 else ''}: clobber / pmdk geomean "
        f"{fmt_ratio(gm[(d, t)])} against a target of {CLOBBER_TARGET:g}×: "
        f"**{'met' if gm[(d, t)] >= CLOBBER_TARGET else 'missed'}**"
        for d in domains for t in p["axes"]["threads"] if (d, t) in gm
    ]  # fmt: skip
    for what, oks in below.items():
        if oks:
            verdicts.append(
                f"- {what} per operation strictly below the undo setting's: "
                f"{sum(oks)} of {len(oks)} workload and thread-count pairs: "
                f"**{'met' if all(oks) else 'missed'}**"
            )
    series = [(f"{k} {DOMAIN_NAMES[d]}", f"{k}-{d}") for d in domains for k in ("clobber", "undo")]
    figs = [
        figure_ratio_bars(
            doc, out, f"clobber-vs-pmdk-{t}t", names,
            [(label, suite_ratio_stats(doc, names, t, v, "pmdk")) for label, v in series],
            "throughput / pmdk",
            f"Clobber mode and undo logging against PMDK, {t} thread{'s' if t > 1 else ''}",
            log=True,
        )
        for t in p["axes"]["threads"]
    ]  # fmt: skip
    heads = ["pmdk", *(f"{k}-{d}" for d in domains for k in ("hand", "undo", "clobber"))]
    return [
        "## clobber: clobber mode against PMDK and undo logging",
        "",
        doc.get("description", ""),
        "",
        *provenance(doc),
        f"- Scale: {p['scale']} (sizes from each workload's workload.json)",
        "",
        "Median throughput in Mops/s, then clobber's throughput over pmdk's in each domain "
        "(the median of the ratios measured in the same repetition). pmdk is the same build "
        "in both domains (libpmemobj's own flushes; the pool is in /dev/shm).",
        "",
        *table(
            ["workload", "threads", *heads, *(f"clobber-{d} / pmdk" for d in domains)],
            rows,
            "ll" + "r" * (len(heads) + len(domains)),
        ),  # fmt: skip
        "",
        "Per operation under ADR, clobber against the undo setting (medians over the "
        "repetitions): bytes of log entries (headers included), undo's bytes over clobber's, "
        "clobber's vlog bytes (the arguments, written at every call; undo has none), fences "
        "between begin and commit, undo's over clobber's.",
        "",
        *table(
            [
                "workload",
                "threads",
                "clobber log B",
                "undo log B",
                "undo / clobber",
                "clobber vlog B",
                "clobber fences",
                "undo fences",
                "undo / clobber",
            ],
            counts,
            "llrrrrrrr",
        ),  # fmt: skip
        "",
        f"The paper reports {CLOBBER_PAPER}. pmkit's targets:",
        "",
        *verdicts,
        "",
        *out.figures_md("clobber", figs),
    ]


SSAPP_PAPER = (
    "1.8× Clobber-NVM's throughput overall (1.4× on the data structures, 7.5× on TATP, 1.2× on "
    "TPC-C, 1.9× on vacation), 60% of volatile throughput across the lock-based structures, "
    "and throughput comparable to Mirror on the lock-free hash table and BST"
)
SSAPP_CLOBBER_TARGET = 1.8  # ssapp / clobber-eadr geomean, lock-based and transactional
SSAPP_VOLATILE_TARGET = 0.6  # ssapp / volatile geomean, lock-based structures
SSAPP_LOCK_BASED = ("btree", "rbtree", "hashmap", "skiplist")


def section_ssapp(doc: dict, out: Output) -> list[str]:
    """SSAPP mode: throughput against clobber mode (eADR), pmdk, hand-eadr and volatile; the
    lock-free workloads against pmdk (Mirror-style there); both fence settings."""
    p = doc["parameters"]
    names = p["axes"]["workload"]
    ssapps = [v for v in ("ssapp", "ssapp-compiler") if v in variant_names(doc)]
    base = [v for v in ("volatile", "hand-eadr", "pmdk", "clobber-eadr") if v in variant_names(doc)]
    ratios = [(v, b) for v in ssapps for b in ("clobber-eadr", "pmdk", "volatile") if b in base]
    rows, geo = [], {}
    for n in names:
        for t in p["axes"]["threads"]:
            row = [n, str(t)]
            for v in (*base, *ssapps):
                m = median_of(doc, v, suite_config(n, t))
                row.append(f"{m['median'] / 1e6:.3g}" if m else "-")
            for v, b in ratios:
                r = paired_ratio(doc, v, b, suite_config(n, t))
                row.append(fmt_ratio(r))
                if r:
                    geo.setdefault((v, b, t, n in SSAPP_LOCK_BASED), []).append(r)
            rows.append(row)

    def gmean(v: str, b: str, t: int, lock_based_only: bool = False) -> float | None:
        return geomean([x for lb in ((True,) if lock_based_only else (True, False))
                        for x in geo.get((v, b, t, lb), [])])  # fmt: skip

    for t in p["axes"]["threads"]:
        rows.append(["**geomean**", str(t)] + [""] * (len(base) + len(ssapps)) + [
            f"**{fmt_ratio(gmean(v, b, t))}**" for v, b in ratios
        ])  # fmt: skip
    verdicts = []
    for v in ssapps:
        for t in p["axes"]["threads"]:
            g = gmean(v, "clobber-eadr", t)
            if g:
                verdicts.append(
                    f"- {v}, {t} thread{'s' if t > 1 else ''}: {v} / clobber-eadr geomean "
                    f"(lock-based and transactional) {fmt_ratio(g)} against a target of "
                    f"{SSAPP_CLOBBER_TARGET:g}×: "
                    f"**{'met' if g >= SSAPP_CLOBBER_TARGET else 'missed'}**"
                )
            g = gmean(v, "volatile", t, lock_based_only=True)
            if g:
                verdicts.append(
                    f"- {v}, {t} thread{'s' if t > 1 else ''}: {v} / volatile geomean on the "
                    f"lock-based structures {g:.0%} against a target of "
                    f"{SSAPP_VOLATILE_TARGET:.0%}: "
                    f"**{'met' if g >= SSAPP_VOLATILE_TARGET else 'missed'}**"
                )
    # What the first target asks, put in terms of volatile: clobber mode's own distance from it.
    for t in p["axes"]["threads"]:
        g = geomean([paired_ratio(doc, "clobber-eadr", "volatile", suite_config(n, t))
                     for n in names])  # fmt: skip
        if g:
            verdicts.append(
                f"- for scale, {t} thread{'s' if t > 1 else ''}: clobber-eadr / volatile geomean "
                f"on the same workloads {fmt_ratio(g)}, so {SSAPP_CLOBBER_TARGET:g}× clobber "
                f"would be {fmt_ratio(g * SSAPP_CLOBBER_TARGET)} volatile"
            )
    shown = [v for v in (*ssapps, "clobber-eadr", "pmdk", "hand-eadr") if v in variant_names(doc)]
    figs = [
        figure_ratio_bars(
            doc, out, f"ssapp-vs-volatile-{t}t", names,
            [(v, suite_ratio_stats(doc, names, t, v, "volatile")) for v in shown],
            "throughput / volatile",
            f"SSAPP mode against volatile, clobber, PMDK and hand, eADR, "
            f"{t} thread{'s' if t > 1 else ''}",
        )
        for t in p["axes"]["threads"]
    ]  # fmt: skip
    return [
        "## ssapp: SSAPP mode against clobber mode, PMDK, hand and volatile (eADR)",
        "",
        doc.get("description", ""),
        "",
        *provenance(doc),
        f"- Scale: {p['scale']} (sizes from each workload's workload.json)",
        "",
        "Median throughput in Mops/s, then ratios (the median of the ratios measured in the "
        "same repetition). ssapp ends each RISE with an sfence, ssapp-compiler with a compiler "
        "barrier. On the lock-free workloads (harris, lfhash, nmbst) clobber mode does not "
        "apply and pmdk is the Mirror-style variant.",
        "",
        *table(
            ["workload", "threads", *base, *ssapps, *(f"{v} / {b}" for v, b in ratios)],
            rows,
            "ll" + "r" * (len(base) + len(ssapps) + len(ratios)),
        ),  # fmt: skip
        "",
        f"The paper reports {SSAPP_PAPER}. pmkit's targets:",
        "",
        *verdicts,
        "",
        *out.figures_md("ssapp", figs),
    ]


def section_ssapp_insns(doc: dict, out: Output) -> list[str]:
    """SSAPP mode's instructions per operation against the other variants."""
    vs = variant_names(doc)
    rows = []
    for w in doc["runs"]:
        c = w["insns_per_op"]
        hand = c.get("hand-eadr")
        rows.append([w["workload"], *(f"{c[v]:.0f}" if v in c else "-" for v in vs),
                     *(fmt_ratio(c[v] / hand) if v in c and hand else "-"
                       for v in ("ssapp", "ssapp-compiler"))])  # fmt: skip
    return [
        "## ssapp-insns: instructions per operation",
        "",
        doc.get("description", ""),
        "",
        *(ln for ln in provenance(doc) if not ln.startswith("- Runs:")),
        f"- {doc['parameters']['keys']} keys; runs of {doc['parameters']['ops']} and "
        f"{2 * doc['parameters']['ops']} operations under valgrind's callgrind, the "
        "difference over the operations between them",
        "",
        *table(
            ["workload", *vs, "ssapp / hand-eadr", "ssapp-compiler / hand-eadr"],
            rows,
            "l" + "r" * (len(vs) + 2),
        ),  # fmt: skip
        "",
        "The paper counts 4.8× Mirror's instructions per operation for SSAPP on its lock-free "
        "structures, at 2.3× the IPC (a 2× slowdown).",
    ]


# Results files named <name>-<date>-<commit>.json (bench/suite.py --name): only the newest of
# each is reported, but every compare file (each compares other builds or variants).
DATED = ("suite", "robust", "clobber", "ssapp")
EVERY = ("compare",)

# Benchmark name -> its section. Add a benchmark's tailored section here.
# ---- wpp ------------------------------------------------------------------------------------


def target_rows(doc: dict) -> list[list[str]]:
    rows = []
    for tg in doc.get("targets", []):
        cfgs = configs_where(doc, tg.get("where", {}))
        for v in tg["variants"]:
            ratios = [paired_ratio(doc, v, tg["baseline"], c) for c in cfgs]
            known = [r for r in ratios if r is not None]
            met = sum(1 for r in known if r >= tg["min_ratio"])
            span = f"{fmt_ratio(min(known))} – {fmt_ratio(max(known))}" if known else "n/a"
            verdict = "**met**" if known and met == len(ratios) else "**missed**"
            rows.append([tg["text"], v, span, f"{met}/{len(ratios)}", verdict])
    return rows


def section_wpp_macro(doc: dict, out: Output) -> list[str]:
    """kvserver and wppvacation: throughput natively, under WPP and with PMDK."""
    p = doc["parameters"]
    axes = list(p["axes"])
    variants = variant_names(doc)
    others = [v for v in variants if v != "native"]
    rows, labels, series = [], [], {v: [] for v in others}
    for c in configs_where(doc, {}):
        row = [str(c[a]) for a in axes]
        for v in variants:
            m = median_of(doc, v, c)
            row.append(fmt_rate(m["median"]) if m else "n/a")
        wpp_pmdk = paired_ratio(doc, "wpp", "pmdk", c) if "pmdk" in variants else None
        row += [fmt_ratio(paired_ratio(doc, "wpp", "native", c)), fmt_ratio(wpp_pmdk)]
        rows.append(row)
        labels.append("\n".join(f"{a}={c[a]}" for a in axes))
        for v in others:
            series[v].append(stat(paired_ratios(doc, v, "native", c)))
    name = doc["benchmark"]
    fig = figure_ratio_bars(
        doc, out, name, labels, list(series.items()), "throughput / native",
        f"{name}: throughput / the same program run natively",
    )  # fmt: skip
    unit = p["metric"].get("unit", p["metric"]["field"])
    return [
        *section_intro(doc, f"{name}: WPP mode against native and PMDK"),
        "### Target",
        "",
        *table(
            ["target", "variant", "ratio range", "configurations met", "verdict"],
            target_rows(doc),
            "lllrl",
        ),  # fmt: skip
        "",
        f"### Median {unit}",
        "",
        "Ratios are medians of the per-repetition ratios of runs made back to back.",
        "",
        *table(axes + variants + ["wpp / native", "wpp / pmdk"], rows),
        "",
        *out.figure(f"{name} relative to native", fig),
    ]


def section_wppmicro(doc: dict, out: Output) -> list[str]:
    tests = doc["parameters"]["axes"]["test"]
    rows, speed = [], []
    for t in tests:
        c = {"test": t}
        nat, wpp = median_of(doc, "native", c), median_of(doc, "wpp", c)
        slow = paired_ratio(doc, "wpp", "native", c)  # time ratio: > 1 is slower
        rows.append([
            t,
            f"{nat['median']:.3g}" if nat else "n/a",
            f"{wpp['median']:.3g}" if wpp else "n/a",
            fmt_ratio(slow),
        ])  # fmt: skip
        # native time / wpp time of each repetition: bar at 1 / the median time ratio
        speed.append(stat([1 / x for x in paired_ratios(doc, "wpp", "native", c) if x],
                          1 / slow if slow else None))  # fmt: skip
    fig = figure_ratio_bars(
        doc, out, "wppmicro", tests, [("wpp", speed)], "performance / native (higher is better)",
        "WPP microbenchmarks (cf. Zhuque Figure 5)",
        spread_note(doc, "1 / the median of the per-repetition time ratios"),
    )  # fmt: skip
    return [
        *section_intro(doc, "wppmicro: the calls WPP intercepts"),
        "Median microseconds per iteration, and the time under WPP over the time natively "
        "(median of paired ratios; above 1 is slower):",
        "",
        *table(["test", "native µs", "wpp µs", "wpp / native time"], rows),
        "",
        *out.figure("WPP microbenchmarks normalised to native", fig),
    ]


def figure_wpprestart(doc: dict, out: Output, has_run: bool) -> Figure:
    """Save and restart times against the heap held, median and min-max per size."""
    mibs = doc["parameters"]["axes"]["mib"]
    lines = [
        ("wpp", "save_ms", "save"),
        ("wpp", "restart_ms", "restart (process start to resumed)"),
        ("wpp", "restore_ms", "restore proper (runtime)"),
    ]
    if has_run:
        lines.append(("wpp-run", "restart_ms", "restart through pmkit wpp run"))
    fig, ax = plt.subplots(figsize=(FIG_WIDTH[0], FIG_HEIGHT))
    drawn = []
    for v, k, label in lines:
        pts = [(n, st) for n in mibs
               if (st := stat(list(run_values(doc, v, {"mib": n}, k).values())))]  # fmt: skip
        ax.plot([n for n, _ in pts], [st[0] for _, st in pts], marker="o", label=label)
        whiskers(ax, pts)
        drawn += [x for _, st in pts for x in st]
    ax.set_xscale("log", base=2)
    ax.set_xticks(mibs, [str(n) for n in mibs])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("heap held by the program (MiB, log scale)")
    log_axis(ax, drawn)  # milliseconds to a tenth of a second: linear would flatten the restarts
    ax.set_ylabel("milliseconds (log scale)")
    ax.grid(axis="x", alpha=0.2)
    ax.set_title("WPP save and restart time against state size", fontsize=10)
    return finish_figure(fig, doc, out, "wpprestart", spread_note(doc))


def section_wpprestart(doc: dict, out: Output) -> list[str]:
    mibs = doc["parameters"]["axes"]["mib"]
    rows, cols = [], ("save_ms", "restart_ms", "restore_ms", "run_ms")
    has_run = any(v.get("name") == "wpp-run" for v in doc["parameters"].get("variants", []))
    for n in mibs:
        c = {"mib": n}
        vals = {k: run_median(doc, "wpp", c, k) for k in (*cols, "heap_mib")}
        # the same restart through `pmkit wpp run` (variant wpp-run), when measured
        vals["run_ms"] = run_median(doc, "wpp-run", c, "restart_ms") if has_run else None
        vals["added"] = (
            vals["run_ms"] - vals["restart_ms"]
            if vals["run_ms"] is not None and vals["restart_ms"] is not None
            else None
        )
        keys = ("heap_mib", "save_ms", "restart_ms", "restore_ms")
        keys += ("run_ms", "added") if has_run else ()
        rows.append([str(n), *(f"{vals[k]:.3g}" if vals[k] is not None else "n/a" for k in keys)])
    fig = figure_wpprestart(doc, out, has_run)
    return [
        *section_intro(doc, "wpprestart: save and restart time against state size"),
        "Medians:",
        "",
        *table(
            ["held MiB", "heap in context (MiB)", "save ms", "restart ms", "restore ms"]
            + (["restart through pmkit wpp run, ms", "added ms"] if has_run else []),
            rows,
        ),
        "",
        *(
            [
                "added ms: the restart through `pmkit wpp run` (its C front end, which execs the "
                "program) minus the direct restart, difference of the medians.",
                "",
            ]
            if has_run
            else []
        ),
        *out.figure("save and restart time", fig),
    ]


# ---- arp mode -------------------------------------------------------------------------------

ARP_MODELS = ["scp", "rcbsp", "arp", "arp+va", "ideal"]
# Kolli et al., ISCA'17, Table 5: persists per epoch (Ideal is 64 by construction).
ARP_PAPER_PPE = {
    "cq": {"scp": 1, "rcbsp": 1.7, "arp": 2.3, "arp+va": 3.5},
    "pc": {"scp": 1, "rcbsp": 2.2, "arp": 3.9, "arp+va": 12.3},
    "sps": {"scp": 1, "rcbsp": 4.6, "arp": 8.1, "arp+va": 13.2},
    "tatp": {"scp": 1, "rcbsp": 1.7, "arp": 4.5, "arp+va": 6.0},
    "tpcc": {"scp": 1, "rcbsp": 1.7, "arp": 2.7, "arp+va": 22.1},
    "ycsb": {"scp": 1, "rcbsp": 2.1, "arp": 3.8, "arp+va": 12.5},
}
# The paper's averages (section 6.1; geometric means of Table 5's ratios).
ARP_PAPER_AVG = [("arp", "scp", 3.9), ("arp", "rcbsp", 1.8), ("arp+va", "scp", 9.9),
                 ("arp+va", "rcbsp", 4.6)]  # fmt: skip
ARP_PAPER_SPEEDUP = 0.243  # ARP+VA's execution time improvement over SCP on TATP, TPCC, YCSB_A


def section_arpsim(doc: dict, out: Output) -> list[str]:
    """The simulator's Table 5, Figure 4 and Figure 5, ours beside the paper's."""
    ws = doc["parameters"]["axes"]["workload"]
    ppe = {w: {m: run_median(doc, m, {"workload": w}, "persists_per_epoch")
               for m in ARP_MODELS} for w in ws}  # fmt: skip
    rows, ordered = [], 0
    for w in ws:
        row = [w]
        for m in ARP_MODELS:
            ours, theirs = ppe[w][m], ARP_PAPER_PPE.get(w, {}).get(m)
            row.append(f"{ours:.2f}" + (f" ({theirs:g})" if theirs else "") if ours else "n/a")
        seq = [ppe[w][m] or 0 for m in ARP_MODELS]
        ok = all(a < b for a, b in zip(seq[:3], seq[1:4], strict=True)) and seq[3] <= seq[4]
        ordered += ok
        row.append("yes" if ok else "**no**")
        rows.append(row)
    avg_rows, within = [], 0
    for a, b, theirs in ARP_PAPER_AVG:
        ours = geomean([ppe[w][a] / ppe[w][b] for w in ws if ppe[w][a] and ppe[w][b]])
        factor = max(ours / theirs, theirs / ours) if ours else None
        within += bool(factor and factor <= 1.5)
        avg_rows.append([f"{a} / {b}", fmt_ratio(ours), f"{theirs}×",
                         f"{factor:.2f}" if factor else "n/a",
                         "**met**" if factor and factor <= 1.5 else "**missed**"])  # fmt: skip
    time = {w: {m: paired_ratio(doc, m, "scp", {"workload": w}) for m in ARP_MODELS} for w in ws}
    bench3 = [w for w in ("tatp", "tpcc", "ycsb") if w in ws]
    g = geomean([time[w]["arp+va"] for w in bench3])
    ours_speedup = 1 - g if g else None
    miss = {}
    for w in ws:
        base = run_median(doc, "scp", {"workload": w}, "miss_rate")
        miss[w] = {m: (run_median(doc, m, {"workload": w}, "miss_rate") or 0) / base
                   if base else None for m in ARP_MODELS}  # fmt: skip
    others = ARP_MODELS[1:]

    def miss_stat(w: str, m: str) -> Stat | None:
        """The miss ratio the table quotes (of the medians), whiskers from each repetition's."""
        return stat(paired_ratios(doc, m, "scp", {"workload": w}, "miss_rate"), miss[w][m])

    fig4 = figure_ratio_bars(
        doc, out, "arpsim-time", ws,
        [(m, [stat(paired_ratios(doc, m, "scp", {"workload": w})) for w in ws]) for m in others],
        "execution time / SCP (lower is better)",
        "Simulated execution time normalised to SCP (cf. the paper's Figure 4)",
    )  # fmt: skip
    fig5 = figure_ratio_bars(
        doc, out, "arpsim-miss", ws, [(m, [miss_stat(w, m) for w in ws]) for m in others],
        "row-buffer miss rate / SCP", "Row-buffer miss rate normalised to SCP (cf. Figure 5)",
        spread_note(doc, "ratio of the medians", "min–max of the per-repetition ratios"),
    )  # fmt: skip
    trows = [[w, *(fmt_ratio(time[w][m]) for m in others),
              *(fmt_ratio(miss[w][m]) for m in others)] for w in ws]  # fmt: skip
    return [
        *section_intro(doc, "arpsim: the persist-ordering simulator against the paper"),
        "### Persists per epoch (the paper's Table 5 in parentheses)",
        "",
        *table(["workload", *ARP_MODELS, "SCP < RCBSP < ARP < ARP+VA ≤ Ideal"], rows),
        "",
        f"Ordering target: holds on {ordered} of {len(ws)} workloads.",
        "",
        "Averages (geometric means over the workloads, as the paper's):",
        "",
        *table(
            ["ratio of persists per epoch", "ours", "paper", "factor apart", "within 1.5"],
            avg_rows,
            "lrrrl",
        ),  # fmt: skip
        "",
        f"ARP+VA's execution time against SCP on TATP, TPCC and YCSB: "
        f"{100 * ours_speedup:.1f}% lower (1 − geometric mean of the time ratios); "
        f"the paper: {100 * ARP_PAPER_SPEEDUP:.1f}%."
        if ours_speedup is not None
        else "",
        "",
        "### Execution time and row-buffer misses, normalised to SCP",
        "",
        *table(
            ["workload", *(f"time {m}" for m in others), *(f"miss {m}" for m in others)], trows
        ),  # fmt: skip
        "",
        *out.figure("simulated execution time", fig4),
        "",
        *out.figure("row-buffer miss rate", fig5),
    ]


def section_arp(doc: dict, out: Output) -> list[str]:
    """The x86 lowerings on this machine: throughput relative to SCP."""
    ws = doc["parameters"]["axes"]["workload"]
    variants = variant_names(doc)
    rows, series = [], {v: [] for v in variants if v != "scp"}
    for w in ws:
        c = {"workload": w}
        row = [w]
        for v in variants:
            m = median_of(doc, v, c)
            row.append(fmt_rate(m["median"]) if m else "n/a")
        for v in series:
            r = paired_ratio(doc, v, "scp", c)
            series[v].append(stat(paired_ratios(doc, v, "scp", c)))
            row.append(fmt_ratio(r))
        rows.append(row)
    fig = figure_ratio_bars(
        doc, out, "arp-x86", ws, list(series.items()), "throughput / SCP lowering",
        "arp workloads on x86: each lowering's throughput over SCP's",
    )  # fmt: skip
    return [
        *section_intro(doc, "arp: the x86 lowerings on this machine"),
        f"Median {doc['parameters']['metric']['unit']}, and each variant over SCP (median of "
        "paired ratios):",
        "",
        *table(["workload", *variants, *(f"{v} / scp" for v in series)], rows),
        "",
        *out.figure("arp lowerings", fig),
    ]


def real_speeds(doc: dict) -> list[tuple[str, Stat, int]]:
    """(bar label, speed against the program's baseline, rounds) of every measured program and
    variant of a real-<mode> results file: a throughput ratio as it is, a run-time ratio
    inverted (each workload of a batch program a bar of its own). The speed is the ratio of
    the medians the tier quotes, its whiskers the lowest and highest ratio of one round (the
    variants ran one after the other in each round) where the file keeps the rounds' numbers
    (rounds = 0 where it keeps only medians)."""

    def rounds(xs: list[float], base: list[float], value: float) -> tuple[Stat, int]:
        per = results.ratios(dict(enumerate(xs)), dict(enumerate(base)))
        return stat(per, value), len(per)

    bars = []
    for name, r in doc["programs"].items():
        ratio = r.get("throughput_ratio_wpp_to_native") or r.get("throughput_ratio")
        if isinstance(ratio, dict):
            runs = r.get("throughput", {}).get("runs", {})
            first = next(iter(runs), None)
            bars += [(f"{name} {v}", *rounds(runs.get(v, []), runs.get(first, []), x))
                     for v, x in ratio.items() if v != "volatile"]  # fmt: skip
        elif ratio:
            runs = r.get("throughput_ops_per_sec", {})
            bars.append((name, *rounds(runs.get("wpp", []), runs.get("native", []), ratio)))
        for part, x in (r.get("time_ratio_wpp_to_native") or {}).items():
            bars.append((f"{name} {part}", (1 / x, 1 / x, 1 / x), 0))
    return bars


def figure_real(doc: dict, out: Output) -> Figure | None:
    bars = real_speeds(doc)
    if not bars:
        return None
    mode = doc["benchmark"].split("-", 1)[1]
    base = "native" if mode == "wpp" else "volatile"
    fig, ax = plt.subplots(figsize=(FIG_WIDTH[0], 1.2 + 0.28 * len(bars)))
    ys = range(len(bars))
    colors = [COLORS["pmdk"] if "pmdk" in b else COLORS.get(mode, "#1f5fa8") for b, _, _ in bars]
    ax.barh(ys, [st[0] for _, st, _ in bars], color=colors)
    whiskers(ax, [(y, st) for y, (_, st, _) in zip(ys, bars, strict=True)], horizontal=True)
    for y, (_, st, _) in zip(ys, bars, strict=True):
        ax.annotate(f"{st[0]:.2f}×" if st[0] >= 0.1 else f"{st[0]:.2g}×", (st[2], y),
                    xytext=(4, 0), textcoords="offset points", va="center", fontsize=7,
                    bbox=LABEL_BOX)  # fmt: skip
    ax.set_yticks(list(ys), [b for b, _, _ in bars], fontsize=8)
    ax.set_ylim(len(bars) - 0.5, -0.5)  # the first program on top
    drawn = [v for _, st, _ in bars for v in st]
    ratio_axis(ax, drawn + [max(drawn) * 1.15], f"speed against the {base} build, 1× = as fast",
               axis="x")  # fmt: skip
    ax.set_title(f"Real programs under {mode} mode", fontsize=10)
    counts = sorted({n for _, _, n in bars if n})
    bare = sorted({b.split()[0] for b, _, n in bars if not n})
    spread = "ratio of the medians"
    if counts:
        spread = f"{'/'.join(map(str, counts))} rounds: {spread}, whiskers min–max of the rounds"
    if bare:
        spread += f"; {', '.join(bare)}: medians only, no spread"
    return finish_figure(fig, doc, out, doc["benchmark"], spread)


def section_real(doc: dict, out: Output) -> list[str]:
    """Programs from Debian's source packages (tests/real/realtier.py, make test-real): what
    each needed, what was checked, what must fail did, and the cost."""
    mode = doc["benchmark"].split("-", 1)[1]
    m = doc["machine"]
    lines = [
        f"## {doc['benchmark']}: real programs under {mode} mode",
        "",
        doc["description"] + " Each program is fetched with `apt-get source` at test time "
        "(never committed), built by its own build system with pmkit as the compiler, and "
        "checked; the controls must fail.",
        "",
        f"Machine: {m.get('cpu_model', '?')}, {m.get('cores', '?')} cores, "
        f"{m.get('kernel', '?')}, load average {m.get('load_average_1min', '?')} at the start; "
        f"commit {doc['commit'].get('sha', '?')[:10]}; {doc['date']}.",
        "",
    ]
    rows = []
    for name, r in doc["programs"].items():
        if "failed" in r:
            rows.append([name, r["source"], "", "FAILED", r["failed"][:120], "", ""])
            continue
        ratio = r.get("throughput_ratio_wpp_to_native") or r.get("throughput_ratio")
        if isinstance(ratio, dict):  # against the volatile build, per variant
            cost = ", ".join(f"{v} {x:.2f}x" for v, x in ratio.items() if v != "volatile")
            cost = "throughput " + cost + " of volatile"
        elif ratio:
            cost = f"throughput {ratio:.2f}x of native"
        elif "time_ratio_wpp_to_native" in r:  # a batch program timed against native
            t = r["time_ratio_wpp_to_native"]
            per = sorted(v for k, v in t.items() if k != "total")
            cost = f"run time {t['total']:.2f}x of native ({per[0]:.2f}x-{per[-1]:.2f}x per part)"
        else:
            cost = "not measured"
        if "checked" in r:  # a library in a pool: the tier's own summary
            what = r["checked"]
        elif "acknowledged_sets_checked" in r:  # a server under load
            what = (
                f"{r['trials']} trials, {r['power_failures']} power failures, "
                f"{r['acknowledged_sets_checked']:,} acknowledged sets read back, {r['lost']} lost"
            )
        else:  # a batch program against its uninterrupted output
            what = (
                f"{r['trials']} trials, {r['power_failures']} power failures, output "
                f"byte-identical to an uninterrupted run ({r['output_bytes']} bytes)"
            )
        glue = (
            f"{r['glue_lines']} / {r['source_changes']}"
            if "glue_lines" in r
            else "build flags only / 0"
        )
        controls = any(k.startswith("control") for k in r)
        rows.append(
            [
                name,
                r["source"],
                glue,
                what,
                "failed as meant" if controls else "not run",
                cost,
                f"{r['seconds']:.0f} s",
            ]
        )
    lines += table(
        [
            "program",
            "code",
            "glue lines / source lines changed",
            "checked",
            "controls (must fail)",
            "cost",
            "time",
        ],
        rows,
    )
    fig = figure_real(doc, out)
    if fig:
        lines += ["", *out.figure("speed against the baseline build", fig)]
    lines += ["", "What a user did to build each (besides the program's own build):", ""]
    lines += [f"- **{n}**: {r['glue']}" for n, r in doc["programs"].items()]
    lines += ["", "Verdicts as the tier printed them:", ""]
    lines += [f"- **{n}**: {r.get('verdict', r.get('failed'))}" for n, r in doc["programs"].items()]
    return lines


# ---- compare: one suite from two builds ------------------------------------------------------


def apart(a: list[float], b: list[float]) -> bool:
    """Whether the ranges of two sets of runs do not overlap."""
    return bool(a and b) and (min(a) > max(b) or max(a) < min(b))


def apart_by_chance(n: int) -> float:
    """The chance that n runs of one build and n of another, drawn from one distribution,
    have ranges that do not overlap: 2 of the C(2n, n) orders of the 2n values."""
    return 2 / math.comb(2 * n, n)


def section_compare(doc: dict, out: Output) -> list[str]:
    p = doc["parameters"]
    against = p["against"]
    suffix = against["suffix"]
    before = against["commit"]
    names, threads = p["axes"]["workload"], p["axes"]["threads"]
    variants = [v for v in variant_names(doc) if not v.endswith(suffix)]
    configs = [suite_config(n, t) for n in names for t in threads]
    summary, cells, series = [], {}, []
    for v in variants:
        meds, moved = [], []
        for c in configs:
            r = paired_ratio(doc, v, v + suffix, c)
            if r is None:
                continue
            meds.append(r)
            now, then = run_values(doc, v, c), run_values(doc, v + suffix, c)
            far = apart(list(now.values()), list(then.values()))
            cells[v, c["workload"], c["threads"]] = f"**{fmt_ratio(r)}**" if far else fmt_ratio(r)
            if far:
                moved.append(f"{c['workload']}/{c['threads']}t {fmt_ratio(r)}")
        g = geomean(meds)
        series.append((g, min(meds), max(meds)) if meds else None)
        summary.append([f"`{v}`", str(len(meds)), fmt_ratio(g),
                        f"{fmt_ratio(min(meds))}–{fmt_ratio(max(meds))}" if meds else "–",
                        f"{len(moved)}" + (f": {', '.join(moved)}" if moved else "")])  # fmt: skip
    rows = [[n, str(t), *(cells.get((v, n, t), "–") for v in variants)]
            for n in names for t in threads]  # fmt: skip
    # One figure per compare file: its name carries the run's date.
    name = "compare-" + re.sub(r"[^0-9]", "", doc["date"])[:14]
    fig = figure_ratio_bars(
        doc, out, name, variants, [("after / before", series)],
        "throughput after / before",
        f"Each variant built from {doc['commit'].get('sha', '?')[:10]} against "
        f"{before.get('sha', '?')[:10]}",
        spread=f"{p['repetitions']} repetitions: geomean over workloads and thread counts of "
        "the median per-repetition ratio, whiskers the lowest and highest configuration",
    )  # fmt: skip
    n = p["repetitions"]
    chance = apart_by_chance(n)
    total = len(cells)
    return [
        f"## compare: {doc['commit'].get('sha', '?')[:10]} against "
        f"{before.get('sha', '?')[:10]} ({', '.join(variants)})",
        "",
        doc.get("description", ""),
        "",
        *provenance(doc),
        f"- Before: commit `{before.get('sha', 'unknown')[:12]}`"
        + (" with uncommitted changes" if before.get("dirty") else "")
        + f", built in `{against.get('build_dir', '?')}`; each variant's two builds run one "
        "after the other in every repetition, which goes first alternating",
        "",
        f"Per variant: the geometric mean over workloads and thread counts of the median "
        f"ratio after / before (each repetition's pair measured back to back), the lowest and "
        f"highest configuration, and the configurations whose {n} runs after and {n} before "
        f"do not overlap at all. With no change at all, that happens by chance to "
        f"{chance:.0%} of configurations ({n} runs each): about {chance * total:.0f} of these "
        f"{total}.",
        "",
        *table(
            ["variant", "configurations", "geomean after / before", "range", "ranges apart"],
            summary,
            "lrrrl",
        ),  # fmt: skip
        "",
        "Every configuration: median ratio after / before; in bold where the runs' ranges "
        "do not overlap.",
        "",
        *table(["workload", "threads", *variants], rows, "ll" + "r" * len(variants)),
        "",
        *out.figures_md("compare", [fig]),
    ]


SECTIONS: dict[str, Callable[[dict, Output], list[str]]] = {
    "alloc": section_alloc,
    "trace": section_trace,
    "explore": section_explore,
    "suite": section_suite,
    "robust": section_robust,
    "robust-analysis": section_robust_analysis,
    "clobber": section_clobber,
    "ssapp": section_ssapp,
    "ssapp-insns": section_ssapp_insns,
    "wppmicro": section_wppmicro,
    "wpprestart": section_wpprestart,
    "wppvacation": section_wpp_macro,
    "kvserver": section_wpp_macro,
    "arpsim": section_arpsim,
    "arp": section_arp,
    "real-wpp": section_real,
    "real-robust": section_real,
    "real-clobber": section_real,
    "real-ssapp": section_real,
    "compare": section_compare,
}


def one_run(docs: list[dict]) -> list[str]:
    """Whether every section comes from one machine and commit (as `make bench` makes them);
    if not, which sections come from which, so that no one compares across them unawares."""
    runs: dict[tuple, list[str]] = {}
    for d in docs:
        m, c = d["machine"], d["commit"]
        key = (m.get("cpu_model", "?"), m.get("cores", "?"), c.get("sha", "unknown")[:12],
               bool(c.get("dirty")))  # fmt: skip
        runs.setdefault(key, []).append(d["benchmark"])
    dates = sorted(d["date"][:10] for d in docs)

    def name(k: tuple) -> str:
        return f"{k[0]}, {k[1]} cores, commit `{k[2]}`" + (" with changes" if k[3] else "")

    if len(runs) == 1:
        (k,) = runs
        when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
        return [f"Every section below was measured on one machine, from one commit: {name(k)} "
                f"({when}).", ""]  # fmt: skip
    return [
        f"**Not one run: these sections come from {len(runs)} machine/commit combinations**, "
        "and numbers from different ones should not be compared (`make bench` measures every "
        "section in one run):",
        "",
        *(f"- {name(k)}: {', '.join(v)}" for k, v in runs.items()),
        "",
    ]


def render(docs: list[dict], out: Output) -> str:
    order = list(SECTIONS)
    docs = sorted(
        docs,
        key=lambda d: (order.index(d["benchmark"]) if d["benchmark"] in order else len(order),
                       d["benchmark"]),
    )  # fmt: skip
    lines = [
        "<!-- Generated by bench/report.py from bench/results/*.json. Do not edit by hand:",
        "     run `python bench/run.py` then `python bench/report.py` (or `make bench`). -->",
        "",
        "# Benchmark results",
        "",
        "Generated from the JSON in `bench/results/` by `bench/report.py`; each section "
        "names the machine and commit it was measured on. Ratios are quoted from one run "
        "with the variants interleaved, since absolute numbers drift on shared machines.",
        "",
    ]
    if not docs:
        lines += ["No results yet: run `python bench/run.py`.", ""]
    lines += one_run(docs)
    for doc in docs:
        section = SECTIONS.get(doc["benchmark"], section_generic)
        lines += section(doc, out) + [""]
    return "\n".join(lines).rstrip() + "\n"


DESCRIPTION = (
    "Regenerate docs/results.md and docs/figures/*.png from bench/results/*.json only; "
    "nothing is measured. Exit status: 0 success, 2 a results file it cannot read."
)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of a report: this script's and `pmkit bench report`'s (one definition)."""
    ap.add_argument("--results-dir", default=str(BENCH_DIR / "results"), metavar="DIR",
                    help="the results files to read (default bench/results/)")  # fmt: skip
    ap.add_argument(
        "--out",
        default=str(REPO / "docs" / "results.md"),
        metavar="FILE",
        help="the page to write (default docs/results.md; figures beside it)",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/report.py", description=DESCRIPTION)
    add_arguments(ap)
    return run(ap.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    folder = Path(args.results_dir)
    docs = []
    # Dated files (<name>-<date>-<commit>.json, from bench/suite.py): the newest of each name.
    dated: dict[str, Path] = {}
    paths, every = [], []
    for q in sorted(folder.glob("*.json")):
        m = re.match(r"([a-z]+)-\d{8}-\d{6}-", q.name)
        if m and m.group(1) in DATED:
            dated[m.group(1)] = q  # sorted by date within a name: the last is the newest
        elif m and m.group(1) in EVERY:
            every.append(q)
        else:
            paths.append(q)
    for path in paths + [dated[n] for n in DATED if n in dated] + every:
        try:
            docs.append(results.load(path))
        except results.ResultsError as e:
            print(f"report.py: {e}", file=sys.stderr)
            return 2
    md = Path(args.out)
    out = Output(md=md, figures=md.parent / "figures")
    out.figures.mkdir(parents=True, exist_ok=True)
    text = render(docs, out)
    md.write_text(text)
    # A figure no section drew this time (a benchmark gone, a program that failed) is not
    # left behind to be taken for a result of these files.
    drawn = set(re.findall(r"\]\(([^)]+\.png)\)", text))
    for f in sorted(out.figures.glob("*.png")):
        if out.link(f) not in drawn:
            f.unlink()
            print(f"report.py: removed {f}, which no section draws now", file=sys.stderr)
    print(f"report.py: wrote {md} from {len(docs)} results file(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
