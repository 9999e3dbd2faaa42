#!/usr/bin/env python3
"""Labels each (workload, peer) pair of braze_bench JSON runs "ahead", "level" or "behind".

    bench/peer_labels.py RUN.json [MORE.json ...]

The runs need repetitions with their iteration entries kept (--benchmark_repetitions=N,
without --benchmark_report_aggregates_only; --benchmark_display_aggregates_only only
shortens the console). The rule (issue 34): Braze fused is "ahead" of a peer only when
Braze's slowest repetition beats the peer's median; "behind" when the peer's slowest
repetition beats Braze's median; otherwise "level". Ratio = peer median / Braze median
(above 1: Braze faster).

Braze fused is BM_<Workload> with unfused:0 (or without the arg); a peer is
BM_<Workload>_<peer> at the same other args (the _symbolic variant is Braze's, not a peer).
Several files (say the same run with OMP_WAIT_POLICY=active and =passive): each pair is
labelled per file, Braze against the peer of the same process, and the combined label
is the least favourable to Braze (ahead only when ahead in every file).
"""
import json
import re
import statistics
import sys

UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
# Braze's own variants and device smoke tests, not peers.
BRAZE_VARIANTS = {"symbolic", "opencl_smoke", "cuda"}
# Name parts that say how a benchmark ran, not what it runs.
RUN_SETTINGS = {"min_time", "min_warmup_time", "iterations", "repeats", "threads", "real_time",
                "process_time", "manual_time"}
ORDER = {"ahead": 0, "level": 1, "behind": 2}


def parse(name):
    """BM_Softmax_torch/rows:4096 -> ("Softmax", "torch", {"rows": "4096"})."""
    head, *args = name.split("/")
    m = re.fullmatch(r"BM_([A-Za-z0-9]+?)(?:_([A-Za-z0-9_]+))?", head)
    if not m:
        return None
    kv = {}
    for a in args:
        k, _, v = a.partition(":")
        if k in RUN_SETTINGS:
            continue
        if not v:
            return None
        kv[k] = v
    return m.group(1), m.group(2), kv


def load(path):
    with open(path) as f:
        data = json.load(f)
    times = {}  # (workload, args, who) -> [ms per repetition]
    for b in data.get("benchmarks", []):
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        parsed = parse(b["run_name"] if "run_name" in b else b["name"])
        if parsed is None:
            continue
        workload, peer, kv = parsed
        if peer in BRAZE_VARIANTS:
            continue
        if peer is None:
            if kv.pop("unfused", "0") != "0":
                continue
            who = "braze"
        else:
            who = peer
        key = (workload, tuple(sorted(kv.items())), who)
        times.setdefault(key, []).append(b["real_time"] * UNIT_MS[b.get("time_unit", "ns")])
    policy = data.get("context", {}).get("omp_wait_policy", "?")
    return times, policy


def label(braze, peer):
    if max(braze) < statistics.median(peer):
        return "ahead"
    if max(peer) < statistics.median(braze):
        return "behind"
    return "level"


def main(paths):
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    rows = {}  # (workload, args, peer) -> [(file, policy, braze ms, peer ms, ratio, label)]
    for path in paths:
        times, policy = load(path)
        for (workload, args, who), peer_ms in times.items():
            if who == "braze":
                continue
            braze_ms = times.get((workload, args, "braze"))
            if not braze_ms:
                continue
            bm, pm = statistics.median(braze_ms), statistics.median(peer_ms)
            rows.setdefault((workload, args, who), []).append(
                (path, policy, bm, max(braze_ms), pm, pm / bm, label(braze_ms, peer_ms),
                 len(braze_ms), len(peer_ms)))
    print("| workload | peer | OMP wait | Braze median (slowest) ms | peer median ms | ratio "
          "| label |")
    print("|---|---|---|---|---|---|---|")
    for (workload, args, peer), runs in sorted(rows.items()):
        name = workload + "".join(f" {k}:{v}" for k, v in args)
        for _, policy, bm, bmax, pm, ratio, lab, nb, np in runs:
            print(f"| {name} | {peer} | {policy} | {bm:.4g} ({bmax:.4g}) | {pm:.4g} | "
                  f"{ratio:.2f} | {lab} |")
        if len(runs) > 1:
            worst = max((r[6] for r in runs), key=ORDER.get)
            print(f"| {name} | {peer} | all | | | | **{worst}** |")
        if min(min(r[7], r[8]) for r in runs) < 3:
            print(f"| {name} | {peer} | | fewer than 3 repetitions: the label means little "
                  "| | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
