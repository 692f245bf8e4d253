#!/usr/bin/env python3
"""Checks a trace scenario's run against the emulated hardware: the production drivers traced on
the QEMU CoreSight plugin's components (scripts/qemu.py --coresight), then the kernel panicked.

Everything is compared with what the plugin (tools/qemu-coresight) says the emulated hardware did,
never with something the harness generated:
- sysfs: the TMC (tmc_etf0, or --sink), the funnel and one ETM per CPU on the CoreSight bus,
  enable_sink / enable_source worked, including a source switched off and on again; with
  --perf-session (perf-panic) the guest's `perf record --snapshot -a` through the sink owns them
  instead: perf recorded, nothing was enabled through sysfs, sysfs read the sink and every source
  as not enabled there, and the plugin saw each ETM enabled once (by perf, whose CPU-wide events
  stay scheduled on their CPU until the panic); everything below is judged as for sysfs;
- the dump's TMC record (csdump extract) equals tmc.bin, what the emulated trace RAM held when
  capture stopped (plugin.log "tmc stopped: N bytes held, full B"): byte for byte, except that a
  wrapped buffer's first 16 bytes are the barrier packet the driver writes there;
- each CPU's ETM record holds the trace ID and TRCCONFIGR the driver programmed (plugin.log
  "etm N: enabled, trace id .., TRCCONFIGR ..", the last enable of that CPU);
- each CPU debug record's PC is the sample the plugin says that EDPCSR read returned;
- ground truth: for each CPU, every branch, waypoint and exception csdump decodes from the dump
  (the whole window, from the buffer's first synchronisation on) equals the newest
  `taken`/`waypoint`/`exception` events of truth.json for that CPU (written by the plugin when that
  CPU's ETM stopped; it keeps every event whose bytes the sink may hold, truth_bytes): same
  (from, to) pairs, in order, no extra; only user space, which the vmcore does not serve, is left
  out (csdump must lose the flow there and nowhere else), and the truth must reach back to the
  oldest decoded event;
- a TMC-ETR (--sink tmc_etr0): its record (payload etr) and the trace csdump unwraps from it
  (extract's trace file, read from where --etr-from says: the record's copy, the capture kernel's
  device dump, the buffer attached to last_dump, the vmcore's memory) equal the buffer the plugin
  wrote, oldest byte first (tmc.bin, "tmc stopped ... (etr: DBA, RSZ)"): byte for byte after the
  barrier packet a wrapped buffer starts with, and the whole buffer decodes without one decoder
  error; with --etr-wrapped the buffer must have wrapped, and the decode is continuous across the
  wrap point: for each CPU, the branches decoded from the bytes before the wrap point (the trace
  cut there) are followed, in the decode of the whole trace, by the ones after it exactly as the
  CPU executed them (a run of the ground truth across the wrap point; a record that does not
  reach back that far is named as the harness's sizing error, not as a splice);
  with --etr-truncated (a DMA buffer larger than the slot)
  the record is partial/-ENOSPC, keeps the newest bytes of the buffer that fit its slot and
  nothing past it;
- on the panicking CPU the decoded functions run through the given ones (--through, e.g.
  sysrq_handle_crash then panic) in that order;
- the CPU debug sample of every other CPU is an address that CPU executed (its truth or its
  decoded ranges);
- with CONFIG_RANDOMIZE_BASE=y in the kernel's .config, csdump found a non-zero KASLR offset;
- `perf script -k vmlinux` decodes csdump's perf.data;
- with --hw-stop FUNCS (the ETMs' ViewInst stop points at the crash path's entries): the plugin's
  truth says the panicking CPU's start/stop logic stopped its trace (viewinst.ended_by
  "stop-point") at the entry of one of FUNCS, the last branch csdump decodes for that CPU goes
  there (nothing after it: no console or CPU debug code), and csdump reports the stop reached;
  with --no-hw-stop, no CPU's trace was stopped by a stop point and the panicking CPU's decoded
  trace runs on past panic()'s entry (--through's last function);
- the panic path's order, as the emulated hardware saw it (plugin.log): every ETM stopped before
  the first EDPCSR read, every EDPCSR read before the TMC stopped, and no trace byte reached the
  TMC after the last source stopped (the counters the plugin logs at each of those moments); the
  dump's phase times (csdump info) ran in that order and their callbacks match the records;
- after the commit the panicking CPU cleaned the dump to the point of coherency (the plugin counts
  its DC CVAC/CIVAC after the TMC stopped: at least one per 64-byte line of the used region)
  when the kernel says the region is cached, and the guest's stop_at refused an unknown name;
- with --budget-ms N (a CPU debug fault on every CPU): the CPU debug phase took at most N ms
  (and a little for printing), and every CPU's record says why it was not sampled.

A dump that is a region file (warm reboot) holds no kernel text as it ran, so csdump decodes
against vmlinux as built and code patched at boot decodes otherwise than it ran: there the records
and the panic path are checked, csdump must say that the text is as built, and the ground-truth
comparison is left to the scenarios with a vmcore.

With --fault, the plugin fault of the run costs only its own record, which must name it.
With --compare-only --decoded FILE..., only the ground-truth comparison runs, on decoded reports
saved by an earlier check (DIR/ground/report.json): the harness self-test alters that file, and
gives all its alterations to one run (the truth is read once).

A CPU's last branch is the one the trace ends with: csdump gives a direct branch's target from its
encoding and an indirect one's from the address packet after it; a last branch without a target
fails the comparison like any other difference.
"""

import argparse
import bisect
import hashlib
import itertools
import json
import mmap
import os
import re
import shutil
import struct
import subprocess
import sys

KERNEL_VA = 0xFFFF_0000_0000_0000
TRUTH_KINDS = ("taken", "waypoint", "exception")
# The debug interface faults and how the driver (and csdump) name the sample's outcome.
DEBUG_FAULTS = {"debug-power-off": "powered down", "debug-ignore-corepurq": "powered down",
                "debug-double-lock": "OS double lock"}
# The delay between two polls of a CPU's power-up (POWER_UP_DELAY_US in cpu_debug/hw.rs).
POWER_UP_DELAY_MS = 1
# The TMC faults and the drain outcome each must give.
TMC_FAULTS = {"tmc-rrd-stuck": 6, "tmc-never-ready": 5, "tmc-flush-stuck": 4, "tmc-rrd-never-empty": 6}
# TMC faults whose partial record still holds the trace: it is decoded and judged like any other.
TMC_FAULTS_WITH_TRACE = ("tmc-rrd-never-empty",)
BARRIER = struct.pack("<4I", *([0x7FFFFFFF] * 4))
TMC_OUTCOMES = {0: "complete", 1: "not_enabled", 2: "not_circular_buffer", 3: "locked",
                4: "flush_timeout", 5: "ready_timeout", 6: "ram_read_stuck", 7: "truncated"}


class Bad(Exception):
    pass


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def func(name):
    """The function of `name+0xoff/0xsize [mod]`, without suffixes such as `.constprop.0`."""
    return name.split()[0].split("+")[0].split(".")[0]


# --- the vmcore: physical memory, VMCOREINFO, kernel page tables -------------------------------

class Vmcore:
    def __init__(self, path):
        self.f = open(path, "rb")
        self.m = mmap.mmap(self.f.fileno(), 0, access=mmap.ACCESS_READ)
        m = self.m
        if m[:4] != b"\x7fELF":
            raise Bad(f"{path} is not an ELF vmcore")
        phoff, = struct.unpack_from("<Q", m, 32)
        phentsize, phnum = struct.unpack_from("<HH", m, 54)
        self.loads, self.info = [], {}
        for i in range(phnum):
            t, _, off, _va, pa, fsz, _msz, _ = struct.unpack_from("<IIQQQQQQ", m, phoff + i * phentsize)
            if t == 1:
                self.loads.append((pa, fsz, off))
            elif t == 4:
                self._notes(off, fsz)
        if "NUMBER(kimage_voffset)" not in self.info:
            raise Bad(f"{path} has no VMCOREINFO with kimage_voffset")

    def _notes(self, off, size):
        d = self.m[off:off + size]
        i = 0
        while i + 12 <= len(d):
            nsz, dsz, _ = struct.unpack_from("<III", d, i)
            name = d[i + 12:i + 12 + nsz].rstrip(b"\0")
            o = i + 12 + ((nsz + 3) & ~3)
            if name == b"VMCOREINFO":
                for line in d[o:o + dsz].decode(errors="replace").splitlines():
                    k, _, v = line.partition("=")
                    self.info[k] = v
            i = o + ((dsz + 3) & ~3)

    def num(self, key):
        v = self.info[key]
        return int(v, 16) if key.startswith("SYMBOL(") else int(v, 0)

    def read_phys(self, pa, n):
        for base, size, off in self.loads:
            if base <= pa and pa + n <= base + size:
                return self.m[off + pa - base:off + pa - base + n]
        return None

    def image_pa(self, va):
        """Physical address of a kernel image address (text, swapper_pg_dir)."""
        return va - self.num("NUMBER(kimage_voffset)")

    def mappings(self, lo, hi):
        """(va, pa, size) of every valid mapping in [lo, hi) of the kernel page tables: 4 KiB
        granule, 48-bit kernel VAs (TCR_EL1.T1SZ 16, four levels from swapper_pg_dir)."""
        if self.num("NUMBER(TCR_EL1_T1SZ)") != 16 or self.num("PAGESIZE") != 4096:
            raise Bad("only 48-bit kernel VAs with 4 KiB pages are walked")
        out = []

        def walk(table_pa, level, va_base):
            shift = 39 - 9 * level
            t = self.read_phys(table_pa, 4096)
            if t is None:
                return
            for i in range(512):
                va = va_base | (i << shift)
                if va + (1 << shift) <= lo or va >= hi:
                    continue
                d, = struct.unpack_from("<Q", t, i * 8)
                if not d & 1:
                    continue
                pa = d & 0x0000FFFFFFFFF000
                if level == 3:
                    if d & 2:
                        out.append((va, pa, 4096))
                elif d & 2:
                    walk(pa, level + 1, va)
                elif level in (1, 2):
                    out.append((va, pa & ~((1 << shift) - 1), 1 << shift))

        walk(self.image_pa(self.num("SYMBOL(swapper_pg_dir)")), 0, 0xFFFF000000000000)
        return out


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def elf_sections(m):
    """(type, flags, addr, offset, size) of each section header of the ELF64 file mapped at `m`."""
    shoff, = struct.unpack_from("<Q", m, 40)
    shentsize, shnum = struct.unpack_from("<HH", m, 58)
    for i in range(shnum):
        yield struct.unpack_from("<IIQQQQ", m, shoff + i * shentsize)[1:]


# --- the plugin's side --------------------------------------------------------------------------

def plugin_log(d):
    path = os.path.join(d, "plugin.log")
    try:
        text = open(path, errors="replace").read()
    except OSError:
        raise Bad(f"no plugin log {path}")
    p = "qemu-coresight: "
    enabled, samples, stops = {}, {}, []
    for m in re.finditer(p + r"etm (\d+): enabled, trace id (0x[0-9a-f]+), TRCCONFIGR (0x[0-9a-f]+)", text):
        enabled[int(m.group(1))] = (int(m.group(2), 16), int(m.group(3), 16))
    for m in re.finditer(p + r"debug (\d+): EDPCSR read by cpu (\d+), sample (0x[0-9a-f]+)", text):
        samples[int(m.group(1))] = int(m.group(3), 16)
    for m in re.finditer(p + r"tmc stopped: (\d+) bytes held, full (true|false)"
                         r"(?: \(etr: DBA (0x[0-9a-f]+), RSZ (0x[0-9a-f]+) words\))?(?:, written to (\S+))?", text):
        stops.append((int(m.group(1)), m.group(2) == "true", m.group(5)))
    if p + "exit:" not in text:
        raise Bad(f"{path} has no exit line: QEMU did not exit through its normal path")
    return enabled, samples, stops


def truth_of(d, at_exit=False):
    """The plugin's truth: each CPU's session as its trace unit last stopped, or (at_exit) as it
    was when QEMU exited, open sessions included."""
    path = os.path.join(d, "truth.json.exit" if at_exit else "truth.json")
    try:
        t = json.load(open(path))
    except (OSError, ValueError) as e:
        raise Bad(f"cannot read the plugin's ground truth {path}: {e}")
    return {c["cpu"]: c for c in t["cpus"]}


# --- the checks ---------------------------------------------------------------------------------

def extract(a, vmcore, out):
    r = run([a.csdump, "extract", vmcore, "-o", out])
    if r.returncode != 0:
        raise Bad(f"csdump extract failed ({r.returncode}): {r.stderr}")
    summary = json.load(open(os.path.join(out, "summary.json")))
    if not a.plain_kdump:
        return summary["records"]
    return plain_kdump_records(a, summary)


