//! Dumps built from OpenCSD snapshots (their real ETMv4 trace packed into a coresight-panic-dump
//! region with the writer the kernel uses) and a vmlinux around a snapshot's kernel
//! image, for the tests that need a dump input with real trace.

#![allow(dead_code)]

use std::fs;
use std::path::Path;

use csdump::capture::Capture;
use cspd_format::cpu_debug::CpuSample;
use cspd_format::cpu_debug::Outcome;
use cspd_format::cpu_debug::PcCalibration;
use cspd_format::cpu_debug::PcKind;
use cspd_format::cpu_debug::FLAG_EDCIDSR_PRESENT;
use cspd_format::cpu_debug::FLAG_EDVIDSR_PRESENT;
use cspd_format::cpu_debug::FLAG_PC64;
use cspd_format::*;

use super::tmc_payload;
use super::DumpWriter;

/// GNU build ID of the kernel of the dumps built here, and of the vmlinux files written for
/// them.
pub const BUILD_ID: [u8; 20] = [0xB1; 20];

/// KASLR offset of the dumps built here: the kernel image of a snapshot is linked this much
/// lower than where the trace says it ran.
pub const KASLR: u64 = 0x20_0000;

/// Builds a committed dump from a snapshot: its trace as a TMC record, each ETM's registers as
/// a saved state, a CPU debug sample per CPU, identity (with `_text` and a KASLR offset) and
/// panic info.
pub fn dump_from_snapshot(snap: &Path, panic_cpu: u32) -> Vec<u8> {
    dump_from_snapshot_at(snap, panic_cpu, 0)
}

/// [`dump_from_snapshot`] whose identity also records `kimage_voffset` (0: unknown).
pub fn dump_from_snapshot_at(snap: &Path, panic_cpu: u32, kimage_voffset: u64) -> Vec<u8> {
    dump_from_snapshot_with(snap, panic_cpu, kimage_voffset, None, |_| {})
}

/// [`dump_from_snapshot_at`] whose identity says the kernel's `_text` is at `text` (default: the
/// snapshot's image), with `modules` run on the writer before the commit (for the module list:
/// [`DumpWriter::modules`]).
pub fn dump_from_snapshot_with(
    snap: &Path,
    panic_cpu: u32,
    kimage_voffset: u64,
    text: Option<u64>,
    modules: impl FnOnce(&mut DumpWriter),
) -> Vec<u8> {
    let cap = Capture::from_snapshot_dir(snap).unwrap();
    let trace = cap.sinks[0].trace.to_vec();
    let mut id = Identity::default();
    id.set_release(b"4.9.0-juno").unwrap();
    id.set_build_id(&BUILD_ID).unwrap();
    id.text_addr = text.unwrap_or(cap.text_addr());
    id.kaslr_offset = if cap.kernel.text.is_some() { KASLR } else { 0 };
    id.kimage_voffset = kimage_voffset;
    let panic = PanicInfo {
        cpu: panic_cpu,
        message: b"Kernel panic - not syncing: test",
        truncated: false,
    };
    let mut w = DumpWriter::new(trace.len() + 64 * 1024, [7; 16], &id, &panic);
    w.add(
        RecordKind::Sink,
        PayloadType::Tmc,
        b"tmc_etf0",
        CPU_NONE,
        &tmc_payload(&trace),
    );
    for e in &cap.etms {
        let mut b = vec![0u8; etm4x::SAVED_STATE_SIZE];
        e.state.encode(&mut b).unwrap();
        let name = format!("etm{}", e.state.cpu);
        w.add(
            RecordKind::Source,
            PayloadType::Etm4x,
            name.as_bytes(),
            e.state.cpu,
            &b,
        );
        let pc = cap.text_addr() + 0x40;
        let s = CpuSample {
            cpu: e.state.cpu,
            outcome: Outcome::Sampled,
            flags: FLAG_PC64 | FLAG_EDCIDSR_PRESENT | FLAG_EDVIDSR_PRESENT,
            pcsample: 3,
            pcsr_offset: 0,
            edprsr_first: 0x1,
            edprsr: 0x1,
            edprcr_saved: 0,
            power_polls: 1,
            edpcsr: (pc & 0xFFFF_FFFF) as u32,
            edpcsr_hi: (pc >> 32) as u32,
            edcidsr: 0,
            edvidsr: 0x9000_0000,
            pc: PcCalibration {
                pc,
                kind: PcKind::AArch64,
            },
            mpidr: None,
        };
        let mut b = vec![0u8; cpu_debug::RECORD_LEN];
        s.encode(&mut b).unwrap();
        let name = format!("cpu_debug{}", e.state.cpu);
        w.add(
            RecordKind::CpuDebug,
            PayloadType::CpuDebug,
            name.as_bytes(),
            e.state.cpu,
            &b,
        );
    }
    modules(&mut w);
    w.finish()
}

