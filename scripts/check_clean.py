#!/usr/bin/env python3
"""Judge what the panic path cleaned to the point of coherency (scripts/gdb_observe.py's record).

On silicon a reset need not write dirty cache lines back, so the dump is only as good as what
was cleaned: every line of what the dump holds at the end (the container header, every record's
header and data, the commit record) that the panic path wrote must have been cleaned after it
was last written. The observation gives, for each `dcache_clean_poc` after the panic, the
physical range cleaned and the 64-byte lines of the region that changed before it, and the lines
that changed after the last clean (until the guest went quiet, or hung in a callback). The
records are found by `csdump extract` of the region as it was then.

    check_clean.py --dir RUNDIR --csdump CSDUMP [--expect-record NAME:STATUS ...]

Prints what it checked; exits 1 with "FAIL: CLEAN: ..." on the first line left dirty.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

RECORD_HEADER_SIZE = 80
COMMIT_RECORD_SIZE = RECORD_HEADER_SIZE + 40


def fail(msg):
    print(f"FAIL: CLEAN: {msg}")
    sys.exit(1)


def committed_ranges(summary):
    """(start, end, what) of every byte range the committed dump consists of."""
    c = summary["container"]
    out = [(0, c["first_record"], "the container header")]
    for r in summary["records"]:
        out.append((r["offset"], r["offset"] + RECORD_HEADER_SIZE + r["length"], f"record {r['name']}"))
    commit = summary.get("commit") or {}
    if commit.get("offset") is None:
        fail(f"the region as the observer left it has no commit record ({commit.get('state')})")
    out.append((commit["offset"], commit["offset"] + COMMIT_RECORD_SIZE, "the commit record"))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", required=True)
    p.add_argument("--csdump", required=True)
    p.add_argument("--expect-record", action="append", default=[], metavar="NAME:STATUS",
                   help="the final region's record NAME has STATUS (e.g. rust-hang:partial)")
    a = p.parse_args()

    try:
        with open(os.path.join(a.dir, "clean.json")) as f:
            obs = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"no observation to judge: {e}")
    base, size, line = obs["region"]["paddr"], obs["region"]["size"], obs["line"]
    final = os.path.join(a.dir, obs["final"]["region"])
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([a.csdump, "extract", final, "-o", tmp], capture_output=True, text=True)
        try:
            with open(os.path.join(tmp, "summary.json")) as f:
                summary = json.load(f)
        except (OSError, ValueError):
            fail(f"csdump cannot read the region the observer saved (exit {out.returncode}): "
                 f"{out.stderr.strip()[-300:]}")
    status = {r["name"]: r["status"] for r in summary["records"]}
    for want in a.expect_record:
        name, _, st = want.partition(":")
        if status.get(name) != st:
            fail(f"record {name} is {status.get(name)!r} in the region observed, not {st!r}")
    ranges = committed_ranges(summary)

    def what(offset):
        for s, e, w in ranges:
            if s <= offset < e:
                return w
        return None

    # For each line: the step before which it was last written, until a clean covers it.
    dirty = {}
    cleans_in_region = 0
    written = set()
    for i, step in enumerate(obs["steps"]):
        for off in step["changed"]:
            dirty[off] = i
            written.add(off)
        pa = step.get("pa")
        if pa is None:
            continue
        lo, hi = pa[0] - base, pa[1] - base
        if hi <= 0 or lo >= size:
            continue
        cleans_in_region += 1
        first = max(lo, 0) // line * line
        for off in range(first, min(hi, size), line):
            dirty.pop(off, None)
    for off in obs["final"]["changed"]:
        dirty[off] = len(obs["steps"])
        written.add(off)

    judged = sorted(off for off in written if any(what(o) for o in range(off, off + line)))
    if not judged:
        fail("the panic path wrote no line of the committed dump (nothing to judge)")
    commit = next(r for r in ranges if r[2] == "the commit record")
    if not any(commit[0] // line * line <= off < commit[1] for off in judged):
        fail("the commit record was never written during the panic (nothing to judge)")
    for off in judged:
        if off in dirty:
            w = next(what(o) for o in range(off, off + line) if what(o))
            step = dirty[off]
            when = (f"after the last clean (step {step} of {len(obs['steps'])})"
                    if step == len(obs["steps"]) else f"before clean step {step}")
            fail(f"region offset {off:#x} ({w}) was written {when} and never cleaned after it; "
                 f"a reset there loses it")
    print(f"clean: {len(obs['steps'])} cleans after the panic ({cleans_in_region} in the region), "
          f"{len(judged)} lines of the committed dump written ({len(summary['records'])} records, "
          f"commit at {commit[0]:#x}), each cleaned after its last write; "
          f"commit state {summary['commit'].get('state')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
