"""`sap report`: an HTML page with charts of a data file's provenance statistics.

The page is one self-contained file, DIR/index.html: the CSS is inline and every chart is embedded
as a base64 PNG data URI. The same charts are also written next to it as PNG files (tags.png,
chain_length.png, tool_calls.png) for use elsewhere. Charts are drawn with matplotlib's Agg canvas
directly (no pyplot, so no global backend state); matplotlib is the optional extra `report`.
"""
from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

from sap.errors import MissingExtra
from sap.provenance.external import file_stats

INSTALL_HINT = "matplotlib is not installed; run pip install 'sap-synth[report]'"
MAX_TOOL_BARS = 60
TAG_COLOURS = {"initial_state": "#4c72b0", "prev_output": "#dd8452", "self_create": "#55a868",
               "prev_user_msg": "#8172b3", "fallback": "#c44e52", "unknown": "#8c8c8c"}


class ReportUnavailable(MissingExtra):
    """The report needs matplotlib, which is not installed."""


def _figure_factory() -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ReportUnavailable(INSTALL_HINT) from exc

    def new_figure(width: float, height: float) -> Any:
        fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
        FigureCanvasAgg(fig)
        return fig

    return new_figure


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def tag_chart(stats: dict[str, Any], new_figure: Any) -> bytes:
    """Bar chart of the tag shares."""
    tags = list(stats["tag_distribution"])
    shares = [stats["tag_distribution"][t] * 100 for t in tags]
    fig = new_figure(7, 3.6)
    ax = fig.add_subplot()
    bars = ax.bar(tags, shares, color=[TAG_COLOURS.get(t, "#999999") for t in tags])
    ax.bar_label(bars, labels=[f"{s:.1f}%" for s in shares], padding=2)
    ax.set_ylabel("share of arguments (%)")
    ax.set_ylim(0, max(shares + [1]) * 1.18)
    inferred = " (inferred)" if stats.get("format") not in (None, "sap") else ""
    ax.set_title(f"Provenance tags{inferred}, {stats['arguments']} arguments")
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def chain_chart(stats: dict[str, Any], new_figure: Any) -> bytes:
    """Histogram of the chain lengths L, one bar per value of L."""
    counts = {int(k): v for k, v in stats["chain_length_counts"].items()}
    xs = list(range(0, max(counts, default=0) + 1))
    ys = [counts.get(x, 0) for x in xs]
    fig = new_figure(7, 3.6)
    ax = fig.add_subplot()
    bars = ax.bar(xs, ys, color="#4c72b0", width=0.8)
    ax.bar_label(bars, labels=[str(y) if y else "" for y in ys], padding=2, fontsize=8)
    ax.set_xticks(xs)
    ax.set_xlabel("chain length L = turn of use - turn the value entered")
    ax.set_ylabel("arguments")
    ax.set_ylim(0, max(ys + [1]) * 1.15)
    ax.set_title(f"Chain lengths: mean {stats['mean_chain_length']:.2f}, max {stats['max_chain_length']}, "
                 f"L>=1 {stats['dependent_share']:.1%}")
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def tool_chart(stats: dict[str, Any], new_figure: Any) -> bytes:
    """Horizontal bar chart of calls per tool, most called on top."""
    items = sorted(stats["tool_counts"].items(), key=lambda kv: (-kv[1], kv[0]))
    shown = items[:MAX_TOOL_BARS]
    fig = new_figure(7, max(2.4, 0.26 * len(shown) + 1.2))
    ax = fig.add_subplot()
    names = [n for n, _ in reversed(shown)]
    values = [v for _, v in reversed(shown)]
    bars = ax.barh(names, values, color="#55a868")
    ax.bar_label(bars, padding=2, fontsize=8)
    ax.set_xlabel("calls")
    ax.set_xlim(0, max(values + [1]) * 1.12)
    ax.tick_params(axis="y", labelsize=8)
    title = f"Tool calls: {len(items)} tools called"
    if len(items) > len(shown):
        title += f" (top {len(shown)} shown)"
    if stats.get("uncalled_tools"):
        title += f", {stats['uncalled_tools']} offered tools never called"
    ax.set_title(title)
    ax.spines[["top", "right"]].set_visible(False)
    return _png(fig)


