#!/usr/bin/env python3
"""Judges perf mode: what the guest's perf recorded through the production drivers, decoded by a
host perf of the same Linux tree (scripts/host-perf.sh: 7.3's perf, OpenCSD 1.5.5).

The guest (scripts/guest/init) ran `perf record -e cs_etm/@tmc_etf0,timestamp=0/ -a` while a
workload ran on every CPU (cspd.perf=cpu-wide), or `perf record -e cs_etm/@tmc_etf0,timestamp=0/u
--per-thread -- /bin/cspd-loop` pinned to one CPU (cspd.perf=per-thread, --per-thread here), and
wrote perf.data to a raw disk behind a line `CSPDPERF <bytes>`. This script extracts it and
requires:

- perf.data's AUX trace is whole: every PERF_RECORD_AUX the kernel wrote has its bytes in
  PERF_RECORD_AUXTRACE records (read from perf.data's records, not through perf), and the newest
  AUX record's bytes are what the ETF held when it last stopped (tmc.bin, written by the plugin;
  a wrapped buffer's first 16 bytes are the barrier packet the driver writes there);
- the trace IDs perf reports (PERF_RECORD_AUX_OUTPUT_HW_ID, as `perf report -D` shows them: one
  per CPU whose ETM perf used, every CPU cpu-wide, version 0.1, one sink) are the IDs the plugin
  saw that CPU's ETM programmed with at every enable (plugin.log "etm N: enabled, trace id ..");
- `perf script --itrace=be` decodes each CPU's AUX trace without a decoder error, a warning about
  code it could not read, or a discontinuity (one start of trace per CPU; per thread, where the
  kernel is not traced, every end of trace is an exception into the kernel and the next start is
  where the program runs on);
- each CPU's decoded branches and exceptions, the whole window, are what the CPU executed
  according to the independent execution record (exec.rec, tools/exec-record; its reader and
  llvm-mc disassembly from check_exec.py): matched boundary by boundary from the window's newest
  branch back to where the trace starts, each taken branch at the end of a block that ends with a
  branch instruction (a direct one's encoded target is perf's), each exception into the block the
  record runs next (per thread: from the block holding the instruction after perf's last one, into
  a vector, whatever ran between then and the return to where the trace starts again), and every
  boundary of the record that leaves the straight line reported;
- each CPU's decode against the plugin's ground truth (truth.json, written when that CPU's ETM
  stopped: the last session of that CPU). Cpu-wide the ETMs are enabled once per CPU and the
  whole decoded window must be the truth's newest events; per thread the ETM runs a session each
  time the program runs on the CPU, and the whole last session must be perf's newest events. As
  perf represents them: ISB waypoints are no samples, an exception is a sample from the last
  instruction executed before it (after a taken branch: the branch) to the vector, and a newest
  branch that no instruction range follows (the ETM stopped in it) is not decoded;
- per thread, the decoded flow through cspd-loop's run, step_a and step_b is the program's
  (scripts/guest/cspd-loop.c): every iteration's calls, returns and branches, and as many
  iterations as --loops, which the program also says it ran.

Address filters (--filter-range FUNC, cspd.perf=filter-range; --filter-start-stop A B,
cspd.perf=filter-start-stop; both with --per-thread): the guest recorded cspd-loop as above with
`--filter 'filter FUNC @ /bin/cspd-loop'` or `--filter 'start A @ /bin/cspd-loop, stop B @
/bin/cspd-loop'`. The AUX data, trace IDs and build IDs are checked as above; then:

- the plugin saw the ETM programmed with the filter at its last enable (the range as an include
  comparator pair, or the start and stop comparators);
- with a range, every address perf's decode names lies inside it;
- the decode is exactly what the filter lets through of what the program ran on that CPU,
  derived from the execution record (not from the plugin's trace or truth): the program's
  blocks from its entry point on, ViewInst applied to them instruction by instruction as IHI 0064
  defines it (a range's bounds both included, the kernel's upper bound being the instruction after
  FUNC; start/stop active from the start's instruction up to and including the stop's; an
  exception traced when ViewInst was active for the instruction before it), and the trace those
  segments give as perf shows it: a trace start per segment, its taken branches, its last branch
  as the trace's end without a target, an exception as a trace end from the last instruction
  executed, nothing for a segment without a branch or exception, and nothing for the trace's last
  element. The number of trace starts first (an entry into the filter lost or added), then every
  sample in order;
- the newest session the plugin's truth, rendered the same way.

Snapshot mode (--snapshot FUNCS, cspd.perf=snapshot): the guest ran `perf record --snapshot=e -a`
with a workload on every CPU, then on every CPU a marker (a /proc read whose kernel function no
other part of the run calls: FUNCS, in order) right before each snapshot: two on SIGUSR2, the last
at exit (SIGINT). Perf disables its events for a snapshot (the ETMs stop, the last one's disable
has the sink hand its RAM to that CPU's AUX buffer and move the head on), reads the AUX buffers and
enables the events again, but not after the snapshot at exit. Required:

- one PERF_RECORD_AUX per snapshot (flags OVERWRITE alone: a sink leaves TRUNCATED out in
  snapshot mode, as upstream's) and its bytes whole in the AUXTRACE record perf wrote of it (the
  same CPU's buffer, the kernel's head less the size); each snapshot is what the ETF held when it
  stopped for it (one plugin stop per snapshot: its size, the barrier packet first where it
  wrapped), the newest byte for byte (tmc.bin);
- the trace IDs as above, every CPU's ETM enabled once per snapshot with that ID;
- perf's decode of perf.data without an error or a discontinuity: perf takes its AUX buffers in
  CPU order, each buffer's snapshots in the order written, and every CPU's trace starts once in
  each snapshot; where a buffer holds a next snapshot, perf ends each CPU's trace with a sample of
  the branch the ETM stopped in (no target), which must be the branch that ends the block the
  execution record runs after the window;
- each CPU's decode of each snapshot calls that snapshot's marker and no other one's;
- each CPU's whole window of each snapshot what the CPU executed according to the execution
  record, as above; newest snapshot first, each older one found before the window of the snapshot
  after it (the windows follow each other in the record, in the order the snapshots were taken);
- the newest snapshot (at exit) against the plugin's truth as cpu-wide: the truth keeps each CPU's
  last session, which is the one that snapshot holds (perf enabled the events again after each
  SIGUSR2 snapshot, so their sessions are not in the truth, nor their RAM in tmc.bin).

User space is left out cpu-wide: perf decodes cpu-wide trace without timestamps after the fact,
with no thread to map user addresses to (the trace has no context IDs), so it loses the flow at
each return to user space and picks it up at the next exception into the kernel; it reports that
as one sample from the return (ERET) to the vector. The judges take such a sample as a return to
user space followed by an exception from there: in the record, every block between is user code;
in the truth, its user-space branches are skipped. They are counted. Per thread, the program's
binary is given (--symfs) and its user space is decoded whole.

How perf is given the kernel (cpu-wide): perf takes EL1 trace without context IDs for a guest's
(cs_etm__get_machine), so the guest options are given (they turn on its guest processing), and
the code it decodes is read through the recorded kernel and module maps from a kcore, as `perf
record --kcore` would have saved it (--kallsyms DIR/kallsyms with DIR/kcore and DIR/modules): the
kernel text and every module's text as they ran, read from the vmcore (alternatives, jump labels
and module relocations are applied at boot or load, so vmlinux and the .ko files would not do),
in one segment from the lowest module to the end of the kernel's text, and the KPTI trampoline's
alias in a segment of its own. One segment, because perf's CoreSight decoder takes an address
below its kernel map for user space; arm64 loads modules below the kernel. The guest keeps a perf
event open until the panic, so that the scheduler's perf jump labels are as they were while perf
recorded.

Prints per CPU (and snapshot) how many branches and exceptions were compared; exits 1 naming the
first difference.
"""

import argparse
import itertools
import os
import re
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_exec  # noqa: E402  (the execution record, llvm-mc)
import check_modules  # noqa: E402  (the guest's module list, the .ko files)
import check_trace  # noqa: E402  (the vmcore and its page tables)
import check_upstream  # noqa: E402  (vmlinux's executable sections)

KERNEL_VA = check_exec.KERNEL_VA
PERFILE2 = b"PERFILE2"
PERF_RECORD_AUX = 11
PERF_RECORD_AUXTRACE = 71
PERF_SAMPLE_CPU_IDENTIFIER = 0x80 | 0x10000
PERF_AUX_FLAG_OVERWRITE = 0x2
BARRIER = struct.pack("<4I", *([0x7FFFFFFF] * 4))
# CS_AUX_HW_ID (include/linux/coresight-pmu.h): trace ID [7:0], sink ID [39:8], minor version
# [59:56], major version [63:60]; the kernel writes version 0.1.
HW_ID_VERSION = (0, 1)
# A hardware breakpoint event's sample in perf script's output (-F cpu,flags,ip,addr): no CPU
# (per thread), no flags, no address, the ip.
BP_SAMPLE = re.compile(r"^\[-01\]\s+0\s+([0-9a-f]+)$")
SAMPLE = re.compile(r"^\[\s*(\d+)\]\s+(.*?)\s+([0-9a-f]+) =>\s+([0-9a-f]+)$")


class Bad(Exception):
    pass


def run(cmd, **kw):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, **kw)
    except FileNotFoundError:
        raise Bad(f"{cmd[0]} is missing")


# --- perf.data --------------------------------------------------------------------------------

def extract(disk, out):
    """perf.data from the guest's raw disk ("CSPDPERF <bytes>\\n" then the file)."""
    try:
        with open(disk, "rb") as f:
            line = f.readline(64)
            m = re.match(rb"CSPDPERF (\d+)\n$", line)
            if not m:
                raise Bad(f"{disk} does not start with the guest's 'CSPDPERF <bytes>' line: {line[:40]!r}")
            data = f.read(int(m.group(1)))
    except OSError as e:
        raise Bad(f"cannot read the perf disk: {e}")
    if len(data) != int(m.group(1)):
        raise Bad(f"{disk} holds {len(data)} bytes of perf.data, its header says {int(m.group(1))}")
    if data[:8] != PERFILE2:
        raise Bad(f"the guest's perf.data does not start with {PERFILE2!r}: {data[:8]!r}")
    with open(out, "wb") as f:
        f.write(data)
    return data


def aux_records(data):
    """perf.data's AUX trace, read from its records (not through perf): the PERF_RECORD_AUX
    records the kernel wrote, (cpu, offset, size, flags), and the PERF_RECORD_AUXTRACE records
    perf record wrote with their payload, (cpu, idx, offset, bytes), in file order."""
    attrs_off, _attrs_size, data_off, data_size = struct.unpack_from("<QQQQ", data, 24)
    # The CPU of a record other than a sample is in its sample_id (sample_id_all), parsed from the
    # record's end: IDENTIFIER last, the CPU (u32 cpu, u32 reserved) before it.
    sample_type, = struct.unpack_from("<Q", data, attrs_off + 24)
    if sample_type & PERF_SAMPLE_CPU_IDENTIFIER != PERF_SAMPLE_CPU_IDENTIFIER:
        raise Bad(f"perf.data's first event samples {sample_type:#x}, without CPU and IDENTIFIER")
    pos, end, aux, auxtrace = data_off, data_off + data_size, [], []
    if end > len(data):
        raise Bad(f"perf.data's data section ends at {end}, past the file's {len(data)} bytes")
    while pos < end:
        typ, _misc, size = struct.unpack_from("<IHH", data, pos)
        if size < 8:
            raise Bad(f"perf.data: a record of size {size} at offset {pos:#x}")
        if typ == PERF_RECORD_AUX:
            off, n, flags = struct.unpack_from("<QQQ", data, pos + 8)
            cpu, = struct.unpack_from("<I", data, pos + size - 16)
            aux.append((cpu, off, n, flags))
        if typ == PERF_RECORD_AUXTRACE:
            n, off, _ref, idx, _tid, cpu = struct.unpack_from("<QQQIII", data, pos + 8)
            payload = data[pos + size:pos + size + n]
            if len(payload) != n:
                raise Bad(f"perf.data: the AUXTRACE record at {pos:#x} announces {n} bytes, "
                          f"{len(payload)} follow")
            auxtrace.append((cpu if cpu != 0xFFFFFFFF else -1, idx, off, payload))
            pos += size + n
        else:
            pos += size
    return aux, auxtrace


