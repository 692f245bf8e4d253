//! Code in loadable modules, named as crash and perf name it: the dump's module list (the
//! `modules` record the kernel keeps current) read by `info`, `extract`, `report`, `perf` and
//! `gdb`; module code named `module+0xoffset`, or by its functions from the module's `.ko`
//! (`--modules DIR`, checked by build ID); a `.ko` of another build, or one that does not read,
//! refused with why; an unloaded module no longer named; a damaged list costing module names
//! only.
//!
//! The dumps with real trace pack an OpenCSD snapshot's ETMv4 trace (juno-ret-stck) and say
//! that the first MiB of the code it ran was a module's: `coresight_tmc`, whose `.ko` (written
//! here) holds that code with a function `tmc_f_<n>` every 4 KiB. The kernel image is the rest,
//! with a vmlinux naming each 4 KiB of it `f_<n>`.

use std::fs;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;

use cspd_format::*;
use serde_json::Value;

mod common;
use common::ko::*;
use common::run;
use common::snapshots::*;
use common::DumpWriter;

/// Where the snapshot's code ran: the module's text, then the kernel image.
const BASE: u64 = 0xFFFF_0000_0808_0000;
/// Size of the module's text (the first MiB of the snapshot's code).
const SPLIT: u64 = 0x10_0000;
/// How far below where it ran the vmlinux links the kernel (the KASLR offset as vmlinux's `_text`
/// against the dump's gives it): far enough that the module's addresses are not vmlinux's.
const LINK_SHIFT: u64 = 0x1000_0000;
/// Build ID of the `coresight_tmc` that ran.
const TMC_ID: [u8; 20] = [0xC0; 20];

fn csdump() -> &'static str {
    env!("CARGO_BIN_EXE_csdump")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The `coresight_tmc` entry: text at `addr`, its `.text` (section [`KO_TEXT`]) there.
fn tmc_at(addr: u64, size: u64, id: &[u8]) -> ModuleEntry {
    let mut e = ModuleEntry::new(b"coresight_tmc", ModuleState::Live);
    e.text_addr = addr;
    e.text_size = size;
    e.set_build_id(id).unwrap();
    assert!(e.add_section(ModuleSection {
        addr,
        index: KO_TEXT,
    }));
    e
}

fn tmc() -> ModuleEntry {
    tmc_at(BASE, SPLIT, &TMC_ID)
}

/// A dump of the snapshot's trace whose kernel `_text` is `text`, with the module list `f`
/// writes.
fn dump(
    snap: &Path,
    text: u64,
    kimage_voffset: u64,
    f: impl FnOnce(&mut [u8]) -> usize,
) -> Vec<u8> {
    dump_from_snapshot_with(snap, 4, kimage_voffset, Some(text), |w: &mut DumpWriter| {
        w.modules(f)
    })
}

/// Adds `entries` to a fresh list in `buf`, then removes `removed`; returns its length.
fn list(buf: &mut [u8], entries: &[ModuleEntry], removed: &[&[u8]]) -> usize {
    let mut len = 0;
    for e in entries {
        len = modules_upsert(buf, e).unwrap();
    }
    for r in removed {
        len = modules_remove(buf, r).unwrap();
    }
    len
}

/// A vmcore of the panic: the dump's region, the kernel image above the module (its text from
/// `image[SPLIT..]`), and the module's code in memory of its own, mapped at [`BASE`] by the
/// kernel's page tables, as the module loader maps it.
fn vmcore(region: &[u8], image: &[u8]) -> Vec<u8> {
    const REGION_PA: u64 = 0x4800_0000;
    const TABLES: u64 = 0x5000_0000;
    const MODULE_PA: u64 = 0x6000_0000;
    let voff = voffset();
    let mut tables = common::PageTables::new(TABLES);
    for page in (0..SPLIT).step_by(4096) {
        tables.map(BASE + page, MODULE_PA + page);
    }
    let mut keys = [0u8; VMCOREINFO_TEXT_MAX];
    let n = format_vmcoreinfo(REGION_PA, region.len() as u64, &mut keys).unwrap();
    let info = format!(
        "OSRELEASE=4.9.0-juno\nPAGESIZE=4096\nNUMBER(VA_BITS)=48\nSYMBOL(swapper_pg_dir)={:x}\n\
         NUMBER(kimage_voffset)={voff:#x}\nKERNELOFFSET={KASLR:x}\n{}",
        TABLES + voff,
        std::str::from_utf8(&keys[..n]).unwrap()
    );
    let load = |paddr: u64, bytes: &[u8]| common::LoadSpec {
        paddr,
        size: bytes.len() as u64,
        chunks: vec![(0, bytes.to_vec())],
    };
    common::elf_core(
        &[common::vmcoreinfo_note(&info)],
        &[
            load(kernel_pa(), &image[SPLIT as usize..]),
            load(REGION_PA, region),
            load(TABLES, tables.bytes()),
            load(MODULE_PA, &image[..SPLIT as usize]),
        ],
    )
}

