"""PNG plots of the sweep curves (matplotlib, an optional extra)."""
from git_tune.errors import UsageError


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'git-tune[plot]'") from None
    return plt


def _series(evaluations, x_key, group_key=None):
    groups = {}
    for e in evaluations:
        if e["value"] is None:
            continue
        g = e["point"].get(group_key) if group_key else ""
        groups.setdefault(g, {}).setdefault(e["point"][x_key], []).append(e["value"])
    return {g: sorted((x, sorted(v)[len(v) // 2]) for x, v in pts.items()) for g, pts in groups.items()}


def sweeps(calibration: dict, path: str) -> str:
    """One panel per engine sweep: seconds against its first dimension, one line per value
    of a second (categorical) one, and the cost model where the sweep fitted one."""
    plt = _pyplot()
    panels = list(calibration["sweeps"].items())
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(5 * max(1, len(panels)), 4),
                             squeeze=False)
    for ax, (name, sweep) in zip(axes[0], panels):
        x_key = sweep["dims"][0]["name"]
        group = sweep["dims"][1]["name"] if len(sweep["dims"]) > 1 else None
        for g, pts in _series(sweep["evaluations"], x_key, group).items():
            xs, ys = zip(*pts)
            ax.plot(xs, ys, "o-", label=str(g) if g else "measured")
        model, samples = sweep["facts"].get("model"), sweep["facts"].get("model_samples")
        if model and samples:
            n = sweep["facts"]["files"]
            xs = range(1, max(p[0] for p in samples) + 1)
            ys = [model["serial"] + n * model["per_item"] / min(w, model["parallelism"])
                  + w * model["per_worker"] for w in xs]
            ax.plot(list(xs), ys, "--", label="cost model")
        ax.set_title(f"engine {name} sweep: seconds vs {x_key}")
        ax.set_xlabel(x_key)
        ax.set_ylabel("seconds (median)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def verify(report: dict, path: str) -> str:
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
