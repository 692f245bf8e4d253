#!/usr/bin/env python3
"""Judge csdump on makedumpfile's files of one panic against the raw /proc/vmcore copy.

A kdump run with `scripts/qemu.py --makedumpfile` leaves, next to the raw copy vmcore.elf,
makedumpfile's files of the same /proc/vmcore: vmcore.flat (-F -c -d 31, Debian's kdump-tools),
vmcore.flat.gz (the same through gzip) and vmcore.kdump (-l -d 31, Fedora's and RHEL's kdump).

  1. `csdump extract` of each gives the same files as of the raw copy: every record's bytes,
     panic.txt, vmcoreinfo.txt, and summary.json but for what names the input (its name, kind
     and format, the file offsets, the notes about the input): the region survives dump level 31.
  2. csdump says which format it read.
  3. Damage: the kdump-compressed file cut inside the region's first page data, inside its
     page descriptor and inside the page bitmaps, and with bytes of the region's compressed data
     flipped; the flattened file cut short, at 3/4 and by its end marker alone (the region
     survives: exit 3 all the same). Each gives a clear error or warning naming the page or the file offset, never a
     crash, and nothing silently read as good data.
  4. With --oracle (examples/vmcore_oracle.rs): csdump's Rust reader and libkdumpfile, its test
     oracle, read the same bytes from every page of every file (the raw copy and makedumpfile's
     three), and class each page the same way.

Prints what it checked; exits 1 on the first failure.
"""

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys

FILES = {
    "vmcore.flat": "kdump-compressed vmcore, zlib pages, dump level 31, flattened (makedumpfile -F)",
    "vmcore.flat.gz": "kdump-compressed vmcore, zlib pages, dump level 31, flattened (makedumpfile -F), gzip'ed",
    "vmcore.kdump": "kdump-compressed vmcore, lzo pages, dump level 31",
}
# summary.json keys that describe the input rather than the dump.
INPUT_KEYS = ("input", "input_kind", "input_format", "input_notes", "input_warnings", "region_file_offset")


class Bad(Exception):
    pass


def run(args):
    r = subprocess.run(args, capture_output=True, text=True, errors="replace", timeout=600)
    if "panicked" in r.stderr or r.returncode < 0:
        raise Bad(f"{' '.join(args)}: crashed ({r.returncode}): {r.stderr[-2000:]}")
    return r


def extracted(csdump, vmcore, out):
    shutil.rmtree(out, ignore_errors=True)
    r = run([csdump, "extract", vmcore, "-o", out])
    if r.returncode != 0:
        raise Bad(f"csdump extract {vmcore} exited {r.returncode}: {r.stderr[-2000:]}")
    files = {}
    for name in sorted(os.listdir(out)):
        data = open(os.path.join(out, name), "rb").read()
        if name == "summary.json":
            s = json.loads(data)
            for k in INPUT_KEYS:
                s.pop(k, None)
            for rec in s.get("records", []):
                rec.pop("file_offset", None)
            data = json.dumps(s, indent=1, sort_keys=True).encode()
        files[name] = data
    return files, r.stderr