def plain_kdump_records(a, summary):
    """Kdump without crash_kexec_post_notifiers (--plain-kdump): the region was committed while the
    kernel ran, no panic-time step wrote a record, each ETM record is the configuration recorded at
    enable, and the sink's record is the capture kernel's device dump. Returns the records the
    other checks read: the region's, its sink records replaced by the capture kernel's."""
    if summary.get("path") != "runtime":
        raise Bad(f"plain kdump: the dump's path is {summary.get('path')!r}, not a commit made while the "
                  "kernel ran (no panic-time step runs before kdump)")
    recs = summary["records"]
    # A CPU debug record written while the kernel ran (the CPU's MPIDR, when the device was bound)
    # is no panic-time step's.
    ran = [x["name"] for x in recs if x["kind"] in ("sink", "cpu-debug", "panic-info", "phases")
           and x["status"] != "not-run"
           and not (x["kind"] == "cpu-debug" and (x.get("origin") or {}).get("by") == "runtime")]
    if ran:
        raise Bad(f"plain kdump: records a panic-time step wrote: {ran}")
    for x in recs:
        if x["kind"] == "source" and (x.get("origin") or {}).get("by") != "runtime":
            raise Bad(f"plain kdump: ETM record {x['name']} was not recorded at enable: {x.get('origin')}")
    used = [r for c in summary["captures"] for r in c["records"] if r.get("file") and r["kind"] == "sink"]
    want = f"coresight_capture:{a.sink}"
    if [(r["name"], (r.get("origin") or {}).get("device_dump")) for r in used] != [(a.sink, want)]:
        raise Bad(f"plain kdump: expected the capture kernel's record of {a.sink} from the device dump "
                  f"{want}, csdump used {used} (device dumps: {[c['name'] for c in summary['captures']]})")
    print(f"plain kdump: no panic-time step ran (the region was committed while the kernel ran), the ETM "
          f"records hold the configuration recorded at enable, the sink record is the capture kernel's "
          f"device dump {want}")
    return [x for x in recs if x["kind"] != "sink"] + used


def sink_record(out, recs):
    tmc = [x for x in recs if x["kind"] == "sink"]
    if len(tmc) != 1 or not tmc[0]["crc_ok"]:
        raise Bad(f"expected one sound sink record: {tmc}")
    raw = open(os.path.join(out, tmc[0]["file"]), "rb").read()
    hlen = struct.unpack_from("<H", raw, 6)[0]
    outcome, flags = struct.unpack_from("<HH", raw, 8)
    rsz = struct.unpack_from("<I", raw, 12)[0]
    if tmc[0]["payload"] == "etr":
        # The ETR payload (format/etr.rs): the trace is what csdump found and unwrapped.
        trace = tmc[0].get("trace") or {}
        if not trace.get("file"):
            raise Bad(f"csdump found no trace for the ETR record: {trace.get('problem')}")
        data = open(os.path.join(out, trace["file"]), "rb").read()
        return tmc[0], outcome, flags, rsz, data, None
    trace_len, words_read = struct.unpack_from("<II", raw, 12 + 10 * 4)
    return tmc[0], outcome, flags, rsz, raw[hlen:hlen + trace_len], words_read


# ETR record flags (format/etr.rs).
ETR_IN_PLACE, ETR_WRAPPED, ETR_TRUNCATED = 1 << 0, 1 << 1, 1 << 2
ETR_HEADER_LEN = 120


def check_sysfs(a, log, fault):
    """The components on the CoreSight bus, and how the trace session was set up: through sysfs
    (enable_sink, enable_source, a source off and on again), or by the guest's perf (--perf-session)."""
    devs = re.search(r"coresight devices: (.*)", log)
    if not devs:
        raise Bad("the guest did not list /sys/bus/coresight/devices")
    names = []
    for tok in devs.group(1).split():
        if not re.fullmatch(r"[a-z_]+\d+", tok):
            break
        names.append(tok)
    want_etms = [f"etm{c}" for c in range(a.cpus) if fault != ("etm-os-lock", c)]
    etms = sorted(n for n in names if re.fullmatch(r"etm\d+", n))
    if a.sink not in names or "funnel0" not in names or etms != want_etms:
        raise Bad(f"expected {a.sink}, funnel0 and {want_etms} on the CoreSight bus, got {names}")
    if a.perf_session:
        check_perf_session(a, log, etms)
        return [int(e[3:]) for e in etms]
    if f"enabled sink {a.sink}: enable_sink=1" not in log:
        raise Bad(f"enable_sink on {a.sink} did not take")
    for e in etms:
        if f"enabled source {e}: enable_source=1" not in log:
            raise Bad(f"enable_source on {e} did not take")
    # The guest prints the round trip only if enable_source read back 0 after the disable.
    if f"round trip {etms[-1]}: enable_source=1" not in log:
        raise Bad(f"disabling and re-enabling {etms[-1]} through sysfs did not work")
    return [int(e[3:]) for e in etms]


def check_perf_session(a, log, etms):
    """The session belongs to the guest's perf (cspd.perf=panic): perf record --snapshot on every
    CPU through the sink was recording (it answered the guest's ping after enabling its events),
    nothing was enabled through sysfs, and sysfs read the sink and every source as not enabled
    there while perf recorded; the plugin saw each ETM enabled once (perf's CPU-wide events stay
    scheduled on their CPU, idle or not: one session per CPU up to the panic)."""
    m = re.search(r"CSPD: perf: recording \(pid \d+\): perf record (.*)", log)
    if not m:
        raise Bad("the guest's perf did not record (no 'perf: recording' line): no perf session")
    if "--snapshot" not in m.group(1) or f"@{a.sink}" not in m.group(1) or not m.group(1).rstrip().endswith(" -a"):
        raise Bad(f"the guest's perf recorded '{m.group(1).strip()}', not a CPU-wide snapshot session through {a.sink}")
    if re.search(r"CSPD: enabled (sink|source) ", log):
        raise Bad("the guest enabled a sink or source through sysfs beside perf's session")
    st = re.search(r"CSPD: perf: sysfs while perf records:(.*)", log)
    if not st:
        raise Bad("the guest did not read the sink's and sources' sysfs state while perf recorded")
    seen = {f"{dev}/{attr}": v for dev, attr, v in re.findall(r"(\S+) (enable_\w+)=(\S+)", st.group(1))}
    want = {f"{a.sink}/enable_sink": "0", **{f"{e}/enable_source": "0" for e in etms}}
    got = {k: seen.get(k) for k in want}
    if got != want:
        raise Bad(f"while perf recorded, sysfs read {got}: perf owns the sink and the sources, sysfs should "
                  f"read them as not enabled there ({want})")
    busy = re.search(r"CSPD: perf: sysfs enable_source etm1 while perf records: (.*)", log)
    if not busy or "Device or resource busy" not in busy.group(1):
        raise Bad("a sysfs session on etm1 while perf recorded was not refused with EBUSY: "
                  + (busy.group(1) if busy else "the guest did not try"))
    if "CSPD: perf: still recording after the refused sysfs session" not in log:
        raise Bad("perf stopped answering after the refused sysfs session")
    enables = {}
    for c in re.findall(r"qemu-coresight: etm (\d+): enabled", open(os.path.join(a.dir, "plugin.log"),
                                                                    errors="replace").read()):
        enables[int(c)] = enables.get(int(c), 0) + 1
    once = {int(e[3:]): 1 for e in etms}
    if enables != once:
        raise Bad(f"the plugin saw the ETMs enabled {enables} times: one perf session per CPU expected ({once})")
    print(f"perf session: '{m.group(1).strip()}' recorded, sysfs read {a.sink} and {', '.join(etms)} as not "
          "enabled there and was refused a session on etm1 (EBUSY), and the plugin saw each ETM enabled once "
          "(by perf)")


def check_etr(a, out, recs, stops, rep, region, vmcore=None, truth=None, cpus=()):
    """The ETR record and its trace against the buffer the plugin wrote (tmc.bin, oldest first)."""
    rec, outcome, flags, rsz, data, _ = sink_record(out, recs)
    if rec["payload"] != "etr" or rec["name"] != a.sink:
        raise Bad(f"the sink record is {rec['name']} with a {rec['payload']} payload, not {a.sink}'s ETR record")
    trace = rec["trace"]
    if a.etr_from and a.etr_from not in (trace.get("from") or ""):
        raise Bad(f"csdump read the ETR trace from {trace.get('from')!r}, not from {a.etr_from!r}")
    if not stops:
        raise Bad("the plugin never said the ETR stopped (plugin.log 'tmc stopped')")
    held, full, path = stops[-1]
    if not path:
        raise Bad("the plugin did not write the ETR's buffer (tmc_dump=)")
    ram = open(path, "rb").read()
    if len(ram) != held or held == 0:
        raise Bad(f"tmc.bin holds {len(ram)} bytes, the plugin said {held}")
    want_full = ram if not full else BARRIER + ram[16:]
    if a.etr_truncated:
        if rec["status"] != "partial" or rec["error"] != -28 or outcome != 7 or not flags & ETR_TRUNCATED:
            raise Bad(f"ETR record {rec['status']}/{rec['error']}, outcome {outcome}, flags {flags:#x}: "
                      "expected partial/-ENOSPC, truncated (a buffer larger than the slot)")
        if flags & ETR_IN_PLACE:
            raise Bad("a DMA buffer's trace was not copied")
        # Never more than the slot: the record's length is within its capacity, and holds the
        # header and the trace only.
        if rec["length"] > rec["capacity"] or rec["length"] != ETR_HEADER_LEN + len(data):
            raise Bad(f"ETR record length {rec['length']}, capacity {rec['capacity']}, {len(data)} trace bytes")
        if len(data) >= held or len(data) + 16 <= rec["capacity"] - ETR_HEADER_LEN:
            raise Bad(f"{len(data)} bytes kept of a {held} byte buffer in a slot of {rec['capacity']}: "
                      "expected the newest frames that fill the slot")
        want = BARRIER + ram[len(ram) - len(data) + 16:]
        if data != want:
            raise Bad("the ETR record's trace is not the newest bytes of the buffer the plugin wrote")
        print(f"ETR record: a {held} byte buffer in a {rec['capacity']} byte slot: the newest {len(data)} "
              f"bytes kept (barrier first), equal to the end of the plugin's buffer; record partial/-ENOSPC, "
              "nothing written past the slot")
    else:
        if rec["status"] != "ok" or outcome != 0:
            raise Bad(f"ETR record {rec['status']}, outcome {outcome}: expected ok/complete")
        if data != want_full:
            raise Bad(f"the ETR trace csdump unwrapped ({len(data)} bytes) differs from the buffer the plugin "
                      f"wrote ({held} bytes, full {full})")
        print(f"ETR record: {held} bytes of trace, equal to the buffer the plugin wrote, oldest first"
              + (" (wrapped: barrier packet, then the buffer from RWP on)" if full else ""))
    if a.etr_wrapped and not (full and flags & ETR_WRAPPED):
        raise Bad(f"the ETR buffer did not wrap (plugin full {full}, record flags {flags:#x}): "
                  "the scenario must wrap it")
    if region:
        # Decoded against vmlinux as built (a region file holds no kernel text): code patched at
        # boot may not match; the decode is judged where there is a vmcore.
        print(f"ETR trace read from {trace['from']}; {rsz * 4} byte buffer")
        return
    if rep["decoder_error_count"]:
        raise Bad(f"the ETR trace decodes with {rep['decoder_error_count']} decoder errors: "
                  f"{rep['decoder_errors'][:3]}")
    print(f"ETR trace read from {trace['from']}; {rsz * 4} byte buffer; the whole trace decodes "
          "without a decoder error")
    if a.etr_wrapped and not a.etr_truncated:
        # The wrap point in the trace: where the bytes from DBA on follow the ones up to the end.
        raw = open(os.path.join(out, rec["file"]), "rb").read()
        rwp, dba = struct.unpack_from("<QQ", raw, 56)
        check_wrap_continuity(a, vmcore, data, rsz * 4 - (rwp - dba), truth, cpus)


def branch_tuples(rc):
    h = lambda x: int(x["addr"], 16) if x else None
    return [(h(b["from"]), h(b["to"]), b["kind"] == "exception") for b in rc["branches"]]


def find_run(hay, needle, start=0):
    """The first index >= start at which `needle` is a contiguous run of `hay`, or -1."""
    n = len(needle)
    for i in range(start, len(hay) - n + 1):
        if hay[i] == needle[0] and hay[i:i + n] == needle:
            return i
    return -1


def check_wrap_continuity(a, vmcore, data, wrap_at, truth, cpus):
    """The decode of a wrapped ETR buffer is continuous across its wrap point (see the module
    documentation): a splice in the wrong place shows as a decoded run that the CPU never
    executed. The same check on the buffer spliced where the ETR's memory ends (the bytes as they
    lie from DBA, the first error a reader could make) must fail, or the check proves nothing."""
    snap = os.path.join(a.dir, "wrap-snapshot" + a.tag)
    r = run([a.csdump, "snapshot", vmcore, "-o", snap, "--vmlinux", a.vmlinux])
    if r.returncode not in (0, 3):
        raise Bad(f"csdump snapshot failed ({r.returncode}): {r.stderr[-1000:]}")
    trace_file = os.path.join(snap, "cstrace.bin")
    if open(trace_file, "rb").read() != data:
        raise Bad("csdump's snapshot trace is not the trace extract wrote")
    checked = wrap_run(a, snap, data, wrap_at, truth, cpus)
    print(f"wrap point at trace byte {wrap_at:#x}: on CPU{', CPU'.join(map(str, checked))} the 16 branches "
          "decoded before it and the 32 after it are a run of what the CPU executed: no gap")
    # The sizing self-test: a record that keeps only its newest 40 events does not reach back
    # to the window, and must be named so, not taken for a splice.
    shallow = {c: dict(t, events=t["events"][-40:]) for c, t in truth.items()}
    try:
        wrap_run(a, snap, data, wrap_at, shallow, checked[:1])
    except Bad as e:
        if "does not reach back to the wrap point" not in str(e):
            raise Bad(f"the wrap check took a record too shallow for the window for something else: {e}")
        print(f"wrap check self-test: a record too shallow is named as a sizing error: {str(e)[:120]}")
    else:
        raise Bad("the wrap check passed with a record that does not reach back to the wrap point")
    # The self-test: the buffer as it lies in memory (from DBA), barrier first, spliced at RWP.
    start = len(data) - wrap_at
    physical = BARRIER + (data[wrap_at:] + data[:wrap_at])[16:]
    try:
        wrap_run(a, snap, physical, start, truth, cpus)
    except Bad as e:
        if "not a run of what the CPU executed" not in str(e):
            raise Bad(f"the wrap check's self-test failed for another reason than the splice: {e}")
        print(f"wrap check self-test: the buffer spliced at RWP instead (as it lies from DBA) is caught: {str(e)[:120]}")
        return
    finally:
        with open(trace_file, "wb") as f:
            f.write(data)
    raise Bad("the wrap check passed a buffer spliced in the wrong place: it cannot be trusted")


