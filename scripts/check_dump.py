#!/usr/bin/env python3
"""Check what csdump extracted from a vmcore against what the sample clients registered.

  check_dump.py --dir EXTRACT_DIR --message "sysrq triggered crash"

Expects (see samples/rust/coresight_panic_dump/): a committed dump; `rust-sample` holding byte
i = (i * 7 + 3) % 256 for 4096 bytes; `c-sample` holding "c sample record\\n" then 1024 bytes
i = 255 - i % 256; `rust-failing` with status partial, error -EIO (-5) and the data "half"; no
record named `rust-deleted` (it was removed with dump_del); the panic message the test triggered;
the phase times: every phase ran, in order, and the "other" phase ran one callback per record of
kind other, as many failed as those records say.
"""

import argparse
import json
import os
import sys


class Bad(Exception):
    pass


def expected():
    rust = bytes((i * 7 + 3) % 256 for i in range(4096))
    c = b"c sample record\n" + bytes(255 - i % 256 for i in range(1024))
    return {"rust-sample": rust, "c-sample": c}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True)
    p.add_argument("--message", required=True)
    a = p.parse_args()
    try:
        with open(os.path.join(a.dir, "summary.json")) as f:
            s = json.load(f)
        if s["commit"]["state"] != "ok":
            raise Bad(f"dump not committed: {s['commit']}")
        records = {r["name"]: r for r in s["records"]}
        for name, data in expected().items():
            r = records.get(name)
            if r is None:
                raise Bad(f"no record named {name} (records: {sorted(records)})")
            if r["status"] != "ok" or not r["crc_ok"]:
                raise Bad(f"record {name}: status {r['status']}, crc_ok {r['crc_ok']}")
            with open(os.path.join(a.dir, r["file"]), "rb") as f:
                got = f.read()
            if got != data:
                raise Bad(f"record {name}: {len(got)} bytes differ from the {len(data)} expected")
        r = records.get("rust-failing")
        if r is None:
            raise Bad("no record for the failing callback")
        if r["status"] != "partial" or r["error"] != -5:
            raise Bad(f"failing callback recorded as {r['status']} / {r['error']}, expected partial / -5")
        with open(os.path.join(a.dir, r["file"]), "rb") as f:
            if f.read() != b"half":
                raise Bad("failing callback's partial data is not 'half'")
        if "rust-deleted" in records:
            raise Bad("the registration removed with dump_del still has a record")
        msg = (s.get("panic") or {}).get("message")
        if msg != a.message:
            raise Bad(f"panic message {msg!r}, expected {a.message!r}")
        ph = s.get("phases")
        if not ph:
            raise Bad("no phase times in the dump")
        phases = {p["phase"]: p for p in ph["phases"]}
        order = ["stop-sources", "sample-cpus", "drain-sinks", "other", "commit"]
        if list(phases) != order or not all(p["ran"] for p in phases.values()):
            raise Bad(f"phase times: {ph}")
        starts = [phases[n]["start_us"] for n in order]
        if starts != sorted(starts) or ph["frequency_hz"] <= 0:
            raise Bad(f"phase times out of order or without a counter frequency: {ph}")
        other = [r for r in s["records"] if r["kind"] == "other"]
        failed = [r for r in other if r["status"] != "ok"]
        if (phases["other"]["callbacks"], phases["other"]["errors"]) != (len(other), len(failed)):
            raise Bad(f"phase other ran {phases['other']['callbacks']} callbacks ({phases['other']['errors']} "
                      f"failed); the dump has {len(other)} other records ({len(failed)} not ok)")
        print(f"dump checked: {len(s['records'])} records, samples byte-exact, failing callback "
              f"isolated, deleted registration absent, panic message {msg!r}, phases in order "
              f"({ph['total_us']} us in all)")
        return 0
    except (Bad, OSError, KeyError, ValueError) as e:
        print(f"error: {a.dir}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