def perf_dump(perf, path):
    """What `perf report -D` says: the AUX_OUTPUT_HW_ID records (cpu, hw_id), records of lost data
    or trace errors, and the build IDs of the executable mappings by file name."""
    r = run([perf, "report", "-D", "-i", path])
    if r.returncode != 0:
        raise Bad(f"perf report -D failed ({r.returncode}): {r.stderr[-1000:]}")
    hw, trouble, maps = [], [], {}
    for line in r.stdout.splitlines():
        mm = re.search(r"PERF_RECORD_MMAP2 .*<([0-9a-f]+)>\]: r-xp (\S+)$", line)
        if mm:
            maps.setdefault(mm.group(2), set()).add(mm.group(1))
        # "CPU [TIME] OFFSET [SIZE]: PERF_RECORD_..." (no time without PERF_SAMPLE_TIME)
        m = re.match(r"(-?\d+) (?:\S+ )?0x[0-9a-f]+ \[0x[0-9a-f]+\]: PERF_RECORD_(\w+)(.*)", line)
        if not m:
            continue
        cpu, kind, rest = int(m.group(1)), m.group(2), m.group(3)
        if kind == "AUX_OUTPUT_HW_ID":
            hw.append((cpu, int(re.search(r"hw_id: (0x[0-9a-f]+)", rest).group(1), 16)))
        elif kind in ("LOST", "LOST_SAMPLES", "AUXTRACE_ERROR"):
            trouble.append(line.strip())
    return hw, trouble, maps


def records(data):
    """perf.data's records in file order: (position, type, length with an AUXTRACE record's
    payload)."""
    _a, _s, data_off, data_size = struct.unpack_from("<QQQQ", data, 24)
    pos, end, out = data_off, data_off + data_size, []
    while pos < end:
        typ, _misc, size = struct.unpack_from("<IHH", data, pos)
        if size < 8:
            raise Bad(f"perf.data: a record of size {size} at offset {pos:#x}")
        n = size + (struct.unpack_from("<Q", data, pos + 8)[0] if typ == PERF_RECORD_AUXTRACE else 0)
        out.append((pos, typ, n))
        pos += n
    return out


def build_id(binary):
    r = run(["llvm-readelf-19", "-n", binary])
    m = re.search(r"Build ID: ([0-9a-f]+)", r.stdout)
    if r.returncode != 0 or not m:
        raise Bad(f"{binary} has no build ID ({r.stderr.strip()[-200:]})")
    return m.group(1)


def check_aux(aux, auxtrace, tmc, tmc_stops, pauses=None, off_cpu=0, tmc_held=None):
    """The AUX trace is whole: the bytes of every AUX record are in AUXTRACE records, and the
    newest AUX record's bytes are what the ETF held when it last stopped with trace (perf gives no
    AUX record for an empty drain; tmc.bin.held then keeps that stop). The AUX buffers are per
    CPU (cpu-wide: AUXTRACE records name their CPU) or per thread (one buffer, its AUXTRACE
    records name no CPU, the AUX records the CPU each session ran on). With `pauses` (perf's AUX
    pause): one AUX record per pause, in order the sizes of the ETF's drains that held trace.
    Returns a note."""
    if not aux:
        raise Bad("perf.data has no PERF_RECORD_AUX: the sink gave perf no trace")
    per_thread = all(c == -1 for c, *_ in auxtrace) and auxtrace
    if per_thread and len({i for _c, i, *_ in auxtrace}) != 1:
        raise Bad("per-thread AUXTRACE records of more than one buffer")
    key = (lambda c: -1) if per_thread else (lambda c: c)
    streams = {}
    for c, _i, off, p in sorted(auxtrace, key=lambda r: r[2]):
        s = streams.setdefault(key(c), bytearray())
        if off != len(s):
            raise Bad(f"the AUX data is cut: CPU{c}'s AUXTRACE record at AUX offset {off:#x} follows "
                      f"{len(s):#x} bytes")
        s += p
    for k in sorted({key(c) for c, *_ in aux}):
        want = sum(n for c, _o, n, _f in aux if key(c) == k)
        have = len(streams.get(k, b""))
        if have != want:
            where = "the thread's buffer" if per_thread else f"CPU{k}"
            raise Bad(f"the AUX data is cut: the kernel wrote {want} bytes of AUX trace to {where} "
                      f"(PERF_RECORD_AUX), perf.data holds {have} of them (PERF_RECORD_AUXTRACE)")
    bad = [f for *_, f in aux if f & ~0x1]
    if bad:
        raise Bad(f"PERF_RECORD_AUX flags {bad[0]:#x}: other than truncated (an ETF that wrapped)")
    if pauses is not None:
        # AUX pause: each pause drains the sink into the AUX buffer (an AUX record of what the
        # ETF held), and the end of the session finds it empty (no record). So does a stop of
        # the unit while the trace runs (`off_cpu`: the scheduler took the thread off its CPU),
        # when the sink held trace by then.
        drains = [n for n, _full in tmc_stops if n]
        sizes = [n for _c, _o, n, _f in aux]
        if not pauses <= len(aux) <= pauses + off_cpu:
            raise Bad(f"perf.data has {len(aux)} PERF_RECORD_AUX, the execution record pauses the trace "
                      f"{pauses} times and the plugin saw the unit stopped {off_cpu} more times (the thread "
                      "off its CPU): each pause, and each such stop with trace, drains the sink into an AUX "
                      "record of its own")
        if sizes != drains:
            i = next((i for i in range(min(len(sizes), len(drains))) if sizes[i] != drains[i]), None)
            at = f"the AUX record {i + 1} holds {sizes[i]} bytes, the ETF's drain {i + 1} {drains[i]}" if i is not None \
                else f"{len(sizes)} AUX records, {len(drains)} drains of the ETF that held trace"
            raise Bad(f"the AUX records are not the ETF's drains, in order: {at}")
        if any(f for *_, f in aux):
            raise Bad("an AUX record is truncated: a drain of a pause lost trace")
        more = len(aux) - pauses
        return (f"{len(aux)} AUX records, one per pause"
                + (f" and {more} for the thread's time off the CPU" if more else "")
                + f", each the bytes the ETF held when it was drained ({sum(sizes)} bytes, all in "
                f"{len(auxtrace)} AUXTRACE record(s))")
    if not tmc_stops:
        raise Bad("the plugin never stopped the TMC: no ETF content to compare the AUX data with")
    # A drain of an empty ETF gives perf no AUX record: the newest record is the newest stop that
    # held trace (tmc.bin, or tmc.bin.held when later stops held none).
    empty = next((k for k in range(len(tmc_stops)) if tmc_stops[-1 - k][0]), len(tmc_stops))
    held, full = tmc_stops[-1 - empty] if empty < len(tmc_stops) else tmc_stops[-1]
    which = "tmc.bin" if not empty else "tmc.bin.held"
    if empty:
        tmc = tmc_held
    last = aux[-1]
    got = bytes(streams[key(last[0])][-last[2]:]) if last[2] else b""
    if tmc is None or len(got) != held or len(tmc) != held:
        raise Bad(f"the newest AUX record holds {len(got)} bytes, the ETF held {held} when it last "
                  f"stopped with trace ({which}: {'missing' if tmc is None else f'{len(tmc)} bytes'}"
                  f"{f'; {empty} later stops held none' if empty else ''})")
    if full:
        if got[:16] != BARRIER:
            raise Bad("the ETF wrapped, but the newest AUX record does not start with the barrier packet")
        got, tmc = got[16:], tmc[16:]
    if got != tmc:
        at = next(i for i in range(len(got)) if got[i] != tmc[i])
        raise Bad(f"the AUX data differs from what the ETF held ({which}) at byte {at + 16 * full:#x}")
    return (f"{len(aux)} AUX record(s), {sum(len(x) for x in streams.values())} bytes of trace in "
            f"{len(auxtrace)} AUXTRACE record(s); the newest AUX record's {held} bytes what the ETF held "
            "when it last stopped" + (f" with trace ({which}; {empty} later stops held none)" if empty else "")
            + (" (wrapped: the barrier packet first)" if full else ""))


def check_trace_ids(hw, enabled, cpus):
    """perf's trace IDs (AUX_OUTPUT_HW_ID, one per CPU whose ETM perf enabled) against every
    enable the plugin saw; `cpus`: the CPUs that must have one."""
    ids, sinks = {}, set()
    for cpu, v in hw:
        major, minor, sink, tid = v >> 60, (v >> 56) & 0xF, (v >> 8) & 0xFFFFFFFF, v & 0xFF
        if (major, minor) != HW_ID_VERSION:
            raise Bad(f"CPU{cpu}: AUX_OUTPUT_HW_ID {v:#x} is version {major}.{minor}, not "
                      f"{HW_ID_VERSION[0]}.{HW_ID_VERSION[1]}")
        if ids.get(cpu, tid) != tid:
            raise Bad(f"CPU{cpu}: perf reports trace IDs {ids[cpu]:#x} and {tid:#x}")
        ids[cpu] = tid
        sinks.add(sink)
    if len(sinks) > 1:
        raise Bad(f"AUX_OUTPUT_HW_ID names {len(sinks)} sinks: {sorted(hex(s) for s in sinks)}")
    for cpu in sorted(set(cpus) | set(ids) | set(enabled)):
        if cpu not in ids:
            raise Bad(f"CPU{cpu}: perf.data has no AUX_OUTPUT_HW_ID (perf cannot map its trace ID)")
        seen = enabled.get(cpu, [])
        if not seen:
            raise Bad(f"CPU{cpu}: perf reports trace ID {ids[cpu]:#x}, but the plugin never saw its ETM enabled")
        other = sorted({t for t in seen if t != ids[cpu]})
        if other:
            raise Bad(f"CPU{cpu}: perf reports trace ID {ids[cpu]:#x}, the plugin saw the ETM "
                      f"programmed with {', '.join(hex(t) for t in other)}")
    if len(set(ids.values())) != len(ids):
        raise Bad(f"two CPUs share a trace ID: {ids}")
    return ids


# --- the kernel as it ran, for perf -----------------------------------------------------------