def page_data(path, pfn):
    """Where a kdump-compressed file stores page `pfn`: (descriptor offset, data offset, size),
    read from its header, second bitmap and page descriptor table (diskdump_mod.h)."""
    with open(path, "rb") as f:
        head = f.read(4096)
        block, sub_blocks, bitmap_blocks = struct.unpack_from("<iiI", head, 428)
        half = bitmap_blocks * block // 2
        f.seek((1 + sub_blocks) * block + half)
        bitmap2 = f.read(half)
        if not bitmap2[pfn // 8] >> (pfn % 8) & 1:
            raise Bad(f"{path}: page {pfn:#x} is not stored")
        rank = sum(bin(b).count("1") for b in bitmap2[:pfn // 8]) + \
            bin(bitmap2[pfn // 8] & ((1 << (pfn % 8)) - 1)).count("1")
        pd = (1 + sub_blocks + bitmap_blocks) * block + 24 * rank
        f.seek(pd)
        off, size, flags = struct.unpack("<QII", f.read(16))
    return pd, off, size, (1 + sub_blocks) * block


def expect_damage(csdump, path, what, work):
    r = run([csdump, "extract", path, "-o", work])
    said = r.stderr
    if r.returncode == 0:
        raise Bad(f"{what}: csdump exited 0 (clean) on a damaged dump: {said[-1500:]}")
    if not re.search(r"page 0x[0-9a-f]+|file offset 0x[0-9a-f]+|byte 0x[0-9a-f]+", said):
        raise Bad(f"{what}: no page or offset named: {said[-1500:]}")
    line = next((l for l in said.splitlines() if re.search(r"page 0x|offset 0x|byte 0x", l)), "")
    print(f"{what}: exit {r.returncode}, {line.strip()[:220]}")


def check(a):
    raw = os.path.join(a.dir, "vmcore.elf")
    ref, _ = extracted(a.csdump, raw, os.path.join(a.dir, "extract-raw"))
    records = [n for n in ref if n.endswith(".bin")]
    if not records:
        raise Bad("the raw copy's extract has no record")
    for name, fmt in FILES.items():
        path = os.path.join(a.dir, name)
        if not os.path.exists(path):
            raise Bad(f"{path} is missing (qemu.py --makedumpfile)")
        files, stderr = extracted(a.csdump, path, os.path.join(a.dir, "extract-" + name.replace(".", "-")))
        if f"read as {fmt}" not in stderr:
            raise Bad(f"{name}: csdump does not say it read a {fmt}: {stderr[-1500:]}")
        if files.keys() != ref.keys():
            raise Bad(f"{name}: files {sorted(files)} differ from the raw copy's {sorted(ref)}")
        for n in ref:
            if files[n] != ref[n]:
                raise Bad(f"{name}: {n} differs from the raw copy's")
        excluded = re.search(r"(\d+) of the region's (\d+) pages are not stored in the dump", stderr)
        print(f"{name} ({os.path.getsize(path)} bytes, raw copy {os.path.getsize(raw)}): "
              f"{len(ref)} files identical to the raw copy's ({len(records)} records); "
              + (f"{excluded.group(1)} of {excluded.group(2)} region pages excluded by -d 31 (zero pages)"
                 if excluded else "every region page stored"))

    if a.oracle:
        r = run([a.oracle, raw] + [os.path.join(a.dir, n) for n in FILES])
        print(r.stdout.rstrip())
        if r.returncode != 0:
            raise Bad(f"csdump's vmcore reader and libkdumpfile disagree: {r.stdout[-2000:]}{r.stderr[-1000:]}")

    # Damage, where it hurts: the region's first page (its container header).
    paddr = int(json.loads(ref["summary.json"])["region_paddr"], 16)
    work = os.path.join(a.dir, "damaged")
    os.makedirs(work, exist_ok=True)
    kd = os.path.join(a.dir, "vmcore.kdump")
    data = open(kd, "rb").read()
    pd, off, size, bitmaps = page_data(kd, paddr // 4096)
    cut = os.path.join(work, "cut.kdump")
    for at, what in [(off + size // 2, "kdump-compressed cut inside the region's first page"),
                     (pd + 12, "kdump-compressed cut inside the region's page descriptor"),
                     (bitmaps + 100, "kdump-compressed cut inside its bitmaps")]:
        open(cut, "wb").write(data[:at])
        expect_damage(a.csdump, cut, f"{what} (at {at:#x})", os.path.join(work, "out"))
    bad = bytearray(data)
    for i in range(off + 8, off + size, 13):
        bad[i] ^= 0x5A
    open(cut, "wb").write(bad)
    expect_damage(a.csdump, cut, "kdump-compressed with the region's first page data corrupted",
                  os.path.join(work, "out"))
    flat = open(os.path.join(a.dir, "vmcore.flat"), "rb").read()
    cutf = os.path.join(work, "cut.flat")
    open(cutf, "wb").write(flat[:len(flat) * 3 // 4])
    r = run([a.csdump, "info", cutf])
    if r.returncode == 0 or "flattened stream ends at byte" not in r.stderr:
        raise Bad(f"a cut flattened file is not named as such ({r.returncode}): {r.stderr[-1500:]}")
    print(f"flattened cut at 3/4: exit {r.returncode}, "
          + next(l for l in r.stderr.splitlines() if "flattened stream ends" in l).strip()[:200])
    # Cut so that only the end marker is lost: the region survives whole, and the file must
    # still be named as cut and the run not clean (exit 3), whatever survived.
    open(cutf, "wb").write(flat[:-16])
    r = run([a.csdump, "info", cutf])
    if r.returncode != 3 or "without its end marker" not in r.stderr:
        raise Bad(f"a flattened file that lost only its end marker is not named as cut, exit 3 "
                  f"({r.returncode}): {r.stderr[-1500:]}")
    print(f"flattened file without its end marker: exit 3, "
          + next(l for l in r.stderr.splitlines() if "flattened stream ends" in l).strip()[:200])
    shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="the run directory (vmcore.elf and makedumpfile's files)")
    ap.add_argument("--csdump", required=True)
    ap.add_argument("--oracle", help="examples/vmcore_oracle (csdump's reader against libkdumpfile)")
    a = ap.parse_args()
    try:
        check(a)
    except Bad as e:
        print(f"check_vmcores: FAIL: {e}", file=sys.stderr)
        return 1
    print("check_vmcores: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
