#!/usr/bin/env python3
"""Checks a trace scenario's run: model-backed ETMs traced into a model-backed TMC, then a panic.

Reads the guest's console log and the vmcore of DIR, runs csdump on it, and checks:
- the CoreSight core listed the sim sink and the sim ETMs, and enable_sink / enable_source worked,
  including a source switched off and on again;
- csdump extracts one TMC record (status ok, outcome complete) whose data has the length and the
  FNV-1a 64 checksum (after the first frame) that the TMC model logged for what it held;
- one ETM record per CPU, saved without error, whose registers are the model's (TRCIDR0..13,
  TRCAUTHSTATUS, TRCDEVARCH of the Cortex-A57 model, read from its source), whose TRCTRACEIDR is
  the trace ID the sim logged for that CPU, and whose TRCCONFIGR is the driver's default;
- `csdump report --vmlinux` shows, for each CPU, the functions of the path the sim generated, in
  order (its last functions are the last functions of the generated path), and the CPU debug
  sample in the function where that path ended;
- `perf script --vmlinux` decodes csdump's perf.data into instruction samples in the kernel.
"""

import argparse
import json
import os
import re
import struct
import subprocess
import sys

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3


class Bad(Exception):
    pass


def fnv1a64(b):
    h = FNV_OFFSET
    for x in b:
        h ^= x
        h = (h * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def model_a57(path):
    """TRCIDR0..13, TRCAUTHSTATUS and TRCDEVARCH of the Cortex-A57 model, from its source."""
    src = open(path).read()
    m = re.search(r"pub const CORTEX_A57: Self = Self \{\s*idr: \[(.*?)\],\s*authstatus: (0x[0-9A-Fa-f_]+|\d+)", src, re.S)
    if not m:
        raise Bad(f"cannot find CORTEX_A57 in {path}")
    idr = [int(v.strip().replace("_", ""), 0) for v in m.group(1).split(",") if v.strip()]
    auth = int(m.group(2).replace("_", ""), 0)
    d = re.search(r"pub const MODEL_DEVARCH_ETMV4: u32 = (0x[0-9A-Fa-f_]+);", src)
    return idr, auth, int(d.group(1).replace("_", ""), 0)


def func(name):
    """The function of a `name+0xoff/0xsize [mod]` or `name+0xoff` symbol, without suffixes such
    as `.constprop.0` that one symbol table keeps and another drops."""
    name = name.split()[0]
    name = name.split("+")[0]
    return name.split(".")[0]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def extract(a, vmcore, out):
    """Runs `csdump extract` into OUT, which must succeed (exit 0), and returns its records."""
    r = run([a.csdump, "extract", vmcore, "-o", out])
    if r.returncode != 0:
        raise Bad(f"csdump extract failed ({r.returncode}): {r.stderr}")
    return json.load(open(os.path.join(out, "summary.json")))["records"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--csdump", required=True)
    ap.add_argument("--vmlinux", required=True)
    ap.add_argument("--etm-model", required=True)
    ap.add_argument("--cpus", type=int, required=True)
    ap.add_argument("--tmc-fault", choices=["ram-stuck"],
                    help="the sim TMC had this model fault: check that its record says so instead")
    a = ap.parse_args()
    try:
        check(a)
    except Bad as e:
        print(f"check_trace: FAIL: {e}", file=sys.stderr)
        return 1
    print("check_trace: ok")
    return 0


def check(a):
    log = open(os.path.join(a.dir, "console.log"), errors="replace").read()
    vmcore = os.path.join(a.dir, "vmcore.elf")

    # 1. sysfs: the sink and the sources, enabled through the CoreSight core.
    devs = re.search(r"coresight devices: (.*)", log)
    if not devs:
        raise Bad("the guest did not list /sys/bus/coresight/devices")
    # The guest's own console line and the kernel's copy of it may run together: keep the names.
    names = []
    for tok in devs.group(1).split():
        if not re.fullmatch(r"[a-z_]+\d+", tok):
            break
        names.append(tok)
    sinks = [n for n in names if n.startswith("tmc_et")]
    etms = sorted(n for n in names if re.fullmatch(r"etm\d+", n))
    if len(sinks) != 1 or len(etms) != a.cpus or not any(n.startswith("funnel") for n in names):
        raise Bad(f"expected one sim TMC, a funnel and {a.cpus} ETMs on the CoreSight bus, got {names}")
    if f"enabled sink {sinks[0]}: enable_sink=1" not in log:
        raise Bad(f"enable_sink on {sinks[0]} did not take")
    for e in etms:
        if f"enabled source {e}: enable_source=1" not in log:
            raise Bad(f"enable_source on {e} did not take")
    last = etms[-1]
    if f"round trip {last}: enable_source=1" not in log or "ETM tracing disabled" not in log:
        raise Bad(f"disabling and re-enabling {last} through sysfs did not work")
    # Each enable generates the unit's path again; the last one is what the panic stopped.
    ids, paths = {}, {}
    for m in re.finditer(r"sim etm(\d+): (?:trace ID (0x[0-9a-f]+): path|path function \d+: (\S+))", log):
        c = int(m.group(1))
        if m.group(2):
            ids[c] = int(m.group(2), 16)
            paths[c] = []
        else:
            paths.setdefault(c, []).append(func(m.group(3)))
    if sorted(ids) != list(range(a.cpus)):
        raise Bad(f"the sim ETMs did not all generate a path: {ids}")
    if a.tmc_fault:
        held = None
    else:
        held = re.search(r"sim tmc\d+: model holds (\d+) bytes, full (\d), fnv64 after first frame ([0-9a-f]{16})", log)
    if not held and not a.tmc_fault:
        raise Bad("the TMC model did not log what it held at the drain")

    out = os.path.join(a.dir, "extract")
    if a.tmc_fault:
        return check_tmc_fault(a, log, vmcore, out, ids)

    # 2. The TMC record equals what the model held.
    recs = extract(a, vmcore, out)
    tmc = [x for x in recs if x["kind"] == "sink"]
    if len(tmc) != 1 or tmc[0]["status"] != "ok" or not tmc[0]["crc_ok"]:
        raise Bad(f"expected one good sink record: {tmc}")
    raw = open(os.path.join(out, tmc[0]["file"]), "rb").read()
    hlen = struct.unpack_from("<H", raw, 6)[0]
    outcome = struct.unpack_from("<H", raw, 8)[0]
    trace_len = struct.unpack_from("<I", raw, 12 + 10 * 4)[0]
    data = raw[hlen:hlen + trace_len]
    if outcome != 0:
        raise Bad(f"TMC record outcome {outcome}, expected complete (0)")
    want_len, want_sum = int(held.group(1)), int(held.group(3), 16)
    if len(data) != want_len or fnv1a64(data[16:]) != want_sum:
        raise Bad(f"TMC record data ({len(data)} bytes, fnv {fnv1a64(data[16:]):016x}) differs from the model's "
                  f"({want_len} bytes, fnv {want_sum:016x})")
    if want_len == 0:
        raise Bad("the TMC model held no trace")
    print(f"TMC record: {len(data)} bytes, equal to what the model held")

    # 3. One ETM record per CPU with the model's registers.
    check_etms(a, recs, out, ids)

    # 4. The report shows each CPU's generated path.
    r = run([a.csdump, "report", vmcore, "--vmlinux", a.vmlinux, "--json", "--last", "12"])
    if r.returncode not in (0, 2):
        raise Bad(f"csdump report failed ({r.returncode}): {r.stderr}")
    rep = json.loads(r.stdout)
    for c in rep["cpus"]:
        cpu = c["cpu"]
        got = [func(f["name"]) for f in c["functions"]]
        want = paths.get(cpu, [])
        if not got:
            raise Bad(f"report: no functions decoded for CPU{cpu}")
        if want[-len(got):] != got:
            raise Bad(f"report for CPU{cpu}: {got} is not the end of the generated path {want}")
        # The CPU debug sample is where the sim CPU's path ended.
        pc = ((c.get("sample") or {}).get("pc") or {}).get("symbol")
        if not pc or func(pc) != want[-1]:
            raise Bad(f"report for CPU{cpu}: CPU debug sample at {pc}, the path ended in {want[-1]}")
        print(f"report CPU{cpu}: last functions {' -> '.join(got)}; sampled PC {pc}")
    if sorted(c["cpu"] for c in rep["cpus"]) != list(range(a.cpus)):
        raise Bad(f"report covers CPUs {[c['cpu'] for c in rep['cpus']]}")

    # 5. perf decodes csdump's perf.data with the kernel image.
    pd = os.path.join(a.dir, "perf")
    r = run([a.csdump, "perf", vmcore, "-o", pd])
    if r.returncode != 0:
        raise Bad(f"csdump perf failed ({r.returncode}): {r.stderr}")
    r = run(["perf", "script", "-i", os.path.join(pd, "perf.data"), "-k", a.vmlinux, "--itrace=i1i",
             "-F", "cpu,ip,sym"], cwd=pd)
    if r.returncode != 0:
        raise Bad(f"perf script failed ({r.returncode}): {r.stderr[-2000:]}")
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    syms = {func(ln.split()[-1]) for ln in lines if len(ln.split()) >= 3}
    want_any = {f for p in paths.values() for f in p}
    if len(lines) < 10 or not (syms & want_any):
        raise Bad(f"perf script decoded {len(lines)} samples, symbols {sorted(syms)[:10]}")
    print(f"perf script: {len(lines)} instruction samples in {len(syms)} functions")


def check_etms(a, recs, out, ids):
    """One ETM record per CPU, saved, with the model's registers and the sim's trace ID."""
    idr, auth, devarch = model_a57(a.etm_model)
    etm = {x["cpu"]: x for x in recs if x["kind"] == "source"}
    if sorted(etm) != list(range(a.cpus)):
        raise Bad(f"expected one ETM record per CPU, got CPUs {sorted(etm)}")
    for cpu, x in sorted(etm.items()):
        if x["status"] != "ok":
            raise Bad(f"ETM record of CPU{cpu}: status {x['status']}")
        b = open(os.path.join(out, x["file"]), "rb").read()
        v = struct.unpack_from("<12I", b, 0)
        got_idr = list(struct.unpack_from("<14I", b, 48))
        if v[1] != cpu or v[2] != 0:
            raise Bad(f"ETM record of CPU{cpu}: cpu {v[1]}, outcome {v[2]}")
        if got_idr != idr or v[6] != auth or v[7] != devarch:
            raise Bad(f"ETM record of CPU{cpu}: registers differ from the model's")
        if v[5] != ids[cpu]:
            raise Bad(f"ETM record of CPU{cpu}: TRCTRACEIDR {v[5]:#x}, the sim traced with {ids[cpu]:#x}")
        if v[4] != 0x41:
            raise Bad(f"ETM record of CPU{cpu}: TRCCONFIGR {v[4]:#x}, expected 0x41 (RES1 and context ID)")
    print(f"ETM records: {a.cpus}, registers equal to the model's, trace IDs {sorted(ids.values())}")


def check_tmc_fault(a, log, vmcore, out, ids):
    """The sim TMC's RAM reads never end: its record is partial with -ETIMEDOUT, its header names
    the fault and how far the drain got (RSZ words, all kept), the console says so, csdump reads
    the dump as sound and its report warns about the drain, and every ETM record is intact."""
    if "model fault: RamStuck" not in log:
        raise Bad("the sim TMC did not take the device tree's linux,sim-fault")
    m = re.search(r"tmc_et\w+: trace drain: ram_read_stuck, (\d+) trace bytes kept", log)
    if not m:
        raise Bad("the panic log does not name the stuck drain")
    # A failed device is not a damaged dump: extract still exits 0.
    recs = extract(a, vmcore, out)
    tmc = [x for x in recs if x["kind"] == "sink"]
    if len(tmc) != 1:
        raise Bad(f"expected one sink record: {tmc}")
    t = tmc[0]
    if t["status"] != "partial" or t["error"] != -110 or not t["crc_ok"]:
        raise Bad(f"stuck TMC recorded as {t['status']} / {t['error']}, expected partial / -110")
    raw = open(os.path.join(out, t["file"]), "rb").read()
    outcome, flags = struct.unpack_from("<HH", raw, 8)
    rsz = struct.unpack_from("<I", raw, 12)[0]
    trace_len, words_read = struct.unpack_from("<II", raw, 12 + 10 * 4)
    if outcome != 6 or not flags & (1 << 6):
        raise Bad(f"TMC record outcome {outcome}, flags {flags:#x}: expected ram_read_stuck (6) with RAM_STUCK")
    if words_read != rsz or trace_len != rsz * 4 or int(m.group(1)) != trace_len:
        raise Bad(f"drain kept {trace_len} bytes of {words_read} words read, RSZ {rsz}")
    r = run([a.csdump, "report", vmcore, "--vmlinux", a.vmlinux])
    want = f"drain ended ram_read_stuck (partial (ETIMEDOUT)) after {rsz} words read of RSZ {rsz}"
    if r.returncode not in (0, 2) or want not in r.stderr:
        raise Bad(f"csdump report ({r.returncode}) does not warn about the stuck drain: {r.stderr}")
    print(f"stuck TMC: record partial/-ETIMEDOUT, outcome ram_read_stuck after {words_read} words (RSZ)")
    check_etms(a, recs, out, ids)


if __name__ == "__main__":
    sys.exit(main())