# csdump's decodes of the wrap check's traces, by (trace, branches kept): the sizing self-test
# judges the same trace as the check with a shallower record, and needs no second decode.
_DECODES = {}


def wrap_run(a, snap, data, wrap_at, truth, cpus):
    """For each CPU, the branches decoded before `wrap_at` are followed in the decode of all of
    `data` by a run of the ground truth; returns the CPUs judged."""
    trace_file = os.path.join(snap, "cstrace.bin")

    def decoded(trace, last):
        key = (hashlib.sha256(trace).digest(), last)
        if key in _DECODES:
            return _DECODES[key]
        with open(trace_file, "wb") as f:
            f.write(trace)
        r = run([a.csdump, "report", snap, "--json", "--last", str(last)])
        if r.returncode not in (0, 3):
            raise Bad(f"csdump report of the snapshot failed ({r.returncode}): {r.stderr[-1000:]}")
        _DECODES[key] = {c["cpu"]: branch_tuples(c) for c in json.loads(r.stdout)["cpus"]}
        return _DECODES[key]

    full = decoded(data, 1_000_000)
    cut = decoded(data[:wrap_at], 64)
    user = lambda t: any(x is not None and x < 0xFFFF000000000000 for x in t[:2])
    checked = []
    for cpu in cpus:
        before = cut.get(cpu, [])[-18:-2]
        if len(before) < 16:
            print(f"wrap point: CPU{cpu} has no trace before it")
            continue
        p = find_run(full.get(cpu, []), before)
        if p < 0:
            raise Bad(f"CPU{cpu}: the branches decoded before the wrap point are not in the decode of the whole trace")
        window = full[cpu][p:p + 16 + 32]
        if len(window) < 48:
            print(f"wrap point: CPU{cpu} has too little trace after it to judge")
            continue
        if any(user(t) for t in window):
            print(f"wrap point: CPU{cpu} runs user code there, which the kernel's memory does not decode; not judged")
            continue
        t = truth[cpu]
        tru = [(int(e["from"], 16), int(e["to"], 16), e["kind"] == "exception")
               for e in t["events"] if e["kind"] in TRUTH_KINDS]
        # How far back the window starts (branches decoded from its first to the trace's end),
        # and how far back the record reaches: a record that dropped events and keeps fewer
        # branches than that cannot hold the window, which says nothing about the trace.
        depth = len(full[cpu]) - p
        whole = t["total"] == len(t["events"])
        print(f"wrap point: CPU{cpu}: the window starts {depth} decoded branches before the trace's end; the record "
              f"keeps {len(tru)} branches ({len(t['events'])} of {t['total']} events, "
              f"{'all' if whole else 'the newest'}; depth {t.get('depth')}, sink cover {t.get('cover_bytes')} bytes)")
        if find_run(tru, window) < 0:
            if not whole and len(tru) < depth:
                raise Bad(f"CPU{cpu}: the record does not reach back to the wrap point (its window starts {depth} "
                          f"decoded branches back, the record keeps {len(tru)}): a harness sizing error, not a "
                          "verdict on the trace; size the plugin's truth to the buffer (truth_bytes)")
            raise Bad(f"CPU{cpu}: the 48 branches decoded across the wrap point (16 before it, 32 after) are not a "
                      f"run of what the CPU executed: a gap or a splice at the wrap point (the record keeps "
                      f"{len(tru)} branches, the window starts {depth} back)")
        checked.append(cpu)
    if not checked:
        raise Bad("no CPU's decode could be judged across the wrap point")
    return checked


def check_tmc(a, out, recs, stops):
    rec, outcome, _, _, data, _ = sink_record(out, recs)
    if rec["status"] != "ok" or outcome != 0:
        raise Bad(f"TMC record {rec['status']}, outcome {TMC_OUTCOMES.get(outcome, outcome)}: expected ok/complete")
    if not stops:
        raise Bad("the plugin never said the TMC stopped (plugin.log 'tmc stopped')")
    held, full, path = stops[-1]
    if not path:
        raise Bad("the plugin did not write its trace RAM (tmc_dump=)")
    ram = open(path, "rb").read()
    if len(ram) != held or len(data) != held or held == 0:
        raise Bad(f"TMC record holds {len(data)} bytes, the emulated RAM {held} ({len(ram)} in {path})")
    if full:
        # A wrapped buffer: the driver (like upstream's) writes a barrier packet over the first
        # frame so that a decoder syncs at the next alignment sync; the rest is the RAM, oldest first.
        if data[:16] != BARRIER or data[16:] != ram[16:]:
            raise Bad("TMC record differs from the emulated RAM (wrapped: barrier + RAM from byte 16)")
    elif data != ram:
        raise Bad("TMC record differs from the emulated RAM")
    print(f"TMC record: {held} bytes, equal to the emulated RAM when capture stopped"
          + (" (wrapped: barrier packet, then the RAM from byte 16)" if full else ""))


def check_etms(a, out, recs, enabled, cpus, log, fault):
    """One ETM record per CPU with the registers the driver programmed; with etm-never-idle@N,
    CPU N's is partial, says idle-timeout, and the panic log names it."""
    etm = {x["cpu"]: x for x in recs if x["kind"] == "source"}
    if sorted(etm) != cpus:
        raise Bad(f"expected one ETM record for CPUs {cpus}, got {sorted(etm)}")
    for cpu, x in sorted(etm.items()):
        v = struct.unpack_from("<12I", open(os.path.join(out, x["file"]), "rb").read(), 0)
        if fault == ("etm-never-idle", cpu):
            if x["status"] != "partial" or x["error"] != -5 or v[1] != cpu or v[2] != 1:
                raise Bad(f"ETM record of CPU{cpu}: {x['status']}/{x['error']}, outcome {v[2]}: "
                          "expected partial/-EIO, outcome 1 (idle-timeout)")
            if not re.search(r"etm%d: idle-timeout" % cpu, log):
                raise Bad(f"the panic log does not name CPU{cpu}'s ETM idle timeout")
            print(f"CPU{cpu} ETM (etm-never-idle): record partial/-EIO, idle-timeout, named in the panic log")
        elif x["status"] != "ok" or v[1] != cpu or v[2] != 0:
            raise Bad(f"ETM record of CPU{cpu}: status {x['status']}, cpu {v[1]}, outcome {v[2]}")
        if cpu not in enabled:
            raise Bad(f"the plugin never saw CPU{cpu}'s ETM enabled")
        tid, cfg = enabled[cpu]
        if v[5] != tid or v[4] != cfg:
            raise Bad(f"ETM record of CPU{cpu}: TRCTRACEIDR {v[5]:#x}, TRCCONFIGR {v[4]:#x}; the driver "
                      f"programmed {tid:#x}, {cfg:#x} (plugin.log)")
    print(f"ETM records: CPUs {cpus}, trace ID and TRCCONFIGR as the driver programmed them: "
          + ", ".join(f"CPU{c} {enabled[c][0]:#x}/{enabled[c][1]:#x}" for c in cpus))


def check_report_sessions(a, rep, cpus):
    """Each ETM record says which session its unit traced for (its flags SAVED_SESSION_SYSFS or
    SAVED_SESSION_PERF), and csdump's report shows it: the guest's, sysfs or (--perf-session)
    perf."""
    want = "perf" if a.perf_session else "sysfs"
    got = {c["cpu"]: c.get("session") for c in rep["cpus"]}
    bad = {c: got.get(c) for c in cpus if got.get(c) != want}
    if bad:
        raise Bad(f"csdump's report says the units of CPUs {bad} traced for other sessions than the guest's "
                  f"{want} session")
    print(f"ETM records: every unit traced for the guest's {want} session, as csdump's report says")


def check_samples(a, rep, samples, log, fault):
    got = {c["cpu"]: c.get("sample") for c in rep["cpus"]}
    for cpu in range(a.cpus):
        s = got.get(cpu)
        if isinstance(fault, tuple) and fault[1] in (cpu, "all") and fault[0] in DEBUG_FAULTS:
            why = DEBUG_FAULTS[fault[0]]
            # Every CPU powered down: the first ones' waits may spend the whole phase budget on a
            # loaded host (it is wall time); a CPU left is then not reached, and says so.
            late = r"coresight-cpu-debug 7ff2%x000\.debug:  not sampled: not reached \(the CPU debug phase's time budget" % cpu
            if fault[1] == "all" and cpu > 0 and re.search(late, log):
                why = "not reached"
            if s and s.get("outcome") == "sampled":
                raise Bad(f"CPU{cpu}'s debug interface has fault {fault[0]}, yet csdump shows a sample: {s}")
            if not re.search(r"coresight-cpu-debug 7ff2%x000\.debug:  not sampled: %s" % (cpu, why), log):
                raise Bad(f"the panic log does not say CPU{cpu}'s debug interface was not sampled: {why}")
            if not s or not s.get("outcome", "").startswith(why):
                raise Bad(f"csdump's outcome for CPU{cpu}'s sample is {(s or {}).get('outcome')}, not {why}")
            print(f"CPU{cpu} debug ({fault[0]}): not sampled, named in the panic log and by csdump: {s['outcome']}")
            continue
        if not s or s.get("outcome") != "sampled":
            raise Bad(f"csdump has no sample for CPU{cpu}: {s}")
        pc = int(s["pc"]["addr"], 16)
        if samples.get(cpu) != pc:
            raise Bad(f"CPU{cpu} debug record PC {pc:#x}; the plugin's EDPCSR read returned "
                      f"{samples.get(cpu, 0):#x}")
    return {c: int(s["pc"]["addr"], 16) for c, s in got.items() if s and s.get("outcome") == "sampled"}


def compare_cpu(cpu, tc, rc, limit=None, untraced_to=None):
    """Every branch, waypoint and exception csdump decoded for one CPU (the whole window, from
    the buffer's first synchronisation on) against its ground truth; returns a note
    (`untraced_to`: see compare_window)."""
    if limit is not None and len(rc["branches"]) >= limit:
        raise Bad(f"CPU{cpu}: csdump report --last {limit} cut the decoded window; raise --last")
    h = lambda x: int(x["addr"], 16) if x else None
    dec, lost = [], []
    for b in rc["branches"]:
        if b["kind"] == "target":
            lost.append(h(b["to"]))
        else:
            dec.append((h(b["from"]), h(b["to"]), b["kind"] == "exception"))
    return compare_window(cpu, dec, lost, tc, untraced_to=untraced_to)


def user_space(addr):
    """Code a vmcore does not serve: user space (the kernel's page tables map only the kernel)."""
    return addr < KERNEL_VA


def compare_window(cpu, dec, lost, tc, unserved=user_space, what="user space", untraced_to=None):
    """A CPU's decoded events, oldest first ((from, to, is_exception)), and the places where the
    decoder lost the flow (`lost`: code it could not read), against its ground truth: the decode
    must equal the truth's newest events; returns a note.

    Code the decoder is not given (`unserved`: user space for a vmcore) is where it loses the
    flow (every such place must be there) and decodes no branch, so the truth's branches and
    waypoints from there are left out of the comparison; exceptions taken from there and
    returns into it are compared. Both are counted in the note.

    Code the trace unit did not trace (`untraced_to`: EL0 when the user excluded it, or what is
    outside the range set): a branch into it ends the trace there, its target known from a
    direct branch's encoding or given when an exception is taken at it before any instruction
    there ran, else not, so branches into it (and those without a target) are left out of both
    sides and counted."""
    if tc.get("reason") != "stopped":
        raise Bad(f"CPU{cpu}: the plugin's truth was not written when its ETM stopped ({tc.get('reason')})")
    served_lost = [x for x in lost if x is None or not unserved(x)]
    if served_lost:
        raise Bad(f"CPU{cpu}: the decoder lost the flow at {hx(served_lost[0])}, which is not {what}")
    if untraced_to:
        # csdump gives a direct branch's target from its encoding, an indirect one's none.
        dec = [x for x in dec if x[2] or (x[1] is not None and not untraced_to(x[1]))]
    if not dec:
        raise Bad(f"CPU{cpu}: no branch decoded")
    tru, user, gaps, into = [], 0, 0, 0
    for e in tc["events"]:
        k = e["kind"]
        if k == "gap":
            gaps += 1
            continue
        if k not in TRUTH_KINDS:
            continue
        f, t = int(e["from"], 16), int(e["to"], 16)
        if k != "exception" and unserved(f):
            user += 1
            continue
        if untraced_to and untraced_to(t):
            if k != "exception":
                into += 1
                continue
            # Into an untraced vector: the trace names the exception, no range gives its vector.
            t = None
        tru.append((f, t, k == "exception"))
    n = len(dec)
    if len(tru) < n:
        raise Bad(f"CPU{cpu}: the plugin's truth reaches back {len(tru)} events, {n} were decoded: "
                  "a sizing error of the harness (truth_bytes), not a verdict on the trace")
    tail = tru[-n:]
    if dec == tail:
        return (f"all {n} equal ({len(lost)} places where the flow went into {what}, {user} "
                f"branches of the truth from {what} not compared, {gaps} gaps in the truth"
                + (f", {into} branches into untraced code, whose target the trace does not give"
                   if untraced_to else "") + ")")
    # Say where they differ, newest first.
    i = next(i for i in range(n - 1, -1, -1) if dec[i] != tail[i])
    fmt = lambda x: f"{hx(x[0])}->{hx(x[1])}{' exc' if x[2] else ''}"
    ctx = lambda seq: " ".join(fmt(x) for x in seq[max(0, i - 2):i + 3])
    raise Bad(f"CPU{cpu}: decoded event {i} of {n} differs from the plugin's ground truth "
              f"({n - 1 - i} newer ones equal): decoded {fmt(dec[i])}, truth {fmt(tail[i])}\n"
              f"  decoded: {ctx(dec)}\n  truth:   {ctx(tail)}")


