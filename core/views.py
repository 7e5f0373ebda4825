"""Human-readable views of command results (the JSON is the same data, whole)."""
import time
from typing import Any, Dict, Iterable, List, Optional

Json = Dict[str, Any]     # a command's result as its JSON reads

from .output import counted, seconds, size, verbatim


def _lat(latency: Json, op: str) -> str:
    v = latency.get(op)
    return seconds(v["p50"]) if v else "-"


def storage_lines(role: str, s: Json) -> List[str]:
    devs = []

    def walk(d: Json) -> None:
        flag = "" if d["rotational"] is None else f" rotational={int(d['rotational'])}"
        devs.append(f"{d['name']}{flag}")
        for sub in d["slaves"]:
            walk(sub)

    for d in s["devices"]:
        walk(d)
    where = f"{s['fstype']} on {s['source']}" if s["source"] else s["fstype"]
    extra = f" [{', '.join(f'{k}={v}' if v else k for k, v in s['network_options'].items())}]" \
        if s["network_options"] else ""
    lines = [f"{role}: {where}{extra}{' (' + ', '.join(devs) + ')' if devs else ''}"
             f"{' read-only' if s['read_only'] else ''} -> {s['storage_class']}"]
    lat = s["latency"]
    if lat:
        lines.append("  p50: " + " · ".join(
            f"{name} {_lat(lat, op)}" for name, op in (
                ("lstat", "lstat_hit"), ("miss", "lstat_miss"), ("read 4K", "read_4k"),
                ("create", "create"), ("fsync", "fsync"), ("cold read", "cold_read"))
            if op in lat))
    lines += [f"  note: {n}" for n in s["notes"]]
    return lines


def probe_view(r: Json) -> str:
    h = r["host"]
    out = [f"Host        {h['logical_cpus']} CPUs ({h['physical_cores']} cores), "
           f"{h['effective_cores']} usable; {size(h['memory_total'])} memory, "
           f"{size(h['memory_available'])} available; load {h['load_average'][0]}"]
    out += [f"            note: {n}" for n in h["notes"]]
    peak = r.get("measured_peak")
    if peak:
        ran = "Git's defaults" if peak["value"] == "default" else f"{peak['key']}={peak['value']}"
        of = f" of the {size(peak['limit'])} it could use" if peak["limit"] else ""
        out.append(f"Memory      git's largest measured peak here: {size(peak['peak'])}{of} "
                   f"({peak['command']}, {ran})")
    rep = r["repository"]
    if rep:
        ix = rep["index"]
        where = rep["layout"]["worktree"] or rep["layout"]["git_dir"]
        if ix:
            out.append(f"Repository  {where}: {ix['entries']} files in {ix['dirs']} directories, "
                       f"depth {ix['max_depth']}; index v{ix['version']} ({size(ix['file_bytes'])}"
                       f"{', ' + ' '.join(ix['extensions']) if ix['extensions'] else ''})")
        else:
            out.append(f"Repository  {where}: no readable index")
        out.append(f"            untracked ~{rep['untracked_estimate']}; {rep['packs']} packs "
                   f"({size(rep['pack_bytes'])}), ~{rep['loose_objects']} loose objects; "
                   f"commit-graph {'yes' if rep['commit_graph'] else 'no'}"
                   f"{'; sparse' if rep['sparse_checkout'] else ''}"
                   f"{'; %d submodules' % rep['submodules'] if rep['submodules'] else ''}"
                   f"{'; %d worktrees' % rep['worktrees'] if rep['worktrees'] > 1 else ''}")
        out += [f"            note: {n}" for n in rep["notes"]]
    st = r["storage"]
    if r["same_file_system"]:
        out += ["Storage     " + l if i == 0 else "            " + l
                for i, l in enumerate(storage_lines("worktree and git dir", st["worktree"]))]
    else:
        first = True
        for role, s in st.items():
            for l in storage_lines(role.replace("_", " "), s):
                out.append(("Storage     " if first else "            ") + l)
                first = False
    c = r["cache"]
    if c:
        frac = f"{c['data_fraction'] * 100:.0f}%" if c["data_fraction"] is not None else "-"
        ratio = f"{c['metadata_ratio']}x" if c["metadata_ratio"] is not None else "-"
        out.append(f"Cache       {c['state']} (data {frac} in page cache, lstat {ratio} the hot figure)")
    g = r["git"]
    if g["version"]:
        missing = ", ".join(f"{k} {v}" for k, v in sorted(g["keys_not_understood"].items()))
        out.append(f"Git         {g['version']} at {g['binary']}; reads {len(g['keys_understood'])} "
                   f"of {len(g['keys_understood']) + len(g['keys_not_understood'])} tuning keys"
                   f"{' (needs newer: ' + missing + ')' if missing else ''}")
        for key, settings in sorted(g["values"].items()):
            last = settings[-1]
            out.append(f"            set: {key}={last['value']} ({last['scope']} {last['origin']})")
        ut = {True: "works", False: "does not work", None: "unknown"}[g["untracked_cache_works"]]
        out.append(f"            untracked cache: {ut} — {g['untracked_cache_detail']}")
        out.append(f"            fsmonitor daemon: {g['fsmonitor_detail']}")
        out.append(f"            index.skipHash: {g.get('skip_hash_detail', 'not tested')}")
    out += [f"            note: {n}" for n in g["notes"]]
    out += [f"Note        {n}" for n in r["notes"]]
    return "\n".join(out)