def guest_image(d, vmcore, vmlinux, modules_dir, out):
    """Writes out/{kcore,kallsyms,modules}: the kernel's executable sections and each module's
    text as they ran (the vmcore), in one PT_LOAD from the lowest module to the kernel's end.
    Returns (kernel bytes that differ from vmlinux, modules, the first alias page and how many)."""
    vc = check_trace.Vmcore(vmcore)
    koff = int(vc.info.get("KERNELOFFSET", "0"), 16)
    segs, patched, phys = [], 0, []
    for name, addr, built in check_upstream.exec_sections(vmlinux):
        ran = vc.read_phys(vc.image_pa(addr + koff), len(built))
        if ran is None:
            raise Bad(f"the vmcore does not hold vmlinux's {name} at {addr + koff:#x}")
        patched += sum(a != b for a, b in zip(ran, built))
        segs.append((addr + koff, bytes(ran)))
        phys.append((vc.image_pa(addr + koff), len(built)))
    # Kernel text also mapped above the image: the KPTI trampoline's fixmap alias, where the CPU
    # runs the entry and exit of user space (a kernel with KASLR on a CPU without E0PD).
    image_end = max(a + len(x) for a, x in segs)
    aliases = []
    for va, pa, n in sorted(vc.mappings(image_end, 1 << 64)):
        if n == 4096 and any(p <= pa < p + s for p, s in phys):
            aliases.append((va, bytes(vc.read_phys(pa, n))))
    try:
        mods = check_modules.guest_modules(os.path.join(d, "console.log"))
    except check_modules.Bad as e:
        raise Bad(str(e))
    lines = []
    for name, (base, _state) in sorted(mods.items()):
        ko = check_modules.ko_path(modules_dir, name)
        if not ko:
            raise Bad(f"module {name}: no {name}.ko under {modules_dir}")
        # The text the loader lays out: the .ko's executable sections (init code is freed).
        size = sum(len(data) + 64 for sname, flags, data, _t, _l in check_modules.ko_sections(ko).values()
                   if flags & 0x6 == 0x6 and not sname.startswith((".init", ".exit")))
        size = (size + 4095) & ~4095
        text, at = b"", base
        for va, pa, n in sorted(vc.mappings(base, base + size)):
            if va > at:
                break
            take = min(va + n, base + size) - at
            if take > 0:
                text += vc.read_phys(pa + at - va, take)
                at += take
        if not text:
            raise Bad(f"module {name}: the vmcore's page tables map nothing at its text {base:#x}")
        segs.append((base, text))
        lines.append(f"{name} {len(text)} 0 - Live {base:#x}\n")
    segs.sort()
    for (a, x), (b, _) in zip(segs, segs[1:]):
        if a + len(x) > b:
            raise Bad(f"the text at {a:#x} overlaps the text at {b:#x}")
    lo, hi = segs[0][0] & ~0xFFF, segs[-1][0] + len(segs[-1][1])
    # The first segment holds _stext and starts at the lowest module: perf's kernel map. The
    # aliases follow it, one segment each, in the file after it.
    loads = [(lo, hi - lo, 4096)]
    at = (4096 + hi - lo + 4095) & ~4095
    for va, x in aliases:
        loads.append((va, len(x), at))
        at += len(x)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "kcore"), "wb") as f:
        f.write(b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
                + struct.pack("<HHIQQQIHHHHHH", 4, 183, 1, 0, 64, 0, 0, 64, 56, len(loads), 0, 0, 0))
        for va, n, off in loads:
            f.write(struct.pack("<IIQQQQQQ", 1, 5, off, va, 0, n, n, 4096))
        for a, x in segs:
            f.seek(4096 + a - lo)
            f.write(x)
        for (va, x), (_, _, off) in zip(aliases, loads[1:]):
            f.seek(off)
            f.write(x)
        f.truncate(at)
    with open(os.path.join(out, "modules"), "w") as f:
        f.writelines(lines)
    r = run(["llvm-nm-19", "-n", "--defined-only", vmlinux])
    if r.returncode != 0:
        raise Bad(f"llvm-nm-19 {vmlinux} failed: {r.stderr[-500:]}")
    with open(os.path.join(out, "kallsyms"), "w") as f:
        for p in (line.split() for line in r.stdout.splitlines()):
            if len(p) == 3 and p[1] in "TtWw" and int(p[0], 16) >= KERNEL_VA:
                f.write(f"{int(p[0], 16) + koff:016x} {'t' if p[1] in 'tw' else 'T'} {p[2]}\n")
    return patched, sorted(mods), aliases[0][0] if aliases else None, len(aliases)


# --- perf's decode ----------------------------------------------------------------------------

def image_summary(patched, mods, alias, pages):
    """What guest_image gave perf, for the log."""
    return (f"kernel text for perf: from the vmcore ({patched} bytes differ from vmlinux), "
            + (f"the text of {', '.join(mods)}" if mods else "no module loaded")
            + (f", {pages} pages of it also mapped at {alias:#x} (the KPTI trampoline)" if pages else ""))


def perf_script(perf, path, image, out, symfs=None):
    """`perf script --itrace=be` (branches, errors) with the kcore, or with --symfs for a user-space
    program (per-thread); its output goes to `out`."""
    if symfs:
        where = ["--symfs", symfs]
    else:
        k = os.path.join(image, "kallsyms")
        where = ["--kallsyms", k, "--guestkallsyms", k, "--guestmodules", os.path.join(image, "modules")]
    r = run([perf, "script", "-i", path] + where + ["--itrace=be", "-F", "cpu,flags,ip,addr"])
    if r.returncode != 0:
        raise Bad(f"perf script failed ({r.returncode}): {r.stderr[-1000:]}")
    with open(out, "w") as f:
        f.write(r.stdout)
    # Warnings perf prints for any cs_etm trace without timestamps or with a wrapped sink.
    benign = ("Warning:", "Virtual timestamps are not enabled", "The time field of the samples",
              "For Arm CPUs prior to Armv8.4", "you can specify the itrace option 'T'",
              "if the Coresight timestamp", "AUX data lost")
    worry = [ln.strip() for ln in r.stderr.splitlines() if ln.strip() and not ln.strip().startswith(benign)]
    if worry:
        raise Bad(f"perf script warned: {' | '.join(worry[:3])}")


def perf_samples(path, other=None):
    """perf script's samples in `path`, in order: (line number, CPU, flags, from, to). A line that
    is no sample is `other`'s when it takes it (returns True), else a decoder error: once every
    sample was given, the errors end the walk (Bad)."""
    errors = []
    for n, line in enumerate(open(path), 1):
        line = line.rstrip("\n")
        if not line.strip():
            continue
        m = SAMPLE.match(line)
        if m:
            yield n, int(m.group(1)), m.group(2), int(m.group(3), 16), int(m.group(4), 16)
        elif not (other and other(line)):
            errors.append(f"line {n}: {line.strip()}")
    if errors:
        raise Bad(f"perf's decode has {len(errors)} errors: {' | '.join(errors[:3])}")


def decoded(path, per_thread=False):
    """perf script's output, per CPU: the trace start and the samples, oldest first: ('B', from,
    to) a taken branch, ('X', from, vector) an exception. Per-thread (user space only), an
    exception ends the trace (the kernel is not traced) and the return from it starts it again:
    ('K', from, resume), from the last instruction executed before the exception to where the
    program ran on; the trace's last exception, with nothing after it, is no event."""
    starts, events, open_end = {}, {}, {}
    for n, cpu, flags, frm, to in perf_samples(path):
        exc = re.search(r"\b(int|syscall|async)\b", flags)
        if "tr end" in flags:
            if not per_thread or not exc or cpu in open_end:
                raise Bad(f"CPU{cpu}: perf's decode ends the trace at {frm:#x} ({path}:{n}): a discontinuity")
            open_end[cpu] = frm
            continue
        if "tr strt" in flags:
            if cpu in open_end:
                events[cpu].append(("K", open_end.pop(cpu), to))
                continue
            if cpu in starts:
                raise Bad(f"CPU{cpu}: perf's decode starts the trace again at {to:#x} ({path}:{n}): "
                          "a discontinuity")
            starts[cpu] = to
            events.setdefault(cpu, [])
            continue
        if cpu not in starts or cpu in open_end:
            raise Bad(f"CPU{cpu}: a sample outside the trace ({path}:{n})")
        events[cpu].append(("X" if exc else "B", frm, to))
    return starts, events


def describe(e):
    what = {"B": "branch", "X": "exception", "K": "exception into the kernel, back at"}[e[0]]
    return f"{what} {e[1]:#x} -> {e[2]:#x}"


# --- against the execution record -------------------------------------------------------------

class Short(Exception):
    pass


class Matcher:
    """perf's samples of one CPU against the record's block boundaries, newest first."""

    def __init__(self, rec, dis, cpu, events, start):
        self.rec, self.dis, self.cpu, self.ev, self.start = rec, dis, cpu, events, start
        self.user = self.returns = self.kernel = 0
        self.deepest = len(events)

    def must_report(self, a, b):
        start, words = a
        if b[0] != start + 4 * len(words):
            return True
        return self.dis.cache.get(words[-1], (None, 0))[0] in ("direct", "indirect")

    @staticmethod
    def hit(e, a, b):
        last = a[0] + 4 * len(a[1]) - 4
        return e[2] == b[0] and (e[0] != "B" or e[1] == last)

    def match_at(self, it, i, stop_after=None):
        """Matches ev[..i] against the boundaries `it` yields; returns how many matched."""
        ev, cpu = self.ev, self.cpu
        matched, pending = 0, None
        for a, b in it:
            self.deepest = min(self.deepest, i)
            if stop_after is not None and matched >= stop_after:
                return matched
            start, words = a
            end = start + 4 * len(words)
            last = end - 4
            kind, off = self.dis.cache.get(words[-1], (None, 0))
            if pending is not None:
                what, f, at = pending
                if what in ("kernel", "kernel-entry"):
                    # Per-thread: back from the return to where the program ran on, to the
                    # exception it took there; the kernel and any other task ran between,
                    # untraced. The exception is taken from a user block that holds the
                    # instruction after `f` (or that `f` ends) into a vector, or from the first
                    # instruction of a block that a taken branch at `f` entered.
                    if what == "kernel-entry" and start < KERNEL_VA and last == f and kind is not None:
                        pending = None
                        continue
                    pending = ("kernel", f, at)
                    if start < KERNEL_VA <= b[0] and not b[0] & 0x7F:
                        if start - 4 <= f <= last:
                            pending = None
                            continue
                        pending = ("kernel-entry", f, at)
                    self.kernel += 1
                    continue
                if what == "user":
                    # Perf lost the flow at a return to user space (ERET at f): every block back to
                    # it is user code.
                    if start < KERNEL_VA:
                        self.user += 1
                        continue
                    if b[0] >= KERNEL_VA or last != f:
                        raise Bad(f"CPU{cpu}: perf's event {at} ({describe(ev[at])}) returns to user space "
                                  f"at {f:#x}, but the record enters the user code before the vector from "
                                  f"{last:#x} (block {start:#x}..{end:#x} -> {b[0]:#x})")
                    pending = None
                    continue
                # "entry": the exception came at the first instruction of the block after a taken
                # branch at f, which must be this boundary.
                if last != f or kind is None:
                    raise Bad(f"CPU{cpu}: perf's event {at} ({describe(ev[at])}) leaves {f:#x}, but the "
                              f"record enters the faulting block {b[0]:#x} from {last:#x}")
                pending = None
                continue
            if i < 0:
                # Back to the start of the trace: it is in block B, or straight-line before it.
                if b[0] <= self.start < b[0] + 4 * len(b[1]):
                    return matched
                if self.must_report(a, b):
                    raise Bad(f"CPU{cpu}: perf's trace starts at {self.start:#x}, but the record enters "
                              f"block {b[0]:#x} from {last:#x} before the first decoded branch")
                continue
            e = ev[i]
            if e[0] == "B" and e[1] == last and e[2] == b[0]:
                if kind is None:
                    raise Bad(f"CPU{cpu}: perf's event {i} is a taken branch from {last:#x}, which "
                              f"{check_exec.LLVM_MC} does not disassemble as a branch")
                if kind in ("direct", "cond") and last + off != b[0]:
                    raise Bad(f"CPU{cpu}: perf's event {i} is a branch from {last:#x} to {b[0]:#x}, but the "
                              f"instruction there branches to {last + off:#x}")
                i -= 1
                matched += 1
                continue
            if e[0] == "K" and e[2] == b[0] and start >= KERNEL_VA:
                # The return from the kernel to where the program ran on.
                pending = ("kernel", e[1], i)
                self.returns += 1
                i -= 1
                matched += 1
                continue
            if e[0] == "X" and e[2] == b[0]:
                if e[2] & 0x7F:
                    raise Bad(f"CPU{cpu}: perf's exception at event {i} enters {e[2]:#x}, which is not an "
                              "exception vector (vector entries are 0x80 apart)")
                f = e[1]
                if start < KERNEL_VA <= f:
                    pending = ("user", f, i)
                    self.returns += 1
                elif f == last:
                    pass  # between two blocks (an interrupt; or right after a taken branch)
                elif check_exec.asynchronous(e[2]):
                    raise Bad(f"CPU{cpu}: perf's interrupt at event {i} ({describe(e)}) is taken after "
                              f"{f:#x}, but the record takes it after block {start:#x}..{end:#x}")
                elif not start - 4 <= f < last:
                    pending = ("entry", f, i)
                i -= 1
                matched += 1
                continue
            if self.must_report(a, b):
                raise Bad(f"CPU{cpu}: perf's event {i} ({describe(e)}) is not what the CPU did: the record "
                          f"has block {start:#x}..{end:#x} (last instruction {last:#x}, "
                          f"{kind or 'not a branch'}) followed by {b[0]:#x}")
        if i >= 0 or pending is not None:
            raise Short(i)
        return matched