/// Writes a minimal ELF64 (aarch64) vmlinux around `image` at `addr`: `.text`, and a symbol
/// table with `_text` and one function per 4 KiB (`f_<n>`).
pub fn write_elf(image: &[u8], addr: u64, path: &Path) {
    write_elf_id(image, addr, path, &BUILD_ID);
}

/// [`write_elf`] with the given GNU build ID in a `.note.gnu.build-id` section.
pub fn write_elf_id(image: &[u8], addr: u64, path: &Path, build_id: &[u8]) {
    let text_off = 0x1000usize;
    let shstr = b"\0.text\0.symtab\0.strtab\0.shstrtab\0.note.gnu.build-id\0";
    let mut strtab = b"\0_text\0".to_vec();
    let mut syms = vec![0u8; 24];
    let sym = |syms: &mut Vec<u8>, name: u32, info: u8, value: u64, size: u64| {
        syms.extend_from_slice(&name.to_le_bytes());
        syms.push(info);
        syms.push(0);
        syms.extend_from_slice(&1u16.to_le_bytes());
        syms.extend_from_slice(&value.to_le_bytes());
        syms.extend_from_slice(&size.to_le_bytes());
    };
    sym(&mut syms, 1, 0x10, addr, 0);
    for (i, a) in (0..image.len() as u64).step_by(0x1000).enumerate() {
        let n = strtab.len() as u32;
        strtab.extend_from_slice(format!("f_{i}\0").as_bytes());
        sym(&mut syms, n, 0x12, addr + a, 0x1000);
    }
    let mut body = vec![0u8; text_off];
    body.extend_from_slice(image);
    let str_off = body.len();
    body.extend_from_slice(&strtab);
    while body.len() % 8 != 0 {
        body.push(0);
    }
    let sym_off = body.len();
    body.extend_from_slice(&syms);
    let shs_off = body.len();
    body.extend_from_slice(shstr);
    while body.len() % 8 != 0 {
        body.push(0);
    }
    let note_off = body.len();
    body.extend_from_slice(&4u32.to_le_bytes());
    body.extend_from_slice(&(build_id.len() as u32).to_le_bytes());
    body.extend_from_slice(&3u32.to_le_bytes()); // NT_GNU_BUILD_ID
    body.extend_from_slice(b"GNU\0");
    body.extend_from_slice(build_id);
    let note_len = body.len() - note_off;
    while body.len() % 8 != 0 {
        body.push(0);
    }
    let sh_off = body.len();
    let sh = |body: &mut Vec<u8>,
              name: u32,
              ty: u32,
              flags: u64,
              a: u64,
              off: usize,
              size: usize,
              link: u32,
              info: u32,
              ent: u64| {
        body.extend_from_slice(&name.to_le_bytes());
        body.extend_from_slice(&ty.to_le_bytes());
        body.extend_from_slice(&flags.to_le_bytes());
        body.extend_from_slice(&a.to_le_bytes());
        body.extend_from_slice(&(off as u64).to_le_bytes());
        body.extend_from_slice(&(size as u64).to_le_bytes());
        body.extend_from_slice(&link.to_le_bytes());
        body.extend_from_slice(&info.to_le_bytes());
        body.extend_from_slice(&8u64.to_le_bytes());
        body.extend_from_slice(&ent.to_le_bytes());
    };
    sh(&mut body, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    sh(&mut body, 1, 1, 6, addr, text_off, image.len(), 0, 0, 0);
    sh(&mut body, 7, 2, 0, 0, sym_off, syms.len(), 3, 1, 24);
    sh(&mut body, 15, 3, 0, 0, str_off, strtab.len(), 0, 0, 0);
    sh(&mut body, 23, 3, 0, 0, shs_off, shstr.len(), 0, 0, 0);
    sh(&mut body, 33, 7, 2, 0, note_off, note_len, 0, 0, 0);
    let mut eh = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0];
    eh.resize(16, 0);
    eh.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    eh.extend_from_slice(&183u16.to_le_bytes()); // EM_AARCH64
    eh.extend_from_slice(&1u32.to_le_bytes());
    eh.extend_from_slice(&addr.to_le_bytes());
    eh.extend_from_slice(&0u64.to_le_bytes());
    eh.extend_from_slice(&(sh_off as u64).to_le_bytes());
    eh.extend_from_slice(&0u32.to_le_bytes());
    for v in [64u16, 56, 0, 64, 6, 4] {
        eh.extend_from_slice(&v.to_le_bytes());
    }
    body[..64].copy_from_slice(&eh);
    fs::write(path, body).unwrap();
}