def hx(a):
    return "(no target)" if a is None else f"{a:#x}"


class Symbols:
    """Function names from System.map, at runtime addresses (vmlinux's plus the KASLR offset)."""

    def __init__(self, path, offset):
        syms = []
        for line in open(path):
            p = line.split()
            if len(p) >= 3 and p[1] in "tTwW":
                syms.append((int(p[0], 16) + offset, p[2]))
        syms.sort()
        self.addrs = [s[0] for s in syms]
        self.names = [s[1] for s in syms]
        self.end = self.addrs[-1] if syms else 0
        self.mods, self.mod_starts = [], []

    def entry(self, addr):
        """The function that starts exactly at addr, or None."""
        i = bisect.bisect_left(self.addrs, addr)
        return func(self.names[i]) if i < len(self.addrs) and self.addrs[i] == addr else None

    def add_modules(self, msyms):
        """The functions of the dump's modules, (start, end, name, module) sorted, from their .ko
        files (check_modules.module_symbols): named like vmlinux's."""
        self.mods = msyms
        self.mod_starts = [m[0] for m in msyms]

    def module_of(self, addr):
        """(function, module) of a module function holding addr, or None."""
        i = bisect.bisect_right(self.mod_starts, addr) - 1
        if i >= 0 and addr < self.mods[i][1]:
            return func(self.mods[i][2]), self.mods[i][3]
        return None

    def __call__(self, addr):
        m = self.module_of(addr)
        if m:
            return m[0]
        i = bisect.bisect_right(self.addrs, addr) - 1
        if i < 0 or addr > self.end:
            return "[module or unknown]"
        return func(self.names[i])


def check_ground(a, truth, rep, cpus):
    untraced = (lambda x: not a.range[0] <= x <= a.range[1]) if a.range else \
        (lambda x: a.exclude_range[0] <= x <= a.exclude_range[1]) if a.exclude_range else \
        (user_space if a.no_el0 else None)
    for cpu in cpus:
        rc = next((c for c in rep["cpus"] if c["cpu"] == cpu), None)
        if rc is None or cpu not in truth:
            raise Bad(f"CPU{cpu}: {'no decoded trace' if rc is None else 'no ground truth'}")
        # The range first: the comparison leaves out what the range does not hold.
        in_range = range_only(cpu, rc, *a.range) if a.range else \
            range_excluded(cpu, rc, truth[cpu], *a.exclude_range) if a.exclude_range else None
        note = compare_cpu(cpu, truth[cpu], rc, None if a.compare_only else a.last, untraced_to=untraced)
        print(f"ground truth CPU{cpu}: the decoded branches, waypoints and exceptions of the whole "
              f"window equal the plugin's: {note}")
        if a.no_el0:
            print(f"CPU{cpu}: {no_el0(cpu, rc)}")
        if in_range:
            print(f"CPU{cpu}: {in_range}")
    # The saved filter once every CPU's decode was judged: a decode that runs what was to be left
    # out is named by that judge, whichever CPU's window shows it.
    if a.no_el0 or a.range or a.exclude_range:
        for cpu in cpus:
            rc = next(c for c in rep["cpus"] if c["cpu"] == cpu)
            print(f"CPU{cpu}: {saved_filter(cpu, rc, a.no_el0, a.range, a.exclude_range)}")


def decoded_in(rc, where, exceptions):
    """The places csdump's decode of a CPU (`rc`) has in code `where` accepts, described: an
    address it could not read there, or a branch (and, with `exceptions`, an exception) from
    there."""
    out = []
    for b in rc["branches"]:
        at = b["to"] if b["kind"] == "target" else b.get("from")
        if at and (exceptions or b["kind"] != "exception") and where(int(at["addr"], 16)):
            out.append(f"{b['kind']} at {at['addr']}")
    return out


def range_only(cpu, rc, lo, hi):
    """An address range set through the ETM's sysfs (addr_range, both ends included): every
    branch and exception csdump decoded leaves from inside it, no place outside it was decoded,
    and the CPU ran the range in the window. Returns a note."""
    out = decoded_in(rc, lambda x: not lo <= x <= hi, exceptions=True)
    if out:
        raise Bad(f"CPU{cpu}: the trace was set to {lo:#x}..{hi:#x}, yet csdump decodes {len(out)} events "
                  f"outside it, the first {out[0]}")
    if not rc["branches"]:
        raise Bad(f"CPU{cpu}: no event decoded in {lo:#x}..{hi:#x}: the CPU did not run it, or it was not traced")
    return f"all {len(rc['branches'])} decoded events leave from {lo:#x}..{hi:#x}, the range set"


def no_el0(cpu, rc):
    """EL0 excluded through the ETM's sysfs `mode`: csdump's decode runs no EL0 code (no place
    where it had to read user-space instructions, no branch from there); exceptions may still
    return there. Returns a note."""
    el0 = decoded_in(rc, user_space, exceptions=False)
    if el0:
        raise Bad(f"CPU{cpu}: EL0 was excluded, yet csdump's decode runs EL0 code: {len(el0)} places, the "
                  f"first {el0[0]}")
    back = sum(1 for b in rc["branches"] if b["kind"] == "exception" and b.get("from")
               and user_space(int(b["from"]["addr"], 16)))
    return (f"no EL0 code in the decode ({len(rc['branches'])} events; {back} exceptions taken from EL0, "
            "the code before them not traced)")


def range_excluded(cpu, rc, tc, lo, hi):
    """An address range excluded through the ETM's sysfs (addr_range with its exclude flag): no
    branch or exception csdump decoded leaves from inside it, no place inside it was decoded, and
    the CPU ran it in the window (the truth has it branch there). Returns a note."""
    out = decoded_in(rc, lambda x: lo <= x <= hi, exceptions=True)
    if out:
        raise Bad(f"CPU{cpu}: {lo:#x}..{hi:#x} was excluded, yet csdump decodes {len(out)} events inside it, "
                  f"the first {out[0]}")
    into = sum(1 for e in tc["events"] if e["kind"] in TRUTH_KINDS and lo <= int(e["to"], 16) <= hi)
    if not into:
        raise Bad(f"CPU{cpu}: the truth has no branch into {lo:#x}..{hi:#x}: the CPU did not run the excluded "
                  "range in the window, the exclusion went untested")
    return f"no decoded event inside {lo:#x}..{hi:#x}, the range excluded; the CPU branched into it {into} times"


def saved_filter(cpu, rc, no_el0, rng, excluded=None):
    """The filter the user set is the one the panic path's ETM record saved, as csdump reads it
    (the levels, the included range), and csdump explains every place in the window where the
    trace went off and on again by it. Returns a note."""
    f = rc.get("filter")
    if not f:
        raise Bad(f"CPU{cpu}: csdump shows no filter for the ETM: its record does not save the configuration")
    want = "EL1 only" if no_el0 else "EL0 and EL1"
    if f["levels"] != want:
        raise Bad(f"CPU{cpu}: the ETM record saves the levels traced as '{f['levels']}', the user set '{want}'")
    for key, want in (("include", rng), ("exclude", excluded)):
        got = [tuple(int(x["addr"], 16) for x in r) for r in f[key]]
        if got != ([tuple(want)] if want else []):
            show = ", ".join(f"{lo:#x}..{hi:#x}" for lo, hi in got) or "none"
            raise Bad(f"CPU{cpu}: the ETM record saves the {key}d ranges {show}, the user set "
                      f"{f'{want[0]:#x}..{want[1]:#x}' if want else 'none'}")
    ranges = f["include"] + f["exclude"]
    r = rc["restarts"]
    if r["unexplained"]:
        raise Bad(f"CPU{cpu}: csdump finds {r['unexplained']} of the {r['total']} places where the trace went off "
                  "and on again unexplained by the saved filter")
    return (f"the ETM record saves the filter set ({f['levels']}"
            + (f", {len(ranges)} range" if ranges else "") + f"); the trace went off and on {r['total']} times in "
            "the decoded window, each explained by it")


def check_el0_excluded(d, cpus):
    """Every ETM was programmed with EL0 excluded from ViewInst (TRCVICTLR.EXLEVEL_NS bit 0), as
    the plugin saw it at each enable."""
    log = open(os.path.join(d, "plugin.log"), errors="replace").read()
    seen = {}
    for m in re.finditer(r"etm (\d+): enabled, .*?EL excluded \(NS\) (0x[0-9a-f]+)", log):
        seen.setdefault(int(m.group(1)), []).append(int(m.group(2), 16))
    for cpu in cpus:
        if not seen.get(cpu):
            raise Bad(f"the plugin never saw CPU{cpu}'s ETM enabled")
        if any(not v & 1 for v in seen[cpu]):
            raise Bad(f"CPU{cpu}'s ETM was enabled tracing EL0 (EL excluded {[hex(v) for v in seen[cpu]]}): "
                      "the sysfs mode's exclude-user bit was not programmed")
    print(f"ETMs of CPUs {sorted(cpus)} programmed with EL0 excluded (TRCVICTLR.EXLEVEL_NS) at every enable")


def check_panic_path(a, rep, sym, panic_cpu, who="panicking"):
    rc = next((c for c in rep["cpus"] if c["cpu"] == panic_cpu), None)
    if rc is None:
        raise Bad(f"{who} CPU{panic_cpu}: no decoded trace")
    names = [sym(int(f["start"], 16)) for f in rc["functions"]]
    want = a.through.split(",")
    i, seen = runs_through(names, want)
    if len(seen) < len(want):
        moved = resumed_elsewhere(rep, sym, panic_cpu, want)
        if moved is not None:
            # The judge must fail the same decode with either half of that evidence taken away.
            for what, bad in resumed_mutations(rep, panic_cpu, moved):
                if resumed_elsewhere(bad, sym, panic_cpu, want) is not None:
                    raise Bad(f"the judge accepted a moved crash path with {what}: it cannot be trusted")
                print(f"self-test: a moved crash path with {what} fails the judge")
            print(f"{who} CPU{panic_cpu}: the crashing task ran {' -> '.join(want)} on CPU{moved['cpu']}, "
                  f"took an interrupt at the first instruction of {moved['name']} there (the call was made, "
                  f"{moved['name']} had not run yet) and resumed on CPU{panic_cpu}, whose decode enters "
                  f"{moved['name']} by that exception's return; CPU{moved['cpu']}'s decode does not return to "
                  f"{moved['name']} after it")
            return
        tail = [n for j, n in enumerate(names[-40:]) if j == 0 or n != names[-40:][j - 1]]
        raise Bad(f"{who} CPU{panic_cpu}: the decoded functions do not run through {want} in order "
                  f"(found {seen}, missing {want[len(seen)]}; {len(names)} functions decoded, last: {tail[-12:]})")
    print(f"{who} CPU{panic_cpu}: the decoded flow runs through {' -> '.join(want)} "
          f"({len(names) - i} more decoded functions after it, the panic path and the dump)")


def runs_through(names, want):
    """How far `names` runs through `want` in order: (the index after the last one found, the
    ones found)."""
    i, seen = 0, []
    for w in want:
        try:
            i = names.index(w, i) + 1
        except ValueError:
            break
        seen.append(w)
    return i, seen


def _addr(end):
    return int(end["addr"], 16) if end else None


def resumed_elsewhere(rep, sym, panic_cpu, want):
    """A crashing task can call the crash entry on one CPU and run it on another: an interrupt
    taken at the entry's first instruction (QEMU takes interrupts between blocks, and a call ends
    one) can preempt the task there, sysrq_handle_crash having just left its RCU read-side
    section, and the scheduler can resume it on another CPU. The decodes then show: on the
    panicking CPU, the trace entering the crash entry by an exception return (its last branch);
    on another CPU, `want` in order, a call into that entry from the last of them, the interrupt
    at the entry (an exception whose return address is the entry) right after it, and no return
    to the entry afterwards. Returns what was found ({'cpu', 'name', 'at'}: the other CPU, the
    entry's name, the index of its exception) or None."""
    rc = next((c for c in rep["cpus"] if c["cpu"] == panic_cpu), None)
    if not rc or not rc["branches"]:
        return None
    last = rc["branches"][-1]
    entry = _addr(last.get("to"))
    name = sym.entry(entry) if entry is not None else None
    if name is None or "eret" not in last["kind"]:
        return None
    for oc in rep["cpus"]:
        if oc["cpu"] == panic_cpu:
            continue
        names = [sym(int(f["start"], 16)) for f in oc["functions"]]
        if len(runs_through(names, want)[1]) < len(want):
            continue
        br = oc["branches"]
        for k in range(len(br) - 1, 0, -1):
            b, call = br[k], br[k - 1]
            if b["kind"] != "exception" or _addr(b.get("from")) != entry:
                continue
            if _addr(call.get("to")) != entry or "link" not in call["kind"] or \
                    sym(_addr(call.get("from"))) != want[-1]:
                break
            if any(_addr(x.get("to")) == entry for x in br[k + 1:]):
                break
            return {"cpu": oc["cpu"], "name": name, "at": k}
    return None


