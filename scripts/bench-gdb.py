#!/usr/bin/env python3
"""Benchmark of `csdump gdb`: the time from GDB's `target remote | csdump gdb ...` to the end of
the first `record instruction-history` (the stub decodes the dump, GDB connects, enables branch
trace, reads the panicking CPU's whole trace and computes its history), on the largest trace the
end-to-end scenarios produced (their run directories with a vmcore and the plugin's tmc.bin; the
vmlinux is the build tree whose build ID the vmcore names). Target: under 1 s.

Prints, for each of --runs runs, the time and its parts as GDB's own clock saw them (connect:
the stub's decode and GDB's handshake; history: fetching and computing the branch trace), and
the median; writes them to $CSPD_CACHE/bench/gdb.txt too.

    scripts/bench-gdb.py [--runs 5] [--csdump target/release/csdump] [--scenario NAME] [--last N]
"""

import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_trace  # noqa: E402

CACHE = os.environ.get("CSPD_CACHE", "/var/tmp/coresight-panic-dump")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_S = 1.0


def largest_run(runs, only=None):
    """(trace bytes, run dir) of the scenario run with the most trace."""
    best = None
    for d in sorted(glob.glob(os.path.join(runs, "*"))):
        if only and os.path.basename(d) != only:
            continue
        tmc, core = os.path.join(d, "tmc.bin"), os.path.join(d, "vmcore.elf")
        if os.path.isfile(tmc) and os.path.isfile(core) and check_trace.is_elf(core):
            n = os.path.getsize(tmc)
            if best is None or n > best[0]:
                best = (n, d)
    return best


def vmlinux_for(vmcore):
    want = check_trace.Vmcore(vmcore).info.get("BUILD-ID")
    for v in sorted(glob.glob(os.path.join(CACHE, "build-*", "vmlinux"))):
        have = check_trace.build_id(v)
        if want and have and want.startswith(have[:len(want)]):
            return v
    return None


def one_run(csdump, vmcore, vmlinux, last):
    py = ("python import time; t0 = time.monotonic()",
          "python t1 = time.monotonic()",
          "python t2 = time.monotonic()",
          "python t3 = time.monotonic(); "
          "print('BENCH connect %.3f enable %.3f history %.3f total %.3f' % "
          "(t1 - t0, t2 - t1, t3 - t2, t3 - t0))")
    args = ["gdb-multiarch", "-batch", "-nx", "-ex", "set pagination off", "-ex", f"file {vmlinux}",
            "-ex", py[0], "-ex", f"target remote | {csdump} gdb {last} {vmcore} --vmlinux {vmlinux}",
            "-ex", py[1], "-ex", "record btrace bts", "-ex", py[2],
            "-ex", "record instruction-history", "-ex", py[3], "-ex", "info record"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    m = re.search(r"BENCH connect ([\d.]+) enable ([\d.]+) history ([\d.]+) total ([\d.]+)", r.stdout)
    if not m:
        raise SystemExit(f"bench-gdb: GDB did not finish the history:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    rec = re.search(r"Recorded (\d+) instructions in (\d+) functions \((\d+) gaps\)", r.stdout)
    decode = re.search(r"decoded in ([\d.]+) s", r.stderr)
    return ([float(x) for x in m.groups()], rec.groups() if rec else None,
            float(decode.group(1)) if decode else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--csdump", default=os.path.join(REPO, "target/release/csdump"))
    ap.add_argument("--scenario", help="this scenario's run instead of the largest")
    ap.add_argument("--last", type=int, help="csdump gdb --last N (default: csdump's default window)")
    a = ap.parse_args()
    if shutil.which("gdb-multiarch") is None:
        raise SystemExit("bench-gdb: gdb-multiarch is missing: run scripts/setup.sh")
    if not os.access(a.csdump, os.X_OK):
        raise SystemExit(f"bench-gdb: {a.csdump} is missing: cargo build --release -p csdump")
    best = largest_run(os.path.join(CACHE, "e2e"), a.scenario)
    if not best:
        raise SystemExit("bench-gdb: no end-to-end trace run with a vmcore: run scripts/e2e.sh first")
    size, d = best
    vmcore = os.path.join(d, "vmcore.elf")
    vmlinux = vmlinux_for(vmcore)
    if not vmlinux:
        raise SystemExit(f"bench-gdb: no build-*/vmlinux has the build ID of {vmcore}: run its scenario again")
    window = "the default window" if a.last is None else f"--last {a.last}"
    out = [f"csdump gdb benchmark: {os.path.basename(d)} ({size // 1024} KiB of trace, {window}), {vmlinux}",
           "time from `target remote` to the end of the first `record instruction-history`:"]
    print(out[0])
    print(out[1])
    totals = []
    for i in range(a.runs):
        last = f"--last {a.last}" if a.last is not None else ""
        (connect, enable, hist, total), rec, decode = one_run(a.csdump, vmcore, vmlinux, last)
        totals.append(total)
        what = (f"  run {i + 1}: {total:.3f} s (connect {connect:.3f} s, of which csdump's decode "
                f"{decode if decode is not None else '?'} s; record btrace {enable:.3f} s; history {hist:.3f} s)")
        if rec and i == 0:
            what += f"; {rec[0]} instructions in {rec[1]} functions, {rec[2]} gaps"
        print(what)
        out.append(what)
    med = statistics.median(totals)
    verdict = f"median {med:.3f} s, best {min(totals):.3f} s (target: under {TARGET_S:.0f} s: " + \
        ("met" if med < TARGET_S else "NOT met") + ")"
    print(verdict)
    out.append(verdict)
    os.makedirs(os.path.join(CACHE, "bench"), exist_ok=True)
    with open(os.path.join(CACHE, "bench", "gdb.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
