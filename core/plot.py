"""PNG plots: what real git measured per key, and the engine's curves (matplotlib, an
optional extra)."""
import sys
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

Json = Dict[str, Any]     # a record as its JSON reads (the calibration's, the report's)

from .errors import UsageError


def _pyplot() -> Any:
    try:
        import matplotlib
        matplotlib.use("Agg")
        # An SVG keeps its words as text (searchable, and what a test reads back).
        matplotlib.rcParams["svg.fonttype"] = "none"
        import matplotlib.pyplot as plt
    except ImportError:
        # The pip of the Python git-tune runs in (its venv), not whatever pip is on PATH.
        raise UsageError(f"--plot needs matplotlib: {sys.executable} -m pip install "
                         "matplotlib") from None
    return plt


def _series(evaluations: Iterable[Mapping[str, Any]], x_key: str, group_key: Optional[str] = None
            ) -> Dict[object, List[Tuple[Any, float]]]:
    groups: Dict[object, Dict[object, List[float]]] = {}
    for e in evaluations:
        if e["value"] is None:
            continue
        g = e["point"].get(group_key) if group_key else ""
        groups.setdefault(g, {}).setdefault(e["point"][x_key], []).append(e["value"])
    return {g: sorted((x, sorted(v)[len(v) // 2]) for x, v in pts.items()) for g, pts in groups.items()}


def _real_git(ax: Any, calibration: Json, recommendation: Json) -> None:
    """Every comparison real git ran, per key: the candidate's speedup over Git's
    default with its 95% interval; green where the key was set, grey where not."""
    status = {k["key"]: k["status"] for k in recommendation["keys"]}
    rows = []
    for key, trial in calibration["trials"].items():
        for c in trial.get("comparisons", ()):
            e = c.get("estimate")
            if e:
                value = c["candidate"].get(key, ",".join(map(str, c["candidate"].values())))
                what = f"{c['workload']}, {c['files']} files" if c.get("files") else c["workload"]
                rows.append((f"{key}={value}\n{what}", 1 / e["ratio"], 1 / e["high"],
                             1 / e["low"], status.get(key) == "set"))
    for i, (label, speedup, low, high, was_set) in enumerate(rows):
        ax.errorbar([speedup], [i], xerr=[[speedup - low], [high - speedup]], fmt="o",
                    color="tab:green" if was_set else "tab:gray", capsize=3)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("speedup over Git's default (95% interval); green: set")
    ax.set_title("real git: what decides")


def recommendation(calibration: Json, recommendation: Json, path: str) -> str:
    """Real git's measurements per key (what decides) beside the engine's sweeps (its
    predictions, drawn as such)."""
    plt = _pyplot()
    panels = list(calibration["sweeps"].items())
    fig, axes = plt.subplots(1, 1 + len(panels), figsize=(6 + 4.5 * len(panels), 5),
                             squeeze=False, gridspec_kw={"width_ratios": [1.4] + [1] * len(panels)})
    _real_git(axes[0][0], calibration, recommendation)
    _engine_panels(axes[0][1:], panels, prediction=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def sweeps(calibration: Json, path: str) -> str:
    """One panel per engine sweep: seconds against its first dimension, one line per value
    of a second (categorical) one, and the cost model where the sweep fitted one."""
    plt = _pyplot()
    panels = list(calibration["sweeps"].items())
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(5 * max(1, len(panels)), 4),
                             squeeze=False)
    _engine_panels(axes[0], panels)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _engine_panels(axes: Sequence[Any], panels: Iterable[Tuple[str, Json]],
                   prediction: bool = False) -> None:
    for ax, (name, sweep) in zip(axes, panels):
        x_key = sweep["dims"][0]["name"]
        group = sweep["dims"][1]["name"] if len(sweep["dims"]) > 1 else None
        for g, pts in _series(sweep["evaluations"], x_key, group).items():
            xs, ys = zip(*pts)
            ax.plot(xs, ys, "o-", label=str(g) if g else "measured")
        model, samples = sweep["facts"].get("model"), sweep["facts"].get("model_samples")
        if model and samples:
            n = sweep["facts"]["files"]
            counts = range(1, max(p[0] for p in samples) + 1)
            modelled = [model["serial"] + n * model["per_item"] / min(w, model["parallelism"])
                        + w * model["per_worker"] for w in counts]
            ax.plot(list(counts), modelled, "--", label="cost model")
        ax.set_title(f"engine {name} sweep" + ("\n(the engine's prediction; real git "
                                              "decides)" if prediction else ""), fontsize=9)
        ax.set_xlabel(x_key)
        ax.set_ylabel("seconds (median)")
        if ax.get_legend_handles_labels()[0]:      # a sweep with no point timed draws none
            ax.legend()


def verify(report: Json, path: str) -> str:
    """Before/after run times per workload, every run shown."""
    plt = _pyplot()
    ws = report["workloads"]
    fig, ax = plt.subplots(figsize=(max(5, 1.8 * len(ws)), 4))
    for i, w in enumerate(ws):
        ax.plot([i - 0.15] * len(w["times_before"]), w["times_before"], "o", color="tab:gray")
        ax.plot([i + 0.15] * len(w["times_after"]), w["times_after"], "o", color="tab:green")
    ax.set_xticks(range(len(ws)))
    ax.set_xticklabels([w["name"] for w in ws])
    ax.set_ylabel("seconds per run")
    ax.set_title("real git: Git's defaults (grey) vs tuned (green)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def agent(report: Json, path: str) -> str:
    """Each command class's median with its interval and p90, one bar per set of values
    in force (before and after each write), per repository."""
    plt = _pyplot()
    lats = report["latencies"]
    if not lats:
        raise UsageError("no commands recorded yet: nothing to plot")
    labels = [f"{l['command']}\n{_short(l['values'])}" for l in lats]
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(lats)), 4.5))
    med = [l["median"] for l in lats]
    err = [[m - l["median_low"] for m, l in zip(med, lats)],
           [l["median_high"] - m for m, l in zip(med, lats)]]
    ax.bar(range(len(lats)), med, yerr=err, color="tab:blue", capsize=3, label="median (95%)")
    ax.plot(range(len(lats)), [l["p90"] for l in lats], "v", color="tab:red", label="p90")
    ax.set_xticks(range(len(lats)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("seconds")
    ax.set_title("your git commands, per set of git-tune values in force")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _short(values: Mapping[str, object]) -> str:
    return "\n".join(f"{k.split('.')[-1]}={v}" for k, v in sorted(values.items())) or "defaults"