def resumed_mutations(rep, panic_cpu, moved):
    """resumed_elsewhere's evidence with one half taken away: the other CPU's interrupt at the
    entry dropped, and the panicking CPU's exception return one instruction off."""
    def with_cpu(cpu, branches):
        return dict(rep, cpus=[dict(c, branches=branches) if c["cpu"] == cpu else c for c in rep["cpus"]])
    oc = next(c for c in rep["cpus"] if c["cpu"] == moved["cpu"])
    rc = next(c for c in rep["cpus"] if c["cpu"] == panic_cpu)
    k = moved["at"]
    last = rc["branches"][-1]
    off = dict(last, to=dict(last["to"], addr=hex(_addr(last["to"]) + 4)))
    return [(f"CPU{moved['cpu']}'s interrupt at the entry dropped", with_cpu(moved["cpu"], oc["branches"][:k] + oc["branches"][k + 1:])),
            (f"CPU{panic_cpu}'s exception return one instruction off", with_cpu(panic_cpu, rc["branches"][:-1] + [off]))]


def check_second_crash(a, truth, rep, sym, panic_cpu):
    """CPUs that crashed at once: the panic ran on one of them; each other one entered panic() as
    well (its decoded flow runs through --through, and its trace stopped in hardware at the
    crash entry), where panic() stops the CPU that lost the race."""
    crashed = [int(c) for c in a.crashed_cpus.split(",")]
    if panic_cpu not in crashed:
        raise Bad(f"the panic ran on CPU{panic_cpu}, none of the CPUs that crashed ({crashed})")
    for cpu in crashed:
        if cpu == panic_cpu:
            continue
        check_panic_path(a, rep, sym, cpu, who="second crashing")
        check_hw_stop(a, truth, rep, sym, cpu, who="second crashing")


def check_hw_stop(a, truth, rep, sym, panic_cpu, who="panicking"):
    """The hardware stop: where the plugin's ETM stopped the panicking CPU's trace (truth.json
    viewinst, tools/qemu-coresight/README.md) and where csdump's decode of it ends."""
    rc = next((c for c in rep["cpus"] if c["cpu"] == panic_cpu), None)
    if a.no_hw_stop:
        stopped = {c: t["viewinst"]["stopped_at"] for c, t in truth.items()
                   if t.get("viewinst", {}).get("stopped_at")}
        if stopped:
            raise Bad(f"no hardware stop was asked for, yet the plugin's ETMs stopped at a stop point: {stopped}")
        if rc and rc.get("hw_stop"):
            raise Bad(f"no hardware stop was asked for, yet csdump reports one: {rc['hw_stop']}")
        # The trace runs on past the crash entry: panic()'s own code and what it calls.
        last = a.through.split(",")[-1]
        names = [sym(int(f["start"], 16)) for f in rc["functions"]] if rc else []
        if last not in names:
            raise Bad(f"panicking CPU{panic_cpu}: {last} is not in the decoded trace")
        after = [n for n in names[names.index(last) + 1:] if n != last]
        if len(after) < 10:
            raise Bad(f"panicking CPU{panic_cpu}: only {after} decoded after {last}: the trace seems to "
                      "end at the crash entry although the hardware stop is off")
        print(f"hardware stop off: no CPU's trace was stopped by a ViewInst stop point; the panicking "
              f"CPU's trace runs on past {last} ({len(after)} function runs after it, "
              f"e.g. {', '.join(sorted(set(after))[:6])})")
        return
    want = a.hw_stop.split(",")
    v = truth.get(panic_cpu, {}).get("viewinst")
    if not v:
        raise Bad(f"{who} CPU{panic_cpu}: no ViewInst record in the plugin's truth")
    if v.get("ended_by") != "stop-point" or not v.get("stopped_at"):
        raise Bad(f"{who} CPU{panic_cpu}: its trace did not end at a stop point ({v})")
    addr = int(v["stopped_at"], 16)
    name = sym.entry(addr)
    if name not in want:
        raise Bad(f"{who} CPU{panic_cpu}: the stop point {addr:#x} ({sym(addr)}) is not the entry of "
                  f"one of {want}")
    last = rc["branches"][-1] if rc and rc["branches"] else None
    to = int(last["to"]["addr"], 16) if last and last.get("to") else None
    if to != addr:
        raise Bad(f"{who} CPU{panic_cpu}: the decoded trace ends with {last}, not a branch to {name} ({addr:#x})")
    via = f" (entered through {last['kind']} at {(last.get('from') or {}).get('symbol')})"
    hs = rc.get("hw_stop") or {}
    if a.plain_kdump:
        # Registers recorded at enable: the unit was not read at the crash.
        if hs.get("reached") is not None or hs.get("stop_points", 0) < 1:
            raise Bad(f"{who} CPU{panic_cpu}: csdump reports the hardware stop as {hs}: with registers "
                      "recorded at enable it cannot know whether the stop point was reached")
        print(f"hardware stop: {who} CPU{panic_cpu}'s trace ends at the entry of {name} ({addr:#x}){via}, "
              f"in the plugin's truth and in csdump's decode; csdump reports {hs['stop_points']} stop "
              "points armed, reached not known (recorded at enable)")
        return
    if not hs.get("reached") or hs.get("stop_points", 0) < 1:
        raise Bad(f"{who} CPU{panic_cpu}: csdump does not report the hardware stop reached: {hs}")
    print(f"hardware stop: {who} CPU{panic_cpu}'s trace ends at the entry of {name} ({addr:#x}){via}, "
          f"in the plugin's truth and in csdump's decode; its ETM record says the stop point was "
          f"reached ({hs['stop_points']} armed)")


COUNTERS = re.compile(r"\[counters: accesses tmc=(\d+) funnel=(\d+) etm=(\d+) debug=(\d+); "
                      r"trace bytes (\d+) by cpu ([\d,]+)\]")


def plugin_milestones(d):
    """The plugin log's lines in order, with their counters: (kind, cpu, text, counters)."""
    out = []
    p = "qemu-coresight: "
    for line in open(os.path.join(d, "plugin.log"), errors="replace"):
        if p not in line:
            continue
        text = line.split(p, 1)[1].strip()
        m = COUNTERS.search(text)
        c = None
        if m:
            c = {"tmc": int(m.group(1)), "funnel": int(m.group(2)), "etm": int(m.group(3)),
                 "debug": int(m.group(4)), "bytes": int(m.group(5))}
        if re.match(r"etm \d+: stopped", text):
            out.append(("etm-stop", int(text.split()[1].rstrip(":")), text, c))
        elif re.match(r"debug \d+: EDPCSR read", text):
            out.append(("edpcsr", int(text.split()[1].rstrip(":")), text, c))
        elif text.startswith("tmc stopped:"):
            out.append(("tmc-stop", None, text, c))
        elif re.match(r"etm \d+: stop point", text):
            out.append(("stop-point", int(text.split()[1].rstrip(":")), text, c))
        elif text.startswith("exit:"):
            out.append(("exit", None, text, c))
    return out


def check_order(a, cpus, fault):
    """The panic path's phases as the emulated hardware saw them: sources stopped, then CPUs
    sampled, then the sink drained; no trace after the last source stopped."""
    ms = plugin_milestones(a.dir)
    # The TMC's stop; a TMC that never stops (a fault) is judged at the plugin's exit.
    tmc = [i for i, m in enumerate(ms) if m[0] == "tmc-stop"]
    ends = tmc or [i for i, m in enumerate(ms) if m[0] == "exit"]
    if not ends:
        raise Bad("the plugin logged neither the TMC stopping nor its exit")
    end = ends[-1]
    # The ETM stops of the panic: the last one of each CPU before the TMC stopped.
    stops = {}
    for i, m in enumerate(ms[:end]):
        if m[0] == "etm-stop":
            stops[m[1]] = i
    reads = [i for i, m in enumerate(ms[:end]) if m[0] == "edpcsr"]
    want = [c for c in cpus if not (isinstance(fault, tuple) and fault[0] == "etm-never-idle"
                                    and fault[1] == c)]
    missing = [c for c in want if c not in stops]
    if missing:
        raise Bad(f"the plugin never saw the ETMs of CPUs {missing} stopped before the TMC stopped")
    last_stop = max(stops[c] for c in want)
    if reads and min(reads) < last_stop:
        raise Bad(f"an EDPCSR read ({ms[min(reads)][2]}) came before the last ETM stopped "
                  f"({ms[last_stop][2]}): CPU debug sampling ran while a source traced")
    c_stop, c_tmc = ms[last_stop][3], ms[end][3]
    if not c_stop or not c_tmc:
        raise Bad("the plugin's milestones carry no counters")
    added = c_tmc["bytes"] - c_stop["bytes"]
    if added != 0:
        raise Bad(f"{added} trace bytes reached the TMC after the last source stopped")
    print(f"panic path order (plugin): {len(want)} ETMs stopped, then {len(reads)} EDPCSR reads, then "
          f"the TMC stopped; no trace byte reached the TMC after the last source stopped")


def check_phases(a, vmcore, recs, fault):
    """The dump's phase times: every phase ran, in order, with the callbacks the records show;
    with --budget-ms, the CPU debug phase within it."""
    r = run([a.csdump, "info", vmcore, "--json"])
    info = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    p = info.get("phases")
    if not p:
        raise Bad(f"csdump info shows no phase times ({r.returncode}): {r.stderr[-500:]}")
    ph = {x["phase"]: x for x in p["phases"]}
    order = ["stop-sources", "sample-cpus", "drain-sinks", "other", "commit"]
    if [x["phase"] for x in p["phases"]] != order or not all(ph[n]["ran"] for n in order):
        raise Bad(f"phase times: {p}")
    starts = [ph[n]["start_us"] for n in order]
    if starts != sorted(starts):
        raise Bad(f"phases out of order: {starts}")
    kinds = {"stop-sources": "source", "sample-cpus": "cpu-debug", "drain-sinks": "sink"}
    for n, k in kinds.items():
        want = sum(1 for x in recs if x["kind"] == k)
        if ph[n]["callbacks"] != want:
            raise Bad(f"phase {n}: {ph[n]['callbacks']} callbacks, the dump has {want} {k} records")
    if a.budget_ms is not None:
        # The budget bounds the waits for power-up, in delays of POWER_UP_DELAY_MS
        # (cpu_debug/hw.rs), which each CPU's record counts (its polls of EDPRSR: one more than
        # its delays at most). The phase's wall time also holds the register accesses and the
        # report lines each CPU prints, which depend on how fast the host runs the emulation:
        # printed, not judged.
        polls = {}
        for x in recs:
            if x["kind"] != "cpu-debug":
                continue
            raw = open(os.path.join(a.dir, "extract" + a.tag, x["file"]), "rb").read()
            polls[x["cpu"]] = struct.unpack_from("<I", raw, 36)[0]
        waited = sum(polls.values()) * POWER_UP_DELAY_MS
        bound = a.budget_ms + len(polls) * POWER_UP_DELAY_MS
        if len(polls) != a.cpus or waited > bound:
            raise Bad(f"the CPU debug phase polled power-up {polls} times per CPU: {waited} ms of "
                      f"waits, more than the {a.budget_ms} ms budget (and one poll per CPU)")
        took = ph["sample-cpus"]["duration_us"] / 1000
        print(f"CPU debug phase: {sum(polls.values())} power-up polls ({polls} per CPU; a CPU waits "
              f"{POWER_UP_DELAY_MS} ms between two), within the {a.budget_ms} ms budget and one "
              f"poll per CPU; {took:.1f} ms of wall time with the register accesses and the reports "
              "printed")
    print("phase times: " + ", ".join(f"{n} {ph[n]['duration_us']:.0f} us" for n in order)
          + f"; {p['total_us']:.0f} us in all")


