#!/usr/bin/env python3
"""Judge the QEMU plugin's CoreSight emulation with upstream's C drivers (scenario upstream-drivers).

The upstream kernel (Linux 7.3's own coresight-tmc and coresight-etm4x, built in) bound to the
plugin's components, traced through sysfs while a workload ran, stopped every source, copied the
ETF through /dev/tmc_etf0 to a raw disk (etf.disk) and printed each ETM's sysfs registers
(`CSPD: upstream reg etmN GROUP/NAME VALUE`), then panicked for a QMP vmcore. This script:

- checks that the drivers bound (tmc_etf0, funnel0, one etmN per CPU) and that sysfs tracing
  worked without a driver error (timeouts, claim-tag or probe failures, warnings, oopses);
- checks what the driver programmed against what the plugin saw (plugin.log: trace ID, TRCCONFIGR);
- writes an OpenCSD snapshot (snapshot/): the ETF bytes as read through /dev/tmc_etf0, each ETM's
  registers as the upstream driver's sysfs shows them, and the kernel text as it ran, read from
  the vmcore (alternatives and jump labels are patched at boot, so vmlinux's bytes would not do);
- decodes it with `trc_pkt_lister` (no decoder error allowed) and, for each CPU, compares every
  taken branch, waypoint and exception of the whole decoded window with the plugin's ground
  truth (truth.json, written when that CPU's ETM was disabled; it keeps every event whose bytes
  the sink may hold): the decoder's elements give a branch's target from the range after it, so
  the last branch's target comes from its encoding (direct) or from the address packet after it
  (indirect), read from trc_pkt_lister's packet listing; user space, which the snapshot holds no
  code of, is left out as check_trace.py does.

With --etr (scenario upstream-etr) it judges upstream's ETR crash-data path instead: the first
boot selected the reserved buffer (buf_mode_preferred resrv, the device tree's "tracedata" and
"metadata" regions), set each ETM's stop points at panic() and arm64_nmi_cpu_stop(), traced and
panicked; the C driver's panic sync stopped the ETR and wrote its metadata; the next boot found
"Valid crash tracedata", copied /dev/crash_tmc_etr0 to the disk (crash.bin) and the host took a
memory dump of that boot (vmcore.elf: the same kernel at the same KASLR offset, for the text).
The crash data must equal the buffer the plugin wrote (tmc.bin, oldest first; the driver's barrier
packet first when it wrapped), and decode to each CPU's ground truth up to its stop point.

Exits 1 on any difference, naming it.
"""

import argparse
import array
import bisect
import hashlib
import json
import mmap
import os
import re
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_exec  # noqa: E402  (the execution record and its matcher)
import check_perf  # noqa: E402  (perf.data's AUX records)
import check_trace  # noqa: E402  (the whole-window comparison with the ground truth)

TRUTH_KINDS = ("taken", "waypoint", "exception")
# ETMv4 register numbers (byte offset / 4) as OpenCSD's snapshot reader names them.
TRCIDR_OFFSET = {**{n: 0x1E0 + 4 * n for n in range(8)}, **{n: 0x180 + 4 * (n - 8) for n in range(8, 14)}}
TRCCONFIGR, TRCTRACEIDR, TRCAUTHSTATUS = 0x010, 0x040, 0xFB8
DRIVER_TROUBLE = re.compile(
    r"(timeout while waiting|coresight.*(fail|error|timed out|not supported)|"
    r"probe of .*(etm|etf|funnel|tmc).* failed|TRCDEVARCH doesn't match|\bWARNING:|\bOops|\bBUG:|"
    r"Unable to handle|Call trace:)", re.I)


class Bad(Exception):
    pass


# --- the guest's console ---------------------------------------------------------------------

def guest_view(console, cpus, sink="tmc_etf0"):
    text = open(console, errors="replace").read()
    if "CSPD: upstream: done" not in text:
        raise Bad("the guest did not finish its upstream sequence (no 'CSPD: upstream: done')")
    m = re.search(r"CSPD: upstream: coresight devices: (.*)", text)
    devs = m.group(1).split() if m else []
    want = [sink, "funnel0"] + [f"etm{c}" for c in range(cpus)]
    missing = [x for x in want if x not in devs]
    if missing:
        raise Bad(f"upstream's drivers did not register {missing} (CoreSight bus: {devs})")
    for line in [f"enabled sink {sink}: enable_sink=1"] + \
            [f"enabled source etm{c}: enable_source=1" for c in range(cpus)] + \
            [f"disabled source etm{c}: enable_source=0" for c in range(cpus)]:
        if f"CSPD: upstream: {line}" not in text:
            raise Bad(f"sysfs: no 'upstream: {line}' (see the console)")
    regs = {}
    for m in re.finditer(rf"CSPD: upstream: reg (etm\d+|{sink}) (\S+) (\S+)", text):
        name, reg, value = m.groups()
        v = int(value, 0) if re.fullmatch(r"(0x)?[0-9a-fA-F]+", value) else value
        regs.setdefault(name, {})[reg] = v
    m = re.search(r"CSPD: upstream: etf (\d+) bytes, md5 ([0-9a-f]{32})", text)
    if not m:
        raise Bad(f"the guest did not read the sink through /dev/{sink} (no 'upstream: etf' line)")
    # The drivers' messages up to the panic the guest triggers afterwards (its call trace is fine).
    before = text.split("Kernel panic - not syncing", 1)[0]
    trouble = [l.strip() for l in before.splitlines() if DRIVER_TROUBLE.search(l)]
    probes = [l.strip() for l in text.splitlines()
              if re.search(r"(coresight|etm4|tmc|funnel)", l, re.I) and "CSPD:" not in l]
    return regs, int(m.group(1)), m.group(2), trouble, probes


