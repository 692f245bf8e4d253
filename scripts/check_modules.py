#!/usr/bin/env python3
"""The dump's module list against what the guest saw: a judge of the core's module notifier.

The guest prints /proc/modules just before its trigger ("CSPD: module: NAME ADDR STATE", then
"CSPD: modules listed"); csdump extract wrote the dump's records (DIR/extract, or --extract).
This script reads the module list record itself (its own reader of the layout in
rust/kernel/coresight/panic_dump/format/modules.rs, not csdump's) and requires:

- the same modules, by name, as /proc/modules (none missing, none extra, none dropped);
- each module's text address as /proc/modules shows it, and state live;
- each module's build ID equal to the one in its .ko in the build tree (--modules-dir), when the
  kernel keeps build IDs (--build-ids);
- each placed section inside the module's text, at a section of the .ko that is executable.

With --expect-absent NAME,..., those modules must be in neither list (unloaded before the panic).
"""
import argparse
import functools
import json
import os
import re
import struct
import sys

HEADER = 16
ENTRY = 256
SECTIONS_MAX = 9


class Bad(Exception):
    pass


def guest_modules(console):
    # The kernel's copies of the guest's lines (its tty echo of them can be split by a kernel
    # record), of the boot that panicked first (a warm reboot's next boot lists its own).
    text = open(console, errors="replace").read()
    end = re.search(r"\] CSPD: modules listed\r?$", text, re.M)
    if not end:
        raise Bad(f"{console}: the guest did not list its modules before the trigger")
    text = text[:end.start()]
    mods = {}
    for m in re.finditer(r"\] CSPD: module: (\S+) (0x[0-9a-f]+) (\S+?)\r?$", text, re.M):
        mods[m.group(1)] = (int(m.group(2), 16), m.group(3))
    return mods


def dump_modules(extract):
    recs = json.load(open(os.path.join(extract, "summary.json")))["records"]
    rec = [r for r in recs if r["kind"] == "modules"]
    if len(rec) != 1:
        raise Bad(f"the dump has {len(rec)} module list records, not one")
    rec = rec[0]
    if not rec.get("crc_ok", False):
        raise Bad(f"the module list record fails its CRC: {rec.get('problem')}")
    data = open(os.path.join(extract, rec["file"]), "rb").read()
    if len(data) < HEADER:
        raise Bad(f"the module list is {len(data)} bytes, shorter than its header")
    count, capacity, dropped, generation = struct.unpack_from("<4I", data, 0)
    if count > capacity or len(data) != HEADER + count * ENTRY:
        raise Bad(f"the module list says {count} of {capacity} entries in {len(data)} bytes")
    out = {}
    for i in range(count):
        e = data[HEADER + i * ENTRY:HEADER + (i + 1) * ENTRY]
        name = e[:56].split(b"\0")[0].decode()
        bid_len, state, nsec = e[76], e[77], e[78]
        text, text_size, init, init_size = struct.unpack_from("<4Q", e, 80)
        if nsec > SECTIONS_MAX or bid_len > 20:
            raise Bad(f"module {name}: {nsec} sections, build ID of {bid_len} bytes")
        secs = [struct.unpack_from("<QI", e, 112 + 16 * k) for k in range(nsec)]
        out[name] = dict(build_id=e[56:56 + bid_len].hex(), state=state, text=text, text_size=text_size,
                         init=init, init_size=init_size, sections=[(a, idx) for a, idx in secs])
    return out, dropped, generation


@functools.lru_cache(maxsize=None)
def ko_files(modules_dir):
    """Every .ko under modules_dir by file name (the first found), from one walk of the tree."""
    found = {}
    for root, _, files in os.walk(modules_dir):
        for f in files:
            if f.endswith(".ko"):
                found.setdefault(f, os.path.join(root, f))
    return found


def ko_path(modules_dir, name):
    files = ko_files(modules_dir)
    return files.get(name + ".ko") or files.get(name.replace("_", "-") + ".ko")


def ko_sections(path):
    """The .ko's sections (an ELF64 little-endian relocatable): index -> (name, flags, data, type,
    link)."""
    b = open(path, "rb").read()
    if b[:4] != b"\x7fELF" or b[4] != 2 or b[5] != 1:
        raise Bad(f"{path} is not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<3H", b, 0x3a)
    raw = []
    for i in range(shnum):
        name, typ, flags, _addr, off, size, link = struct.unpack_from("<2I4QI", b, shoff + i * shentsize)
        raw.append((name, typ, flags, b[off:off + size] if typ != 8 else b"", link))
    strtab = raw[shstrndx][3]
    return {i: (strtab[n:strtab.index(b"\0", n)].decode(), flags, data, typ, link)
            for i, (n, typ, flags, data, link) in enumerate(raw)}