def trace_end(k, cpu, kind, frm, nxt, dis):
    """Checks the trace end perf shows between two snapshots (a `kind` at `frm`, no target) against
    the blocks the record runs after the window's newest event (`nxt`): the ETM stopped in the
    branch that ends one of them, reached by falling through the ones before (each ends with an
    ISB or a branch not taken: the next starts right after it); a taken branch on the way would
    have been a sample of perf's."""
    for n, (start, words) in enumerate(nxt):
        last = start + 4 * len(words) - 4
        if frm == last and dis.cache.get(words[-1], (None, 0))[0] is not None:
            how = "next" if n == 0 else f"{n} blocks later, falling through ISBs and branches not taken"
            return f"; its trace end, a {kind} at {frm:#x}, the branch that ends the block the record runs {how}"
        if n + 1 < len(nxt) and nxt[n + 1][0] != last + 4:
            break
    first = nxt[0][0]
    raise Bad(f"snapshot {k + 1}: CPU{cpu}: perf's decode ends the snapshot's trace with a {kind} at {frm:#x}, "
              f"but the record runs block {first:#x}..{first + 4 * len(nxt[0][1]):#x} after the window's newest "
              "event and no branch it falls through to is that one (the branch the ETM stopped in ends it)")


# Blocks check_record returns after a window's newest event: enough to walk from it to where the
# trace ended through ISBs and branches not taken.
FOLLOWING = 16


def check_record(rec, dis, cpu, events, start, ring=None, at=None):
    """Finds perf's decode of `cpu` in the record (the newest place where its newest events match;
    with `at`, a position of check_exec.boundaries, the newest before it) and matches the whole
    window there. Returns (boundaries after its end, counted from `at`, user-space blocks, returns
    to user space, kernel blocks between exceptions (per thread), boundaries the window spans, the
    position of its oldest boundary, the blocks the record runs after the window's newest event:
    the first and up to FOLLOWING - 1 more)."""
    if ring is None:
        ring, wrapped = rec.ring(cpu)
    else:
        wrapped = rec.counts[cpu] > rec.entries
    m = Matcher(rec, dis, cpu, events, start)
    n = len(events)
    run_len = min(check_exec.ANCHOR_RUN, n)
    best = None
    # The boundaries where the newest event can be, found by searching the ring (not by walking
    # every boundary after it): newest first, those before `at` when it is given.
    newest = events[-1]
    as_exec = ("T" if newest[0] == "B" else "X", newest[1], newest[2])
    for (a, b), pos in check_exec.hits(rec, ring, as_exec, lambda _e, a, b: m.hit(newest, a, b)):
        if at is not None and pos >= at:
            continue
        oldest = [pos, 1]

        def from_here():
            yield (a, b)
            for bd, p in check_exec.boundaries(rec, ring, pos):
                oldest[0] = p
                oldest[1] += 1
                yield bd
        try:
            if m.match_at(from_here(), n - 1, stop_after=run_len) < run_len:
                continue
        except (Bad, Short):
            continue
        m.user, m.returns, m.kernel, m.deepest = 0, 0, 0, n
        oldest = [pos, 1]
        try:
            m.match_at(from_here(), n - 1)
            seen = check_exec.walked_to(ring, pos) - (check_exec.walked_to(ring, at) if at is not None else 0)
            return (seen - 1, m.user, m.returns, m.kernel, oldest[1], oldest[0],
                    [b] + check_exec.following(rec, ring, pos, FOLLOWING)[1:])
        except Short as s:
            why = f"its ring keeps the newest {rec.entries} blocks" if wrapped else "it starts there"
            err = Bad(f"CPU{cpu}: the execution record does not reach back to perf's oldest {s.args[0] + 1} "
                      f"events ({why}): a sizing error of the harness, not a verdict on the trace")
            depth = max(s.args[0], 0)
        except Bad as e:
            err, depth = e, m.deepest
        if best is None or depth < best[0]:
            best = (depth, err)
    if best is not None:
        raise best[1]
    raise Bad(f"CPU{cpu}: perf's newest event ({describe(events[-1])}) and the {run_len} before it are "
              f"nowhere in the execution record as a run" + (" (its ring wrapped)" if wrapped else ""))


# --- against the plugin's truth ---------------------------------------------------------------

def truth_as_perf(tc, user_only=False):
    """The truth's events as perf represents them (see the module's docstring), oldest first; the
    user-space events left out (kernel traced) or the kernel's (user space only); whether the
    newest event is followed by an instruction range that does not end (the ETM stopped in it), so
    that perf makes no sample of it."""
    out, left_out, gone, exc = [], 0, None, None
    # Kernel traced: an atom after the newest taken branch (a not-taken branch, an ISB's
    # waypoint) ends the range at its target, so that perf samples the branch.
    atom_after = False
    for e in tc["events"]:
        k = e["kind"]
        if not user_only and k in ("not-taken", "waypoint") and gone is None and out \
                and int(e["from"], 16) >= KERNEL_VA:
            atom_after = True
        if k in ("taken", "exception"):
            atom_after = False
        if user_only and k == "gap" and exc is not None:
            # The kernel is not traced: the exception, then the trace resumes where the program
            # runs on.
            out.append(("K", exc, int(e["to"], 16)))
            exc = None
            continue
        if k not in ("taken", "exception"):
            continue  # not-taken, waypoint (an ISB is no sample), gap
        f, t = int(e["from"], 16), int(e["to"], 16)
        if k == "exception" and (user_only or (gone is None and f >= KERNEL_VA)):
            # From the last instruction executed: the one before the preferred return, or a taken
            # branch to it (the exception came before the target's first instruction ran).
            frm = f - 4
            if out and out[-1][0] == "B" and out[-1][2] == f:
                frm = out.pop()[1]
            if user_only:
                exc = frm  # into the kernel: the gap that follows says where the trace resumes
            else:
                out.append(("X", frm, t))
        elif user_only:
            if f < KERNEL_VA and t < KERNEL_VA:
                out.append(("B", f, t))
            else:
                left_out += 1
        elif gone is not None:
            # In user space since the return at `gone`: perf picks the flow up at the exception.
            if k == "exception" and t >= KERNEL_VA:
                out.append(("X", gone, t))
                gone = None
            else:
                left_out += 1
        elif f < KERNEL_VA:
            left_out += 1  # the window starts in user space
        elif t < KERNEL_VA:
            gone = f
        else:
            out.append(("B", f, t))
    return out, left_out, exc is None and not atom_after


def truth_events(tc, user_only=False):
    """The truth's events perf can show, oldest first: truth_as_perf without a newest event that
    no range follows (returned apart, or None), and the count of events left out."""
    tru, left_out, open_end = truth_as_perf(tc, user_only)
    last = tru.pop() if open_end and tru else None
    return tru, last, left_out


def check_truth(cpu, tc, events, user_only=False):
    """perf's newest events of `cpu` against the truth's session (the last one of that CPU): with
    the kernel traced (cpu-wide, one session), perf's whole window is the truth's newest events;
    user space only (per-thread, a session each time the program runs on the CPU), the whole
    session is perf's newest events."""
    if tc.get("reason") != "stopped":
        raise Bad(f"CPU{cpu}: the plugin's truth was not written when its ETM stopped ({tc.get('reason')})")
    tru, last, left_out = truth_events(tc, user_only)
    n, t = len(events), len(tru)
    if not user_only and t < n:
        raise Bad(f"CPU{cpu}: the plugin's truth reaches back {t} events, perf decoded {n}: a sizing error "
                  "of the harness (truth_bytes), not a verdict on the trace")
    if user_only and n < t:
        raise Bad(f"CPU{cpu}: perf decoded {n} events, fewer than the {t} of the truth's last session")
    m = min(n, t)
    a, b = events[n - m:], tru[t - m:]
    if a != b:
        i = next(i for i in range(m - 1, -1, -1) if a[i] != b[i])
        ctx = lambda seq: " ".join(f"{x[0]} {x[1]:#x}->{x[2]:#x}" for x in seq[max(0, i - 2):i + 3])
        raise Bad(f"CPU{cpu}: perf's event {n - m + i} of {n} differs from the plugin's ground truth "
                  f"({m - 1 - i} newer ones equal): perf {describe(a[i])}, truth {describe(b[i])}\n"
                  f"  perf:  {ctx(a)}\n  truth: {ctx(b)}")
    what = (f"all {n} perf decoded are the truth's newest" if m == n else
            f"the truth's session, all {t} of its events, is perf's newest")
    return (what + (f", the truth's last ({describe(last)}) aside: no range follows it, perf makes no "
                    "sample of it" if last else "")
            + f"; {left_out} {'kernel' if user_only else 'user-space'} events of the truth left out")


# --- the program's control flow (per-thread) ------------------------------------------------------

def functions(binary, names):
    r = run(["llvm-nm-19", "--print-size", "--defined-only", binary])
    if r.returncode != 0:
        raise Bad(f"llvm-nm-19 {binary} failed: {r.stderr[-500:]}")
    out = {}
    for p in (line.split() for line in r.stdout.splitlines()):
        if len(p) == 4 and p[3] in names and p[2] in "Tt":
            out[p[3]] = (int(p[0], 16), int(p[0], 16) + int(p[1], 16))
    missing = [n for n in names if n not in out]
    if missing:
        raise Bad(f"{binary} has no function {', '.join(missing)}")
    return out