def _gain(g: Optional[Json]) -> str:
    if not g:
        return "-"
    return f"{g['speedup']:.2f}x ({g['low']:.2f}-{g['high']:.2f})"


def recommend_view(r: Json) -> str:
    from .output import table
    rows = [(k["key"], k["value"] if k["status"] == "set" else "-", k["git_default"],
             _gain(k["gain"]), k["reason"]) for k in r["keys"]]
    out = [f"Recommendation for git {r['git_version']} on {r['storage_class']} storage "
           f"(workload: {r['workload']})", ""]
    out += _warnings(r.get("notes", ()))
    out += [table(("key", "value", "git default", "speedup (95% CI)", "why"), rows)]
    if r["findings"]:
        out += ["", "Findings (no Git key):"] + [f"  - {f}" for f in r["findings"]]
    if r.get("notes"):
        out += ["", "Calibration notes:"] + [f"  - {n}" for n in r["notes"]]
    if r.get("spent"):
        out += ["", went(r["spent"])]
    exp = ", ".join(f"{w} {s:.2f}x" for w, s in sorted(r["expected"].items())) or "none"
    out += ["", f"Expected with the values set: {exp}; weighted for {r['workload']}: "
                f"{r['weighted_speedup']:.2f}x"]
    return "\n".join(out)


def calibration_view(c: Json) -> str:
    from .output import table
    out = [f"Calibrated {c['repository']['path']} ({c['repository']['entries']} files) on "
           f"{c['storage']['fstype']} ({c['storage']['storage_class']}), git {c['git_version']}, "
           f"{c['host']['effective_cores']} cores, cache {c['cache_state']}: {c['seconds']:.1f} s"]
    for name, s in c["sweeps"].items():
        out.append(f"  {name} sweep: {len(s['evaluations'])} measurements ({s['strategy']}, "
                   f"stopped on {s['stopped']}), best {s['best']} = {seconds(s['best_value'])}")
    rows = []
    for key, t in c["trials"].items():
        for cmp in t["comparisons"]:
            e = cmp["estimate"]
            what = cmp["workload"] + (f" ({cmp['files']} files)" if cmp["files"] else "")
            if e is None:   # git failed on one side
                failed = "fails" if cmp["fails"] == "default" else "works"
                rows.append((key, what, failed, "works" if failed == "fails" else "fails",
                             "-", f"{cmp['fails']} fails"))
                continue
            rows.append((key, what, seconds(e["median_old"]), seconds(e["median_new"]),
                         f"{e['ratio']:.3f} ({e['low']:.3f}-{e['high']:.3f})", e["verdict"]))
    if rows:
        out += ["", "Real git, Git's default vs candidate (interleaved):",
                table(("key", "workload", "default", "candidate", "ratio (95% CI)", "verdict"), rows)]
    out += [f"note: {n}" for n in c["notes"]]
    if c.get("spent"):
        out.append(went(c["spent"]))
    return "\n".join(out)


