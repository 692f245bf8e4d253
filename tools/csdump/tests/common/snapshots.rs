//! Dumps built from OpenCSD snapshots (their real ETMv4 trace packed into a coresight-panic-dump
//! region with the format's and cspd-hw's encoders) and a vmlinux around a snapshot's kernel
//! image, for the tests that need a dump input with real trace.

#![allow(dead_code)]

use std::fs;
use std::path::Path;

use csdump::capture::Capture;
use cspd_format::*;
use cspd_hw::cpu_debug::CpuSample;
use cspd_hw::cpu_debug::Outcome;
use cspd_hw::cpu_debug::PcCalibration;
use cspd_hw::cpu_debug::PcKind;
use cspd_hw::cpu_debug::FLAG_EDCIDSR_PRESENT;
use cspd_hw::cpu_debug::FLAG_EDVIDSR_PRESENT;
use cspd_hw::cpu_debug::FLAG_PC64;
use cspd_hw::tmc::TmcRecordHeader;
use cspd_hw::tmc::TMC_RECORD_HEADER_LEN;
use cspd_hw::tmc::TMC_RECORD_VERSION;

/// KASLR offset of the dumps built here: the kernel image of a snapshot is linked this much
/// lower than where the trace says it ran.
pub const KASLR: u64 = 0x20_0000;

/// Builds a committed dump from a snapshot: its trace as a TMC record, each ETM's registers as
/// a saved state, a CPU debug sample per CPU, identity (with `_text` and a KASLR offset) and
/// panic info.
pub fn dump_from_snapshot(snap: &Path, panic_cpu: u32) -> Vec<u8> {
    let cap = Capture::from_snapshot_dir(snap).unwrap();
    let trace = cap.sinks[0].trace.to_vec();
    let size = trace.len() + 64 * 1024;
    let mut r = vec![0u8; size];
    let ch = ContainerHeader::new(size as u64, [7; 16], 1);
    init_region(&mut r, &ch).unwrap();
    let st = ch.stamp;
    let add = |r: &mut Vec<u8>, kind, name: &[u8], cpu: u32, data: &[u8]| {
        let mut h = RecordHeader::new(kind, name, data.len().next_multiple_of(8) as u32, st);
        h.cpu = cpu;
        let off = append_record(r, &h).unwrap();
        h.status = RecordStatus::Ok;
        write_record(&mut r[off..], &h, data).unwrap();
    };
    let mut id = Identity::default();
    id.set_release(b"4.9.0-juno").unwrap();
    id.text_addr = cap.text_addr();
    id.kaslr_offset = if cap.kernel.text.is_some() { KASLR } else { 0 };
    let mut buf = vec![0u8; IDENTITY_SIZE];
    id.encode(&mut buf).unwrap();
    add(&mut r, RecordKind::Identity, b"identity", CPU_NONE, &buf);
    let mut pbuf = [0u8; PANIC_INFO_MAX_SIZE];
    let n = PanicInfo {
        cpu: panic_cpu,
        message: b"Kernel panic - not syncing: test",
        truncated: false,
    }
    .encode(&mut pbuf)
    .unwrap();
    add(
        &mut r,
        RecordKind::PanicInfo,
        b"panic",
        CPU_NONE,
        &pbuf[..n],
    );
    let tmc = TmcRecordHeader {
        version: TMC_RECORD_VERSION,
        rsz: (trace.len() / 4) as u32,
        trace_len: trace.len() as u32,
        words_read: (trace.len() / 4) as u32,
        ..TmcRecordHeader::default()
    };
    let mut sink = vec![0u8; TMC_RECORD_HEADER_LEN];
    tmc.encode(&mut sink).unwrap();
    sink.extend_from_slice(&trace);
    add(&mut r, RecordKind::Sink, b"tmc_etf0", CPU_NONE, &sink);
    for e in &cap.etms {
        let mut b = vec![0u8; cspd_hw::etm4x::SAVED_STATE_SIZE];
        e.state.encode(&mut b).unwrap();
        let name = format!("etm{}", e.state.cpu);
        add(&mut r, RecordKind::Source, name.as_bytes(), e.state.cpu, &b);
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
        };
        let mut b = vec![0u8; cspd_hw::cpu_debug::RECORD_LEN];
        s.encode(&mut b).unwrap();
        let name = format!("cpu_debug{}", e.state.cpu);
        add(
            &mut r,
            RecordKind::CpuDebug,
            name.as_bytes(),
            e.state.cpu,
            &b,
        );
    }
    write_commit(&mut r).unwrap();
    r
}

/// Writes a minimal ELF64 (aarch64) vmlinux around `image` at `addr`: `.text`, and a symbol
/// table with `_text` and one function per 4 KiB (`f_<n>`).
pub fn write_elf(image: &[u8], addr: u64, path: &Path) {
    let text_off = 0x1000usize;
    let shstr = b"\0.text\0.symtab\0.strtab\0.shstrtab\0";
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
    let mut eh = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0];
    eh.resize(16, 0);
    eh.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    eh.extend_from_slice(&183u16.to_le_bytes()); // EM_AARCH64
    eh.extend_from_slice(&1u32.to_le_bytes());
    eh.extend_from_slice(&addr.to_le_bytes());
    eh.extend_from_slice(&0u64.to_le_bytes());
    eh.extend_from_slice(&(sh_off as u64).to_le_bytes());
    eh.extend_from_slice(&0u32.to_le_bytes());
    for v in [64u16, 56, 0, 64, 5, 4] {
        eh.extend_from_slice(&v.to_le_bytes());
    }
    body[..64].copy_from_slice(&eh);
    fs::write(path, body).unwrap();
}