def check_loop(binary, events, loops):
    """The decoded flow through cspd-loop's run, step_a and step_b is the program's (scripts/guest/
    cspd-loop.c): `loops` iterations, in two calls of run (the first half, a sleep, the second),
    each a call of step_a and its return to the call's next instruction, a call of step_b, in
    odd iterations step_b's taken branch, its return, and run's branch back but after the last
    iteration of each half. An exception into the kernel that came right after a taken branch
    stands for that branch; one between two instructions is no branch. Returns a note."""
    fn = functions(binary, ("run", "step_a", "step_b"))
    inside = lambda x, name: fn[name][0] <= x < fn[name][1]
    loop = lambda x: any(inside(x, n) for n in fn)
    flow = []
    for k, f, t in events:
        if k == "K" and t == f + 4:
            continue
        if loop(f) and loop(t):
            flow.append((f, t))
    it, calls_a, calls_b, odd_taken, back = 0, 0, 0, 0, 0
    pos = 0

    def take(what, ok):
        nonlocal pos
        if pos >= len(flow) or not ok(*flow[pos]):
            got = f"{flow[pos][0]:#x} -> {flow[pos][1]:#x}" if pos < len(flow) else "the end of the decode"
            raise Bad(f"cspd-loop: iteration {it}: the decode has {got} where the program makes {what}")
        pos += 1
        return flow[pos - 1]

    while pos < len(flow) or it < loops:
        if it == loops:
            f, t = flow[pos]
            raise Bad(f"cspd-loop: after {loops} iterations the decode goes on in the loop: {f:#x} -> {t:#x}")
        f, _ = take("the call of step_a", lambda f, t: inside(f, "run") and t == fn["step_a"][0])
        calls_a += 1
        take("step_a's return", lambda r, t: inside(r, "step_a") and t == f + 4)
        f, _ = take("the call of step_b", lambda f, t: inside(f, "run") and t == fn["step_b"][0])
        calls_b += 1
        if it % 2:
            take("step_b's branch for an odd iteration", lambda x, t: inside(x, "step_b") and inside(t, "step_b"))
            odd_taken += 1
        take("step_b's return", lambda r, t: inside(r, "step_b") and t == f + 4)
        if it not in (loops // 2 - 1, loops - 1):
            take("run's branch back", lambda x, t: inside(x, "run") and inside(t, "run") and t < x)
            back += 1
        it += 1
    return (f"{it} iterations: {calls_a} calls of step_a and {calls_b} of step_b, each returning after its "
            f"call, {odd_taken} of step_b's branches taken (the odd iterations), {back} branches back in run "
            "(two halves)")


# --- address filters (per-thread) ----------------------------------------------------------------

class Filter:
    """An address filter as the kernel programs it into the ETM and as IHI 0064 defines its effect
    on ViewInst. A range (`filter FUNC @ BINARY`): the kernel's filter runs from the symbol's start
    to start + size (etm_addr_filters_sync), which the driver programs as an address range
    comparator pair (TRCVIIECTLR.INCLUDE); the pair matches an instruction address A with
    lower <= A <= upper, so the instruction at the upper bound (the one after the function) is
    inside too. Start/stop (`start A @ BINARY, stop B @ BINARY`): single comparators at the two
    functions' entries (TRCVISSCTLR.START, STOP); the start/stop logic begins stopped (no start
    point hit yet), is active for an instruction that causes a start and stays active up to and
    including an instruction that causes a stop."""

    def __init__(self, binary, range_func=None, start_stop=None, pause=None):
        self.range_func, self.start_stop, self.pause = range_func, start_stop, pause
        if pause:
            # perf's AUX pause (no ETM filter): the trace resumes at a breakpoint on the first
            # address, before its instruction executes, and pauses at one on any other, before
            # that instruction executes: traced from the resume's instruction up to, not
            # including, the next pause's.
            self.resume, self.pauses = pause[0], set(pause[1:])
        elif range_func:
            lo, end = functions(binary, (range_func,))[range_func]
            self.lo, self.hi = lo, end
        else:
            fn = functions(binary, start_stop)
            self.start, self.stop = fn[start_stop[0]][0], fn[start_stop[1]][0]

    def __str__(self):
        if self.pause:
            return (f"AUX pause: resumed at {self.resume:#x}, paused at "
                    + ", ".join(f"{x:#x}" for x in sorted(self.pauses)) + " (the pause's instruction left out)")
        if self.range_func:
            return f"the range {self.range_func} {self.lo:#x}..{self.hi:#x} (both bounds included)"
        return (f"start at {self.start_stop[0]} {self.start:#x}, stop at {self.start_stop[1]} {self.stop:#x} "
                "(the stop's instruction included)")

    def programmed(self, plugin_line):
        """Whether the plugin's log line of an ETM enable shows this filter programmed."""
        if self.range_func:
            return f"ViewInst include [{self.lo:#x}-{self.hi:#x}]" in plugin_line
        m = re.search(r"ViewInst start \[([^]]*)\] stop \[([^]]*)\]", plugin_line)
        return bool(m) and f":{self.start:#x}" in m.group(1) and f":{self.stop:#x}" in m.group(2)


def elf_text(binary):
    """The bytes of the program's executable PT_LOAD segments, by address: [(vaddr, bytes)]."""
    data = open(binary, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise Bad(f"{binary} is not a 64-bit ELF file")
    phoff, = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    out = []
    for k in range(phnum):
        typ, flags, off, vaddr, _pa, filesz = struct.unpack_from("<IIQQQQ", data, phoff + k * phentsize)
        if typ == 1 and flags & 1:
            out.append((vaddr, data[off:off + filesz]))
    return out


def program_run(rec, dis, cpu, binary):
    """What the program did on `cpu` according to the execution record, from its last entry at the
    ELF entry point to the record's end: a list of (start, executed instruction words, end) with
    `end` how that stretch ended: ('next',) the straight line into the next one, ('taken', to) its
    last instruction a taken branch, ('not-taken',) a conditional branch not taken, ('exception',
    resume) an exception into the kernel (other tasks may run before the program resumes at
    `resume`), or ('end',) the record's end. The record knows no tasks: the program's blocks are
    the user-space blocks whose instruction words are the binary's at those addresses (perf and
    busybox, static binaries too, run other code at the same addresses); the first other block
    after one of them must be an exception vector (the kernel and other tasks run only after
    an exception)."""
    text = elf_text(binary)
    entry, = struct.unpack_from("<Q", open(binary, "rb").read(32), 24)
    ring, wrapped = rec.ring(cpu)
    mine = {}

    def ours(index):
        v = mine.get(index)
        if v is None:
            start, words = rec.block(index)
            v = False
            for va, seg in text:
                if va <= start and start + 4 * len(words) <= va + len(seg):
                    o = start - va
                    v = struct.unpack_from(f"<{len(words)}I", seg, o) == words
            mine[index] = v
        return v

    index = lambda j: check_exec.index_at(ring, j, 0)
    first = next((j for j in range(len(ring) - 1, -1, -1) if rec.block(index(j))[0] == entry and ours(index(j))),
                 None)
    if first is None:
        why = f" (its ring keeps the newest {rec.entries} blocks: a sizing error of the harness)" if wrapped else ""
        raise Bad(f"CPU{cpu}: the execution record never runs {binary}'s entry point {entry:#x}{why}")
    blocks = []  # ((start, words) of the program, the first other block run before it, or None)
    between = None
    for j in range(first, len(ring)):
        # A cycle entry's runs are its loop's blocks in turn; a block's entry repeats it.
        runs = (ring[j] >> check_exec.INDEX_BITS) + 1
        for idx in (itertools.repeat(index(j), runs) if not check_exec.period(ring[j]) else
                    (check_exec.index_at(ring, j, r) for r in range(runs))):
            if ours(idx):
                blocks.append((rec.block(idx), between))
                between = None
            elif between is None:
                between = rec.block(idx)[0]
    out = []
    for k, ((start, words), _) in enumerate(blocks):
        end = start + 4 * len(words)
        kind, off = dis.cache.get(words[-1], (None, 0))
        if k + 1 == len(blocks):
            out.append((start, words, ("end",)))
            continue
        nxt, gone = blocks[k + 1][0][0], blocks[k + 1][1]
        if gone is not None:
            if gone < KERNEL_VA or gone & 0x7F:
                raise Bad(f"CPU{cpu}: the program's block {start:#x}..{end:#x} is followed by {gone:#x}, "
                          "neither the program nor an exception vector")
            # An exception; the program resumes at `nxt`: after the block (an interrupt between
            # blocks, an SVC), at the target of its last branch (an interrupt after a taken
            # branch), or inside it (a fault: the instructions before it executed).
            if nxt == end:
                out.append((start, words, ("not-taken",) if kind == "cond" else ("next",)))
                out.append((nxt, (), ("exception", nxt)))
            elif kind in ("direct", "cond", "indirect") and (kind == "indirect" or nxt == end - 4 + off):
                out.append((start, words, ("taken", nxt)))
                out.append((nxt, (), ("exception", nxt)))
            elif start <= nxt < end:
                out.append((start, words[:(nxt - start) // 4], ("exception", nxt)))
            else:
                raise Bad(f"CPU{cpu}: after an exception from the program's block {start:#x}..{end:#x} the "
                          f"program resumes at {nxt:#x}: neither in that block nor after it")
        elif nxt == end:
            out.append((start, words, ("not-taken",) if kind == "cond" else ("next",)))
        elif kind is None:
            raise Bad(f"CPU{cpu}: the program's block {start:#x}..{end:#x} is followed by {nxt:#x}, but its last "
                      "instruction is no branch")
        else:
            if kind in ("direct", "cond") and end - 4 + off != nxt:
                raise Bad(f"CPU{cpu}: the program's block {start:#x}..{end:#x} is followed by {nxt:#x}, but its "
                          f"branch goes to {end - 4 + off:#x}")
            out.append((start, words, ("taken", nxt)))
    return out


def render(segments):
    """perf's samples of ETM trace segments (a Trace On, then P0 elements while ViewInst stays
    active, without a discontinuity): ('S', start) perf's trace start; ('B', from, to) a taken
    branch; ('E', at) the segment's last P0 element, a branch (perf marks it as the trace's end
    and reports no target: the next trace is elsewhere); ('X', from) an exception, from the last
    instruction executed, which ends the segment (the kernel is not traced). A segment without a
    P0 element gives a decoder nothing to infer an instruction from: no sample. The trace's last
    P0 element, with no trace after it, is no sample either. `segments`: lists of P0 elements
    ('taken', at, to), ('not-taken', at), ('exception', from) after the start address."""
    out = []
    for start, p0 in segments:
        if not p0:
            continue
        out.append(("S", start))
        for j, e in enumerate(p0):
            if e[0] == "exception":
                out.append(("X", e[1]))
            elif j == len(p0) - 1:
                out.append(("E", e[1]))
            elif e[0] == "taken":
                out.append(("B", e[1], e[2]))
    if out and out[-1][0] in ("E", "X"):
        out.pop()
    return out


def filter_segments(flow, flt):
    """ViewInst over the program's flow (program_run) with the filter, instruction by instruction:
    the trace segments, each (start, [P0 elements]) as render() takes them."""
    segs, cur, started, last_active = [], None, False, None
    for start, words, end in flow:
        n = len(words)
        for k in range(n):
            a = start + 4 * k
            if flt.pause:
                if a == flt.resume:
                    started = True
                elif a in flt.pauses:
                    started = False
                active = started
            elif flt.range_func:
                active = flt.lo <= a <= flt.hi
            else:
                if a == flt.start:
                    started = True
                active = started
                if a == flt.stop and started:
                    started = False
            if not active:
                cur = None
                last_active = None
                continue
            if cur is None:
                cur = (a, [])
                segs.append(cur)
            last_active = a
            if k == n - 1 and end[0] in ("taken", "not-taken"):
                cur[1].append(("taken", a, end[1]) if end[0] == "taken" else ("not-taken", a))
            if flt.start_stop and not started:
                # The stop: nothing after it is traced, an exception right after it neither.
                cur = None
                last_active = None
        if end[0] == "exception":
            # Traced when ViewInst was active for the instruction executed before it (the last
            # one of this block, or the taken branch of the previous one).
            frm = last_active
            if cur is not None and frm is not None:
                if n == 0 and cur[1] and cur[1][-1][0] == "taken":
                    cur[1].pop()
                cur[1].append(("exception", frm))
            cur, last_active = None, None
    return segs


def perf_filter_events(path, breakpoints=None):
    """perf script's output of a filtered per-thread recording: per CPU the samples as render()
    gives them, with their line numbers. With `breakpoints` (a list), the samples of the hardware
    breakpoint events (AUX pause) are appended to it, their addresses in order."""
    out = {}

    def breakpoint_sample(line):
        b = BP_SAMPLE.match(line) if breakpoints is not None else None
        if b:
            breakpoints.append(int(b.group(1), 16))
        return b is not None

    for n, cpu, flags, frm, to in perf_samples(path, breakpoint_sample):
        if "tr strt" in flags:
            e = ("S", to)
        elif "tr end" in flags:
            e = ("X", frm) if re.search(r"\b(int|syscall|async)\b", flags) else ("E", frm)
        else:
            e = ("B", frm, to)
        out.setdefault(cpu, []).append((e, n))
    return out


def show(e):
    return {"S": "trace start at", "B": "branch", "E": "trace end at", "X": "exception from"}[e[0]] + " " + \
        " -> ".join(f"{x:#x}" for x in e[1:] if x is not None)


def truth_filtered(tc):
    """The plugin's truth of the last session as trace segments: a gap is a Trace On at its
    target; taken, not-taken and exception events are P0 elements (an exception from the
    instruction before its preferred return, or from a taken branch to it). The truth records no
    gap where the session's trace first starts: that start's address is None (the execution
    record's comparison has it)."""
    segs = []
    for e in tc["events"]:
        k = e["kind"]
        if k == "gap":
            segs.append((int(e["to"], 16), []))
            continue
        if not segs:
            segs.append((None, []))  # the session's first trace start: the truth has no gap for it
        f = int(e["from"], 16)
        p0 = segs[-1][1]
        if k == "taken":
            p0.append(("taken", f, int(e["to"], 16)))
        elif k == "not-taken":
            p0.append(("not-taken", f))
        elif k == "exception":
            if p0 and p0[-1][0] == "taken" and p0[-1][2] == f:
                p0.append(("exception", p0.pop()[1]))
            else:
                p0.append(("exception", f - 4))
    return render(segs)


def program_flow(d, cpu, binary):
    """The program's flow on `cpu` by the execution record (program_run)."""
    try:
        rec = check_exec.Record(os.path.join(d, "exec.rec"))
        if rec.table_full:
            raise Bad("the execution record's table filled up: raise exec-record's table=")
        dis = check_exec.Disassembler()
        dis.classify(rec.last_words())
        return program_run(rec, dis, cpu, binary)
    except check_exec.Bad as e:
        raise Bad(str(e))


def pause_count(flow, flt):
    """How many times the program resumed and paused the trace (AUX pause), by its flow: (resumes,
    pauses)."""
    resumed, res, pau = False, 0, 0
    for start, words, _end in flow:
        for k in range(len(words)):
            a = start + 4 * k
            if a == flt.resume and not resumed:
                resumed, res = True, res + 1
            elif a in flt.pauses and resumed:
                resumed, pau = False, pau + 1
    return res, pau


def check_filter(a, d, script, enabled, truth, flow=None):
    """The decode of a filtered per-thread recording is exactly what the filter lets through of
    what the program ran, as the execution record says it ran; and its newest session the truth's.
    AUX pause: the same for what the program ran between each resume and the next pause; the
    breakpoints perf sampled, and the plugin's stops and enables of the ETM, those resumes and
    pauses."""
    flt = Filter(a.per_thread, a.filter_range, a.filter_start_stop, a.pause_window)
    bps = [] if flt.pause else None
    per_cpu = perf_filter_events(script, bps)
    if len(per_cpu) != 1:
        raise Bad(f"the program's trace comes from CPUs {sorted(per_cpu)}: the guest pins it to one")
    cpu, got = next(iter(per_cpu.items()))
    lines = [n for _e, n in got]
    got = [e for e, _n in got]
    text = open(os.path.join(d, "plugin.log"), errors="replace").read()
    if flt.pause:
        flow = flow or program_flow(d, cpu, a.per_thread)
        res, pau = pause_count(flow, flt)
        want_bps = [e for start, words, _e in flow for e in
                    (start + 4 * k for k in range(len(words))) if e == flt.resume or e in flt.pauses]
        if bps != want_bps:
            i = next((i for i in range(min(len(bps), len(want_bps))) if bps[i] != want_bps[i]),
                     min(len(bps), len(want_bps)))
            raise Bad(f"perf sampled {len(bps)} breakpoint hits, the execution record runs the breakpoints' "
                      f"instructions {len(want_bps)} times; they part at hit {i + 1}")
        ups = len(re.findall(rf"qemu-coresight: etm {cpu}: enabled", text))
        downs = len(re.findall(rf"qemu-coresight: etm {cpu}: stopped", text))
        # Beside the resumes and pauses, the scheduler may take the thread off its CPU while the
        # trace runs (perf then stops the unit and starts it again when the thread runs on): such
        # a pair leaves no trace of its own, which the windows' comparison below checks sample by
        # sample, and the AUX records one per pause.
        extra = ups - res
        if ups < res or downs < pau or downs - pau != extra:
            raise Bad(f"the plugin saw CPU{cpu}'s ETM enabled {ups} times and stopped {downs} times, the "
                      f"execution record resumes the trace {res} times and pauses it {pau} times")
        print(f"{flt}: perf sampled the {len(bps)} breakpoint hits the execution record runs; the plugin saw "
              f"CPU{cpu}'s ETM enabled at each of the {res} resumes and stopped at each of the {pau} pauses"
              + (f", and {extra} more stop and start around the thread's time off the CPU" if extra else ""))
    else:
        last = [ln for ln in text.splitlines() if f"qemu-coresight: etm {cpu}: enabled" in ln]
        if not last or not flt.programmed(last[-1]):
            raise Bad(f"the plugin did not see CPU{cpu}'s ETM programmed with {flt} at its last enable: "
                      f"{last[-1] if last else 'no enable'}")
        print(f"filter: {flt}; the plugin saw CPU{cpu}'s ETM programmed so")
    if flt.range_func:
        for i, e in enumerate(got):
            bad = [x for x in e[1:] if not flt.lo <= x <= flt.hi]
            if bad:
                raise Bad(f"perf's event {i} ({show(e)}, {script}:{lines[i]}) is outside the filter's range "
                          f"{flt.lo:#x}..{flt.hi:#x}: the trace holds an instruction the filter leaves out")
    flow = flow or program_flow(d, cpu, a.per_thread)
    want = render(filter_segments(flow, flt))
    if flt.pause:
        inside = {x for e in want for x in e[1:]}
        for i, e in enumerate(got):
            bad = [x for x in e[1:] if x not in inside]
            if bad:
                raise Bad(f"perf's event {i} ({show(e)}, {script}:{lines[i]}) is outside the pause window: "
                          f"the execution record never runs {bad[0]:#x} between a resume and a pause")
    entries_got = sum(1 for e in got if e[0] == "S")
    entries_want = sum(1 for e in want if e[0] == "S")
    if entries_got != entries_want:
        raise Bad(f"perf's decode starts the trace {entries_got} times, the execution record enters the filter "
                  f"{entries_want} times: {'an entry lost' if entries_got < entries_want else 'an entry too many'}")
    if got != want:
        i = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
        entry = sum(1 for e in want[:i + 1] if e[0] == "S")
        mine = show(got[i]) + f", {script}:{lines[i]}" if i < len(got) else "the end of the decode"
        theirs = show(want[i]) if i < len(want) else "nothing more"
        raise Bad(f"perf's event {i} ({mine}) is not what the filter lets through of what CPU{cpu} ran: the "
                  f"execution record has {theirs} there (in the filter's entry {entry} of {entries_want})")
    exc = sum(1 for e in want if e[0] == "X")
    taken = [e for e in want if e[0] == "B"]
    kinds = {}
    for e in taken:
        kinds[e[1:]] = kinds.get(e[1:], 0) + 1
    ends = {}
    for e in want:
        if e[0] == "E":
            ends[e[1]] = ends.get(e[1], 0) + 1
    print(f"CPU{cpu}: {len(want)} samples, every one what the filter lets through of the program's "
          f"{sum(len(w) for _s, w, _e in flow)} instructions in the execution record: {entries_want} trace "
          f"starts, taken branches " + ", ".join(f"{f:#x} -> {t:#x} {c} times" for (f, t), c in sorted(kinds.items()))
          + "; trace ends at " + ", ".join(f"{f:#x} {c} times" for f, c in sorted(ends.items()))
          + f" (and one last, which perf does not sample); {exc} exception{'' if exc == 1 else 's'} inside the filter")
    if cpu not in truth:
        raise Bad(f"CPU{cpu}: the plugin's truth has no such CPU")
    if truth[cpu].get("reason") != "stopped":
        raise Bad(f"CPU{cpu}: the plugin's truth was not written when its ETM stopped ({truth[cpu].get('reason')})")
    tru = truth_filtered(truth[cpu])
    if not tru or len(tru) > len(got):
        raise Bad(f"CPU{cpu}: the plugin's truth of the last session has {len(tru)} samples as perf shows them, "
                  f"perf decoded {len(got)}")
    mine = got[-len(tru):]
    diff = [i for i, (x, y) in enumerate(zip(mine, tru)) if x != y and y != ("S", None)]
    if diff:
        i = diff[-1]
        raise Bad(f"CPU{cpu}: perf's event {len(got) - len(tru) + i} ({show(mine[i])}) differs from the plugin's "
                  f"ground truth of the last session ({show(tru[i]) if tru[i][1] is not None else 'a trace start'})")
    print(f"CPU{cpu}: {len(enabled.get(cpu, []))} trace sessions; the truth's last session, {len(tru)} samples "
          "as perf shows them, is perf's newest")
    return cpu


# --- snapshot mode ----------------------------------------------------------------------------

def snapshots(data, n):
    """The snapshots of a `perf record --snapshot` session, oldest first: the PERF_RECORD_AUX the
    kernel wrote when the sink handed its RAM to an AUX buffer (at each disable perf asked for; in
    snapshot mode the head moves on by what the sink handed over, the record's offset is the new
    head and its flags say OVERWRITE) with the PERF_RECORD_AUXTRACE perf wrote of it: dicts with
    the record's position, the CPU whose buffer it is, the head, the size and flags, and `trace`
    (position, offset and bytes of the AUXTRACE record). Every one of the `n` snapshots the guest
    took must be there, whole."""
    attrs_off, = struct.unpack_from("<Q", data, 24)
    sample_type, = struct.unpack_from("<Q", data, attrs_off + 24)
    if sample_type & PERF_SAMPLE_CPU_IDENTIFIER != PERF_SAMPLE_CPU_IDENTIFIER:
        raise Bad(f"perf.data's first event samples {sample_type:#x}, without CPU and IDENTIFIER")
    aux, trace = [], []
    for pos, typ, _n in records(data):
        size, = struct.unpack_from("<H", data, pos + 6)
        if typ == PERF_RECORD_AUX:
            head, nbytes, flags = struct.unpack_from("<QQQ", data, pos + 8)
            cpu, = struct.unpack_from("<I", data, pos + size - 16)
            aux.append({"pos": pos, "cpu": cpu, "head": head, "size": nbytes, "flags": flags})
        elif typ == PERF_RECORD_AUXTRACE:
            nbytes, off, _ref, _idx, _tid, cpu = struct.unpack_from("<QQQIII", data, pos + 8)
            payload = data[pos + size:pos + size + nbytes]
            if len(payload) != nbytes:
                raise Bad(f"perf.data: the AUXTRACE record at {pos:#x} announces {nbytes} bytes, "
                          f"{len(payload)} follow")
            trace.append({"pos": pos, "cpu": cpu, "offset": off, "bytes": payload})
    if len(aux) != n:
        raise Bad(f"perf.data holds {len(aux)} PERF_RECORD_AUX, the guest took {n} snapshots: one "
                  "sink update per snapshot expected")
    for k, x in enumerate(aux):
        if x["flags"] != PERF_AUX_FLAG_OVERWRITE:
            # A snapshot is expected to be cut, and TRUNCATED would keep the perf core from starting
            # the event again: upstream's sinks leave it out in snapshot mode, so must this one.
            raise Bad(f"snapshot {k + 1}: PERF_RECORD_AUX flags {x['flags']:#x}, not OVERWRITE (snapshot mode) "
                      "alone")
        if k >= len(trace):
            raise Bad(f"the AUX data is cut: snapshot {k + 1}: the kernel wrote {x['size']} bytes to CPU{x['cpu']}'s "
                      "AUX buffer (PERF_RECORD_AUX), perf.data has no AUXTRACE record of them")
        t = trace[k]
        if (t["cpu"], t["offset"], len(t["bytes"])) != (x["cpu"], x["head"] - x["size"], x["size"]):
            raise Bad(f"the AUX data is cut: snapshot {k + 1}: the kernel wrote {x['size']} bytes ending at "
                      f"{x['head']:#x} of CPU{x['cpu']}'s AUX buffer (PERF_RECORD_AUX), perf.data's AUXTRACE "
                      f"record holds {len(t['bytes'])} bytes at {t['offset']:#x} of CPU{t['cpu']}'s")
        x["trace"] = t
    if len(trace) != n:
        raise Bad(f"perf.data holds {len(trace)} AUXTRACE records for {n} snapshots")
    return aux


def check_snapshot_etf(snaps, stops, tmc):
    """Each snapshot is what the ETF held when it stopped for it (the plugin's stops, one per
    snapshot: the sink stops when the last CPU's event is disabled): its size, and the barrier
    packet first where the RAM had wrapped; the newest byte for byte (tmc.bin is the RAM at the
    last stop)."""
    if len(stops) != len(snaps):
        raise Bad(f"the plugin saw the TMC stop {len(stops)} times, perf.data holds {len(snaps)} snapshots: "
                  "one stop per snapshot expected")
    notes = []
    for k, (x, (held, full)) in enumerate(zip(snaps, stops)):
        got = x["trace"]["bytes"]
        if len(got) != held:
            raise Bad(f"snapshot {k + 1} holds {len(got)} bytes, the ETF held {held} when it stopped for it")
        if full and got[:16] != BARRIER:
            raise Bad(f"snapshot {k + 1}: the ETF wrapped, but the snapshot does not start with the barrier packet")
        notes.append(f"{held} bytes{' (wrapped)' if full else ''} in CPU{x['cpu']}'s buffer")
    got, full = snaps[-1]["trace"]["bytes"], stops[-1][1]
    if len(tmc) != len(got):
        raise Bad(f"the newest snapshot holds {len(got)} bytes, tmc.bin (the ETF at its last stop) {len(tmc)}")
    a, b = (got[16:], tmc[16:]) if full else (got, tmc)
    if a != b:
        at = next(i for i in range(len(a)) if a[i] != b[i])
        raise Bad(f"the newest snapshot differs from what the ETF held (tmc.bin) at byte {at + 16 * full:#x}")
    return (f"{len(snaps)} snapshots: " + ", ".join(f"{k + 1}: {t}" for k, t in enumerate(notes))
            + "; each what the ETF held when it stopped for it, the newest byte for byte")


def kernel_functions(vmlinux, vmcore, names):
    """The runtime addresses (vmlinux's and the KASLR offset from the vmcore) of `names`."""
    koff = int(check_trace.Vmcore(vmcore).info.get("KERNELOFFSET", "0"), 16)
    r = run(["llvm-nm-19", "--defined-only", vmlinux])
    if r.returncode != 0:
        raise Bad(f"llvm-nm-19 {vmlinux} failed: {r.stderr[-500:]}")
    out = {}
    for p in (line.split() for line in r.stdout.splitlines()):
        if len(p) == 3 and p[1] in "Tt" and p[2] in names:
            if p[2] in out:
                raise Bad(f"vmlinux has more than one function {p[2]}")
            out[p[2]] = int(p[0], 16) + koff
    missing = [n for n in names if n not in out]
    if missing:
        raise Bad(f"vmlinux has no function {', '.join(missing)}")
    return out


def check_markers(k, cpu, events, markers, addr):
    """Snapshot k's decode of `cpu` calls no other snapshot's marker. Returns how many calls of
    its own marker (the one the guest ran on every CPU until the snapshot stopped the trace), which
    check_snapshot_markers wants on at least one CPU: on a CPU where the snapshot's own stop work
    ran (perf's signal handling, or its exit before the last one) that work can fill the shared
    sink past the marker, and every event of each decode is checked against the execution record
    anyway."""
    calls = {name: sum(1 for e in events if e[2] == addr[name]) for name in markers}
    for j, n in enumerate(markers):
        if j != k and calls[n]:
            raise Bad(f"snapshot {k + 1}: CPU{cpu}'s decode calls {n} ({calls[n]} times), the activity the guest "
                      f"ran before snapshot {j + 1}")
    return calls[markers[k]]


def check_snapshot_markers(k, marker, calls, sizes):
    """Snapshot k is the one its marker says: some CPU's decode calls it (calls: per CPU), and no
    CPU's calls another's (check_markers)."""
    if not any(calls):
        raise Bad(f"snapshot {k + 1}: no CPU's decode calls {marker}, the activity the guest ran on every CPU "
                  "until this snapshot stopped the trace")
    without = [f"CPU{c} ({sizes[c]} events)" for c, x in enumerate(calls) if not x]
    print(f"snapshot {k + 1}: the decode calls {marker} (" + ", ".join(
        f"CPU{c} {x}" for c, x in enumerate(calls)) + " times), the marker the guest ran until it, and no other "
        "snapshot's marker" + (f"; not in the window of {', '.join(without)}: the stop's own work on it came "
                               "later" if without else ""))


def snapshot_decodes(path, snaps, cpus):
    """perf script's decode of the whole perf.data, each CPU's part of each snapshot: [{cpu:
    (trace start, events)}] by snapshot, as decoded() gives them, and {(snapshot, cpu): (kind,
    address)} of the trace ends between two snapshots of one AUX buffer.

    perf decodes its AUX buffers (queues) in CPU order, each buffer's snapshots in the order
    written, resetting the decoder at each: every CPU's trace starts once in each snapshot ("tr
    strt"), and where the buffer holds a next snapshot, perf ends that CPU's trace with a sample
    of the branch the ETM stopped in ("tr end", no target; at the end of the data it makes no
    sample of it). Any other start or end of the trace is a discontinuity."""
    segs = {}
    for n, cpu, flags, frm, to in perf_samples(path):
        mine = segs.setdefault(cpu, [])
        if "tr strt" in flags:
            if mine and mine[-1]["end"] is None:
                raise Bad(f"CPU{cpu}: perf's decode starts the trace again at {to:#x} ({path}:{n}) without "
                          "ending it: a discontinuity")
            mine.append({"start": to, "events": [], "end": None, "line": n})
            continue
        if not mine or mine[-1]["end"] is not None:
            raise Bad(f"CPU{cpu}: a sample outside the trace ({path}:{n})")
        if "tr end" in flags:
            if to != 0:
                raise Bad(f"CPU{cpu}: perf's decode ends the trace at {frm:#x} with a target ({path}:{n})")
            mine[-1]["end"] = (" ".join(flags.replace("tr end", "").split()), frm, n)
            continue
        exc = re.search(r"\b(int|syscall|async)\b", flags)
        mine[-1]["events"].append(("X" if exc else "B", frm, to))
    queues = sorted({x["cpu"] for x in snaps})
    order = [k for q in queues for k, x in enumerate(snaps) if x["cpu"] == q]
    out, ends = [{} for _ in snaps], {}
    for cpu in range(cpus):
        mine = segs.get(cpu, [])
        if len(mine) != len(order):
            raise Bad(f"CPU{cpu}: perf's decode starts the trace {len(mine)} times, the AUX buffers hold "
                      f"{len(order)} snapshots: {'a discontinuity' if len(mine) > len(order) else 'a snapshot without its trace'}")
        for j, (k, seg) in enumerate(zip(order, mine)):
            last_in_buffer = j == len(order) - 1 or snaps[order[j + 1]]["cpu"] != snaps[k]["cpu"]
            if last_in_buffer and seg["end"]:
                raise Bad(f"CPU{cpu}: perf's decode ends snapshot {k + 1}'s trace ({path}:{seg['end'][2]}), the "
                          "last of its AUX buffer: a discontinuity")
            if not last_in_buffer and not seg["end"]:
                raise Bad(f"CPU{cpu}: perf's decode goes on from snapshot {k + 1} to snapshot {order[j + 1] + 1} "
                          f"({path}:{mine[j + 1]['line']}) without the end of the first one's trace")
            if not seg["events"]:
                raise Bad(f"snapshot {k + 1}: perf decoded no branch of CPU{cpu}")
            out[k][cpu] = (seg["start"], seg["events"])
            if seg["end"]:
                ends[k, cpu] = seg["end"][:2]
    return out, ends


def check_snapshot(a, d, out, path, data, enabled, stops, tmc):
    markers = a.snapshot.split(",")
    n = len(markers)
    snaps = snapshots(data, n)
    print(f"perf.data: {len(data)} bytes; " + check_snapshot_etf(snaps, stops, tmc))
    hw, trouble, _maps = perf_dump(a.perf, path)
    if trouble:
        raise Bad(f"perf.data has records of lost data or trace errors: {trouble[0]}")
    ids = check_trace_ids(hw, enabled, range(a.cpus))
    for cpu in range(a.cpus):
        if len(enabled.get(cpu, [])) != n:
            raise Bad(f"CPU{cpu}: its ETM was enabled {len(enabled.get(cpu, []))} times, not once per snapshot "
                      f"({n}): perf enables the events again after each snapshot but the one at exit")
    print("trace IDs: " + ", ".join(f"CPU{c} {t:#x}" for c, t in sorted(ids.items()))
          + f": perf's AUX_OUTPUT_HW_ID records are what the plugin saw each ETM programmed with at its {n} enables")
    vmcore = os.path.join(d, "vmcore.elf")
    addr = kernel_functions(a.vmlinux, vmcore, markers)
    script = a.script
    if not script:
        script = os.path.join(out, "perf-script.txt")
        patched, mods, alias, na = guest_image(d, vmcore, a.vmlinux, a.modules_dir, os.path.join(out, "kcore_dir"))
        print(image_summary(patched, mods, alias, na))
        perf_script(a.perf, path, os.path.join(out, "kcore_dir"), script)
    parts, ends = snapshot_decodes(script, snaps, a.cpus)
    decodes = [({c: v[0] for c, v in p.items()}, {c: v[1] for c, v in p.items()}) for p in parts]
    print(f"perf script: every CPU's trace starts once in each snapshot, without an error or a discontinuity; "
          f"{len(ends)} trace ends between two snapshots of one AUX buffer (checked against the execution record "
          "below)")
    for k in range(n):
        calls = [check_markers(k, cpu, decodes[k][1][cpu], markers, addr) for cpu in range(a.cpus)]
        check_snapshot_markers(k, markers[k], calls, [len(decodes[k][1][c]) for c in range(a.cpus)])
    rec = check_exec.Record(os.path.join(d, "exec.rec"))
    if rec.table_full:
        raise Bad("the execution record's table filled up: raise exec-record's table=")
    dis = check_exec.Disassembler()
    dis.classify(rec.last_words())
    try:
        truth = check_trace.truth_of(d)
    except check_trace.Bad as e:
        raise Bad(str(e))
    for cpu in range(a.cpus):
        # Newest snapshot first; each older one is searched for before the window of the one after
        # it: the snapshots' windows follow each other in the record, in the order taken.
        ring, _ = rec.ring(cpu)
        at, base = None, 0
        for k in range(n - 1, -1, -1):
            starts, events = decodes[k]
            ev = events[cpu]
            try:
                after, user, returns, _kernel, span, at, nxt = check_record(rec, dis, cpu, ev, starts[cpu], ring, at)
            except Bad as e:
                where = "" if k == n - 1 else f" (searched before snapshot {k + 2}'s window)"
                raise Bad(f"snapshot {k + 1}: {e}{where}")
            end = ""
            if (k, cpu) in ends:
                kind, frm = ends[k, cpu]
                end = trace_end(k, cpu, kind, frm, nxt, dis)
            exc = sum(1 for e in ev if e[0] != "B")
            print(f"snapshot {k + 1}, CPU{cpu}: {len(ev)} decoded branches and exceptions compared ({len(ev) - exc} "
                  f"taken branches, {exc} exceptions, {returns} of them returns to user space and the exception back; "
                  f"{user} user-space blocks perf could not follow): every one what the execution record says the "
                  f"CPU did, from the trace start {starts[cpu]:#x}; the window ends {base + after} block boundaries "
                  f"before the record's end" + (f", before snapshot {k + 2}'s window" if k < n - 1 else "") + end)
            base += after + span
            if k == n - 1:
                if cpu not in truth:
                    raise Bad(f"CPU{cpu}: the plugin's truth has no such CPU")
                print(f"snapshot {k + 1}, CPU{cpu}: the truth holds the last of its {n} sessions, this snapshot's; "
                      + check_truth(cpu, truth[cpu], ev))
        del ring
    print(f"snapshot{'s' if n > 2 else ''} {', '.join(str(k + 1) for k in range(n - 1))}: the session"
          f"{'s' if n > 2 else ''} ended before the last one, which alone the plugin's truth and tmc.bin keep: "
          "judged against the execution record and the ETF's stops")


# --- the judge ----------------------------------------------------------------------------------

def plugin_view(d):
    try:
        text = open(os.path.join(d, "plugin.log"), errors="replace").read()
    except OSError as e:
        raise Bad(f"cannot read the plugin's log: {e}")
    enabled = {}
    for m in re.finditer(r"qemu-coresight: etm (\d+): enabled, trace id (0x[0-9a-f]+)", text):
        enabled.setdefault(int(m.group(1)), []).append(int(m.group(2), 16))
    stops = [(int(m.group(1)), m.group(2) == "true")
             for m in re.finditer(r"qemu-coresight: tmc stopped: (\d+) bytes held, full (true|false)", text)]
    m = re.search(r"qemu-coresight: exit: .*?\((\d+) dropped, \d+ of them after the TMC took its last "
                  r"byte\).*?(\d+) lost, (\d+) gaps", text)
    if not m:
        raise Bad("the plugin's log has no exit line with its dropped, lost and gap counts")
    if any(int(x) for x in m.groups()):
        raise Bad(f"the plugin dropped {m.group(1)} trace bytes, lost {m.group(2)} exception returns and "
                  f"recorded {m.group(3)} gaps: the trace is not whole")
    return enabled, stops


def check(a):
    d, out = a.dir, a.out or os.path.join(a.dir, "perf")
    console = open(os.path.join(d, "console.log"), errors="replace").read()
    if "CSPD: perf: record ok" not in console or "CSPD: perf: perf.data on the disk" not in console:
        raise Bad("the guest's perf record did not succeed, or perf.data did not reach the disk")
    if not os.access(a.perf, os.X_OK):
        raise Bad(f"no host perf {a.perf}: run scripts/host-perf.sh")
    if a.per_thread:
        m = re.search(r"CSPD: perf: \| cspd-loop: (\d+) iterations", console)
        if not m:
            raise Bad("cspd-loop did not say how many iterations it ran (console.log)")
        if int(m.group(1)) != a.loops:
            raise Bad(f"cspd-loop ran {m.group(1)} iterations, not {a.loops}")
        if not os.path.isfile(a.per_thread):
            raise Bad(f"no {a.per_thread}: the program the guest ran (scripts/initramfs.sh builds it)")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "perf.data")
    data = extract(a.disk, path)
    enabled, stops = plugin_view(d)
    try:
        tmc = open(os.path.join(d, "tmc.bin"), "rb").read()
    except OSError as e:
        raise Bad(f"cannot read what the ETF held (tmc.bin): {e}")
    if a.snapshot:
        check_snapshot(a, d, out, path, data, enabled, stops, tmc)
        return
    aux, auxtrace = aux_records(data)
    flow = pauses = None
    if a.pause_window:
        if not aux:
            raise Bad("perf.data has no PERF_RECORD_AUX: the sink gave perf no trace")
        flow = program_flow(d, aux[0][0], a.per_thread)
        pauses = pause_count(flow, Filter(a.per_thread, pause=a.pause_window))[1]
        downs = len(re.findall(r"qemu-coresight: etm \d+: stopped",
                               open(os.path.join(d, "plugin.log"), errors="replace").read()))
        off_cpu = max(downs - pauses, 0)
    else:
        off_cpu = 0
    try:
        tmc_held = open(os.path.join(d, "tmc.bin.held"), "rb").read()
    except FileNotFoundError:
        tmc_held = None
    print(f"perf.data: {len(data)} bytes; {check_aux(aux, auxtrace, tmc, stops, pauses, off_cpu, tmc_held)}")
    hw, trouble, maps = perf_dump(a.perf, path)
    if trouble:
        raise Bad(f"perf.data has records of lost data or trace errors: {trouble[0]}")
    ids = check_trace_ids(hw, enabled, [] if a.per_thread else range(a.cpus))
    print("trace IDs: " + ", ".join(f"CPU{c} {t:#x}" for c, t in sorted(ids.items()))
          + ": perf's AUX_OUTPUT_HW_ID records are what the plugin saw each ETM programmed with")
    if a.per_thread:
        want, seen = build_id(a.per_thread), maps.get("/bin/cspd-loop", set())
        if seen != {want}:
            raise Bad(f"perf.data maps /bin/cspd-loop with build ID {', '.join(sorted(seen)) or 'none'}, "
                      f"{a.per_thread} has {want}: not the program the guest ran")
    script = a.script
    if not script:
        script = os.path.join(out, "perf-script.txt")
        if a.per_thread:
            # The program as the guest ran it (/bin/cspd-loop), for perf's --symfs.
            symfs = os.path.join(out, "symfs")
            os.makedirs(os.path.join(symfs, "bin"), exist_ok=True)
            with open(a.per_thread, "rb") as f, open(os.path.join(symfs, "bin", "cspd-loop"), "wb") as g:
                g.write(f.read())
            print(f"user space for perf: {a.per_thread} as /bin/cspd-loop")
            perf_script(a.perf, path, None, script, symfs=symfs)
        else:
            patched, mods, alias, n = guest_image(d, os.path.join(d, "vmcore.elf"), a.vmlinux, a.modules_dir,
                                                  os.path.join(out, "kcore_dir"))
            print(image_summary(patched, mods, alias, n))
            perf_script(a.perf, path, os.path.join(out, "kcore_dir"), script)
    if a.filter_range or a.filter_start_stop or a.pause_window:
        try:
            truth = check_trace.truth_of(d)
        except check_trace.Bad as e:
            raise Bad(str(e))
        check_filter(a, d, script, enabled, truth, flow)
        return
    starts, events = decoded(script, per_thread=bool(a.per_thread))
    cpus = sorted(events) if a.per_thread else range(a.cpus)
    for cpu in cpus:
        if not events.get(cpu):
            raise Bad(f"CPU{cpu}: perf decoded no branch")
    if a.per_thread:
        if len(cpus) != 1:
            raise Bad(f"the program's trace comes from CPUs {list(cpus)}: the guest pins it to one")
        print(f"cspd-loop on CPU{cpus[0]}: {check_loop(a.per_thread, events[cpus[0]], a.loops)}")
    rec = check_exec.Record(os.path.join(d, "exec.rec"))
    if rec.table_full:
        raise Bad("the execution record's table filled up: raise exec-record's table=")
    dis = check_exec.Disassembler()
    dis.classify(rec.last_words())
    try:
        truth = check_trace.truth_of(d)
    except check_trace.Bad as e:
        raise Bad(str(e))
    for cpu in cpus:
        ev = events[cpu]
        after, user, returns, kernel, _, _, _ = check_record(rec, dis, cpu, ev, starts[cpu])
        exc = sum(1 for e in ev if e[0] != "B")
        if a.per_thread:
            what = (f"{exc} exceptions into the kernel and back, {kernel} blocks of the kernel and of other "
                    "tasks between them")
        else:
            what = (f"{exc} exceptions, {returns} of them returns to user space and the exception back; {user} "
                    "user-space blocks perf could not follow")
        print(f"CPU{cpu}: {len(ev)} decoded branches and exceptions compared ({len(ev) - exc} taken branches, "
              f"{what}): every one what the execution record says the CPU did, from the trace start "
              f"{starts[cpu]:#x}; the trace ends {after} block boundaries before the record's end")
        if cpu not in truth:
            raise Bad(f"CPU{cpu}: the plugin's truth has no such CPU")
        sessions = len(enabled.get(cpu, []))
        if not a.per_thread and sessions != 1:
            raise Bad(f"CPU{cpu}: its ETM was enabled {sessions} times: the truth holds only the last session")
        print(f"CPU{cpu}: {sessions} trace sessions; {check_truth(cpu, truth[cpu], ev, bool(a.per_thread))}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="the run directory (console.log, plugin.log, truth.json, "
                    "tmc.bin, exec.rec, vmcore.elf)")
    ap.add_argument("--disk", required=True, help="the guest's raw disk with perf.data")
    ap.add_argument("--perf", required=True, help="the host perf (scripts/host-perf.sh)")
    ap.add_argument("--vmlinux", required=True)
    ap.add_argument("--modules-dir", required=True, help="the kernel build tree: the .ko files")
    ap.add_argument("--cpus", type=int, required=True)
    ap.add_argument("--per-thread", metavar="BINARY",
                    help="the per-thread run of /bin/cspd-loop (user space only): BINARY is the program "
                    "the guest ran; its decoded flow must be the program's")
    ap.add_argument("--loops", type=int, default=1000, help="cspd-loop's iterations (CSPD_LOOPS)")
    ap.add_argument("--snapshot", metavar="FUNCS",
                    help="the snapshot run (perf record --snapshot=e): the kernel function the guest's marker "
                    "calls on every CPU just before each snapshot, in order, the last before the one at exit")
    ap.add_argument("--filter-range", metavar="FUNC",
                    help="with --per-thread: perf recorded with --filter 'filter FUNC @ /bin/cspd-loop'; the "
                    "decode must be exactly what the execution record ran inside the range")
    ap.add_argument("--filter-start-stop", nargs=2, metavar=("START", "STOP"),
                    help="with --per-thread: perf recorded with --filter 'start START @ /bin/cspd-loop, stop STOP @ "
                    "/bin/cspd-loop'; the decode must be exactly what the execution record ran from a start to a stop")
    ap.add_argument("--pause-window", nargs="+", metavar="ADDR", type=lambda x: int(x, 0),
                    help="with --per-thread: perf recorded with AUX pause (the cs_etm event start-paused, a "
                    "breakpoint event resuming it at the first ADDR and one pausing it at each other); the decode "
                    "must be exactly what the execution record ran from each resume's instruction up to, not "
                    "including, the next pause's, one AUX record per pause")
    ap.add_argument("--out", help="where perf.data, the kcore and perf script's output go (default DIR/perf)")
    ap.add_argument("--script", help="perf script's output saved by an earlier run (OUT/perf-script.txt, "
                    "possibly altered): judged instead of running perf script")
    a = ap.parse_args()
    if a.snapshot and a.per_thread:
        ap.error("--snapshot and --per-thread exclude each other")
    if (a.filter_range or a.filter_start_stop) and not a.per_thread:
        ap.error("--filter-range and --filter-start-stop judge a --per-thread recording")
    if sum(1 for x in (a.filter_range, a.filter_start_stop, a.pause_window) if x) > 1:
        ap.error("--filter-range, --filter-start-stop and --pause-window exclude each other")
    if a.pause_window and (not a.per_thread or len(a.pause_window) < 2):
        ap.error("--pause-window judges a --per-thread recording: a resume address and one or more pause addresses")
    try:
        check(a)
    except Bad as e:
        print(f"check_perf: FAIL: {e}", file=sys.stderr)
        return 1
    print("check_perf: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