def guest_view_etr(console, cpus):
    text = open(console, errors="replace").read()
    first, sep, second = text.partition("Kernel panic - not syncing")
    if not sep:
        raise Bad("the first boot did not panic")
    m = re.search(r"CSPD: upstream: coresight devices: (.*)", first)
    devs = m.group(1).split() if m else []
    want = ["tmc_etr0", "funnel0"] + [f"etm{c}" for c in range(cpus)]
    missing = [x for x in want if x not in devs]
    if missing:
        raise Bad(f"upstream's drivers did not register {missing} (CoreSight bus: {devs})")
    lines = ["buf_mode_preferred resrv", "enabled sink tmc_etr0: enable_sink=1"] + \
        [f"enabled source etm{c}: enable_source=1" for c in range(cpus)]
    for line in lines:
        if f"CSPD: upstream: {line}" not in first:
            raise Bad(f"sysfs: no 'upstream: {line}' in the first boot (see the console)")
    for c in range(cpus):
        for n, fn in ((0, "panic"), (1, "arm64_nmi_cpu_stop")):
            if not re.search(rf"CSPD: upstream: addr_stop etm{c} {n} {fn} 0x[0-9a-f]+", first):
                raise Bad(f"etm{c}: the stop point at {fn} was not set through addr_stop")
    regs = {}
    for m in re.finditer(r"CSPD: upstream: reg (etm\d+|tmc_etr0) (\S+) (\S+)", first):
        name, reg, value = m.groups()
        v = int(value, 0) if re.fullmatch(r"(0x)?[0-9a-fA-F]+", value) else value
        regs.setdefault(name, {})[reg] = v
    if "coresight tmc_etr0: Valid crash tracedata found" not in second:
        raise Bad("the next boot's C driver did not find valid crash tracedata")
    m = re.search(r"CSPD: upstream: crash_tmc_etr0 (\d+) bytes, md5 ([0-9a-f]{32})", second)
    if not m:
        raise Bad("the next boot did not read /dev/crash_tmc_etr0 (no 'upstream: crash_tmc_etr0' line)")
    trouble = [l.strip() for l in first.splitlines() if DRIVER_TROUBLE.search(l)]
    trouble += [l.strip() for l in second.split("Booting Linux", 1)[-1].splitlines()
                if DRIVER_TROUBLE.search(l)]
    probes = [l.strip() for l in text.splitlines()
              if re.search(r"(coresight|etm4|tmc|funnel)", l, re.I) and "CSPD:" not in l]
    return regs, int(m.group(1)), m.group(2), trouble, probes


def truth_to_stop(d, cpu):
    """The plugin's truth of `cpu` for the session whose trace ended at a stop point, cut there."""
    for name in ("truth.json", "truth.json.exit"):
        path = os.path.join(d, name)
        if not os.path.exists(path):
            continue
        for c in json.load(open(path))["cpus"]:
            v = c.get("viewinst") or {}
            if c["cpu"] != cpu or v.get("ended_by") != "stop-point":
                continue
            events = c["events"]
            keep = len(events) - (c["total"] - v["total_at_stop"])
            return dict(c, events=events[:max(keep, 0)], reason="stopped"), v["stopped_at"]
    raise Bad(f"CPU{cpu}: the plugin's truth has no session that ended at a stop point")


def plugin_view(path):
    text = open(path, errors="replace").read() if os.path.exists(path) else ""
    enabled = {}
    for m in re.finditer(r"etm (\d+): enabled, trace id (0x[0-9a-f]+), TRCCONFIGR (0x[0-9a-f]+)", text):
        enabled[int(m.group(1))] = (int(m.group(2), 16), int(m.group(3), 16))
    return enabled, text


# --- the vmcore and vmlinux ------------------------------------------------------------------

def elf_phdrs(data):
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise Bad("the vmcore is not an ELF64 file")
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        yield struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)


def vmcoreinfo(data):
    for p_type, _, off, _, _, filesz, _, _ in elf_phdrs(data):
        if p_type != 4:  # PT_NOTE
            continue
        pos, end = off, off + filesz
        while pos + 12 <= end:
            namesz, descsz, _ = struct.unpack_from("<III", data, pos)
            name = data[pos + 12:pos + 12 + namesz].rstrip(b"\0")
            desc_at = pos + 12 + (namesz + 3) // 4 * 4
            desc = data[desc_at:desc_at + descsz]
            if name == b"VMCOREINFO":
                return dict(l.split("=", 1) for l in desc.decode(errors="replace").splitlines() if "=" in l)
            pos = desc_at + (descsz + 3) // 4 * 4
    raise Bad("the vmcore has no VMCOREINFO note")


def read_phys(data, paddr, size):
    for p_type, _, off, _, pa, filesz, _, _ in elf_phdrs(data):
        if p_type == 1 and pa <= paddr and paddr + size <= pa + filesz:
            return data[off + paddr - pa:off + paddr - pa + size]
    return None


def exec_sections(path):
    """(name, address, bytes) of vmlinux's executable sections that stay after boot."""
    data = open(path, "rb").read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    shdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    stro = shdrs[shstrndx][4]
    out = []
    for name_off, sh_type, flags, addr, off, size, *_ in shdrs:
        name = data[stro + name_off:data.index(b"\0", stro + name_off)].decode()
        if sh_type == 1 and flags & 0x4 and flags & 0x2 and size and not name.startswith((".init", ".exit")):
            out.append((name, addr, data[off:off + size]))
    return out


def map_file(path):
    """The file's bytes, mapped read-only (a vmcore is the guest's whole RAM)."""
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def kernel_text(vmcore, vmlinux):
    data = map_file(vmcore)
    info = vmcoreinfo(data)
    try:
        koff = int(info.get("KERNELOFFSET", "0"), 16)
        voff = int(info["NUMBER(kimage_voffset)"], 16)
    except (KeyError, ValueError):
        raise Bad("VMCOREINFO lacks KERNELOFFSET or NUMBER(kimage_voffset)")
    images, patched = [], 0
    for name, addr, built in exec_sections(vmlinux):
        ran = read_phys(data, (addr + koff - voff) & (1 << 64) - 1, len(built))
        if ran is None:
            raise Bad(f"the vmcore does not hold {name} at {addr + koff:#x}")
        patched += sum(a != b for a, b in zip(ran, built))
        images.append((name, addr + koff, ran))
    return images, koff, patched


