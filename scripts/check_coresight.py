#!/usr/bin/env python3
"""Check what the guest read from the QEMU plugin's CoreSight registers (cspd.test=devmem).

The guest's init prints every access as `CSPD: devmem rd NAME ADDRESS VALUE` (or `wr`) and every
poll as `CSPD: devmem poll NAME ADDRESS VALUE READS ok|timeout`. The values must be the documented
ones: the CoreSight component IDs of every component with Arm's JEP106 code and each part's number,
and the TMC's behaviour (DDI 0461) through a reset, a capture, a manual flush, an RRD drain
and RRD reads once disabled;
the CPU debug interface of another CPU must be powered and sample a kernel PC. Exits 1 on any
difference, naming each.
"""

import argparse
import re
import sys

CIDR = (0x0D, 0x90, 0x05, 0xB1)  # CoreSight component (class 0x9), preamble 0xB105_0_0D
ARM_JEP106 = 0x3B  # identity code; continuation code 0x4 (PIDR4)
# SoC-400 TMC and funnel; the ETM and the CPU debug interface of a Cortex-A57 (qemu.py's -cpu; in
# linux's coresight-etm4x table 0x95D is the Cortex-A53's ETM, 0x95E the Cortex-A57's).
PARTS = {"tmc": 0x961, "funnel": 0x908, "etm": 0x95E, "debug": 0xD07}

STS_TMC_READY = 1 << 2
STS_EMPTY = 1 << 4
RRD_EMPTY = 0xFFFFFFFF
FFCR_FLUSHMAN = 1 << 6
DEVID_CONFIGTYPE_ETF = 0b10
EDPRSR_PU = 1 << 0

LINE = re.compile(r"CSPD: devmem (rd|wr) (\S+) (0x[0-9a-fA-F]{8}) (0x[0-9a-fA-F]{8}|failed\S*)")
POLL = re.compile(r"CSPD: devmem poll (\S+) (0x[0-9a-fA-F]{8}) (0x[0-9a-fA-F]{8}|none) (\d+) (ok|timeout)")