def went(spent: Json) -> str:
    """Where a calibration's budget went: the probe's parts together, then each phase,
    in the order they came."""
    phases: Dict[str, float] = {}
    for phase, s in spent.items():
        name = "probe" if phase.startswith("probe ") else phase
        phases[name] = phases.get(name, 0.0) + s
    probe = {k[len("probe "):]: v for k, v in spent.items() if k.startswith("probe ")}
    parts = ", ".join(f"{k} {v:.1f}" for k, v in probe.items() if v >= 0.05)
    return "Where the budget went: " + ", ".join(
        f"{k} {v:.1f} s" + (f" ({parts})" if k == "probe" and parts else "")
        for k, v in phases.items() if v >= 0.05)


def after_write(scope: Json) -> List[str]:
    """The last lines of every write: how to see it and how to undo it."""
    spec = scope["name"] if scope["name"] != "file" else "file:" + scope["include_file"]
    return ["see: git-tune show", f"undo: git-tune revert --scope {spec}"]


def write_view(r: Json, footer: bool = True) -> str:
    p = r["plan"]
    out = []
    for c in p["conflicts"]:
        kept = c["key"] in p["left_alone"]
        out.append(f"conflict: {c['key']}={c['value']} set in {c['scope']} config ({c['origin']})"
                   + ("; left alone (use --override)" if kept else "; written anyway (--override)"))
    from .advisor.write.configwrite import ORIGIN_WORDS
    for k in p.get("kept", ()):
        out.append(f"kept: {k['key']}={k['value']} ({ORIGIN_WORDS.get(k['origin'], k['origin'])}"
                   "); --override replaces it")
    if p.get("removed"):
        out.append("removes: " + ", ".join(f"{k}={v}" for k, v in sorted(p["removed"].items())))
    if not p["changes"]:
        out.append("nothing to change")
        return "\n".join(out)
    out.append(verbatim(p["diff"].rstrip()))
    w = r.get("written")
    if w:
        out.append(w["message"] + (f" (backup: {w['backup']})" if w["backup"] else ""))
        for k, origin in w["overridden"].items():
            out.append(f"warning: {k} is still taken from {origin}")
        if footer:
            out += after_write(w["scope"])
    elif r.get("dry_run"):
        out.append("dry run: nothing was written")
    return "\n".join(out)


def verify_view(r: Json, regions: bool = True) -> str:
    """The verification's table; with `regions`, where the time went by trace2 region."""
    from .output import table
    rows = []
    for w in r["workloads"]:
        e = w["estimate"]
        if e is None:
            rows.append((w["command"], "fails" if w["fails"] == "before" else "works",
                         "works" if w["fails"] == "before" else "fails", "-",
                         f"git fails {w['fails']}: {w['error'][:80]}"))
            continue
        rows.append((w["command"], seconds(e["median_old"]), seconds(e["median_new"]),
                     _speedup(e), e["verdict"]))
    settings = ", ".join(f"{k}={v}" for k, v in sorted(r["after"].items()))
    out = [f"Real git in {r['repo']}, {r['runs']} interleaved runs a side"
           f"{' (cold)' if r['cold'] else ''}: Git's defaults vs {settings}", ""]
    out += _warnings(r["notes"])
    out += [table(("workload", "before", "after", "speedup (95% CI)", "verdict"), rows, "lrrrl")]
    phase_rows = []
    for w in r["workloads"]:
        keys = sorted(set(w["phases_before"]) | set(w["phases_after"]))
        for k in keys:
            if k.startswith(("index/", "status/", "unpack_trees/", "children/")):
                b, a = w["phases_before"].get(k), w["phases_after"].get(k)
                fmt = (lambda x: "-" if x is None else str(int(x))) if k.startswith("children/") else seconds
                phase_rows.append((w["name"], k, fmt(b), fmt(a)))
    if phase_rows and regions:
        out += ["", "Where the time went (trace2, one traced run a side):",
                table(("workload", "region", "before", "after"), phase_rows, "llrr")]
    out += [f"note: {n}" for n in r["notes"] if not n.startswith("unreliable:")]
    return "\n".join(out)