def module_text(vmcore, console):
    """The text of each loaded module as it ran, read from the vmcore through the kernel's page
    tables (swapper_pg_dir, 4 KiB pages, 48-bit VAs): from the address the guest listed
    ("CSPD: module: NAME ADDR"), page by page until a page is not mapped, at most 1 MiB.
    Returns [(name, address, bytes)]."""
    mods = re.findall(r"CSPD: module: (\S+) (0x[0-9a-f]+)", open(console, errors="replace").read())
    if not mods:
        return []
    data = map_file(vmcore)
    info = vmcoreinfo(data)
    try:
        pgd = int(info["SYMBOL(swapper_pg_dir)"], 16) - int(info["NUMBER(kimage_voffset)"], 16)
        va_bits, page = int(info["NUMBER(VA_BITS)"]), int(info["PAGESIZE"])
    except (KeyError, ValueError):
        raise Bad("VMCOREINFO lacks swapper_pg_dir, kimage_voffset, VA_BITS or PAGESIZE")
    if va_bits != 48 or page != 4096:
        raise Bad(f"module text: a {va_bits}-bit, {page}-byte page walk is not implemented")
    out_mask = 0x0000_FFFF_FFFF_F000

    def phys(va):
        table = pgd & out_mask
        for level, shift in enumerate((39, 30, 21, 12)):
            raw = read_phys(data, table + ((va >> shift) & 511) * 8, 8)
            if raw is None:
                return None
            d, = struct.unpack("<Q", raw)
            if not d & 1:
                return None
            if level in (1, 2) and not d & 2:  # a block
                size = 1 << shift
                return (d & out_mask & ~(size - 1)) | (va & (size - 1))
            table = d & out_mask
        return table | (va & 0xFFF)

    images = []
    seen = set()
    for name, addr in mods:
        base = int(addr, 16)
        if base in seen:
            continue
        seen.add(base)
        text = bytearray()
        while len(text) < 1 << 20:
            pa = phys(base + len(text))
            chunk = read_phys(data, pa, 4096) if pa is not None else None
            if chunk is None:
                break
            text += chunk
        if not text:
            raise Bad(f"module {name}: its text at {base:#x} is not mapped in the vmcore's page tables")
        images.append((f"module {name}", base, bytes(text)))
    return images


# --- the snapshot and the decode -------------------------------------------------------------

def write_snapshot(d, etf, images, etms):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "cstrace.bin"), "wb") as f:
        f.write(etf)
    devices = []
    for k, (cpu, regs) in enumerate(sorted(etms.items())):
        core = (f"[device]\nname=cpu_{cpu}\nclass=core\ntype=ARMv8-A\n\n[regs]\n"
                f"PC(size:64)=0x{images[0][1]:X}\nSP(size:64)=0\nSCTLR_EL1=0x1007\nCPSR=0x1C5\n")
        # OpenCSD keeps one memory map for all cores: the images go with the first core only.
        for i, (name, addr, b) in enumerate(images if k == 0 else []):
            fname = f"kernel{re.sub(r'[^A-Za-z0-9]', '_', name)}.bin"
            with open(os.path.join(d, fname), "wb") as f:
                f.write(b)
            core += f"\n[dump{i + 1}]\nfile={fname}\naddress=0x{addr:X}\nlength=0x{len(b):X}\n"
        open(os.path.join(d, f"cpu_{cpu}.ini"), "w").write(core)
        etm = f"[device]\nname=ETM_{cpu}\nclass=trace_source\ntype=ETM4\n\n[regs]\n"
        for name, off, val in regs:
            etm += f"{name}(0x{off >> 2:03X})=0x{val:08X}\n"
        open(os.path.join(d, f"etm_{cpu}.ini"), "w").write(etm)
        devices += [f"cpu_{cpu}.ini", f"etm_{cpu}.ini"]
    open(os.path.join(d, "snapshot.ini"), "w").write(
        "[snapshot]\nversion=1.0\n\n[device_list]\n"
        + "".join(f"device{i}={f}\n" for i, f in enumerate(devices))
        + "\n[trace]\nmetadata=trace.ini\n")
    open(os.path.join(d, "trace.ini"), "w").write(
        "[trace_buffers]\nbuffers=buffer0\n\n[buffer0]\nname=ETB_0\nfile=cstrace.bin\nformat=coresight\n"
        "\n[source_buffers]\n" + "".join(f"ETM_{c}=ETB_0\n" for c in sorted(etms))
        + "\n[core_trace_sources]\n" + "".join(f"cpu_{c}=ETM_{c}\n" for c in sorted(etms)))


ELEM = re.compile(r"Idx:\d+; ID:([0-9a-fA-F]+); OCSD_GEN_TRC_ELEM_(\w+)\((.*)\)\s*$")


PKT = re.compile(r"Idx:\d+; ID:([0-9a-fA-F]+); \[[^\]]*\];\s+(I_\w+) : .*?(?:Addr=0x([0-9A-Fa-f]+))?")
# Packets after which an address packet is no longer the target of the last branch.
MOVES_ON = ("I_ATOM", "I_Q", "I_EXCEPT", "I_TRACE_ON", "I_OVERFLOW", "I_DISCARD", "I_NOT_SYNC",
            "I_SRC_ADDR", "I_PE_RESET", "I_TRANS_FAIL")