class Checks:
    def __init__(self):
        self.failed = []
        self.passed = 0

    def expect(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed.append(what)


def parse(text):
    """NAME -> value of each read (a string when the read failed), NAME -> (value, reads, ok) of
    each poll. The console holds each line twice (kmsg and init's stdout): both must agree."""
    reads, polls = {}, {}
    for m in LINE.finditer(text):
        kind, name, _, value = m.groups()
        if kind != "rd":
            continue
        v = int(value, 16) if value.startswith("0x") else value
        if name in reads and reads[name] != v:
            raise SystemExit(f"check_coresight: {name} printed twice with different values")
        reads[name] = v
    for m in POLL.finditer(text):
        name, _, value, n, state = m.groups()
        polls[name] = (int(value, 16) if value != "none" else None, int(n), state == "ok")
    return reads, polls


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--console", required=True)
    p.add_argument("--cpus", type=int, required=True)
    p.add_argument("--tmc-size", type=int, default=65536, help="the plugin's tmc_size, bytes")
    p.add_argument("--system-map", help="the kernel's System.map: a sampled PC must be in its text "
                   "(_stext.._etext; without it, any kernel address)")
    a = p.parse_args()
    text = open(a.console, errors="replace").read()
    if "CSPD: devmem done" not in text:
        print("check_coresight: the guest did not finish its devmem sequence", file=sys.stderr)
        return 1
    reads, polls = parse(text)
    c = Checks()

    def val(name):
        v = reads.get(name)
        if not isinstance(v, int):
            c.expect(False, f"{name}: {'not read' if v is None else v}")
            return None
        return v

    # Component IDs.
    comps = ["tmc", "funnel"] + [f"{k}{n}" for n in range(a.cpus) for k in ("etm", "debug")]
    for comp in comps:
        kind = comp.rstrip("0123456789")
        ids = {r: val(f"{comp}.{r}") for r in
               ("PIDR0", "PIDR1", "PIDR2", "PIDR3", "PIDR4", "CIDR0", "CIDR1", "CIDR2", "CIDR3")}
        if None in ids.values():
            continue
        for r, v in ids.items():
            c.expect(v <= 0xFF, f"{comp}.{r} = {v:#010x}: bits 31:8 must be zero")
        cidr = tuple(ids[f"CIDR{i}"] for i in range(4))
        c.expect(cidr == CIDR, f"{comp} CIDR0-3 = {' '.join(f'{x:#04x}' for x in cidr)}, "
                 f"want {' '.join(f'{x:#04x}' for x in CIDR)}")
        part = ids["PIDR0"] | (ids["PIDR1"] & 0xF) << 8
        c.expect(part == PARTS[kind], f"{comp} part number {part:#05x}, want {PARTS[kind]:#05x}")
        designer = (ids["PIDR1"] >> 4) | (ids["PIDR2"] & 0x7) << 4
        c.expect(designer == ARM_JEP106, f"{comp} JEP106 designer {designer:#04x}, want {ARM_JEP106:#04x}")
        c.expect(ids["PIDR2"] & 0x8, f"{comp} PIDR2 = {ids['PIDR2']:#04x}: the JEDEC bit (3) is clear")
        c.expect(ids["PIDR4"] == 0x04, f"{comp} PIDR4 = {ids['PIDR4']:#04x}, want 0x04 "
                 "(JEP106 continuation code 4, one 4 KiB block)")
        print(f"{comp}: part {part:#05x}, designer {designer:#04x}, CIDR "
              f"{' '.join(f'{x:02X}' for x in cidr)}")

    # The TMC.
    rsz = val("tmc.RSZ")
    if rsz is not None:
        c.expect(rsz == a.tmc_size // 4, f"tmc.RSZ = {rsz:#x} words, want {a.tmc_size // 4:#x} "
                 f"({a.tmc_size} bytes)")
    sts = val("tmc.STS.reset")
    if sts is not None:
        c.expect(sts & STS_TMC_READY, f"tmc.STS after reset = {sts:#x}: TMCReady clear")
    devid = val("tmc.DEVID")
    if devid is not None:
        c.expect((devid >> 6) & 3 == DEVID_CONFIGTYPE_ETF,
                 f"tmc.DEVID = {devid:#x}: CONFIGTYPE {(devid >> 6) & 3:#b}, "
                 f"want {DEVID_CONFIGTYPE_ETF:#b} (ETF)")
    sts = val("tmc.STS.running")
    if sts is not None:
        c.expect(not sts & STS_TMC_READY, f"tmc.STS while capturing = {sts:#x}: TMCReady set")
    for name, mask, want in (("tmc.FFCR.flushed", FFCR_FLUSHMAN, 0),
                             ("tmc.STS.stopped", STS_TMC_READY, STS_TMC_READY)):
        v, n, ok = polls.get(name, (None, 0, False))
        c.expect(ok and v is not None and v & mask == want,
                 f"{name}: " + ("never polled" if name not in polls else
                                f"{v if v is None else hex(v)} after {n} reads, timed out"))
    # Stopped: RRD drains from RRP, or returns 0xFFFFFFFF without moving RRP once STS.Empty.
    sts = polls.get("tmc.STS.stopped", (None,))[0]
    rrp = [val(f"tmc.RRP.stopped.{i}") for i in range(3)]
    rrd = [val(f"tmc.RRD.stopped.{i}") for i in range(1, 3)]
    width = 1 << ((devid or 0) >> 8 & 7)  # bytes; DEVID.MEMWIDTH: 2 = 32 bits, 3 = 64, ...
    if sts is not None and None not in rrp and None not in rrd:
        steps = [(rrp[i + 1] - rrp[i]) % a.tmc_size for i in range(2)]
        if sts & STS_EMPTY:
            c.expect(rrd == [RRD_EMPTY] * 2 and steps == [0, 0],
                     f"stopped and empty (STS {sts:#x}): RRD {' '.join(f'{x:#010x}' for x in rrd)}, "
                     f"RRP {' '.join(f'{x:#x}' for x in rrp)}: want 0xffffffff and RRP unmoved")
        else:
            c.expect(all(x != RRD_EMPTY for x in rrd) and all(s_ in (0, width) for s_ in steps)
                     and sum(steps) == 8,
                     f"stopped with data (STS {sts:#x}): RRD {' '.join(f'{x:#010x}' for x in rrd)}, "
                     f"RRP {' '.join(f'{x:#x}' for x in rrp)}: want the words and RRP advancing")
        print(f"tmc stopped: STS {sts:#x}{' (empty)' if sts & STS_EMPTY else ''}, RRD "
              f"{' '.join(f'{x:#010x}' for x in rrd)}, RRP {' -> '.join(f'{x:#x}' for x in rrp)}")
    # Disabled: each RRD read returns the word at RRP and advances RRP by the memory width.
    rrp = [val(f"tmc.RRP.{i}") for i in range(5)]
    rrd = [val(f"tmc.RRD.{i}") for i in range(1, 5)]
    if None not in rrp and None not in rrd:
        steps = [(rrp[i + 1] - rrp[i]) % a.tmc_size for i in range(4)]
        c.expect(all(s_ in (0, width) for s_ in steps) and sum(steps) == 16,
                 f"disabled: RRP across 4 RRD reads {' '.join(f'{x:#x}' for x in rrp)} "
                 f"(RRD {' '.join(f'{x:#010x}' for x in rrd)}): want 16 bytes in steps of "
                 f"{width} (DEVID.MEMWIDTH)")
        print(f"tmc: RSZ {rsz:#x}, DEVID {devid:#x}; disabled: RRP {' -> '.join(f'{x:#x}' for x in rrp)} "
              f"over RRD {' '.join(f'{x:#010x}' for x in rrd)}")

    # The CPU debug interface of another CPU.
    target = 1 if a.cpus > 1 else 0
    d = f"debug{target}"
    prsr = val(f"{d}.EDPRSR")
    if prsr is not None:
        c.expect(prsr & EDPRSR_PU, f"{d}.EDPRSR = {prsr:#x}: PU (powered up) clear")
    lo, hi = val(f"{d}.EDPCSR"), val(f"{d}.EDPCSRhi")
    val(f"{d}.EDDEVID")
    if lo is not None and hi is not None:
        pc = hi << 32 | lo
        start = end = 0
        if a.system_map:
            syms = {}
            for line in open(a.system_map):
                f = line.split()
                if len(f) == 3 and f[2] in ("_stext", "_etext"):
                    syms[f[2]] = int(f[0], 16)
            start, end = syms.get("_stext", 0), syms.get("_etext", 0)
            # KASLR: the guest printed where _stext runs; System.map has the link address.
            m = re.search(r"CSPD: devmem ksym _stext ([0-9a-f]{16})", text)
            if m and start:
                shift = int(m.group(1), 16) - start
                start, end = start + shift, end + shift
        if start and end:
            c.expect(start <= pc < end + 8,
                     f"{d} EDPCSR {pc:#018x} is not in the kernel text {start:#x}..{end:#x}")
        else:
            c.expect(pc >> 48 == 0xFFFF, f"{d} EDPCSR {pc:#018x} is not a kernel address")
        print(f"{d}: EDPRSR {reads.get(f'{d}.EDPRSR')}, EDDEVID {reads.get(f'{d}.EDDEVID')}, "
              f"EDPCSR {pc:#018x}")

    for f in c.failed:
        print(f"check_coresight: FAIL: {f}", file=sys.stderr)
    print(f"check_coresight: {c.passed} checks passed, {len(c.failed)} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