def slower_after_write(v: Json) -> List[str]:
    """auto's verification, where a workload was slower beyond noise under the values just
    written: said after its table (auto has taken them back: `taken_back`)."""
    from .advisor.measure.verify import slower
    said = slower(v)
    if not said:
        return []
    return [f"slower with the values written: {'; '.join(said)}."]


def _speedup(e: Json) -> str:
    return f"{1 / e['ratio']:.2f}x ({1 / e['high']:.2f}-{1 / e['low']:.2f})"


def _warnings(notes: Iterable[str]) -> List[str]:
    """A busy host (hostload) is said before any figure: every one is read with it."""
    return [f"warning: {n}" for n in notes if n.startswith("unreliable:")]


def show_view(r: Json) -> str:
    if not r["applied"]:
        return "git-tune has applied nothing."
    out = []
    import time as _t
    for a in r["applied"]:
        when = _t.strftime("%Y-%m-%d %H:%M", _t.localtime(a["written"]))
        state = "STALE" if a["stale"] else "current"
        out.append(f"{a['scope']}: {a['include_file']}"
                   + (f" (included from {a['included_from']})" if a["included_from"] else "")
                   + f", written {when}, {state}")
        out += [f"  {k} = {v}" for k, v in sorted(a["settings"].items())]
        for git_dir, values in sorted(a["per_repo"].items()):
            out += [f"  {k} = {v}   (only in {git_dir})" for k, v in sorted(values.items())]
        out += [f"  on disk: {k} = {v}" for k, v in a["index_state"].items()]
        out += [f"  stale: {s}" for s in a["stale"]]
        out += [f"  to do: {t}" for t in a["todo"]]
    return "\n".join(out)


def auto_summary(r: Json) -> str:
    """What auto shows by default, before it asks and after: what it will write and what
    each value gained, what it expects, what stays Git's, the risk. Short (a screen at
    80 columns); `--explain` shows the whole table, the findings and the diff."""
    from .models import catalogue
    rec, p = r["recommendation"], r["plan"]
    out = [f"git-tune auto: {r['repo']}", f"  git {rec['git_version']}, "
           f"{rec['storage_class']} storage, workload {rec['workload']}"
           + ("; a stored calibration reused (--recalibrate redoes it)"
              if r["calibration_reused"] else "")]
    out += _warnings(rec.get("notes", ()))
    keys = {k["key"]: k for k in rec["keys"]}
    written = {**p["settings"], **{k: v for block in p["per_repo"].values()
                                   for k, v in block.items()}}
    if p["changes"] and written:
        out += ["", f"writes to {p['scope']['include_file']}:"]
        width = max(len(f"{k} = {v}") for k, v in written.items())
        for k, v in sorted(written.items()):
            g = (keys.get(k) or {}).get("gain")
            gain = f"{g['speedup']:.2f}x on {g['workload']}" if g else "kept as it was"
            out.append(f"  {f'{k} = {v}':<{width}}  {gain}")
    for k in p.get("kept", ()):
        out.append(f"  kept: {k['key']} = {k['value']} (yours; --override replaces it)")
    if p.get("removed"):
        out.append("  removes: " + ", ".join(f"{k}={v}" for k, v in sorted(p["removed"].items())))
    exp = ", ".join(f"{w} {s:.2f}x" for w, s in sorted(rec["expected"].items()))
    if exp:
        out.append(f"expected: {exp}; weighted for {rec['workload']}: "
                   f"{rec['weighted_speedup']:.2f}x")
    default = [k["key"] for k in rec["keys"] if k["status"] != "set"]
    if default:
        out.append(f"Git's defaults stay for {len(default)} keys (--explain says why)")
    short = [n for n in rec.get("notes", ()) if n.startswith("the budget ended")]
    out += short
    risky = [catalogue.lookup(k) for k in written if catalogue.lookup(k).changes]
    out.append("risk: " + ("; ".join(f"{k.name} changes {k.changes}" for k in risky) if risky
                           else "speed only: no value changes a file format or what git "
                                "notices"))
    return "\n".join(out)