def decode(d, lister):
    """Decodes the snapshot with trc_pkt_lister (packets and elements). Returns, per trace ID,
    its elements and the address of its trailing address packet (one that no atom, exception or
    trace-on followed: at the end of the trace, the target of a last indirect branch), the decoder
    errors and the log."""
    log = os.path.join(d, "decode.ppl")
    # trc_pkt_lister appends to its log: a second decode of the same directory starts afresh.
    if os.path.exists(log):
        os.remove(log)
    r = subprocess.run([lister, "-ss_dir", d, "-src_name", "ETB_0", "-decode", "-logfilename", log],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise Bad(f"trc_pkt_lister failed ({r.returncode}): {r.stderr.strip() or r.stdout[-500:]}")
    by_id, tails, errors = {}, {}, []
    for line in open(log, errors="replace"):
        line = line.strip()
        m = ELEM.match(line)
        if not m:
            p = PKT.match(line)
            if p:
                tid, kind = int(p.group(1), 16), p.group(2)
                if kind.startswith("I_ADDR") and p.group(3):
                    tails[tid] = int(p.group(3), 16)
                elif kind.startswith(MOVES_ON):
                    tails[tid] = None
            elif "OCSD_ERR" in line:
                errors.append(line)
            continue
        tid, kind, body = int(m.group(1), 16), m.group(2), m.group(3)
        by_id.setdefault(tid, []).append((kind, body))
    return by_id, tails, errors, log


def direct_target(w, at):
    """The target of an A64 direct branch (B, BL, B.cond, CBZ/CBNZ, TBZ/TBNZ) at `at`, else None."""
    sext = lambda v, bits: v - (1 << bits) if v >> (bits - 1) else v
    if w & 0x7C000000 == 0x14000000:
        off = sext(w & 0x3FFFFFF, 26)
    elif w & 0xFF000010 == 0x54000000 or w & 0x7E000000 == 0x34000000:
        off = sext((w >> 5) & 0x7FFFF, 19)
    elif w & 0x7E000000 == 0x36000000:
        off = sext((w >> 5) & 0x3FFF, 14)
    else:
        return None
    return (at + 4 * off) & ((1 << 64) - 1)


def word_at(images, addr):
    for _, base, b in images:
        if base <= addr and addr + 4 <= base + len(b):
            return struct.unpack_from("<I", b, addr - base)[0]
    return None


RANGE = re.compile(r"exec range=0x([0-9a-f]+):\[0x([0-9a-f]+)\] num_i\(\d+\) last_sz\((\d+)\) "
                   r"\(ISA=\w+\) ([EN]) ?(.*)$")
ISB = 0xD5033FDF


def steps(elems):
    """The decoder's elements as (kind, address, branch): an instruction range's start and its
    last instruction's branch (from, is_exception, indirect) when taken; an address the decoder
    could not read (ADDR_NACC); an exception's return address, itself the source of the next
    step; ('RESET', None, None) where the decoder starts again (NO_SYNC, TRACE_ON)."""
    for kind, body in elems:
        if kind == "INSTR_RANGE":
            m = RANGE.search(body)
            if not m:
                raise Bad(f"cannot read the decoder's range {body!r}")
            start, end, size, flag, br = int(m.group(1), 16), int(m.group(2), 16), int(m.group(3)), \
                m.group(4), m.group(5).strip()
            taken = flag == "E" and br and not br.startswith("---")
            yield kind, start, (end - size, False, br.startswith("iBR")) if taken else None
        elif kind == "ADDR_NACC":
            m = re.search(r"0x([0-9a-fA-F]+)", body)
            yield kind, int(m.group(1), 16) if m else None, None
        elif kind == "EXCEPTION":
            m = re.search(r"ret addr:(0x[0-9a-f]+)", body)
            addr = int(m.group(1), 16) if m else None
            yield kind, addr, (addr, True, False) if addr is not None else None
        elif kind in ("NO_SYNC", "TRACE_ON"):
            yield "RESET", None, None


def last_target(pending, tail, word):
    """The target of the trace's last branch `pending`: a direct one's from its encoding, an
    indirect one's from the trailing address packet (`tail`); an ISB falls through."""
    frm, _, indirect = pending
    w = word(frm)
    to = tail if indirect else (direct_target(w, frm) if w is not None else None)
    if to is None and w is not None and not indirect and direct_target(w, frm) is None \
            and (w & 0xFE000000) != 0xD6000000:
        to = frm + 4  # a taken waypoint that is not a branch (ISB) falls through
    return to


def branches(elems, tail, word):
    """(from, to, is_exception) of every taken branch, waypoint and exception, in order, and the
    addresses where the decoder lost the flow (no code image); the rule csdump's report uses,
    the last branch included: a direct one's target from its encoding (`word` reads the kernel
    text as it ran), an indirect one's from the trailing address packet (`tail`)."""
    out, lost, pending = [], [], None
    for kind, addr, branch in steps(elems):
        if kind == "RESET":
            pending = None
            continue
        if kind == "ADDR_NACC" and pending is None:
            lost.append(addr)
        if addr is not None and pending is not None:
            out.append((pending[0], addr, pending[1]))
        pending = branch
    if pending is not None and not pending[1]:
        out.append((pending[0], last_target(pending, tail, word), False))
    return out, lost


def exec_events(elems, tail, word):
    """The decode as check_exec.py's events, oldest first: ('T', from, to) for a taken branch,
    ('X', from, to) for an exception, ('W', at) for an ISB (a waypoint that does not branch),
    ('G', at) where the decoder lost the flow (code the snapshot does not hold), in the order the
    decoder gave them; the last branch's target as branches() finds it (a last branch whose
    target the trace does not give is left out)."""
    out, pending = [], None

    def event(frm, exc, to):
        if exc:
            return ("X", frm, to)
        return ("W", frm) if word(frm) == ISB else ("T", frm, to)

    for kind, addr, branch in steps(elems):
        if kind == "RESET":
            pending = None
            continue
        if addr is not None and pending is not None:
            out.append(event(pending[0], pending[1], addr))
        if kind == "ADDR_NACC" and addr is not None:
            out.append(("G", addr))
        pending = branch
    if pending is not None and not pending[1]:
        to = last_target(pending, tail, word)
        if word(pending[0]) == ISB or to is not None:
            out.append(event(pending[0], False, to))
    return out


def check_exec_record(d, cpu, events, what, images, self_test=False):
    """`events` (exec_events()) against the execution record the recorder plugin wrote
    (exec.rec; check_exec.py's matcher): the newest place in the record where the decode matches
    whole. Returns a note."""
    rec = getattr(check_exec_record, "rec", None)
    if rec is None:
        try:
            rec = check_exec_record.rec = check_exec.Record(os.path.join(d, "exec.rec"))
        except check_exec.Bad as e:
            raise Bad(str(e))
        check_exec_record.dis = check_exec.Disassembler()
        check_exec_record.dis.classify(rec.last_words())
    if not events:
        raise Bad(f"CPU{cpu}: {what}: no event to judge against the execution record")
    rings = check_exec_record.__dict__.setdefault("rings", {})
    if cpu not in rings:
        rings[cpu] = rec.ring(cpu)
    ring, wrapped = rings[cpu]
    try:
        unserved = unserved_by(images)
        after, total, user = check_exec.check_cpu(rec, check_exec_record.dis, cpu, events, ring, wrapped,
                                                  unserved)
        if self_test:
            # The judge fails this decode changed by one event (check_exec.py's self-test).
            check_exec.self_test(rec, check_exec_record.dis, cpu, events, ring, wrapped, unserved)
        else:
            # A decode that ends in a polling loop: the loop's own check fails on it changed.
            check_exec.self_test_trail(rec, check_exec_record.dis, cpu, events, ring, wrapped, unserved)
    except check_exec.Bad as e:
        raise Bad(f"{what}: {e}")
    return (f"all {total} decoded events are what the execution record says the CPU did; the trace ends "
            f"{after} block boundaries before the record's end ({user} boundaries in code the snapshot does not hold)")


def unserved_by(images):
    """Whether an address is outside every image (code the snapshot does not hold)."""
    spans = sorted((base, base + len(b)) for _, base, b in images)
    starts = [a for a, _ in spans]

    def unserved(x):
        i = bisect.bisect_right(starts, x) - 1
        return i < 0 or x >= spans[i][1]
    return unserved


def compare(cpu, dec, lost, tc, images):
    """Returns a note, or raises Bad naming the first difference (check_trace.compare_window:
    the whole decoded window against the truth's newest events). The snapshot holds vmlinux's
    text only: user space and the kernel's aliases of it (the KPTI trampoline's vectors at their
    fixmap address) are code the decoder is not given."""
    unserved = unserved_by(images)
    what = "code the snapshot does not hold (user space, the trampoline's fixmap alias)"
    try:
        return check_trace.compare_window(cpu, dec, lost, tc, unserved, what)
    except check_trace.Bad as e:
        raise Bad(str(e))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True, help="the run directory (console.log, plugin.log, truth.json, "
                   "etf.disk, vmcore.elf)")
    p.add_argument("--vmlinux", required=True)
    p.add_argument("--cpus", type=int, required=True)
    p.add_argument("--trc-pkt-lister", default=shutil.which("trc_pkt_lister") or "trc_pkt_lister")
    p.add_argument("--etr", action="store_true", help="the ETR crash-data path (scenario upstream-etr)")
    p.add_argument("--exec", action="store_true",
                   help="also judge each decode against the execution record (exec.rec)")
    p.add_argument("--devfile", action="store_true",
                   help="also the read of the sink's device file while the session traced (cspd.devfile=1: "
                        "devfile.disk, the plugin's tmc.bin.1)")
    p.add_argument("--devfile-perf", action="store_true",
                   help="also perf through the sink while its device file was open (cspd.devfile_perf=1)")
    p.add_argument("--sink", default="tmc_etf0",
                   help="the sink the guest traced into and read (cspd.sink; default tmc_etf0)")
    a = p.parse_args()
    d = a.dir
    if a.etr:
        return main_etr(a)
    try:
        sink = a.sink
        regs, etf_len, etf_md5, trouble, probes = guest_view(os.path.join(d, "console.log"), a.cpus, sink)
        print("upstream drivers, as the kernel logged them:")
        for l in probes[:40]:
            print(f"  {l}")
        if trouble:
            raise Bad("the upstream drivers reported trouble:\n  " + "\n  ".join(trouble[:20]))
        etf = open(os.path.join(d, "etf.disk"), "rb").read()[:etf_len]
        if len(etf) != etf_len or hashlib.md5(etf).hexdigest() != etf_md5:
            raise Bad(f"etf.disk does not hold the {etf_len} bytes the guest read (md5 {etf_md5})")
        if etf_len == 0 or etf_len % 16:
            raise Bad(f"/dev/{sink} gave {etf_len} bytes: want a non-zero number of 16-byte frames")
        devfile = devfile_read(d, sink) if a.devfile else None
        if a.devfile_perf:
            devfile_perf(d, sink)
        t = regs.get(sink, {})
        print(f"{sink} as the driver's sysfs shows it after the read: "
              + ", ".join(f"{k.split('/')[-1]} {v:#x}" if isinstance(v, int) else f"{k} {v}"
                          for k, v in sorted(t.items())))
        print(f"the sink through /dev/{sink}: {etf_len} bytes"
              + (" (wrapped: the driver put a barrier packet first)"
                 if etf[:16] == struct.pack("<4I", *[0x7FFFFFFF] * 4) else ""))

        enabled, _ = plugin_view(os.path.join(d, "plugin.log"))
        etms, ids = etm_registers(regs, a.cpus, enabled)
        for cpu, tid in sorted(ids.items()):
            r = {name: v for name, _, v in etms[cpu]}
            print(f"CPU{cpu}'s ETM: trace ID {tid:#x}, TRCCONFIGR {r['TRCCONFIGR']:#x}, TRCIDR0 {r['TRCIDR0']:#x}, "
                  f"TRCIDR1 {r['TRCIDR1']:#x} (the plugin saw the same trace ID and TRCCONFIGR)")

        images, koff, patched = kernel_text(os.path.join(d, "vmcore.elf"), a.vmlinux)
        print(f"kernel text from the vmcore: {sum(len(b) for _, _, b in images)} bytes in {len(images)} "
              f"sections at KASLR offset {koff:#x}; {patched} bytes differ from vmlinux (patched at boot)")
        mods = module_text(os.path.join(d, "vmcore.elf"), os.path.join(d, "console.log"))
        if mods:
            print("module text from the vmcore (the kernel's page tables): "
                  + ", ".join(f"{n.split()[-1]} {len(b)} bytes at {base:#x}" for n, base, b in mods))
        images += mods
        snap = os.path.join(d, "snapshot")
        write_snapshot(snap, etf, images, etms)
        by_id, tails, errors, log = decode(snap, a.trc_pkt_lister)
        if errors:
            raise Bad(f"the decode has {len(errors)} decoder errors, first: {errors[0]} (decode: {log})")

        truth = {c["cpu"]: c for c in json.load(open(os.path.join(d, "truth.json")))["cpus"]}
        if a.devfile:
            check_devfile(a, d, devfile, images, etms, ids, truth)
        failed = []
        for cpu, tid in sorted(ids.items()):
            dec, lost = branches(by_id.get(tid, []), tails.get(tid), lambda x: word_at(images, x))
            try:
                if cpu not in truth:
                    raise Bad(f"CPU{cpu}: no ground truth in truth.json")
                note = compare(cpu, dec, lost, truth[cpu], images)
                print(f"ground truth CPU{cpu} (trace ID {tid:#x}): {len(dec)} branches, waypoints and "
                      f"exceptions decoded; {note}")
                if a.exec:
                    ev = exec_events(by_id.get(tid, []), tails.get(tid), lambda x: word_at(images, x))
                    print(f"execution record CPU{cpu}: {check_exec_record(d, cpu, ev, 'the ETF read', images)}")
            except Bad as e:
                failed.append(str(e))
        if failed:
            raise Bad("\n".join(failed) + f"\n(decode: {log})")
    except (Bad, OSError) as e:
        print(f"check_upstream: FAIL: {e}", file=sys.stderr)
        return 1
    print(f"check_upstream: the kernel's drivers bound, traced and read {sink}; OpenCSD decodes it to "
          "the plugin's ground truth on every CPU" + (" and to the execution record" if a.exec else ""))
    return 0