/// What a dump holds of a snapshot: its trace, each ETM's registers, and the identity of the
/// kernel (with `_text` and a KASLR offset).
pub struct SnapshotRecords {
    /// The trace as a TMC drain keeps it.
    pub trace: Vec<u8>,
    /// The ETMs' registers.
    pub etms: Vec<etm4x::SavedState>,
    /// The identity record.
    pub identity: Identity,
}

/// Reads the records a dump of `snap` holds.
pub fn snapshot_records(snap: &Path) -> SnapshotRecords {
    let cap = Capture::from_snapshot_dir(snap).unwrap();
    let mut identity = Identity::default();
    identity.set_release(b"4.9.0-juno").unwrap();
    identity.set_build_id(&BUILD_ID).unwrap();
    identity.text_addr = cap.text_addr();
    identity.kaslr_offset = if cap.kernel.text.is_some() { KASLR } else { 0 };
    SnapshotRecords {
        trace: cap.sinks[0].trace.to_vec(),
        etms: cap.etms.iter().map(|e| e.state).collect(),
        identity,
    }
}

/// A region size (page-aligned) with room for `r`.
fn region_size(r: &SnapshotRecords) -> usize {
    (r.trace.len() + 64 * 1024).next_multiple_of(4096)
}

/// The dump the panic path writes of `r`: the sink drained, each ETM's registers read,
/// committed by the panic path.
pub fn panic_path_dump(r: &SnapshotRecords) -> Vec<u8> {
    let panic = PanicInfo {
        cpu: r.etms[0].cpu,
        message: b"Kernel panic - not syncing: test",
        truncated: false,
    };
    let mut w = DumpWriter::new(region_size(r), [7; 16], &r.identity, &panic);
    w.add(
        RecordKind::Sink,
        PayloadType::Tmc,
        b"tmc_etf0",
        CPU_NONE,
        &tmc_payload(&r.trace),
    );
    for s in &r.etms {
        let mut b = vec![0u8; etm4x::SAVED_STATE_SIZE];
        s.encode(&mut b).unwrap();
        let name = format!("etm{}", s.cpu);
        w.add(
            RecordKind::Source,
            PayloadType::Etm4x,
            name.as_bytes(),
            s.cpu,
            &b,
        );
    }
    w.finish()
}

/// The dump of `r` a kernel whose panic path never ran leaves (plain kdump without
/// `crash_kexec_post_notifiers`): identity, each ETM's registers as programmed at enable
/// (`RECORD_FLAG_RUNTIME`, `SAVED_PROGRAMMED`), the sink and a CPU debug record per ETM not run,
/// no panic info, a commit flagged `RECORD_FLAG_RUNTIME`. The trace goes to the capture
/// kernel's device dump ([`super::capture_container`]).
pub fn runtime_dump(r: &SnapshotRecords) -> Vec<u8> {
    let mut w = DumpWriter::at_runtime(region_size(r), [7; 16], &r.identity);
    w.register(
        RecordKind::Sink,
        PayloadType::Tmc,
        b"tmc_etf0",
        CPU_NONE,
        r.trace.len() + tmc::TMC_RECORD_HEADER_LEN,
    );
    for s in &r.etms {
        let mut s = *s;
        s.flags |= etm4x::SAVED_PROGRAMMED;
        let mut b = vec![0u8; etm4x::SAVED_STATE_SIZE];
        s.encode(&mut b).unwrap();
        let name = format!("etm{}", s.cpu);
        w.add_flagged(
            RecordKind::Source,
            PayloadType::Etm4x,
            name.as_bytes(),
            s.cpu,
            &b,
            RECORD_FLAG_RUNTIME,
        );
        let name = format!("cpu_debug{}", s.cpu);
        w.register(
            RecordKind::CpuDebug,
            PayloadType::CpuDebug,
            name.as_bytes(),
            s.cpu,
            cpu_debug::RECORD_LEN,
        );
    }
    w.finish_flagged(RECORD_FLAG_RUNTIME)
}