def auto_preview(r: Json, explain: bool = False) -> str:
    """What auto shows before it asks: the summary, or with `explain` the recommendation
    and the diff it would write."""
    if not explain:
        return auto_summary(r)
    out = [recommend_view(r["recommendation"]), ""]
    if r["calibration_reused"]:
        out.append("(reused a fresh calibration of this host and repository; --recalibrate to redo it)")
    out.append(write_view({"plan": r["plan"], "written": None, "dry_run": False}, footer=False)
               if r["plan"]["changes"] else "")
    return "\n".join(out)


def next_steps(r: Json, demo: bool = False) -> List[str]:
    """What to try next, whatever auto found: its last lines when it wrote nothing."""
    if r["written"]:
        steps = []
    elif r["dry_run"]:
        steps = ["next: run it again without --dry-run to write these values (it asks first)"]
    elif r["message"].startswith("not written"):
        steps = ["next: run it again and answer y, or with --yes; --dry-run only looks"]
    else:       # nothing to change
        steps = ["next: `git-tune verify --set KEY=VALUE` times any value you want to try, "
                 "before and after, with real git"]
    if demo:
        steps.append("next: tune your own repository with `git-tune auto --repo PATH` "
                     "(it shows what it would write and asks first)")
    return steps


def auto_view(r: Json, preview_shown: bool = False, explain: bool = False) -> str:
    if not preview_shown and not explain:
        out = [auto_summary(r)]
        if r["written"]:
            out.append(r["written"]["message"] + (f" (backup: {r['written']['backup']})"
                                                  if r["written"]["backup"] else ""))
        return "\n".join(out + _auto_tail(r, with_message=not r["written"], explain=False))
    out = [] if preview_shown else [recommend_view(r["recommendation"]), ""]
    if r["calibration_reused"] and not preview_shown:
        out.append("(reused a fresh calibration of this host and repository; --recalibrate to redo it)")
    if preview_shown and r["written"]:
        out.append(write_view({"plan": dict(r["plan"], diff="", conflicts=[]),
                               "written": r["written"], "dry_run": False}, footer=False))
    elif not preview_shown:
        out.append(write_view({"plan": r["plan"], "written": r["written"], "dry_run": False},
                              footer=False) if r["plan"]["changes"] else "")
    return "\n".join(l for l in out if l is not None) + "\n" + "\n".join(_auto_tail(r))


def _auto_tail(r: Json, with_message: bool = True, explain: bool = True) -> List[str]:
    """auto's last lines: index rewrites, what was held back, the verification, the
    message, how to see and undo a write that stands."""
    out = []
    if r.get("index"):
        out.append(r["index"])
    out += list((r.get("held_back") or {}).values())
    if r.get("verify"):
        out += ["", verify_view(r["verify"], regions=explain)] + slower_after_write(r["verify"])
    if with_message or r.get("taken_back"):
        out.append(r["message"])
    if r["written"] and not r.get("taken_back"):   # a write's last lines: see it, undo it
        out += after_write(r["written"]["scope"])
    return [l for l in out if l is not None]


def apply_view(r: Json, show_diff: bool) -> str:
    out = []
    if r["mismatches"]:
        out.append("applied despite class mismatch (--force): " + "; ".join(r["mismatches"]))
    if r["dropped_keys"]:
        out.append("not applied (this git does not read them): " + ", ".join(r["dropped_keys"]))
    p = r["plan"]
    if not p["changes"]:
        out.append("already applied: nothing to change")
        return "\n".join(out)
    if show_diff or r["check"]:
        out.append(verbatim(p["diff"].rstrip()))
    if r["check"]:
        out.append("would change (--check: nothing was written)")
    elif r["written"]:
        out.append(r["written"]["message"])
        out += after_write(r["written"]["scope"])
    return "\n".join(out)