def devfile_read(d, sink="tmc_etf0"):
    """The read of the sink's device file (/dev/tmc_etf0, /dev/tmc_etr0) while the session traced
    (upstream's semantics): the open stopped capture (the plugin's first TMC stop, whose RAM or
    ETR buffer it kept as tmc.bin.1), a second reader was refused with EBUSY, the read gave the
    trace as the drain reads it, and the close
    started capture again (the plugin saw capture stop a second time, when the sources were
    disabled). The read decodes, on every CPU, to a run of the plugin's ground truth: that
    session's events before the stop (the truth keeps the whole session's newest events,
    truth_bytes)."""
    text = open(os.path.join(d, "console.log"), errors="replace").read()
    for line in ("devfile open while tracing", "devfile closed: "):
        if f"CSPD: upstream: {line}" not in text:
            raise Bad(f"device file: no 'upstream: {line}' (see the console)")
    m = re.search(r"CSPD: upstream: devfile second reader: (.*)", text)
    if not m or not m.group(1).startswith("refused") or "busy" not in m.group(1):
        raise Bad(f"device file: a second reader was not refused with EBUSY ({m.group(1) if m else 'not tried'})")
    if not re.search(r"CSPD: upstream: devfile read: \d+\+\d+ records out", text):
        raise Bad("device file: the guest did not read it while tracing (no 'upstream: devfile read' line)")
    disk = open(os.path.join(d, "devfile.disk"), "rb").read()
    held_path = os.path.join(d, "tmc.bin.1")
    held = open(held_path, "rb").read() if os.path.exists(held_path) else None
    if held is None:
        raise Bad("the plugin kept no trace of the first TMC stop (tmc.bin.1): the open did not stop capture")
    stop_lines = re.findall(r"tmc stopped: (\d+) bytes held, full (true|false)",
                            open(os.path.join(d, "plugin.log"), errors="replace").read())
    stops = len(stop_lines)
    if not stop_lines:
        raise Bad("plugin.log has no TMC stop")
    # A RAM or buffer that wrapped is read with the barrier packet over its oldest 16 bytes. The
    # disk was zeros: the read is what precedes the zeros after what the sink held.
    want = BARRIER + held[16:] if stop_lines[0][1] == "true" else held
    n = len(want)
    data = disk[:n]
    if n == 0 or n % 16:
        raise Bad(f"the plugin kept {n} bytes at the open's stop: want a non-zero number of 16-byte frames")
    if any(disk[n:n + 65536]):
        raise Bad(f"the device file gave more than the {n} bytes {sink} held when the open stopped it")
    if data != want:
        at = next((i for i in range(min(len(data), len(want))) if data[i] != want[i]), min(len(data), len(want)))
        raise Bad(f"the device file's {n} bytes are not what {sink} held when the open stopped it "
                  f"({len(held)} bytes, tmc.bin.1"
                  f"{', wrapped: the barrier packet first' if stop_lines[0][1] == 'true' else ''}): "
                  f"they differ at byte {at:#x}")
    if stops < 2:
        raise Bad(f"the plugin saw capture stop {stops} times: the close did not start it again "
                  "(want the open's stop, then the sources' disable)")
    print(f"device file /dev/{sink} while tracing: {n} bytes, what it held when the open stopped capture "
          f"(the plugin's tmc.bin.1){' (wrapped: barrier packet first)' if data[:16] == BARRIER else ''}; a second "
          f"reader refused (EBUSY); capture started again at the close (the plugin saw {stops} stops)")
    return data