def ko_functions(secs):
    """(section index, value, size, name) of the .ko's function symbols."""
    out = []
    for _name, _flags, data, typ, link in secs.values():
        if typ != 2:  # SHT_SYMTAB
            continue
        names = secs[link][2]
        for at in range(0, len(data) - 23, 24):
            st_name, st_info, _other, shndx, value, size = struct.unpack_from("<IBBHQQ", data, at)
            if st_info & 0xf == 2:  # STT_FUNC
                out.append((shndx, value, size, names[st_name:names.index(b"\0", st_name)].decode()))
    return out


def module_symbols(extract, modules_dir):
    """The functions of every module in the dump's list, placed where the dump says its sections
    were: sorted (start, end, name, module), from the .ko files under modules_dir."""
    dumped, _, _ = dump_modules(extract)
    syms = []
    for name, m in dumped.items():
        ko = ko_path(modules_dir, name)
        if not ko:
            raise Bad(f"module {name}: no {name}.ko under {modules_dir}")
        placed = {idx: addr for addr, idx in m["sections"]}
        for shndx, value, size, fn in ko_functions(ko_sections(ko)):
            if shndx in placed:
                syms.append((placed[shndx] + value, placed[shndx] + value + max(size, 1), fn, name))
    return sorted(syms), dumped


def ko_build_id(secs):
    for name, _flags, data, _typ, _link in secs.values():
        if name == ".note.gnu.build-id" and len(data) >= 16:
            namesz, descsz, typ = struct.unpack_from("<3I", data, 0)
            if typ == 3:
                at = 12 + (namesz + 3) // 4 * 4
                return data[at:at + descsz].hex()
    return None


SHF_EXECINSTR = 4


def check(a):
    seen = guest_modules(os.path.join(a.dir, "console.log"))
    dumped, dropped, generation = dump_modules(a.extract or os.path.join(a.dir, "extract"))
    if dropped:
        raise Bad(f"the module list dropped {dropped} modules")
    missing = sorted(set(seen) - set(dumped))
    extra = sorted(set(dumped) - set(seen))
    if missing or extra:
        raise Bad(f"the dump's module list differs from /proc/modules: missing {missing}, extra {extra}")
    for name in a.expect_absent.split(",") if a.expect_absent else []:
        if name in dumped:
            raise Bad(f"module {name} was unloaded before the panic, but the dump lists it")
    named = 0
    for name, (addr, state) in sorted(seen.items()):
        m = dumped[name]
        if m["text"] != addr:
            raise Bad(f"module {name}: the dump says text at {m['text']:#x}, /proc/modules {addr:#x}")
        if state == "Live" and (m["state"] != 2 or m["init_size"] != 0):
            raise Bad(f"module {name} is live, but the dump says state {m['state']}, init text "
                      f"{m['init_size']} bytes")
        if not m["text_size"] or not m["sections"]:
            raise Bad(f"module {name}: text of {m['text_size']} bytes, {len(m['sections'])} sections placed")
        for sa, idx in m["sections"]:
            if not m["text"] <= sa < m["text"] + m["text_size"]:
                raise Bad(f"module {name}: section {idx} placed at {sa:#x}, outside its text")
        if a.modules_dir:
            ko = ko_path(a.modules_dir, name)
            if not ko:
                raise Bad(f"module {name}: no {name}.ko under {a.modules_dir}")
            secs = ko_sections(ko)
            if a.build_ids:
                want = ko_build_id(secs)
                if not want or m["build_id"] != want:
                    raise Bad(f"module {name}: build ID {m['build_id'] or 'none'} in the dump, {want} in {ko}")
            for sa, idx in m["sections"]:
                if idx not in secs or not secs[idx][1] & SHF_EXECINSTR:
                    what = secs[idx][0] if idx in secs else "missing"
                    raise Bad(f"module {name}: section {idx} of {ko} ({what}) is not executable")
        named += 1
    print(f"module list: {named} modules as /proc/modules shows them (text addresses, state"
          f"{', build IDs of the .ko files' if a.build_ids else ''}, executable sections in the text); "
          f"{generation} changes since boot")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--extract", help="csdump extract's directory (default DIR/extract)")
    ap.add_argument("--modules-dir", help="the kernel build tree: the .ko files")
    ap.add_argument("--build-ids", action="store_true", help="the kernel keeps module build IDs")
    ap.add_argument("--expect-absent", help="modules unloaded before the panic")
    a = ap.parse_args()
    try:
        check(a)
    except Bad as e:
        print(f"check_modules: FAIL: {e}", file=sys.stderr)
        return 1
    print("check_modules: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