def merge_view(r: Json) -> str:
    out = []
    for c in r["classes"]:
        cls = ", ".join(f"{k}={v}" for k, v in c["profile"]["class"].items())
        out.append(f"{cls}: {c['hosts']} host(s)")
        for key, counts in sorted(c["spread"].items()):
            chosen = c["profile"]["settings"].get(key, "(default)")
            out.append(f"  {key} = {chosen}   spread {counts}")
        out += [f"  warning: {w}" for w in c["warnings"]]
    out += [f"wrote {f}" for f in r["files"]]
    return "\n".join(out)


def multi_view(r: Json) -> str:
    from .output import table
    rows = []
    for a in r["repos"]:
        rec = a["recommendation"]
        for k in rec["keys"]:
            if k["status"] == "set":
                shared = "shared" if k["key"] in r["common"] else "this repository"
                rows.append((a["repo"], a["entries"], k["key"], k["value"], shared))
        if not any(k["status"] == "set" for k in rec["keys"]):
            rows.append((a["repo"], a["entries"], "-", "-", "Git's defaults"))
    out = [table(("repository", "files", "key", "value", "written as"), rows)]
    w = r.get("written")
    if w:
        out.append(write_view({"plan": w["plan"], "written": w["result"], "dry_run": False}))
    return "\n".join(out)


def agent_enable_view(r: Json) -> str:
    st, c = r["state"], r["collector"]
    watch = "every repository" if st["watch_all"] else ", ".join(st["watch"])
    lines = [f"agent enabled: git's trace2 events are collected for {watch}",
             f"collector: {'running, pid ' + str(c['pid']) if c['running'] else 'not running'}"]
    if r["written"]:
        lines.append(r["written"]["message"] + " (undo: git-tune agent disable)")
    unit = r.get("service")
    if unit:
        lines.append("systemd user service git-tune-agent.service "
                     + ("installed: systemd starts the collector at login" if unit["installed"]
                        else "not installed") + (f"; {unit['note']}" if unit["note"] else ""))
    if not r.get("spool_in_memory", True):
        lines.append(f"note: no private memory file system here ($XDG_RUNTIME_DIR): each "
                     f"command's raw events, arguments included, wait on disk in "
                     f"{st['spool']} (yours alone, 0700) until the collector reads them, "
                     f"every second; at most {r['spool_max_files']} while it is stopped")
    for v in r["env_overrides"]:
        lines.append(f"note: {v} is set here, so git run from this shell sends its events there")
    return "\n".join(lines)


def agent_status_view(r: Json) -> str:
    st, c = r["state"], r["collector"]
    if not st["enabled"]:
        head = "agent disabled (git-tune agent enable --repo P | --all)"
    else:
        watch = "every repository" if st["watch_all"] else ", ".join(st["watch"])
        head = f"agent enabled for {watch}; " + ("events routed" if r["routed"] else
                                                 "events NOT routed (reverted? "
                                                 "git-tune agent enable routes them again)")
    collector = (f"collector running, pid {c['pid']}, {size(c['rss_bytes'])} resident"
                 if c["running"] else "collector not running (git-tune agent start)")
    last = r.get("last_record_at")
    lines = [head, collector, f"{r['records']} commands stored ({size(r['store_bytes'])}"
                              + (time.strftime(", the last at %Y-%m-%d %H:%M",
                                               time.localtime(last)) if last else "")
                              + f"), {r['spool_files']} event files waiting"]
    if r.get("spool_foreign"):
        n = r["spool_foreign"]
        lines.append(f"{n} {'entry' if n == 1 else 'entries'} in the spool ({r['spool']}) "
                     "not git's event files: left alone; remove them")
    if r.get("spool_full_times"):
        lines.append(f"git found the spool full {r['spool_full_times']} times and stopped "
                     "recording until it was read (is the collector running?)")
    if r.get("damaged"):
        lines.append(f"the agent's state was damaged and moved aside to {r['damaged']}: "
                     "git-tune agent enable --repo P chooses the repositories again")
    lines += [f"rehash storm in {s['repo']}: {s['commands']} commands in a row re-read "
              f"~{s['rehashed']} of {s['entries']} entries ({s['cause']}; "
              "git-tune agent report says more)" for s in r.get("storms", ())]
    lines += [f"drift in scope {d['scope']}: " + "; ".join(d["reasons"])
              + " (the agent re-tunes it when the host is idle; git-tune agent retune now)"
              for d in r.get("drift", ())]
    lines += [_retune_line(e) for e in r.get("retuned", ())[-1:]]
    exp = r.get("experiment")
    if exp:
        lines.append(f"experiment on {exp['key']}: {exp['approved'] or 'Git default'} against "
                     f"{exp['candidate']} in {exp['repo']}, now the {exp['arm']} value, "
                     f"{counted(exp['pairs'], 'pair')} of slots so far")
    return "\n".join(lines)