PERF_DISK_OFFSET = 4 << 20
PERF_AUX_FLAG_TRUNCATED = 1


def devfile_perf(d, sink):
    """perf through the sink while its device file was open (cspd.devfile_perf=1: perf record
    --per-thread of `true`, its perf.data at 4 MiB into devfile.disk): the sink refused perf
    (upstream: EBUSY while it is read), so each start of the event ended its AUX record empty and
    truncated, no AUXTRACE data was written, and capture never started (the plugin saw only the
    device file's and the sources' stops)."""
    text = open(os.path.join(d, "console.log"), errors="replace").read()
    if not re.search(r"CSPD: upstream: devfile perf while open: perf record rc \d+", text):
        raise Bad("perf while the device file was open: the guest did not run it (no 'devfile perf while open')")
    with open(os.path.join(d, "devfile.disk"), "rb") as f:
        f.seek(PERF_DISK_OFFSET)
        line = f.readline(64)
        m = re.match(rb"CSPDPERF (\d+)\n$", line)
        if not m:
            raise Bad(f"devfile.disk has no perf.data at {PERF_DISK_OFFSET:#x} (the guest's 'CSPDPERF' line): {line[:40]!r}")
        data = f.read(int(m.group(1)))
    if len(data) != int(m.group(1)) or data[:8] != check_perf.PERFILE2:
        raise Bad(f"devfile.disk: the guest's perf.data is cut or not one ({len(data)} of {m.group(1)} bytes)")
    try:
        aux, auxtrace = check_perf.aux_records(data)
    except check_perf.Bad as e:
        raise Bad(f"the perf.data of perf while the device file was open: {e}")
    cpus_seen = sorted({c for c, *_ in aux})
    if not aux:
        raise Bad("perf while the device file was open: perf.data has no AUX record (the event never started)")
    kept = [(c, n, fl) for c, _o, n, fl in aux if n or not fl & PERF_AUX_FLAG_TRUNCATED]
    if kept:
        c, n, fl = kept[0]
        raise Bad(f"perf recorded through {sink} while its device file was open: CPU{c}'s AUX record of "
                  f"{n:#x} bytes, flags {fl:#x} (want 0 bytes, truncated: the sink refused it)")
    traced = sum(len(p) for *_x, p in auxtrace)
    if traced:
        raise Bad(f"perf wrote {traced} bytes of trace from {sink} while its device file was open")
    stops = len(re.findall(r"tmc stopped: \d+ bytes held", open(os.path.join(d, "plugin.log"), errors="replace").read()))
    if stops != 2:
        raise Bad(f"the plugin saw capture stop {stops} times; want 2 (the open's, the sources'): perf "
                  "started the sink while its device file was open")
    print(f"perf through {sink} while its device file was open: {len(aux)} AUX records (CPUs {cpus_seen}), "
          "each empty and truncated (the sink refused it), no trace written, capture not started")