def _fmt(value: Any, kind: str = "") -> str:
    if value is None:
        return "n/a"
    if kind == "pct":
        return f"{value:.1%}"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _summary_rows(stats: dict[str, Any]) -> list[tuple[str, str]]:
    spread = stats["frequency_spread"]
    return [
        ("format", stats["format"] + ("" if stats["format"] == "sap" else " (tags inferred from the dialogue)")),
        ("records", _fmt(stats["records"])),
        ("arguments", _fmt(stats["arguments"])),
        ("turns per record (mean)", _fmt(stats["mean_turns"])),
        ("calls per record (mean)", _fmt(stats["mean_calls"])),
        ("chain length L (mean)", _fmt(stats["mean_chain_length"])),
        ("chain length L (max)", _fmt(stats["max_chain_length"])),
        ("arguments with L >= 1", _fmt(stats["dependent_share"], "pct")),
        ("fallback rate", _fmt(stats["fallback_rate"], "pct")),
        ("records with parallel calls", _fmt(stats["parallel_share"], "pct")),
        ("tool coverage", _fmt(stats["tool_coverage"], "pct")),
        ("offered tools never called", _fmt(stats["uncalled_tools"])),
        ("call count spread (most / least called)", "n/a" if spread is None else f"{spread:.1f}x"),
        ("kinds", ", ".join(f"{k} {v}" for k, v in stats["kind_counts"].items()) or "none"),
    ]


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 60rem;
       padding: 0 1rem; color: #222; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
.source { color: #666; font-family: ui-monospace, monospace; font-size: .9rem; }
table { border-collapse: collapse; margin: .5rem 0; }
td, th { padding: .25rem .8rem; border-bottom: 1px solid #eee; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; height: auto; }
figcaption { color: #666; font-size: .85rem; }
"""


def render_html(stats: dict[str, Any], source: str, charts: list[tuple[str, str, bytes]]) -> str:
    """The report page: summary table, tag table and the charts as data URIs. `charts` = (file, caption, png)."""
    e = html.escape
    rows = "\n".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _summary_rows(stats))
    n = stats["arguments"]
    tag_rows = "\n".join(f"<tr><th>{e(t)}</th><td class=\"num\">{round(s * n)}</td><td class=\"num\">{s:.1%}</td></tr>"
                         for t, s in stats["tag_distribution"].items())
    figures = "\n".join(
        f"<figure><img src=\"data:image/png;base64,{base64.b64encode(png).decode('ascii')}\" alt=\"{e(caption)}\">"
        f"<figcaption>{e(caption)} (also saved as <a href=\"{e(name)}\">{e(name)}</a>)</figcaption></figure>"
        for name, caption, png in charts)
    note = ""
    if stats["format"] != "sap":
        note = ("<p>This file declares no provenance. Each argument's tag and origin are inferred from where its value "
                "first appears: the user messages, earlier tool returns and the initial configuration; values found "
                "in none of them are <em>unknown</em>."
                + (" BFCL data has no tool returns, so <em>prev_output</em> cannot be inferred." if stats["format"] == "bfcl" else "")
                + "</p>")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>sap report: {e(source)}</title>
<style>{CSS}</style>
</head>
<body>
<h1>sap report</h1>
<div class="source">{e(source)}</div>
{note}
<h2>Summary</h2>
<table>
{rows}
</table>
<h2>Provenance tags</h2>
<table>
<tr><th>tag</th><th>arguments</th><th>share</th></tr>
{tag_rows}
</table>
<h2>Charts</h2>
{figures}
</body>
</html>
"""


def write_report(path: str | Path, out_dir: str | Path, answers: str | Path | None = None) -> Path:
    """Write DIR/index.html and the chart PNGs for a sap, OpenAI-messages or BFCL file; returns the page's path.

    Raises ReportUnavailable without matplotlib, ValueError when `out_dir` is an existing file or the
    data cannot be read. The directory is created if missing.
    """
    new_figure = _figure_factory()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"output path {out} is not a directory")
    stats = file_stats(path, answers)
    charts = [
        ("tags.png", "Share of arguments per provenance tag", tag_chart(stats, new_figure)),
        ("chain_length.png", "Histogram of chain lengths L", chain_chart(stats, new_figure)),
        ("tool_calls.png", "Calls per tool", tool_chart(stats, new_figure)),
    ]
    out.mkdir(parents=True, exist_ok=True)
    for name, _, png in charts:
        (out / name).write_bytes(png)
    index = out / "index.html"
    index.write_text(render_html(stats, str(path), charts), encoding="utf-8")
    return index