/// Physical address of the kernel image in [`vmcore`].
fn kernel_pa() -> u64 {
    0x4018_0000
}

/// `kimage_voffset` of the kernel in [`vmcore`].
fn voffset() -> u64 {
    BASE + SPLIT - kernel_pa()
}

/// What the tests with real trace work on.
struct Setup {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    snap: PathBuf,
    image: Vec<u8>,
    /// vmlinux of the kernel above the module.
    vmlinux: PathBuf,
    /// A module tree holding `coresight-tmc.ko` (a file name with `-`), of the build that ran.
    mods: PathBuf,
}

fn setup() -> Option<Setup> {
    let snap = cspd_testdata::snapshot("juno-ret-stck")?;
    if !cspd_testdata::tool("trc_pkt_lister") {
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let image = fs::read(snap.join("kernel_dump.bin")).unwrap();
    let vmlinux = dir.join("vmlinux");
    write_elf(
        &image[SPLIT as usize..],
        BASE + SPLIT - LINK_SHIFT,
        &vmlinux,
    );
    let mods = dir.join("lib/modules/4.9.0-juno");
    fs::create_dir_all(mods.join("kernel/drivers/hwtracing/coresight")).unwrap();
    fs::write(
        mods.join("kernel/drivers/hwtracing/coresight/coresight-tmc.ko"),
        ko_with_functions(&image[..SPLIT as usize], "tmc_f_", Some(&TMC_ID)),
    )
    .unwrap();
    Some(Setup {
        _tmp: tmp,
        dir,
        snap,
        image,
        vmlinux,
        mods,
    })
}

impl Setup {
    /// The vmcore of a panic with `entries` loaded (and `removed` unloaded since).
    fn vmcore(&self, name: &str, entries: &[ModuleEntry], removed: &[&[u8]]) -> PathBuf {
        let region = dump(&self.snap, BASE + SPLIT, voffset(), |b| {
            list(b, entries, removed)
        });
        let path = self.dir.join(name);
        fs::write(&path, vmcore(&region, &self.image)).unwrap();
        path
    }
}

/// Every named address of a report: (address, symbol), from the branches and CPU samples.
fn named(report: &Value) -> Vec<(u64, String)> {
    let mut v = Vec::new();
    let mut add = |a: &Value| {
        if let (Some(addr), Some(sym)) = (a["addr"].as_str(), a["symbol"].as_str()) {
            let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16).unwrap();
            v.push((addr, sym.to_string()));
        }
    };
    for c in report["cpus"].as_array().unwrap() {
        add(&c["sample"]["pc"]);
        for b in c["branches"].as_array().unwrap() {
            add(&b["from"]);
            add(&b["to"]);
        }
    }
    v
}