def check_cache_clean(a, log, vmcore, panic_cpu):
    """The panicking CPU cleaned the dump to the point of coherency as it wrote it: the kernel says
    so, and the plugin counted its DC CVAC/CIVAC after the TMC stopped, at least one per 64-byte
    line of the sink records written since (dump-cleaned judges every line of every record
    through QEMU's gdbstub)."""
    m = re.search(r"coresight_panic_dump: dump committed at \S+ \(sequence \d+\): .*; (.*)", log)
    if not m:
        raise Bad("the panic log has no 'dump committed' line")
    how = m.group(1).strip()
    if how.startswith("written through"):
        print("cache: the region is not cached (a no-map region, write-combined): nothing to clean")
        return
    if not how.startswith("each step cleaned to the point of coherency"):
        raise Bad(f"the dump was not cleaned from the data cache: {how}")
    r = run([a.csdump, "info", vmcore, "--json"])
    info = json.loads(r.stdout)
    sinks = [x for x in info["records"] if x["kind"] == "sink"]
    lines = sum((80 + x["length"] + 63) // 64 for x in sinks)
    text = open(os.path.join(a.dir, "plugin.log"), errors="replace").read()
    d = re.findall(r"data cache cleans to the point of coherency since the TMC stopped, by cpu: ([\d,]+)", text)
    if not d:
        raise Bad("the plugin logged no count of data cache cleans")
    counts = [int(x) for x in d[-1].split(",")]
    n = counts[panic_cpu] if panic_cpu < len(counts) else 0
    if n < lines:
        raise Bad(f"CPU{panic_cpu} ran {n} data cache cleans after the TMC stopped; the sink records "
                  f"written since are {lines} lines")
    print(f"cache: the kernel cleaned each step to the point of coherency; the panicking CPU ran {n} "
          f"DC CVAC/CIVAC after the TMC stopped, for the {lines} lines of the sink records written since")


def demangled(names):
    """Rust's mangled names as llvm-cxxfilt demangles them (an independent demangler); others as
    they are."""
    rust = sorted({n for n in names if n.startswith("_R")})
    if not rust:
        return {}
    tool = next((t for t in ("llvm-cxxfilt-19", "llvm-cxxfilt") if shutil.which(t)), None)
    if not tool:
        raise Bad("llvm-cxxfilt is not installed: it demangles the modules' Rust names for the judge")
    out = run([tool], input="\n".join(rust) + "\n").stdout.splitlines()
    if len(out) != len(rust):
        raise Bad(f"{tool} gave {len(out)} names for {len(rust)}")
    return dict(zip(rust, out))


def bare(name):
    """`function+0xoff [module]` -> `function`."""
    name = re.sub(r" \[[^\]]+\]$", "", name)
    return re.sub(r"\+0x[0-9a-f]+$", "", name)


def check_module_names(rep, sym):
    """Every kernel-space address csdump's report gives (each function's start, each branch's
    ends) has a name, and an address in module code has the name of the module's function that
    holds it, as the judge reads it from the .ko where the dump's module list placed it."""
    judged = {}
    for c in rep["cpus"]:
        points = [(f["start"], f.get("name")) for f in c["functions"]]
        points += [(b[k]["addr"], b[k].get("symbol")) for b in c["branches"] for k in ("from", "to")
                   if b.get(k)]
        for addr, name in points:
            a = int(addr, 16)
            if a < 0xFFFF << 48:
                continue
            if not name:
                raise Bad(f"CPU{c['cpu']}: csdump's report has a kernel address without a name: {addr}")
            m = sym.module_of(a)
            if m:
                judged.setdefault((m[1], m[0], bare(name)), a)
    names = demangled([fn for _, fn, _ in judged])
    per = {}
    for (module, fn, got), a in judged.items():
        want = names.get(fn, fn)
        if got != want:
            raise Bad(f"csdump names {a:#x} in {module} {got!r}; its .ko says {want!r}")
        per[module] = per.get(module, 0) + 1
    print("module code named in csdump's report as in the .ko files: "
          + (", ".join(f"{m} {n} function(s)" for m, n in sorted(per.items())) or "none traced")
          + "; no kernel address without a name")


def check_trigger(a, rep, sym):
    """An exception taken in the trigger function (the oops), on whichever CPU ran it: the task
    may move to another CPU before die() runs (seen here: the fault on CPU 1, die() on CPU 0)."""
    for c in rep["cpus"]:
        for b in c["branches"]:
            if b["kind"] == "exception" and b["from"] and sym(int(b["from"]["addr"], 16)) == a.trigger:
                print(f"CPU{c['cpu']}: decoded exception in {a.trigger} at {b['from']['addr']} "
                      f"(vector {b['to']['addr']})")
                return
    raise Bad(f"no CPU's decoded flow has an exception taken in {a.trigger}")


def executed(tc, rc, pc):
    ev = tc["events"]
    for e, nxt in zip(ev, ev[1:] + [None]):
        lo = int(e["to"], 16)
        hi = int(nxt["from"], 16) if nxt else lo
        if lo <= pc <= hi:
            return "its ground truth"
    for f in rc["functions"]:
        s = int(f["start"], 16)
        if s <= pc < s + 4 * max(f["instructions"], 1):
            return "its decoded ranges"
    return None


def executed_in_record(d, cpu, pc):
    """Where the execution record (exec.rec, tools/exec-record) has CPU `cpu` run the instruction
    at `pc` last: how many blocks before the end of its record; None when it has no record or the
    newest million blocks of the record do not hold that instruction."""
    path = os.path.join(d, "exec.rec")
    if not os.path.exists(path):
        return None
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import check_exec
    try:
        rec = check_exec.Record(path)
        if cpu >= rec.vcpus:
            return None
        ring, _ = rec.ring(cpu)
        # A sample is of the CPU's last moments: among its newest million blocks.
        for back, (start, words) in enumerate(itertools.islice(check_exec.blocks_back(rec, ring), 1_000_000)):
            if start <= pc < start + 4 * len(words):
                return f"the execution record: its block {start:#x}, {back} blocks before the record's end"
    except check_exec.Bad as e:
        raise Bad(str(e))
    return None


def check_other_samples(a, truth, rep, pcs, panic_cpu, sym):
    for cpu, pc in sorted(pcs.items()):
        if cpu == panic_cpu:
            continue
        rc = next((c for c in rep["cpus"] if c["cpu"] == cpu), None)
        if cpu not in truth and not (rc and rc["functions"]):
            print(f"CPU{cpu} debug sample {pc:#x} ({sym(pc)}): CPU{cpu} has no trace (no ETM), not checked")
            continue
        # The independent record first: the ground truth of a warm reboot's first boot can be
        # replaced by the second boot's sessions, and a region's decode uses vmlinux as built.
        where = executed_in_record(a.dir, cpu, pc)
        if not where:
            where = executed(truth[cpu], rc, pc) if cpu in truth and rc else None
        if not where:
            raise Bad(f"CPU{cpu}'s debug sample {pc:#x} ({sym(pc)}) is not an address that CPU executed")
        print(f"CPU{cpu} debug sample {pc:#x} ({sym(pc)}): executed by CPU{cpu} ({where})")


def kaslr_enabled(vmlinux):
    """Whether the kernel's .config (next to vmlinux) has CONFIG_RANDOMIZE_BASE=y; None when that
    .config is newer than vmlinux (a build in progress: it may not be this kernel's)."""
    cfg = os.path.join(os.path.dirname(os.path.abspath(vmlinux)), ".config")
    try:
        if os.path.getmtime(cfg) > os.path.getmtime(vmlinux):
            return None
        return "CONFIG_RANDOMIZE_BASE=y\n" in open(cfg).read()
    except OSError:
        return False


def build_id(vmlinux):
    """The GNU build ID of an ELF file, as hex."""
    with open(vmlinux, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        for typ, _, _, off, size in elf_sections(m):
            if typ != 7:  # SHT_NOTE
                continue
            j = off
            while j + 12 <= off + size:
                nsz, dsz, t = struct.unpack_from("<III", m, j)
                o = j + 12 + ((nsz + 3) & ~3)
                if t == 3 and m[j + 12:j + 12 + nsz].rstrip(b"\0") == b"GNU":
                    return m[o:o + dsz].hex()
                j = o + ((dsz + 3) & ~3)
    return None


def check_quiet_after_sink_stop(d):
    """Plain kdump: no CPU's trace unit sent a byte after the capture kernel stopped the sink
    (the plugin's counters when the TMC stopped and at exit), so the truth at exit is what the
    sink held."""
    text = open(os.path.join(d, "plugin.log"), errors="replace").read()
    stop = re.search(r"tmc stopped: .*?" + COUNTERS.pattern, text)
    end = re.search(r"exit: .*?" + COUNTERS.pattern, text)
    if not stop or not end:
        raise Bad("plain kdump: the plugin log has no counters at the TMC's stop or at exit")
    if stop.groups()[-2:] != end.groups()[-2:]:
        raise Bad(f"plain kdump: trace reached the funnel after the capture kernel stopped the sink "
                  f"(trace bytes {stop.group(5)} by cpu {stop.group(6)} then, {end.group(5)} by cpu "
                  f"{end.group(6)} at exit)")
    print(f"plain kdump: no trace byte after the capture kernel stopped the sink ({end.group(5)} in all, "
          f"by cpu {end.group(6)})")


def check_plain_log(a, log, rep):
    """Plain kdump in the logs: no panic-time step ran in the crashed kernel, the capture kernel's
    TMC driver drained the sink the crashed kernel left capturing, and csdump has no CPU sample."""
    if "crash_kexec_post_notifiers" in open(os.path.join(a.dir, "cmdline.txt")).read():
        raise Bad("plain kdump: crash_kexec_post_notifiers is on the command line")
    if "CSPD: crash_kexec_post_notifiers: N" not in log:
        raise Bad("plain kdump: the guest did not read crash_kexec_post_notifiers off")
    if re.search(r"coresight_panic_dump: dump committed at", log):
        raise Bad("plain kdump: the panic dump ran in the crashed kernel")
    how = "drained" if not a.sink.startswith("tmc_etr") else "stopped"
    m = re.search(r"%s: the crashed kernel left it capturing: %s \((\w+)\)" % (a.sink, how), log)
    if not m or m.group(1) != "complete":
        raise Bad(f"plain kdump: the capture kernel's log does not say {a.sink} was {how} completely "
                  f"({m.group(1) if m else 'no line'})")
    sampled = [c["cpu"] for c in rep["cpus"] if (c.get("sample") or {}).get("outcome") == "sampled"
               and (c["sample"].get("origin") or {}).get("by") != "capture-kernel"]
    if sampled:
        raise Bad(f"plain kdump: csdump shows CPU samples {sampled} that no panic-time step took")
    print(f"plain kdump: the capture kernel's TMC driver found {a.sink} capturing and {how} it "
          "(complete); no CPU debug sample of the crashed kernel's")
    if a.capture_debug:
        check_capture_samples(a, rep)
    if a.locked_cpu:
        check_locked_cpu(a, rep)


def plugin_counters(d, line_re, last_before=None):
    """The per-CPU trace byte counters of the first plugin log line matching `line_re` (with
    `last_before`, of the last one before the first line matching that)."""
    lines = open(os.path.join(d, "plugin.log"), errors="replace").read().splitlines()
    if last_before is not None:
        end = next((i for i, ln in enumerate(lines) if re.search(last_before, ln)), len(lines))
        lines = lines[:end][::-1]
    for ln in lines:
        m = re.search(line_re + r".*?" + COUNTERS.pattern, ln)
        if m:
            return [int(x) for x in m.group(m.re.groups).split(",")]
    raise Bad(f"the plugin log has no line {line_re!r} with counters")


def check_locked_cpu(a, rep):
    """--locked-cpu N:FUNC (plain kdump, a hard lockup): CPU N ignored the crash stop, so the
    capture kernel's sample of it is in FUNC, where it spins; and the report's account of how much
    of the sink CPU N's trace took after the panicking CPU's trace ended is what the plugin
    counted: the bytes CPU N sent between the panicking CPU's last bytes (at its stop point, or the
    stop block's atom right after) and the capture kernel's stop of the sink. When those overfilled the sink, the report must say that none
    of the panicking CPU's trace is left."""
    cpu_s, func = a.locked_cpu.split(":", 1)
    cpu = int(cpu_s)
    c = next((x for x in rep["cpus"] if x["cpu"] == cpu), None)
    if c is None:
        raise Bad(f"locked CPU{cpu}: not in csdump's report")
    sm = c.get("sample") or {}
    sym = (sm.get("pc") or {}).get("symbol") or ""
    if sm.get("outcome") != "sampled" or sym.split("+")[0] != func:
        raise Bad(f"locked CPU{cpu}: the capture kernel's sample is not in {func}: {sm.get('outcome')} "
                  f"{(sm.get('pc') or {}).get('addr')} {sym}")
    # The panicking CPU's last bytes: at its stop point, or the atom of the stop's block after it.
    said = f"CPU {cpu} did not stop at the crash: the capture kernel found it running at {sym}"
    if not any(n.startswith(said) for n in rep.get("notes", [])):
        raise Bad(f"locked CPU{cpu}: the report does not say it did not stop at the crash ({said!r})")
    at_stop = plugin_counters(a.dir, rf"etm {a.panic_cpu}: (stop point 0x[0-9a-f]+ reached|\d+ trace bytes "
                              r"after its stop point)", last_before=r"qemu-coresight: tmc stopped:")
    at_end = plugin_counters(a.dir, r"tmc stopped:")
    sent = at_end[cpu] - at_stop[cpu]
    size = next(s["bytes"] for s in rep["sinks"])
    share = c.get("sink_share") or {}
    notes = rep.get("notes", [])
    if share.get("after_crash") is None:
        gone = [n for n in notes if n.startswith(f"none of the panicking CPU {a.panic_cpu}'s trace is left")]
        if sent < size or not gone:
            raise Bad(f"locked CPU{cpu}: csdump finds none of the panicking CPU{a.panic_cpu}'s trace in the sink "
                      f"(notes {gone}); the plugin counted {sent} bytes of CPU{cpu} after the crash, "
                      f"against a {size}-byte sink")
        print(f"locked CPU{cpu}: sampled in {sym}; its trace went on after the crash ({sent} bytes, the "
              f"plugin's count) and overwrote the {size}-byte sink; csdump says none of the panicking "
              f"CPU{a.panic_cpu}'s trace is left")
        return
    n = share["after_crash"]
    if n != sent:
        raise Bad(f"locked CPU{cpu}: csdump says its trace took {n} bytes of the sink after the panicking "
                  f"CPU{a.panic_cpu}'s trace ended, the plugin counted {sent}")
    said = [x for x in notes if x.startswith(f"CPU {cpu}'s trace took {n} bytes of the sink")]
    if not said:
        raise Bad(f"locked CPU{cpu}: the report's notes do not say how much of the sink it took: {notes}")
    print(f"locked CPU{cpu}: sampled by the capture kernel in {sym}; its trace took {n} bytes of the sink "
          f"after the panicking CPU{a.panic_cpu}'s ended, as the plugin counted")


# What csdump says of a CPU the capture kernel found powered off (format's POWERED_OFF_REASON).
POWERED_OFF = "powered off (EDPRSR.PU clear as found; the capture kernel requested no power-up)"


def check_capture_samples(a, rep):
    """Plain kdump with the CPU debug driver in the capture kernel (--capture-debug): every CPU but
    the panicking one (where the capture kernel runs) has the capture kernel's sample, named by its
    MPIDR and given its crashed-kernel number by csdump, and each says what the plugin's CPU was
    when the capture kernel read it: powered off (PSCI CPU_OFF halted the vCPU, before the capture
    kernel stopped the sink, and it did not restart), or sampled at the PC the plugin's EDPCSR read
    returned. The panicking CPU's record is the one written when its device was bound."""
    text = open(os.path.join(a.dir, "plugin.log"), errors="replace").read().splitlines()
    stop = next((i for i, ln in enumerate(text) if "qemu-coresight: tmc stopped:" in ln), None)
    if stop is None:
        raise Bad("capture samples: the plugin log has no TMC stop (the capture kernel's drain)")
    for c in rep["cpus"]:
        cpu, sm = c["cpu"], c.get("sample") or {}
        by = (sm.get("origin") or {}).get("by")
        if cpu == a.panic_cpu:
            if by != "runtime":
                raise Bad(f"capture samples: the panicking CPU{cpu} (the capture kernel's own) has a sample "
                          f"from {by}, not its record from when the device was bound")
            continue
        if by != "capture-kernel" or not sm.get("as_found") or sm.get("mpidr") != hex(cpu):
            raise Bad(f"capture samples: CPU{cpu} has no capture kernel's sample taken as found with MPIDR "
                      f"{hex(cpu)}: {sm}")
        off = [i for i, ln in enumerate(text) if ln.startswith(f"qemu-coresight: cpu {cpu}: powered off")]
        back = [i for i, ln in enumerate(text) if ln.startswith(f"qemu-coresight: cpu {cpu}: powered down and up")]
        reads = [(i, int(m.group(1), 16)) for i, ln in enumerate(text)
                 if (m := re.match(rf"qemu-coresight: debug {cpu}: EDPCSR read by cpu \d+, sample (0x[0-9a-f]+)", ln))
                 and i > stop]
        was_off = bool(off) and off[-1] < stop and not any(b > off[-1] for b in back)
        if sm.get("outcome") == POWERED_OFF:
            if not was_off:
                raise Bad(f"capture samples: csdump says CPU{cpu} was powered off, but the plugin did not power "
                          f"it off before the capture kernel stopped the sink (powered off at lines {off}, "
                          f"restarted at {back}, TMC stop at {stop})")
            print(f"capture samples: CPU{cpu} (MPIDR {hex(cpu)}) powered off, as the plugin's PSCI CPU_OFF left "
                  "it; the capture kernel named it so")
        elif sm.get("outcome") == "sampled":
            if was_off:
                raise Bad(f"capture samples: CPU{cpu} was powered off, yet csdump shows a sample")
            pc = int((sm.get("pc") or {}).get("addr") or "0", 16)
            if not reads or reads[-1][1] != pc:
                raise Bad(f"capture samples: CPU{cpu}'s sample {pc:#x} is not what the plugin's EDPCSR read "
                          f"returned in the capture kernel ({[hex(r[1]) for r in reads]})")
            print(f"capture samples: CPU{cpu} (MPIDR {hex(cpu)}) sampled by the capture kernel at {pc:#x} "
                  f"{(sm.get('pc') or {}).get('symbol')}, the PC the plugin's EDPCSR read returned")
        else:
            raise Bad(f"capture samples: CPU{cpu}: {sm.get('outcome')}")


def check_perf(a, vmcore, sym):
    pd = os.path.join(a.dir, "perf" + a.tag)
    mods = ["--modules", a.modules_dir] if a.modules_dir else []
    r = run([a.csdump, "perf", vmcore, "-o", pd] + mods)
    if r.returncode not in (0, 3):
        raise Bad(f"csdump perf failed ({r.returncode}): {r.stderr}")
    # One sample every 64 instructions: perf decodes the whole trace all the same, and prints
    # a 64th of the lines (a 1 MiB ETR trace is millions of instructions).
    r = run(["perf", "script", "-i", os.path.join(pd, "perf.data"), "-k", a.vmlinux, "--itrace=i64i",
             "-F", "cpu,ip,sym"], cwd=pd)
    if r.returncode != 0:
        raise Bad(f"perf script failed ({r.returncode}): {r.stderr[-2000:]}")
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    if len(lines) < 10:
        raise Bad(f"perf script decoded {len(lines)} samples")
    # Module code: csdump's perf.data maps each module's .ko (MMAP events, build IDs; host test
    # perf_data_maps_modules_and_perf_names_their_functions), but perf 6.1's CoreSight decoder
    # takes every address below the kernel map (where arm64 loads modules) for user space, so it
    # names no module sample here; they are counted, not judged.
    n = sum(1 for ln in lines if (m := re.match(r"\s*\[\d+\]\s+([0-9a-f]+)\s", ln))
            and sym.module_of(int(m.group(1), 16)))
    print(f"perf script: {len(lines)} instruction samples (one per 64 instructions)"
          + (f" ({n} in module code, which perf 6.1 cannot name)" if n else ""))


def parse_fault(f):
    if not f:
        return None
    name, _, cpu = f.partition("@")
    if cpu == "all":
        return (name, "all")
    return (name, int(cpu)) if cpu else name


def check(a):
    fault = parse_fault(a.fault)
    if a.compare_only:
        # The truth is read once for every decoded report given (the self-test's alterations).
        truth = truth_of(a.dir)
        failed = 0
        for path in a.decoded:
            rep = json.load(open(path))
            cpus = sorted(c["cpu"] for c in rep["cpus"] if c["cpu"] in truth)
            try:
                check_ground(a, truth, rep, cpus)
            except Bad as e:
                failed += 1
                print(f"check_trace: {path}: FAIL: {e}")
            else:
                print(f"check_trace: {path}: ok")
        if failed:
            raise Bad(f"{failed} of {len(a.decoded)} decoded reports differ from the ground truth")
        return
    log = open(os.path.join(a.dir, "console.log"), errors="replace").read()
    # What csdump reads (the raw copy, or makedumpfile's file of the same panic); what this
    # script reads itself (the kernel text as it ran, the build ID) is the raw ELF copy.
    vmcore = a.vmcore or os.path.join(a.dir, "vmcore.elf")
    raw = os.path.join(a.dir, "vmcore.elf")
    enabled, samples, stops = plugin_log(a.dir)
    cpus = check_sysfs(a, log, fault)
    # The trace ID each driver programmed is checked against the plugin's in check_etms (the
    # driver logs enabling only at debug level).
    if isinstance(fault, tuple) and fault[0] == "etm-os-lock":
        c = fault[1]
        if not re.search(r"coresight-etm4x 7ff1%x000\.etm: trace unit not usable: OS lock stayed set" % c, log):
            raise Bad(f"the log does not name CPU{c}'s ETM OS lock")
        print(f"CPU{c} ETM: OS lock stuck, probe refused and named (OS lock stayed set); its record is the only one missing")
    out = os.path.join(a.dir, "extract" + a.tag)
    recs = extract(a, vmcore, out)

    # The report of the dump as csdump gives it: the decode (against the text the kernel ran, read
    # from the vmcore, modules included), symbols from vmlinux, samples, the KASLR offset. --last
    # reaches back to the crash on the panicking CPU.
    text = ["--text-from", a.text_from] if a.text_from else []
    if a.report:
        # The same command's output, saved by the caller (negatives that alter no input of it).
        rep = json.load(open(a.report))
    else:
        mods = ["--modules", a.modules_dir] if a.modules_dir else []
        r = run([a.csdump, "report", vmcore, "--vmlinux", a.vmlinux, "--json", "--last", str(a.last)] + text + mods)
        if r.returncode not in (0, 3):
            raise Bad(f"csdump report failed ({r.returncode}): {r.stderr}")
        rep = json.loads(r.stdout)
    offset = int(rep["kaslr_offset"], 16)
    # KASLR: CONFIG_RANDOMIZE_BASE=y and the fixed kaslr-seed of the coresight device tree put the
    # kernel at a non-zero offset; csdump must have found it (checked only when the kernel's
    # .config enables KASLR: without it the offset is rightly 0).
    region = not is_elf(raw)
    if region:
        print("the dump is a region file (warm reboot): code is read from vmlinux, not a vmcore")
    want_id, have_id = (None if region else Vmcore(raw).info.get("BUILD-ID")), build_id(a.vmlinux)
    if want_id and have_id and not want_id.startswith(have_id[:len(want_id)]):
        raise Bad(f"{a.vmlinux} (build ID {have_id}) is not the kernel that wrote the dump ({want_id})")
    kaslr = kaslr_enabled(a.vmlinux)
    if a.nokaslr:
        if offset != 0:
            raise Bad(f"the kernel ran with nokaslr, but csdump relocates by {offset:#x}")
        print("KASLR: off (nokaslr), and csdump relocates by 0")
    elif kaslr is None:
        print("KASLR: not checked, the kernel's .config is newer than vmlinux (a build in progress?)")
    elif kaslr:
        if offset == 0:
            raise Bad("CONFIG_RANDOMIZE_BASE=y and a kaslr-seed, but csdump reports KASLR offset 0")
        print(f"KASLR: csdump relocates by {offset:#x}")
    sym = Symbols(a.system_map, offset)
    if a.modules_dir:
        # The modules' functions, placed where the dump's module list says their sections were
        # (the judge's own reading of the list and of the .ko files).
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import check_modules
        try:
            msyms, _ = check_modules.module_symbols(out, a.modules_dir)
        except check_modules.Bad as e:
            raise Bad(f"module symbols: {e}")
        sym.add_modules(msyms)
    panic_cpu = rep["panic_cpu"]
    if a.plain_kdump:
        # No panic info record (the crashed kernel ran nothing after panic()'s kexec): csdump
        # infers the panicking CPU from where the traces end, and says so.
        inferred = [n for n in rep.get("notes", []) if n.startswith("the panicking CPU is CPU")
                    and "inferred" in n]
        if panic_cpu != a.panic_cpu or len(inferred) != 1:
            raise Bad(f"plain kdump: csdump names CPU{panic_cpu} as the panicking one (notes: {inferred}); "
                      f"the trigger ran on CPU{a.panic_cpu}, and only its trace ends at a stop point")
        print(f"plain kdump: csdump infers the panicking CPU, CPU{panic_cpu}: {inferred[0]}")
        panic_cpu = a.panic_cpu
    elif a.panic_cpu is not None:
        if panic_cpu != a.panic_cpu:
            raise Bad(f"the panic was to happen on CPU{a.panic_cpu}; csdump says CPU{panic_cpu}")
        print(f"the panic happened on CPU{panic_cpu}, where the trigger was pinned")
    if a.plain_kdump:
        check_plain_log(a, log, rep)
        check_quiet_after_sink_stop(a.dir)
        pcs = {}
    else:
        pcs = check_samples(a, rep, samples, log, fault)

    if "stop_at refused an unknown function; still: " not in log:
        raise Bad("the guest did not see stop_at refuse an unknown function name")
    if not a.vmcore and not a.plain_kdump:
        check_order(a, cpus, fault)
        check_phases(a, vmcore, recs, fault)
        check_cache_clean(a, log, raw, panic_cpu)
    if fault in TMC_FAULTS:
        check_tmc_fault(a, fault, log, vmcore, out, recs, stops)
        if fault not in TMC_FAULTS_WITH_TRACE:
            check_etms(a, out, recs, enabled, cpus, log, fault)
            check_report_sessions(a, rep, cpus)
            print("CPU debug records: the PCs the plugin's EDPCSR reads returned")
            return
    elif a.sink.startswith("tmc_etr"):
        check_etr(a, out, recs, stops, rep, not is_elf(raw), vmcore, truth_of(a.dir, a.plain_kdump), cpus)
    else:
        check_tmc(a, out, recs, stops)
    check_etms(a, out, recs, enabled, cpus, log, fault)
    check_report_sessions(a, rep, cpus)
    if not a.plain_kdump:
        print("CPU debug records: the PCs the plugin's EDPCSR reads returned")

    ground = os.path.join(a.dir, "ground" + a.tag)
    os.makedirs(ground, exist_ok=True)
    # What the self-test alters: each CPU's decoded branches (the functions are left out).
    keep = dict(rep, cpus=[dict(c, functions=[]) for c in rep["cpus"]])
    with open(os.path.join(ground, "report.json"), "w") as fh:
        # json.dumps, not json.dump: the latter encodes in pure Python (13 s for trace-kdump's).
        fh.write(json.dumps(keep))
    # Plain kdump: no trace unit was stopped by software, their sessions are open when QEMU
    # exits; the truth as it is then is what the sink got, once no trace reached it after the
    # capture kernel stopped it.
    truth = truth_of(a.dir, a.plain_kdump)
    if a.plain_kdump:
        # The sink stopped last (check_quiet_after_sink_stop): each open session ends where its
        # trace into the sink ended, as a stopped one does.
        for c in truth.values():
            c["reason"] = "stopped"
    if region and a.text_from:
        # The text from a vmcore of the next boot (same kernel, same KASLR offset): csdump must
        # say where its text came from, and the decode is compared like any other.
        if not any(n.startswith("kernel text read from") for n in rep.get("notes", [])):
            raise Bad(f"csdump report does not say it read the kernel text from {a.text_from}: "
                      f"{rep.get('notes')}")
        print(f"the dump is a region file: csdump read the kernel text from {a.text_from} (the next boot)")
        check_ground(a, truth, rep, cpus)
    elif region:
        # A region file has no kernel text as it ran: csdump decodes against vmlinux as built, and
        # code the kernel patched at boot (alternatives, static keys: gic_handle_irq has both)
        # decodes another way than it ran. csdump must say so; the comparison needs a vmcore.
        if not any("code the kernel patched at run time" in n for n in rep.get("notes", [])):
            raise Bad("csdump report does not say that a region's decode uses vmlinux as built")
        print("ground truth: not compared, the dump is a region file without the kernel text as it "
              "ran (csdump notes so); the records are checked against the emulated hardware above")
    else:
        check_ground(a, truth, rep, cpus)
    if a.no_el0:
        check_el0_excluded(a.dir, cpus)
    if a.range:
        print(f"panicking CPU{panic_cpu}: its flow to the crash is outside the range traced, not checked")
    elif panic_cpu not in cpus:
        print(f"panicking CPU{panic_cpu} has no ETM (the faulty one): its flow is not checked")
    else:
        check_panic_path(a, rep, sym, panic_cpu)
    if a.modules_dir:
        check_module_names(rep, sym)
    if a.trigger:
        check_trigger(a, rep, sym)
    if (a.hw_stop or a.no_hw_stop) and panic_cpu in cpus:
        check_hw_stop(a, truth, rep, sym, panic_cpu)
    if a.crashed_cpus:
        check_second_crash(a, truth, rep, sym, panic_cpu)
    if a.plain_kdump:
        # Where the crash stop left the other CPUs (compared with the truth above): their last
        # decoded functions.
        for c in rep["cpus"]:
            if c["cpu"] != panic_cpu and c["functions"]:
                names = [sym(int(f["start"], 16)) for f in c["functions"][-3:]]
                print(f"CPU{c['cpu']}: its trace ends where the crash stopped it: {' -> '.join(names)}")
    check_other_samples(a, truth, rep, pcs, panic_cpu, sym)
    if a.perf:
        check_perf(a, vmcore, sym)


def check_tmc_fault(a, fault, log, vmcore, out, recs, stops):
    """The TMC fault costs the TMC record only: partial/-ETIMEDOUT, its outcome names the fault, the
    panic log and csdump report say so."""
    rec, outcome, flags, rsz, data, words_read = sink_record(out, recs)
    want = TMC_FAULTS[fault]
    if rec["status"] != "partial" or rec["error"] != -110 or outcome != want:
        raise Bad(f"TMC record {rec['status']}/{rec['error']}, outcome {TMC_OUTCOMES.get(outcome, outcome)}: "
                  f"expected partial/-110, {TMC_OUTCOMES[want]}")
    if a.sink.startswith("tmc_etr"):
        check_etr_fault(a, fault, log, vmcore, out, rec, outcome)
        return
    m = re.search(r"tmc_etf0: trace drain: (\w+), (\d+) trace bytes kept", log)
    if not m or m.group(1) != TMC_OUTCOMES[want] or int(m.group(2)) != len(data):
        raise Bad(f"the panic log does not name the TMC fault: {m and m.group(0)}")
    if fault == "tmc-rrd-stuck":
        if words_read != rsz or len(data) != rsz * 4 or not flags & (1 << 6):
            raise Bad(f"stuck drain kept {len(data)} bytes of {words_read} words read, RSZ {rsz}, flags {flags:#x}")
        if not stops:
            raise Bad("the plugin never said the TMC stopped")
    if fault == "tmc-rrd-never-empty":
        # RRD gave the RAM's words from RRP on, wrapping, and never the empty marker: the drain
        # stopped after RSZ words, which are the whole RAM, oldest first from RRP.
        if words_read != rsz or len(data) != rsz * 4 or not flags & (1 << 6):
            raise Bad(f"never-empty drain kept {len(data)} bytes of {words_read} words read, RSZ {rsz}, "
                      f"flags {flags:#x}")
        if not stops or not stops[-1][2]:
            raise Bad("the plugin never said the TMC stopped with its RAM written")
        # The plugin writes its RAM oldest first (from RWP when it wrapped), as the drain reads it.
        ram = open(stops[-1][2], "rb").read()
        held = BARRIER + ram[16:] if flags & (1 << 1) else ram
        if data != held:
            raise Bad("the never-empty drain's record is not the emulated RAM, oldest first")
        print(f"TMC record (tmc-rrd-never-empty): the whole RAM, oldest first ({len(data)} bytes), "
              "equal to the emulated RAM")
    r = run([a.csdump, "report", vmcore, "--vmlinux", a.vmlinux])
    if r.returncode not in (0, 3) or f"drain ended {TMC_OUTCOMES[want]}" not in r.stderr:
        raise Bad(f"csdump report ({r.returncode}) does not warn about the TMC drain: {r.stderr[-1500:]}")
    print(f"TMC fault {fault}: record partial/-ETIMEDOUT, outcome {TMC_OUTCOMES[want]} after {words_read} "
          f"words read (RSZ {rsz}), named in the panic log and by csdump report")


def check_etr_fault(a, fault, log, vmcore, out, rec, outcome):
    """An ETR that never becomes ready: its record names it, after the bounded wait, and the
    panic log and csdump report say so."""
    raw = open(os.path.join(out, rec["file"]), "rb").read()
    ready_delays = struct.unpack_from("<I", raw, 112)[0]
    # TMC_POLL_TRIES in tmc/hw.rs: the wait for TMCReady is bounded, and this one ran to its bound.
    if fault == "tmc-never-ready" and ready_delays != 1000:
        raise Bad(f"the ETR record waited {ready_delays} delays for TMCReady, not the bound (1000)")
    m = re.search(rf"{a.sink}: trace record: (\w+), (\d+) of (\d+) trace bytes copied", log)
    if not m or m.group(1) != TMC_OUTCOMES[outcome]:
        raise Bad(f"the panic log does not name the ETR fault: {m and m.group(0)}")
    stamps = [float(x) for x in re.findall(r"\[\s*(\d+\.\d+)\] (?:Kernel panic - not syncing|coresight_panic_dump: dump committed)", log)]
    if len(stamps) < 2:
        raise Bad("the panic log lacks the panic or the dump's commit line")
    # The wait is bounded by its count of delays, checked above; the wall time from the panic to
    # the commit also holds the other callbacks and whatever the host's emulation costs (the
    # plugin writes its truth when each ETM stops), so it is printed, not judged.
    took = stamps[-1] - stamps[0]
    r = run([a.csdump, "report", vmcore, "--vmlinux", a.vmlinux])
    if r.returncode not in (0, 3) or f"ETR record ended {TMC_OUTCOMES[outcome]}" not in r.stderr:
        raise Bad(f"csdump report ({r.returncode}) does not warn about the ETR: {r.stderr[-1500:]}")
    print(f"ETR fault {fault}: record partial/-ETIMEDOUT, outcome {TMC_OUTCOMES[outcome]} after the bounded "
          f"wait ({ready_delays} delays); the dump committed {took:.3f} s after the panic; named in the "
          "panic log and by csdump report")


def hex_range(v):
    """An address range given as LO:HI (hexadecimal), as a pair."""
    lo, hi = (int(x, 16) for x in v.split(":"))
    return lo, hi


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--csdump", required=True)
    ap.add_argument("--vmlinux", required=True)
    ap.add_argument("--system-map", help="default: System.map next to vmlinux")
    ap.add_argument("--cpus", type=int, required=True)
    ap.add_argument("--through", default="sysrq_handle_crash,panic",
                    help="functions the panicking CPU's decoded flow runs through, in order")
    ap.add_argument("--trigger", help="a function some CPU's decoded flow takes an exception in (an oops)")
    ap.add_argument("--fault", help="the plugin fault of the run (fault=NAME[@CPU])")
    ap.add_argument("--text-from", help="a region file's dump: csdump report --text-from this vmcore "
                    "of the next boot (the kernel text as it ran), and the ground truth compared")
    ap.add_argument("--nokaslr", action="store_true",
                    help="the kernel ran with nokaslr: csdump must find the KASLR offset 0")
    ap.add_argument("--panic-cpu", type=int, help="the CPU the panic must have happened on")
    ap.add_argument("--crashed-cpus", metavar="LIST",
                    help="CPUs that crashed at once (e.g. 0,1): the panic ran on one of them, each other "
                    "one's flow runs through --through as well and stopped at the hardware stop")
    ap.add_argument("--sink", default="tmc_etf0", help="the TMC's name on the CoreSight bus (tmc_etr0: an ETR)")
    ap.add_argument("--perf-session", action="store_true",
                    help="the guest's perf owns the sink and the sources up to the panic (cspd.perf=panic), "
                    "not sysfs: its session is checked instead of sysfs's enables")
    ap.add_argument("--etr-from", help="ETR: where csdump must have read the trace (a part of its 'from')")
    ap.add_argument("--etr-truncated", action="store_true",
                    help="ETR: a DMA buffer larger than the slot: the record keeps its newest bytes")
    ap.add_argument("--etr-wrapped", action="store_true", help="ETR: the buffer must have wrapped")
    ap.add_argument("--last", type=int, default=1000000,
                    help="csdump report --last: enough to hold every decoded branch of a CPU (the whole window is compared)")
    ap.add_argument("--perf", action="store_true", help="also decode csdump's perf.data with perf script")
    ap.add_argument("--exclude-range", metavar="LO:HI", type=hex_range,
                    help="the ETMs were set through sysfs to exclude LO..HI (hexadecimal, both ends included): no "
                         "decoded event from inside it, the CPU ran it, the rest equals the truth")
    ap.add_argument("--range", metavar="LO:HI", type=hex_range,
                    help="the ETMs traced only LO..HI (addr_range, hexadecimal, both ends included): every "
                         "decoded event is inside it; the crash path is not traced")
    ap.add_argument("--no-el0", action="store_true",
                    help="EL0 was excluded through the ETMs' sysfs mode: every unit was programmed so, and "
                         "no CPU's decode runs EL0 code")
    ap.add_argument("--hw-stop", metavar="FUNCS",
                    help="the ETMs stop trace at these functions' entries (e.g. panic,die,die_kernel_fault): "
                         "the panicking CPU's trace must end at one of them (give --through the functions "
                         "before it: nothing of the stopped function is decoded)")
    ap.add_argument("--no-hw-stop", action="store_true",
                    help="the hardware stop is off: no CPU's trace may end at a stop point, and the "
                         "panicking CPU's runs on past --through's last function")
    ap.add_argument("--budget-ms", type=int,
                    help="the CPU debug phase's time budget (coresight_cpu_debug.budget_ms) it must keep")
    ap.add_argument("--compare-only", action="store_true",
                    help="only the ground-truth comparison, on --decoded (harness self-test)")
    ap.add_argument("--decoded", action="append",
                    help="a decoded report (DIR/ground/report.json, possibly altered); with --compare-only "
                    "it may be given more than once, and each report's verdict is printed on its own line")
    ap.add_argument("--modules-dir", help="the kernel build tree: name module code (--trigger, --through) "
                    "from the .ko files, placed as the dump's module list says")
    ap.add_argument("--report", help="csdump report --json --last LAST of the dump, saved by the caller: used "
                    "instead of running it (harness negatives that alter none of its inputs share one decode)")
    ap.add_argument("--plain-kdump", action="store_true",
                    help="kdump without crash_kexec_post_notifiers: nothing ran after panic() in the crashed "
                    "kernel; its ETM records are the configuration recorded at enable, the sink's record "
                    "the capture kernel's device dump, no CPU sample of the crashed kernel's (needs --panic-cpu)")
    ap.add_argument("--locked-cpu", metavar="N:FUNC",
                    help="plain kdump: CPU N spun in FUNC with interrupts masked through the crash: judge the "
                    "capture kernel's sample of it and the report's account of the sink it took after")
    ap.add_argument("--capture-debug", action="store_true",
                    help="plain kdump: the capture kernel loaded the CPU debug driver with debug=1, which "
                    "sampled every CPU but the panicking one as found")
    ap.add_argument("--vmcore", help="the dump csdump reads (default DIR/vmcore.elf; e.g. makedumpfile's "
                    "file of the same panic); the script's own reads stay on DIR/vmcore.elf")
    a = ap.parse_args()
    # Output directories of a run on another file than the raw copy get its name as a suffix.
    a.tag = "" if not a.vmcore else "-" + os.path.basename(a.vmcore).replace(".", "-")
    a.system_map = a.system_map or os.path.join(os.path.dirname(os.path.abspath(a.vmlinux)), "System.map")
    if a.compare_only and not a.decoded:
        ap.error("--compare-only needs --decoded")
    if a.hw_stop and a.no_hw_stop:
        ap.error("--hw-stop and --no-hw-stop exclude each other")
    if a.plain_kdump and a.panic_cpu is None:
        ap.error("--plain-kdump needs --panic-cpu (no record names the panicking CPU)")
    try:
        check(a)
    except Bad as e:
        print(f"check_trace: FAIL: {e}", file=sys.stderr)
        return 1
    print("check_trace: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