def _retune_line(e: Json) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.get("time", 0)))
    if e.get("experiment"):
        return f"{when} scope {e.get('scope')}: experiment {e['experiment']}: {e.get('what')}"
    if e.get("note") and not e.get("scope"):
        return f"{when} {e['note']}"
    if not e.get("retuned"):
        return f"{when} scope {e.get('scope')}: not re-tuned: {e.get('why')}"
    line = (f"{when} scope {e['scope']}: re-tuned ({'; '.join(e['reasons'])}): "
            f"{_values(e['before'])} -> {_values(e['after'])}")
    if e.get("asks"):
        line += f"; {', '.join(e['asks'])} left as you approved (git-tune auto asks)"
    if e.get("note"):
        line += f"; {e['note']}"
    return line


def agent_retune_view(r: Json) -> str:
    if not r["drift"]:
        return "nothing has drifted: git-tune's values still hold (git-tune show)"
    return "\n".join(_retune_line(e) for e in r["retuned"])


def agent_log_view(r: Json) -> str:
    if not r["retunes"]:
        return "the agent has re-tuned nothing yet"
    return "\n".join(_retune_line(e) for e in r["retunes"])


def _values(v: Json) -> str:
    return ", ".join(f"{k}={x}" for k, x in sorted(v.items())) or "Git's defaults"


def agent_report_view(r: Json) -> str:
    from .output import table
    if not r["latencies"]:
        return "no commands recorded yet (git-tune agent status)"
    out = []
    for repo in sorted({l["repo"] for l in r["latencies"]}):
        mine = [l for l in r["latencies"] if l["repo"] == repo]
        rows = [(l["command"], l["runs"],
                 f"{seconds(l['median'])} [{seconds(l['median_low'])}-"
                 f"{seconds(l['median_high'])}]", seconds(l["p90"]), l["rehashed"],
                 _values(l["values"])) for l in mine]
        out += [f"{repo}:", table(("command", "runs", "median [95%]", "p90", "rehashed",
                                   "values in force"), rows, "lrrrrl"), ""]
        went = [f"{l['command']}: " + ", ".join(
                    f"{k} {v:.0%}" for k, v in sorted(l["regions"].items(),
                                                      key=lambda kv: -kv[1])[:3])
                for l in mine if l["regions"]]
        if went:
            out += ["where the time went: " + "; ".join(dict.fromkeys(went)), ""]
    out = ["\n".join(out).rstrip()]
    for c in r["changes"]:
        out.append(f"\n{c['command']} in {c['repo']}: {c['speedup']:.2f}x "
                   f"({c['low']:.2f}-{c['high']:.2f}, {c['runs_before']} runs before, "
                   f"{c['runs_after']} after) with {_values(c['after'])} against "
                   f"{_values(c['before'])}: {c['verdict']}")
    for s in r["storms"]:
        out.append(f"\nrehash storm in {s['repo']}: {s['commands']} commands in a row re-read "
                   f"~{s['rehashed']} of {s['entries']} entries ({seconds(s['refresh_seconds'])} "
                   f"in refresh of {seconds(s['seconds'])}); cause: {s['cause']}: {s['fix']}")
    return "\n".join(out)