fn functions(report: &Value) -> Vec<String> {
    report["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["functions"].as_array().unwrap().iter())
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

/// Checks that `sym`, the name of `addr` in the module, is `tmc_f_<n>+0x<off> [coresight_tmc]`
/// for the function of the `.ko` that holds it.
fn assert_tmc_function(addr: u64, sym: &str) {
    let off = addr - BASE;
    let want = match off % 0x1000 {
        0 => format!("tmc_f_{} [coresight_tmc]", off / 0x1000),
        o => format!("tmc_f_{}+{o:#x} [coresight_tmc]", off / 0x1000),
    };
    assert_eq!(sym, want, "{addr:#x}");
}

#[test]
fn report_names_module_code_by_offset_and_by_its_functions() {
    let Some(s) = setup() else {
        return;
    };
    let core = s.vmcore("vmcore", &[tmc()], &[]);
    // Without the .ko: module+offset, between the kernel's functions.
    let o = run(&[&"report", &core, &"--vmlinux", &s.vmlinux, &"--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names = named(&r);
    let in_module = |a: u64| (BASE..BASE + SPLIT).contains(&a);
    let mut module_names = 0;
    for (a, sym) in &names {
        if in_module(*a) {
            assert_eq!(*sym, format!("coresight_tmc+{:#x}", a - BASE));
            module_names += 1;
        } else if (BASE + SPLIT..BASE + s.image.len() as u64).contains(a) {
            assert!(sym.starts_with("f_"), "{a:#x} {sym}");
        }
    }
    assert!(module_names > 0, "no branch in module code: {names:?}");
    let funcs = functions(&r);
    assert!(
        funcs.iter().any(|f| f.starts_with("coresight_tmc+0x")),
        "{funcs:?}"
    );
    assert!(funcs.iter().any(|f| f.starts_with("f_")), "{funcs:?}");
    assert_eq!(r["modules"][0]["name"], "coresight_tmc");
    assert_eq!(r["modules"][0]["ko"], Value::Null);
    // The module's code was read from the vmcore through the kernel's page tables.
    assert!(
        r["decoder"]
            .as_str()
            .unwrap()
            .contains("code outside vmlinux (modules)"),
        "{}",
        r["decoder"]
    );

    // With the module tree: the .ko's functions, where the record says its .text was loaded.
    let html = s.dir.join("r.html");
    let o = run(&[
        &"report",
        &core,
        &"--vmlinux",
        &s.vmlinux,
        &"--modules",
        &s.dir.join("lib"),
        &"--json",
        &"--html",
        &html,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut by_ko = 0;
    for (a, sym) in named(&r) {
        if in_module(a) {
            assert_tmc_function(a, &sym);
            by_ko += 1;
        }
    }
    assert_eq!(by_ko, module_names);
    let funcs = functions(&r);
    assert!(
        funcs
            .iter()
            .any(|f| f.starts_with("tmc_f_") && f.ends_with(" [coresight_tmc]")),
        "{funcs:?}"
    );
    assert!(
        !funcs.iter().any(|f| f.starts_with("coresight_tmc+")),
        "{funcs:?}"
    );
    let ko = s
        .mods
        .join("kernel/drivers/hwtracing/coresight/coresight-tmc.ko");
    assert_eq!(r["modules"][0]["ko"], ko.display().to_string());
    assert!(fs::read_to_string(&html)
        .unwrap()
        .contains(" [coresight_tmc]"));
    // The text report says how modules are named, and names them.
    let o = run(&[
        &"report",
        &core,
        &"--vmlinux",
        &s.vmlinux,
        &"--modules",
        &s.mods,
    ]);
    let out = text(&o.stdout);
    assert!(
        out.contains("modules: 1 loaded (coresight_tmc), 1 named from their .ko"),
        "{out}"
    );
    assert!(out.contains(" [coresight_tmc]"), "{out}");
}

#[test]
fn a_ko_of_another_build_or_that_does_not_read_is_refused() {
    let Some(s) = setup() else {
        return;
    };
    let core = s.vmcore("vmcore", &[tmc()], &[]);
    let bad = s.dir.join("bad");
    let good = ko_with_functions(&s.image[..SPLIT as usize], "tmc_f_", Some(&TMC_ID));
    for (sub, bytes) in [
        ("a", b"not an ELF file".to_vec()),
        ("b", good[..good.len() / 2].to_vec()),
        (
            "c",
            ko_with_functions(&s.image[..SPLIT as usize], "tmc_f_", Some(&[0xC1; 20])),
        ),
    ] {
        fs::create_dir_all(bad.join(sub)).unwrap();
        fs::write(bad.join(sub).join("coresight_tmc.ko"), bytes).unwrap();
    }
    let o = run(&[
        &"report",
        &core,
        &"--vmlinux",
        &s.vmlinux,
        &"--modules",
        &bad,
        &"--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    let path = |sub: &str| bad.join(sub).join("coresight_tmc.ko").display().to_string();
    assert!(
        err.contains(&format!("{}: not a 64-bit ELF file", path("a"))),
        "{err}"
    );
    assert!(err.contains(&format!("note: {}: ", path("b"))), "{err}");
    let other = format!(
        "{} is another build of coresight_tmc: build ID {}, the module that ran had {}",
        path("c"),
        "c1".repeat(20),
        "c0".repeat(20)
    );
    assert!(err.contains(&other), "{err}");
    assert!(
        err.contains("coresight_tmc: no usable .ko: its code is named coresight_tmc+offset"),
        "{err}"
    );
    // Named by offset, as without a .ko.
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let in_module: Vec<(u64, String)> = named(&r)
        .into_iter()
        .filter(|(a, _)| (BASE..BASE + SPLIT).contains(a))
        .collect();
    assert!(!in_module.is_empty());
    for (a, sym) in &in_module {
        assert_eq!(*sym, format!("coresight_tmc+{:#x}", a - BASE));
    }
    // --force takes the other build, and says so.
    let o = run(&[
        &"report",
        &core,
        &"--modules",
        &bad.join("c"),
        &"--force",
        &"--json",
    ]);
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!("{other} (used anyway: --force)")),
        "{err}"
    );
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let (a, sym) = named(&r)
        .into_iter()
        .find(|(a, _)| (BASE..BASE + SPLIT).contains(a))
        .unwrap();
    assert_tmc_function(a, &sym);
}

#[test]
fn an_unloaded_module_is_not_named() {
    let Some(s) = setup() else {
        return;
    };
    // coresight_tmc was unloaded before the panic; another module stays, elsewhere.
    let mut other = ModuleEntry::new(b"other_mod", ModuleState::Live);
    other.text_addr = 0xFFFF_0000_0100_0000;
    other.text_size = 0x2000;
    let core = s.vmcore("vmcore", &[tmc(), other], &[b"coresight_tmc"]);
    let o = run(&[
        &"report",
        &core,
        &"--vmlinux",
        &s.vmlinux,
        &"--modules",
        &s.mods,
        &"--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        !out.contains("coresight_tmc") && !out.contains("tmc_f_"),
        "{out}"
    );
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["modules"].as_array().unwrap().len(), 1);
    assert_eq!(r["modules"][0]["name"], "other_mod");
    // Its old addresses are addresses again.
    let branches: Vec<&Value> = r["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["branches"].as_array().unwrap().iter())
        .collect();
    let old = branches
        .iter()
        .filter_map(|b| b["to"]["addr"].as_str())
        .filter(|a| (BASE..BASE + SPLIT).contains(&hex(a)))
        .count();
    assert!(old > 0);
    for b in &branches {
        if b["to"]["addr"]
            .as_str()
            .is_some_and(|a| (BASE..BASE + SPLIT).contains(&hex(a)))
        {
            assert_eq!(b["to"]["symbol"], Value::Null, "{b}");
        }
    }
    let info = run(&[&"info", &core]);
    let out = text(&info.stdout);
    assert!(out.contains("modules:   1 loaded (room for"), "{out}");
    assert!(
        out.contains("other_mod") && !out.contains("coresight_tmc"),
        "{out}"
    );
}

/// Region offset of the module list record's data.
fn modules_data(region: &[u8]) -> usize {
    let r = parse_region(region).unwrap();
    let rec = r
        .records()
        .flatten()
        .find(|r| r.header.kind == RecordKind::Modules)
        .unwrap();
    rec.data_offset()
}

#[test]
fn a_damaged_module_list_costs_only_module_names() {
    let Some(s) = setup() else {
        return;
    };
    // The data CRC fails: the list is not read.
    let mut region = dump(&s.snap, BASE + SPLIT, 0, |b| list(b, &[tmc()], &[]));
    let at = modules_data(&region) + 20;
    region[at] ^= 0xFF;
    let crc = s.dir.join("crc.cspd");
    fs::write(&crc, &region).unwrap();
    // An entry's state is no state: the list does not decode.
    let region = dump(&s.snap, BASE + SPLIT, 0, |b| {
        let n = list(b, &[tmc()], &[]);
        b[MODULES_HEADER_SIZE + 77] = 9;
        n
    });
    let entry = s.dir.join("entry.cspd");
    fs::write(&entry, &region).unwrap();
    for (d, why) in [
        (&crc, "record data CRC mismatch"),
        (&entry, "entry 0: module state at offset 0x5d is 9"),
    ] {
        let o = run(&[
            &"report",
            d,
            &"--vmlinux",
            &s.vmlinux,
            &"--modules",
            &s.mods,
            &"--json",
        ]);
        // Damage is exit 3; the report is written all the same.
        assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
        let err = text(&o.stderr);
        assert!(err.contains("the module list is damaged: "), "{err}");
        assert!(err.contains(why), "{err}");
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        let out = text(&o.stdout);
        assert!(!out.contains("coresight_tmc") && !out.contains("tmc_f_"));
        // The kernel is still named, every CPU still reported.
        assert_eq!(r["cpus"].as_array().unwrap().len(), 6);
        assert!(functions(&r).iter().any(|f| f.starts_with("f_")));
        let o = run(&[&"info", d, &"--json"]);
        assert_eq!(o.status.code(), Some(3));
        let i: Value = serde_json::from_slice(&o.stdout).unwrap();
        let p = i["modules"]["problem"].as_str().unwrap();
        assert!(
            p.starts_with("the module list is damaged: ") && p.contains(why),
            "{p}"
        );
        let codes: Vec<&str> = i["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["code"].as_str().unwrap())
            .collect();
        assert!(
            codes == ["data-crc"] || codes == ["bad-modules"],
            "{codes:?}"
        );
        // The rest of the dump is read: identity, panic, every record else.
        assert_eq!(i["panic"]["cpu"], 4);
        assert_eq!(i["records"].as_array().unwrap().len(), 17);
    }
}

/// A dump without trace whose module list holds more modules than it has room for.
fn listed_dump() -> (Vec<u8>, Vec<ModuleEntry>) {
    let id = common::identity();
    let panic = PanicInfo {
        cpu: 0,
        message: b"Kernel panic - not syncing: test",
        truncated: false,
    };
    let mut w = DumpWriter::new(16 * 1024, [5; 16], &id, &panic);
    let cap = modules_capacity(16 * 1024);
    assert_eq!(cap, 8);
    let mut entries = Vec::new();
    let mut coming = tmc_at(0xFFFF_8000_7A00_0000, 0x6000, &TMC_ID);
    coming.state = ModuleState::Coming;
    coming.init_addr = 0xFFFF_8000_7A10_0000;
    coming.init_size = 0x800;
    assert!(coming.add_section(ModuleSection {
        addr: 0xFFFF_8000_7A10_0000,
        index: KO_INIT,
    }));
    entries.push(coming);
    for i in 0..cap as u64 {
        let name = format!("mod_{i}");
        let mut e = ModuleEntry::new(name.as_bytes(), ModuleState::Live);
        e.text_addr = 0xFFFF_8000_7B00_0000 + i * 0x10_0000;
        e.text_size = 0x1000;
        entries.push(e);
    }
    w.modules(|b| list(b, &entries, &[]));
    (w.finish(), entries)
}

#[test]
fn info_and_extract_list_the_modules() {
    let tmp = tempfile::tempdir().unwrap();
    let (region, _) = listed_dump();
    let d = tmp.path().join("d.cspd");
    fs::write(&d, &region).unwrap();
    let o = run(&[&"info", &d]);
    let out = text(&o.stdout);
    assert!(
        out.contains(
            "modules:   8 loaded (room for 8, 1 more dropped: not named, 9 changes since boot)"
        ),
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("coresight_tmc "))
        .unwrap();
    assert!(
        line.contains("coming")
            && line.contains("text 0xffff80007a000000+0x6000")
            && line.contains("init 0xffff80007a100000+0x800")
            && line.contains(&format!("build id {}", "c0".repeat(20))),
        "{line}"
    );
    assert!(
        out.contains("sections [3] 0xffff80007a000000, [2] 0xffff80007a100000"),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("mod_6 ")),
        "{out}"
    );
    assert!(!out.contains("mod_7"), "the ninth did not fit: {out}");
    let o = run(&[&"info", &d, &"--json"]);
    let i: Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = &i["modules"];
    assert_eq!(m["dropped"], 1);
    assert_eq!(m["capacity"], 8);
    assert_eq!(m["modules"].as_array().unwrap().len(), 8);
    let t = &m["modules"][0];
    assert_eq!(t["name"], "coresight_tmc");
    assert_eq!(t["state"], "coming");
    assert_eq!(t["build_id"], "c0".repeat(20));
    assert_eq!(t["text"]["start"], "0xffff80007a000000");
    assert_eq!(t["text"]["size"], 0x6000);
    assert_eq!(t["init"]["start"], "0xffff80007a100000");
    assert_eq!(t["sections"][1]["index"], KO_INIT);
    assert_eq!(t["sections"][1]["addr"], "0xffff80007a100000");
    assert_eq!(m["modules"][1]["build_id"], "");
    assert_eq!(m["modules"][1]["init"], Value::Null);
    // summary.json is the same document.
    let out = tmp.path().join("x");
    run(&[&"extract", &d, &"-o", &out]);
    let s: Value = serde_json::from_slice(&fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["modules"], i["modules"]);
    assert_eq!(s["records"][3]["kind"], "modules");
}

/// The module list of [`listed_dump`], read as csdump reads it.
fn listed_modules() -> csdump::modules::ModuleList {
    let (region, _) = listed_dump();
    let r = parse_region(&region).unwrap();
    let rec = r
        .records()
        .flatten()
        .find(|r| r.header.kind == RecordKind::Modules)
        .unwrap();
    csdump::modules::ModuleList::decode(rec.data).unwrap()
}

#[test]
fn module_code_is_named_from_the_ko_where_its_sections_were_placed() {
    use csdump::modules::ModuleSymbols;
    let tmp = tempfile::tempdir().unwrap();
    let list = listed_modules();
    let mut m = ModuleSymbols::new(&list);
    // By offset: text, init text; nothing outside.
    assert_eq!(
        m.name(0xFFFF_8000_7A00_1234).as_deref(),
        Some("coresight_tmc+0x1234")
    );
    assert_eq!(
        m.name(0xFFFF_8000_7A10_0010).as_deref(),
        Some("coresight_tmc.init+0x10")
    );
    assert_eq!(m.name(0xFFFF_8000_7A00_6000), None);
    assert_eq!(
        m.name(0xFFFF_8000_7B20_0800).as_deref(),
        Some("mod_2+0x800")
    );
    // The .ko: 0x5000 bytes of .text, a function every 4 KiB; the last one is 0x800 long.
    let code = vec![0u8; 0x5000];
    let mut funcs: Vec<(String, u32, u64, u64)> = (0..5)
        .map(|i| (format!("tmc_f_{i}"), KO_TEXT, i * 0x1000, 0x1000))
        .collect();
    funcs[4].3 = 0x800;
    funcs.push(("tmc_probe".into(), KO_TEXT, 0x2400, 0));
    funcs.push(("tmc_init".into(), KO_INIT, 0, 0x40));
    // A Rust function: named demangled, as llvm-cxxfilt prints it.
    funcs.push((
        "_RNvMNtCs1234_13coresight_tmc3tmcNtB2_3Tmc5probe".into(),
        KO_TEXT,
        0x4c00,
        0x100,
    ));
    let ko = ko_bytes(&KoSpec {
        text: &code,
        init: &[0; 0x40],
        funcs,
        build_id: Some(&TMC_ID),
    });
    fs::write(tmp.path().join("coresight_tmc.ko"), &ko).unwrap();
    m.load_dir(tmp.path(), false).unwrap();
    let t = 0xFFFF_8000_7A00_0000u64;
    let name = |a: u64| m.name(a);
    assert_eq!(name(t).as_deref(), Some("tmc_f_0 [coresight_tmc]"));
    assert_eq!(
        name(t + 0x1010).as_deref(),
        Some("tmc_f_1+0x10 [coresight_tmc]")
    );
    // A symbol without a size reaches the next one.
    assert_eq!(
        name(t + 0x2404).as_deref(),
        Some("tmc_probe+0x4 [coresight_tmc]")
    );
    // Past the end of the last sized function: the module's offset.
    assert_eq!(name(t + 0x4900).as_deref(), Some("coresight_tmc+0x4900"));
    assert_eq!(
        name(t + 0x4c10).as_deref(),
        Some("<coresight_tmc::tmc::Tmc>::probe+0x10 [coresight_tmc]")
    );
    // The .init.text section is where the record placed it.
    assert_eq!(
        name(0xFFFF_8000_7A10_0008).as_deref(),
        Some("tmc_init+0x8 [coresight_tmc]")
    );
    assert_eq!(
        m.function(t + 0x1010).as_deref(),
        Some("tmc_f_1 [coresight_tmc]")
    );
    // No .ko for the others: their names, by offset, and a note.
    assert_eq!(name(0xFFFF_8000_7B00_0004).as_deref(), Some("mod_0+0x4"));
    assert!(
        m.notes
            .iter()
            .any(|n| n.starts_with("no .ko under ") && n.contains("mod_0")),
        "{:?}",
        m.notes
    );
    // Neither the mapping symbol nor the data object names code.
    assert!(!format!("{:?}", m.modules()).contains("a_variable"));

    // A module that ran without a recorded build ID takes its .ko unchecked, and says why.
    let mut l = listed_modules();
    l.entries[0].build_id_len = 0;
    let mut m = ModuleSymbols::new(&l);
    m.load_dir(tmp.path(), false).unwrap();
    assert!(
        m.notes
            .iter()
            .any(|n| n.contains("coresight_tmc.ko: used unchecked")
                && n.contains("CONFIG_STACKTRACE_BUILD_ID")),
        "{:?}",
        m.notes
    );
    assert_eq!(name(t).as_deref(), Some("tmc_f_0 [coresight_tmc]"));

    // A .ko without a build ID note is used, not checked, and said so.
    let no_id = tempfile::tempdir().unwrap();
    let ko_plain = ko_with_functions(&code, "tmc_f_", None);
    fs::write(no_id.path().join("coresight_tmc.ko"), ko_plain).unwrap();
    let mut m = ModuleSymbols::new(&listed_modules());
    m.load_dir(no_id.path(), false).unwrap();
    assert!(
        m.notes
            .iter()
            .any(|n| n.contains("has no build ID note: not checked against coresight_tmc's")),
        "{:?}",
        m.notes
    );
    assert_eq!(
        m.name(t + 0x10).as_deref(),
        Some("tmc_f_0+0x10 [coresight_tmc]")
    );

    // A record that places a section the .ko does not have: refused, by offset.
    let mut l = listed_modules();
    l.entries[0].sections[0].index = 99;
    let mut m = ModuleSymbols::new(&l);
    m.load_dir(tmp.path(), false).unwrap();
    assert!(
        m.notes
            .iter()
            .any(|n| n.contains("coresight_tmc's record places section 99 at 0xffff80007a000000")),
        "{:?}",
        m.notes
    );
    assert_eq!(m.name(t + 0x10).as_deref(), Some("coresight_tmc+0x10"));

    // --modules that is not a directory is an error.
    assert!(ModuleSymbols::new(&listed_modules())
        .load_dir(&tmp.path().join("coresight_tmc.ko"), false)
        .unwrap_err()
        .contains("not a directory"));
}

#[test]
fn ko_files_that_lie_are_refused_without_a_panic() {
    use csdump::modules::ModuleSymbols;
    let tmp = tempfile::tempdir().unwrap();
    let list = listed_modules();
    let ko = ko_with_functions(&[0u8; 0x3000], "tmc_f_", Some(&TMC_ID));
    let path = tmp.path().join("coresight_tmc.ko");
    let mut rng = common::Rng(0x5eed_1234_5678_9abc);
    let mut refused = 0;
    for round in 0..400 {
        let mut b = ko.clone();
        match round % 4 {
            // Cut anywhere.
            0 => b.truncate(rng.below(b.len())),
            // Bytes changed in the headers and tables (the end of the file).
            1 | 2 => {
                for _ in 0..1 + rng.below(8) {
                    let at = if rng.below(2) == 0 {
                        rng.below(64)
                    } else {
                        b.len() - 1 - rng.below(0x300.min(b.len()))
                    };
                    b[at] = rng.next() as u8;
                }
            }
            // A section header's offset or size made huge.
            _ => {
                let shoff = u64::from_le_bytes(b[40..48].try_into().unwrap()) as usize;
                let at = shoff + 64 * (1 + rng.below(7)) + 24 + 8 * rng.below(2);
                b[at..at + 8].copy_from_slice(&(rng.next() | 1 << 62).to_le_bytes());
            }
        }
        fs::write(&path, &b).unwrap();
        let mut m = ModuleSymbols::new(&list);
        m.load_dir(tmp.path(), false).unwrap();
        let _ = m.name(0xFFFF_8000_7A00_0010);
        if m.modules()[0].ko.is_none() {
            refused += 1;
            assert!(
                m.notes.iter().any(|n| n.contains("coresight_tmc.ko")),
                "{:?}",
                m.notes
            );
        }
    }
    assert!(refused > 100, "{refused}");
}

#[test]
fn perf_data_maps_modules_and_perf_names_their_functions() {
    let Some(s) = setup() else {
        return;
    };
    if !cspd_testdata::tool("perf") {
        return;
    }
    // perf's cs_etm decoder takes addresses below the kernel map for user space: here the
    // module is above the kernel image (the first MiB), as perf can decode it.
    let region = dump(&s.snap, BASE, 0, |b| {
        list(b, &[tmc_at(BASE + SPLIT, 0x60_0000, &TMC_ID)], &[])
    });
    let d = s.dir.join("above.cspd");
    fs::write(&d, region).unwrap();
    let vmlinux = s.dir.join("vmlinux-low");
    write_elf(&s.image[..SPLIT as usize], BASE - KASLR, &vmlinux);
    let mods = s.dir.join("above");
    fs::create_dir_all(&mods).unwrap();
    let ko = mods.join("coresight_tmc.ko");
    fs::write(
        &ko,
        ko_with_functions(&s.image[SPLIT as usize..0x70_0000], "tmc_f_", Some(&TMC_ID)),
    )
    .unwrap();
    let out = s.dir.join("perf");
    let o = run(&[&"perf", &d, &"-o", &out, &"--modules", &mods]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let data = out.join("perf.data");
    let raw = Command::new("perf")
        .args(["script", "-D", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    let raw = text(&raw.stdout);
    let mmap = format!(
        "PERF_RECORD_MMAP -1/0: [{:#x}({:#x}) @ 0]: x {}",
        BASE + SPLIT,
        0x60_0000,
        ko.display()
    );
    assert!(raw.contains(&mmap), "{raw:.4000}");
    // The kernel's map ends where the module's starts.
    assert!(
        raw.contains(&format!(
            "[{BASE:#x}({SPLIT:#x}) @ {BASE:#x}]: x [kernel.kallsyms]_text"
        )),
        "{raw:.4000}"
    );
    let ids = Command::new("perf")
        .args(["buildid-list", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    let ids = text(&ids.stdout);
    assert!(
        ids.contains(&format!("{} {}", "c0".repeat(20), ko.display())),
        "{ids}"
    );
    let sc = Command::new("perf")
        .args(["script", "--itrace=i1i", "-F", "ip,sym,dso", "--vmlinux"])
        .arg(&vmlinux)
        .arg("-i")
        .arg(&data)
        .output()
        .unwrap();
    let lines = text(&sc.stdout);
    let mut in_ko = 0;
    for l in lines.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 3 || !l.contains("coresight_tmc.ko") {
            continue;
        }
        let ip = hex(f[0]);
        assert_eq!(
            f[1],
            format!("tmc_f_{}", (ip - BASE - SPLIT) / 0x1000),
            "{l}"
        );
        in_ko += 1;
    }
    assert!(in_ko > 10_000, "{in_ko} instructions named in the module");
    // Without --modules: no module map.
    let out = s.dir.join("perf-none");
    run(&[&"perf", &d, &"-o", &out]);
    let raw = Command::new("perf")
        .args(["script", "-D", "-i"])
        .arg(out.join("perf.data"))
        .output()
        .unwrap();
    assert_eq!(text(&raw.stdout).matches("PERF_RECORD_MMAP").count(), 1);
}

#[test]
fn gdb_gets_the_modules_as_libraries_and_names_their_functions() {
    let Some(s) = setup() else {
        return;
    };
    if !cspd_testdata::tool("gdb-multiarch") {
        return;
    }
    let core = s.vmcore("vmcore", &[tmc()], &[]);
    let gdb = |modules: bool| {
        let mut stub = format!(
            "target remote | {} gdb --last 0 {} --vmlinux {}",
            csdump(),
            core.display(),
            s.vmlinux.display()
        );
        if modules {
            stub.push_str(&format!(" --modules {}", s.mods.display()));
        }
        let o = Command::new("gdb-multiarch")
            .args([
                "-batch",
                "-nx",
                "-ex",
                "set pagination off",
                "-ex",
                "set width 0",
            ])
            .arg(&s.vmlinux)
            .args(["-ex", &stub])
            .args(["-ex", "info sharedlibrary"])
            .args(["-ex", "record btrace bts"])
            .args(["-ex", "set record function-call-history-size unlimited"])
            .args(["-ex", "record function-call-history"])
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert!(
            !err.contains("panicked") && !err.contains("Remote connection closed"),
            "{err}"
        );
        text(&o.stdout)
    };
    let out = gdb(true);
    let ko = s
        .mods
        .join("kernel/drivers/hwtracing/coresight/coresight-tmc.ko");
    assert!(
        out.lines()
            .any(|l| l.contains("Yes") && l.ends_with(&ko.display().to_string())),
        "{out:.3000}"
    );
    let history: Vec<&str> = out.lines().filter_map(|l| l.split('\t').nth(1)).collect();
    assert!(
        history.iter().any(|f| f.starts_with("tmc_f_")),
        "{out:.3000}"
    );
    assert!(history.iter().any(|f| f.starts_with("f_")), "{out:.3000}");
    // Without the module tree, GDB has no name for module code.
    let out = gdb(false);
    assert!(
        out.contains("No shared libraries loaded at this time."),
        "{out:.3000}"
    );
    assert!(!out.contains("tmc_f_"));
}