def check_devfile(a, d, data, images, etms, ids, truth):
    """The read's decode against the truth and (--exec) the execution record."""
    n = len(data)
    # The truth keeps the events of the newest cover_bytes of sink input: it reaches back to the
    # read's window only if the input after the open's stop and the window fit in it.
    plog = open(os.path.join(d, "plugin.log"), errors="replace").read()
    at_stop = re.search(r"tmc stopped: \d+ bytes held.*?trace bytes (\d+)", plog)
    at_end = re.findall(r"etm \d+: stopped.*?trace bytes (\d+)", plog)
    cover = min((c.get("cover_bytes") or 0) for c in truth.values()) if truth else 0
    if at_stop and at_end:
        need = int(at_end[-1]) - int(at_stop.group(1)) + n
        if need > cover:
            raise Bad(f"the truth keeps the events of the newest {cover} bytes of sink input, the read's window "
                      f"ends {need - n} bytes before the sources stopped: a sizing error of the harness "
                      "(truth_bytes), not a verdict on the trace")
    snap = os.path.join(d, "snapshot-devfile")
    write_snapshot(snap, data, images, etms)
    by_id, tails, errors, log = decode(snap, a.trc_pkt_lister)
    if errors:
        raise Bad(f"the device file's decode has {len(errors)} decoder errors, first: {errors[0]} (decode: {log})")
    for cpu, tid in sorted(ids.items()):
        dec, lost = branches(by_id.get(tid, []), tails.get(tid), lambda x: word_at(images, x))
        if cpu not in truth:
            raise Bad(f"CPU{cpu}: no ground truth in truth.json")
        print(f"device file, CPU{cpu}: {compare_run(cpu, dec, lost, truth[cpu], images)}")
        if a.exec:
            ev = exec_events(by_id.get(tid, []), tails.get(tid), lambda x: word_at(images, x))
            note = check_exec_record(d, cpu, ev, "the device file", images, self_test=cpu == min(ids))
            print(f"device file, CPU{cpu}: {note}")


BARRIER = struct.pack("<4I", *[0x7FFFFFFF] * 4)


def compare_run(cpu, dec, lost, tc, images):
    """A decode of a sink read while its session went on (`dec`, oldest first) against the
    session's truth: the whole decode is a run of the truth's events (branches from code the
    snapshot does not hold left out, as compare() does), ending where capture stopped: its last
    branch's target is compared when the trace gives it. Returns a note, or raises Bad with the
    closest candidate's first difference."""
    unserved = unserved_by(images)
    served_lost = [x for x in lost if x is None or not unserved(x)]
    if served_lost:
        raise Bad(f"CPU{cpu}: the decoder lost the flow at {served_lost[0]:#x}, which the snapshot holds")
    if not dec:
        raise Bad(f"CPU{cpu}: no branch decoded from the device file")
    tru = [(int(e["from"], 16), int(e["to"], 16), e["kind"] == "exception") for e in tc["events"]
           if e["kind"] in TRUTH_KINDS and (e["kind"] == "exception" or not unserved(int(e["from"], 16)))]
    n = len(dec)
    last = dec[-1]

    def last_ok(t):
        return t[0] == last[0] and t[2] == last[2] and (last[1] is None or t[1] == last[1])

    if not any(last_ok(t) for t in tru):
        raise Bad(f"CPU{cpu}: the device file's last decoded event ({check_trace.hx(last[0])} -> "
                  f"{check_trace.hx(last[1])}) is nowhere in the truth ({len(tru)} events; "
                  "truth_bytes must reach back to the read)")
    # The events as 32-bit codes, searched as bytes: a CPU that polls runs one branch hundreds
    # of thousands of times, and a window compared at each of its places would take hours.
    codes = {}

    def packed(seq):
        return array.array("I", (codes.setdefault(e, len(codes)) for e in seq)).tobytes()

    hay = packed(tru)

    def newest_end(m):
        """The newest truth index k matching the decode's last event whose m events before it
        are the decode's m events before its last, or None."""
        if m == 0:
            return next((k for k in range(len(tru) - 1, -1, -1) if last_ok(tru[k])), None)
        needle = packed(dec[n - 1 - m:n - 1])
        end = len(hay)
        while True:
            p = hay.rfind(needle, 0, end)
            if p < 0:
                return None
            end = p + len(needle) - 1
            if p % 4 == 0 and p // 4 + m < len(tru) and last_ok(tru[p // 4 + m]):
                return p // 4 + m

    k = newest_end(n - 1)
    if k is not None:
        return (f"all {n} decoded events are a run of the truth, ending {len(tru) - 1 - k} events before "
                "its end (the session went on after the read)")
    # The closest place: the longest run of the decode's newest events that the truth has.
    lo, hi = 0, n - 1  # newest_end(lo) is found, newest_end(hi) is not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if newest_end(mid) is None:
            hi = mid
        else:
            lo = mid
    k = newest_end(lo)
    i = n - 2 - lo
    if k - 1 - lo < 0:
        raise Bad(f"CPU{cpu}: the truth ({len(tru)} events) ends before the device file's decoded event {i} "
                  f"of {n}: truth_bytes must reach back to the read")
    t, e = tru[k - 1 - lo], dec[i]
    raise Bad(f"CPU{cpu}: the device file's decoded event {i} of {n} differs from the truth where its "
              f"newest event is: decoded {check_trace.hx(e[0])}->{check_trace.hx(e[1])}, "
              f"truth {check_trace.hx(t[0])}->{check_trace.hx(t[1])}")


