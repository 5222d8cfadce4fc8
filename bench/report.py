#!/usr/bin/env python3
"""Reads bench/run.sh's results (hey outputs, probe JSON, RSS samples) and prints one table.

  report.py RESULTS_DIR CORES CPU      the table
  report.py --step-ok HEY_OUTPUT RPS   exit 0 when that step held (p99 < 10 ms, >= 90 % of RPS)
"""
import json
import os
import re
import sys


def hey(path):
    """(p50 s, p99 s, requests/s, ok responses, errors) from a hey report, or None."""
    try:
        text = open(path).read()
    except OSError:
        return None
    pct = dict(re.findall(r"^\s+(\d+)%+ in ([\d.]+) secs", text, re.M))
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    ok = sum(int(n) for code, n in re.findall(r"\[(\d+)\]\s+(\d+) responses", text) if code.startswith("2"))
    bad = sum(int(n) for code, n in re.findall(r"\[(\d+)\]\s+(\d+) responses", text) if not code.startswith("2"))
    errors = bad + sum(int(n) for n in re.findall(r"^\s+\[(\d+)\]\s+\S", text.split("Error distribution:")[-1], re.M)) \
        if "Error distribution:" in text else bad
    if "50" not in pct or rps is None:
        return None
    return float(pct["50"]), float(pct.get("99", pct["50"])), float(rps.group(1)), ok, errors


def step_ok(path, rps):
    r = hey(path)
    return r is not None and r[1] < 0.010 and r[2] >= 0.9 * rps and r[4] == 0


def read(path, default=None):
    try:
        return open(path).read().strip()
    except OSError:
        return default


def main(results, cores, cpu):
    targets = [t for t in ["direct", "switchyard", "switchyard-anthropic", "litellm", "portkey"]
               if os.path.exists(f"{results}/{t}.c1.txt")]
    rows = {}
    for t in targets:
        c1, fixed = hey(f"{results}/{t}.c1.txt"), hey(f"{results}/{t}.fixed1k.txt")
        steps = sorted(int(m.group(1)) for f in os.listdir(results)
                       if (m := re.match(rf"{re.escape(t)}\.step(\d+)\.txt$", f)))
        held = [s for s in steps if step_ok(f"{results}/{t}.step{s}.txt", s)]
        stream = json.loads(read(f"{results}/{t}.stream.json", "null") or "null")
        rows[t] = {
            "c1": c1, "fixed": fixed,
            "max_rps": max((hey(f"{results}/{t}.step{s}.txt")[2] for s in held), default=0.0),
            "stream": stream,
            "rss_idle": int(read(f"{results}/{t}.rss_idle", "0")) / 1024,
            "rss_load": int(read(f"{results}/{t}.rss_load", "0")) / 1024,
        }
    base = rows.get("direct")
    us = lambda s: s * 1e6
    print(f"\nSwitchyard comparative benchmark — {cores} cores,{cpu}; all traffic on 127.0.0.1")
    print("added = the gateway's figure minus the mock's own (direct); lower is better\n")
    head = ["target", "c=1 p50 ms", "added p50 µs", "added p99 µs", "p99 @1k rps ms", "max rps (p99<10ms)",
            "stream +first µs", "stream +gap p99 µs", "RSS idle MB", "RSS load MB"]
    print("  ".join(f"{h:>18}" if i else f"{h:<22}" for i, h in enumerate(head)))
    for t, r in rows.items():
        c1 = r["c1"]
        cells = [t]
        cells.append(f"{c1[0] * 1e3:.3f}" if c1 else "-")
        cells.append(f"{us(c1[0] - base['c1'][0]):.0f}" if c1 and base and base["c1"] and t != "direct" else "-")
        cells.append(f"{us(c1[1] - base['c1'][1]):.0f}" if c1 and base and base["c1"] and t != "direct" else "-")
        cells.append(f"{r['fixed'][1] * 1e3:.2f}" if r["fixed"] else "-")
        cells.append(f"{r['max_rps']:.0f}")
        s, bs = r["stream"], (base or {}).get("stream")
        cells.append(f"{s['first_chunk_p50_us'] - bs['first_chunk_p50_us']}" if s and bs and t != "direct" else "-")
        cells.append(f"{s['gap_p99_us'] - bs['gap_p99_us']}" if s and bs and t != "direct" else "-")
        cells.append(f"{r['rss_idle']:.1f}" if r["rss_idle"] else "-")
        cells.append(f"{r['rss_load']:.1f}" if r["rss_load"] else "-")
        print("  ".join(f"{c:>18}" if i else f"{c:<22}" for i, c in enumerate(cells)))
    sy = rows.get("switchyard")
    for peer in ["litellm", "portkey"]:
        if sy and peer in rows and rows[peer]["max_rps"]:
            print(f"\nswitchyard / {peer}: max rps x{sy['max_rps'] / rows[peer]['max_rps']:.1f}", end="")
            if sy["c1"] and rows[peer]["c1"] and base and base["c1"]:
                mine, theirs = sy["c1"][1] - base["c1"][1], rows[peer]["c1"][1] - base["c1"][1]
                print(f", added p99 at c=1 x{theirs / max(mine, 1e-9):.1f} lower", end="")
    print()
    slow = hey(f"{results}/slow.inflight.txt")
    if slow:
        print(f"\n1 s upstream, thousands in flight: {slow[3]} answered, {slow[4]} errors, "
              f"{slow[2]:.0f} req/s, p99 {slow[1]:.2f} s; Switchyard peak RSS "
              f"{int(read(f'{results}/switchyard.rss_peak', '0')) / 1024:.1f} MB")
    soak = read(f"{results}/soak.rss")
    if soak:
        samples = [int(line.split()[1]) / 1024 for line in soak.splitlines() if line.strip()]
        print(f"\nsoak: RSS MB over time (every 10 s): {' '.join(f'{s:.1f}' for s in samples)}")
    missing = [p for p in ["litellm", "portkey"] if p not in rows]
    if missing:
        print(f"\nnot measured (install or start failed, see bench/.work/*.log): {', '.join(missing)}")


if __name__ == "__main__":
    if sys.argv[1] == "--step-ok":
        sys.exit(0 if step_ok(sys.argv[2], int(sys.argv[3])) else 1)
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