def etm_registers(regs, cpus, enabled):
    """Each CPU's ETM registers as upstream's sysfs shows them, checked against what the plugin
    saw programmed: ({cpu: [(name, offset, value)]}, {cpu: trace ID})."""
    etms, ids = {}, {}
    for c in range(cpus):
        r = regs.get(f"etm{c}", {})
        need = [f"trcidr/trcidr{n}" for n in TRCIDR_OFFSET if n not in (6, 7)] + \
               ["mgmt/trcconfig", "mgmt/trctraceid", "mgmt/trcauthstatus", "cpu"]
        miss = [x for x in need if not isinstance(r.get(x), int)]
        if miss:
            raise Bad(f"etm{c}: sysfs did not give {miss} ({ {k: r.get(k) for k in miss} })")
        cpu = r["cpu"]
        tid, cfg = r["mgmt/trctraceid"], r["mgmt/trcconfig"]
        if cpu not in enabled:
            raise Bad(f"the plugin never saw CPU{cpu}'s ETM enabled (plugin.log)")
        if enabled[cpu] != (tid, cfg):
            raise Bad(f"etm{c} (CPU{cpu}): sysfs says trace ID {tid:#x}, TRCCONFIGR {cfg:#x}; the plugin "
                      f"saw {enabled[cpu][0]:#x}, {enabled[cpu][1]:#x} programmed")
        etms[cpu] = [("TRCCONFIGR", TRCCONFIGR, cfg), ("TRCTRACEIDR", TRCTRACEIDR, tid),
                     ("TRCAUTHSTATUS", TRCAUTHSTATUS, r["mgmt/trcauthstatus"])] + \
            [(f"TRCIDR{n}", off, r[f"trcidr/trcidr{n}"]) for n, off in TRCIDR_OFFSET.items() if n not in (6, 7)]
        ids[cpu] = tid
    return etms, ids


def main_etr(a):
    d = a.dir
    barrier = struct.pack("<4I", *[0x7FFFFFFF] * 4)
    try:
        regs, n, md5, trouble, probes = guest_view_etr(os.path.join(d, "console.log"), a.cpus)
        print("upstream drivers, as the kernel logged them:")
        for l in probes[:40]:
            print(f"  {l}")
        if trouble:
            raise Bad("the upstream drivers reported trouble:\n  " + "\n  ".join(trouble[:20]))
        crash = open(os.path.join(d, "crash.bin"), "rb").read()[:n]
        if len(crash) != n or hashlib.md5(crash).hexdigest() != md5:
            raise Bad(f"crash.bin does not hold the {n} bytes the guest read (md5 {md5})")
        _, plog = plugin_view(os.path.join(d, "plugin.log"))
        stops = re.findall(r"tmc stopped: (\d+) bytes held, full (true|false) \(etr: DBA (0x[0-9a-f]+), "
                           r"RSZ (0x[0-9a-f]+) words\), written to (\S+)", plog)
        if not stops:
            raise Bad("the plugin never said the ETR stopped with its buffer written (plugin.log)")
        held, full, dba, rsz, path = stops[-1]
        ram = open(path, "rb").read()
        want = barrier + ram[16:] if full == "true" else ram
        if len(ram) != int(held) or crash != want:
            raise Bad(f"/dev/crash_tmc_etr0 ({n} bytes) differs from the buffer the plugin wrote "
                      f"({held} bytes at DBA {dba}, full {full})")
        print(f"/dev/crash_tmc_etr0: {n} bytes, equal to the ETR's buffer at DBA {dba} ({int(rsz, 16) * 4} "
              "bytes) as the plugin wrote it" + (", barrier packet first (wrapped)" if full == "true" else ""))

        enabled, _ = plugin_view(os.path.join(d, "plugin.log"))
        etms, ids = etm_registers(regs, a.cpus, enabled)
        images, koff, patched = kernel_text(os.path.join(d, "vmcore.elf"), a.vmlinux)
        print(f"kernel text from the next boot's vmcore: {sum(len(b) for _, _, b in images)} bytes in "
              f"{len(images)} sections at KASLR offset {koff:#x}; {patched} bytes differ from vmlinux")
        snap = os.path.join(d, "snapshot")
        write_snapshot(snap, crash, images, etms)
        by_id, tails, errors, log = decode(snap, a.trc_pkt_lister)
        if errors:
            raise Bad(f"the decode has {len(errors)} decoder errors, first: {errors[0]} (decode: {log})")
        failed = []
        for cpu, tid in sorted(ids.items()):
            dec, lost = branches(by_id.get(tid, []), tails.get(tid), lambda x: word_at(images, x))
            try:
                tc, stopped_at = truth_to_stop(d, cpu)
                note = compare(cpu, dec, lost, tc, images)
                print(f"ground truth CPU{cpu} (trace ID {tid:#x}, trace stopped at {stopped_at}): "
                      f"{len(dec)} branches, waypoints and exceptions decoded; {note}")
            except Bad as e:
                failed.append(str(e))
        if failed:
            raise Bad("\n".join(failed) + f"\n(decode: {log})")
    except (Bad, OSError, ValueError, KeyError) as e:
        print(f"check_upstream: FAIL: {e}", file=sys.stderr)
        return 1
    print("check_upstream: upstream's C ETR crash-data path on the emulated ETR: the crash data is the "
          "buffer the ETR wrote and decodes to the plugin's ground truth on every CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
