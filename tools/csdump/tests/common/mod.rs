//! Synthetic dump regions and ELF64 vmcores for tests and benchmarks.
//!
//! The ELF writer here is written from the ELF specification, independently of csdump's reader.

#![allow(dead_code)]

use std::fs::File;
use std::io::Seek;
use std::io::SeekFrom;
use std::io::Write;
use std::path::Path;

use cspd_format::*;

pub mod dumps;
pub mod ko;
pub mod oracle;
pub mod snapshots;

pub const BOOT_ID: [u8; 16] = *b"\x10\x32\x54\x76\x98\xba\xdc\xfe\x01\x23\x45\x67\x89\xab\xcd\xef";
pub const PANIC_MSG: &[u8] = b"Kernel panic - not syncing: sysrq triggered crash";

/// A region built by [`build_region`], with what went into it.
pub struct Built {
    pub bytes: Vec<u8>,
    pub identity: Vec<u8>,
    pub sink: Vec<u8>,
    pub etm: Vec<u8>,
    /// Region offsets: identity, panic, sink, etm, cpu debug, commit.
    pub offsets: [usize; 6],
    /// Region offset of the phase times record (between panic and sink).
    pub phases_off: usize,
    /// The phase times written.
    pub phases: Phases,
}

/// The phase times [`build_region`] writes: 62.5 MHz, every phase ran, 10 us times its number.
pub fn sample_phases() -> Phases {
    let mut p = Phases {
        frequency: 62_500_000,
        entry: 1_000_000,
        ..Phases::default()
    };
    let mut at = p.entry + 125;
    for (i, phase) in Phase::ALL.iter().enumerate() {
        let t = p.get_mut(*phase);
        t.start = at;
        t.end = at + 625 * (i as u64 + 1);
        t.callbacks = u32::from(*phase != Phase::Commit);
        at = t.end;
    }
    p
}

pub fn identity() -> Identity {
    let mut id = Identity::default();
    id.set_release(b"7.3.0-cspd-test").unwrap();
    id.set_build_id(&[0x5a, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07])
        .unwrap();
    id.kaslr_offset = 0x3b_0000;
    id.text_addr = 0xffff_8000_803b_0000;
    id.page_offset = 0xffff_0000_0000_0000;
    id.memstart = 0x4000_0000;
    id.kimage_voffset = 0xffff_7fff_c03b_0000;
    id.region_paddr = 0x4800_0000;
    id.region_size = 0x4000;
    id
}

pub fn identity_payload() -> Vec<u8> {
    let id = identity();
    let mut buf = vec![0u8; IDENTITY_SIZE];
    id.encode(&mut buf).unwrap();
    buf
}

fn fill(region: &mut [u8], offset: usize, data: &[u8], status: RecordStatus, error: i32) {
    let mut h = RecordHeader::decode_at(&region[offset..], offset).unwrap();
    h.status = status;
    h.error = error;
    write_record(&mut region[offset..], &h, data).unwrap();
}

/// The payload of a TMC sink record that drained `trace` completely.
pub fn tmc_payload(trace: &[u8]) -> Vec<u8> {
    use cspd_format::tmc::*;
    let words = (trace.len() / 4) as u32;
    let tmc = TmcRecordHeader {
        version: TMC_RECORD_VERSION,
        rsz: words,
        trace_len: trace.len() as u32,
        words_read: words,
        ..TmcRecordHeader::default()
    };
    let mut sink = vec![0u8; TMC_RECORD_HEADER_LEN];
    tmc.encode(&mut sink).unwrap();
    sink.extend_from_slice(trace);
    sink
}

/// Writes a region the way the kernel writes one, with the format's writer: the core's records
/// (identity, panic info), a slot per registration reserved with [`SlotAllocator`], each
/// filled as its callback would fill it at panic, then the commit.
pub struct DumpWriter {
    r: Vec<u8>,
    slots: SlotAllocator,
    stamp: u64,
    phases_off: usize,
    modules_off: usize,
}

impl DumpWriter {
    /// A fresh region of `size` bytes with the identity record and the panic info written.
    pub fn new(size: usize, boot_id: [u8; 16], id: &Identity, panic: &PanicInfo<'_>) -> Self {
        let mut r = vec![0u8; size];
        let ch = ContainerHeader::new(size as u64, boot_id, 1);
        let core = init_with_core_records(&mut r, &ch, id).unwrap();
        let mut buf = [0u8; PANIC_INFO_MAX_SIZE];
        let n = panic.encode(&mut buf).unwrap();
        let mut h = RecordHeader::decode(&r[core.panic_info..]).unwrap();
        h.status = RecordStatus::Ok;
        h.cpu = panic.cpu;
        write_record(&mut r[core.panic_info..], &h, &buf[..n]).unwrap();
        Self {
            r,
            phases_off: core.phases,
            modules_off: core.modules,
            slots: SlotAllocator::new(core.first_free, size),
            stamp: ch.stamp,
        }
    }

    /// A fresh region of `size` bytes as a kernel leaves it while it runs: the identity record
    /// written, the panic info and phase times not run.
    pub fn at_runtime(size: usize, boot_id: [u8; 16], id: &Identity) -> Self {
        let mut r = vec![0u8; size];
        let ch = ContainerHeader::new(size as u64, boot_id, 1);
        let core = init_with_core_records(&mut r, &ch, id).unwrap();
        Self {
            r,
            phases_off: core.phases,
            modules_off: core.modules,
            slots: SlotAllocator::new(core.first_free, size),
            stamp: ch.stamp,
        }
    }

    /// Registers a record of `kind` and fills it with `data`, status ok.
    pub fn add(
        &mut self,
        kind: RecordKind,
        payload: PayloadType,
        name: &[u8],
        cpu: u32,
        data: &[u8],
    ) {
        self.add_flagged(kind, payload, name, cpu, data, 0);
    }

    /// [`DumpWriter::add`] with the header's `flags` (`RECORD_FLAG_RUNTIME`: an ETM's record
    /// written at enable).
    pub fn add_flagged(
        &mut self,
        kind: RecordKind,
        payload: PayloadType,
        name: &[u8],
        cpu: u32,
        data: &[u8],
        flags: u32,
    ) {
        let cap = SlotAllocator::capacity_for(data.len()).unwrap();
        let mut h = RecordHeader::new(kind, name, cap, self.stamp);
        h.cpu = cpu;
        h.payload = payload;
        let off = register(&mut self.r, &mut self.slots, h);
        h.status = RecordStatus::Ok;
        h.flags = flags;
        write_record(&mut self.r[off..], &h, data).unwrap();
    }

    /// Registers a record of `kind` with room for `capacity` bytes and leaves it not run, as
    /// the kernel core does when a driver registers and the panic path never runs.
    pub fn register(
        &mut self,
        kind: RecordKind,
        payload: PayloadType,
        name: &[u8],
        cpu: u32,
        capacity: usize,
    ) {
        let cap = SlotAllocator::capacity_for(capacity).unwrap();
        let mut h = RecordHeader::new(kind, name, cap, self.stamp);
        h.cpu = cpu;
        h.payload = payload;
        register(&mut self.r, &mut self.slots, h);
    }

    /// Writes the phase times into the core's slot, as the panic path does.
    pub fn phases(&mut self, p: &Phases) {
        let mut b = [0u8; PHASES_SIZE];
        p.encode(&mut b).unwrap();
        let mut h = RecordHeader::decode(&self.r[self.phases_off..]).unwrap();
        h.status = RecordStatus::Ok;
        write_record(&mut self.r[self.phases_off..], &h, &b).unwrap();
    }

    /// Changes the module list as the core's module notifier does: `f` gets the record's data
    /// area (the list as [`modules_init`] left it, or as the last call did) and returns the
    /// list's new length (what [`modules_upsert`] and [`modules_remove`] return); the record is
    /// then sealed with that length.
    pub fn modules(&mut self, f: impl FnOnce(&mut [u8]) -> usize) {
        let off = self.modules_off;
        let mut h = RecordHeader::decode(&self.r[off..]).unwrap();
        let cap = h.capacity as usize;
        let data = &mut self.r[off + RECORD_HEADER_SIZE..off + RECORD_HEADER_SIZE + cap];
        h.length = f(data) as u32;
        seal_record(&mut self.r[off..], &h).unwrap();
    }

    /// Writes the commit and returns the region.
    pub fn finish(mut self) -> Vec<u8> {
        write_commit(&mut self.r).unwrap();
        self.r
    }

    /// Writes the commit with the header's `flags` (`RECORD_FLAG_RUNTIME`: committed while the
    /// kernel ran) and returns the region.
    pub fn finish_flagged(mut self, flags: u32) -> Vec<u8> {
        write_commit_flagged(&mut self.r, flags).unwrap();
        self.r
    }
}

/// Reserves a slot and writes its not-run record header, as the kernel core does when a driver
/// registers.
fn register(r: &mut [u8], slots: &mut SlotAllocator, header: RecordHeader) -> usize {
    let off = slots.reserve(header.capacity).unwrap();
    r[off..off + RECORD_HEADER_SIZE].copy_from_slice(&header.encode());
    off
}

/// Builds a committed region of `size` bytes with the writer the kernel uses: identity, panic
/// info, a TMC sink with `sink_len` bytes of trace, an ETM source on CPU 1, a free slot, and a
/// CPU debug record whose callback timed out.
pub fn build_region(size: usize, sink_len: usize) -> Built {
    let mut r = vec![0u8; size];
    let ch = ContainerHeader::new(size as u64, BOOT_ID, 3);
    let st = ch.stamp;
    let core = init_with_core_records(&mut r, &ch, &identity()).unwrap();
    let id_off = ch.first_record as usize;
    let pi_off = core.panic_info;
    let mut slots = SlotAllocator::new(core.first_free, size);
    let cap = SlotAllocator::capacity_for(sink_len).unwrap();
    let mut sink = RecordHeader::new(RecordKind::Sink, b"tmc_etf0", cap, st);
    sink.payload = PayloadType::Tmc;
    let sink_off = register(&mut r, &mut slots, sink);
    let mut etm = RecordHeader::new(RecordKind::Source, b"etm1", 64, st);
    etm.cpu = 1;
    etm.payload = PayloadType::Etm4x;
    let etm_off = register(&mut r, &mut slots, etm);
    let free = RecordHeader::new(RecordKind::Free, b"", 16, st);
    register(&mut r, &mut slots, free);
    let mut cpu = RecordHeader::new(RecordKind::CpuDebug, b"cpu_debug/0", 32, st);
    cpu.cpu = 0;
    cpu.payload = PayloadType::CpuDebug;
    let cpu_off = register(&mut r, &mut slots, cpu);

    let identity = identity_payload();
    let mut buf = [0u8; PANIC_INFO_MAX_SIZE];
    let n = PanicInfo {
        cpu: 2,
        message: PANIC_MSG,
        truncated: false,
    }
    .encode(&mut buf)
    .unwrap();
    fill(&mut r, pi_off, &buf[..n], RecordStatus::Ok, 0);
    let phases = sample_phases();
    let mut pb = [0u8; PHASES_SIZE];
    phases.encode(&mut pb).unwrap();
    fill(&mut r, core.phases, &pb, RecordStatus::Ok, 0);
    let sink: Vec<u8> = (0..sink_len).map(|i| (i * 31 + 7) as u8).collect();
    fill(&mut r, sink_off, &sink, RecordStatus::Ok, 0);
    let etm_data: Vec<u8> = (0..48u8).collect();
    fill(&mut r, etm_off, &etm_data, RecordStatus::Ok, 0);
    fill(&mut r, cpu_off, &[], RecordStatus::CallbackError, -110);
    let used = write_commit(&mut r).unwrap();
    Built {
        bytes: r,
        identity,
        sink,
        etm: etm_data,
        offsets: [
            id_off,
            pi_off,
            sink_off,
            etm_off,
            cpu_off,
            used - COMMIT_RECORD_SIZE,
        ],
        phases_off: core.phases,
        phases,
    }
}

/// Boot id of the capture kernel in the containers [`capture_container`] builds.
pub const CAPTURE_BOOT_ID: [u8; 16] = [0xca; 16];

/// What a kdump capture kernel hands over for the sink record `name` it drained: a capture
/// container (container header, the record with `data`, status ok, flagged
/// `RECORD_FLAG_CAPTURE`, then the commit), built with the format's `seal_capture`.
pub fn capture_container(name: &[u8], payload: PayloadType, data: &[u8]) -> Vec<u8> {
    capture_container_of(RecordKind::Sink, name, payload, data)
}

/// [`capture_container`] for a record of any `kind` (a CPU debug sample of a CPU not online in
/// the capture kernel).
pub fn capture_container_of(
    kind: RecordKind,
    name: &[u8],
    payload: PayloadType,
    data: &[u8],
) -> Vec<u8> {
    use cspd_format::capture::*;
    let cap = SlotAllocator::capacity_for(data.len()).unwrap();
    let mut buf = vec![0u8; capture_container_size(cap).unwrap()];
    capture_data_mut(&mut buf, cap).unwrap()[..data.len()].copy_from_slice(data);
    let mut h = RecordHeader::new(kind, name, cap, 0);
    h.status = RecordStatus::Ok;
    h.payload = payload;
    h.length = data.len() as u32;
    let used = seal_capture(&mut buf, CAPTURE_BOOT_ID, &h).unwrap();
    assert_eq!(used, buf.len());
    buf
}

/// The vmcore device dump note of a capture container for the record `name`
/// (`coresight_capture:<name>`).
pub fn capture_note(name: &str, container: &[u8]) -> NoteSpec {
    vmcoredd_note(&format!("coresight_capture:{name}"), container)
}

/// An ELF vmcore whose memory holds `region` at `paddr` (named by vmcoreinfo), with `extra`
/// notes (device dumps) before the others, as fs/proc/vmcore.c puts them.
pub fn vmcore_with(region: &[u8], paddr: u64, extra: Vec<NoteSpec>) -> Vec<u8> {
    let mut notes = extra;
    notes.push(core_note());
    notes.push(vmcoreinfo_note(&vmcoreinfo_text(
        paddr,
        region.len() as u64,
    )));
    elf_core(
        &notes,
        &[LoadSpec {
            paddr,
            size: region.len() as u64,
            chunks: vec![(0, region.to_vec())],
        }],
    )
}

/// An ELF note.
pub struct NoteSpec {
    pub name: Vec<u8>,
    pub kind: u32,
    pub desc: Vec<u8>,
}

pub fn vmcoreinfo_note(text: &str) -> NoteSpec {
    NoteSpec {
        name: b"VMCOREINFO".to_vec(),
        kind: 0,
        desc: text.as_bytes().to_vec(),
    }
}

/// The note `vmcore_add_device_dump()` adds to /proc/vmcore (fs/proc/vmcore.c): a
/// `struct vmcoredd_header` (n_namesz 8, n_descsz, n_type NT_VMCOREDD, name "LINUX" padded to 8,
/// dump_name padded to 44) then the data, the whole padded to a page.
pub fn vmcoredd_note(dump_name: &str, data: &[u8]) -> NoteSpec {
    let data_size = (64 + data.len()).next_multiple_of(4096);
    let mut desc = vec![0u8; 44];
    desc[..dump_name.len()].copy_from_slice(dump_name.as_bytes());
    desc.extend(data);
    desc.resize(data_size - 64 + 44, 0);
    NoteSpec {
        // 5 letters and 2 NULs here, the writer adds the third: n_namesz 8.
        name: b"LINUX\0\0".to_vec(),
        kind: 0x700,
        desc,
    }
}

/// A `PRSTATUS`-like "CORE" note, as kdump and QEMU write per CPU.
pub fn core_note() -> NoteSpec {
    NoteSpec {
        name: b"CORE".to_vec(),
        kind: 1,
        desc: vec![0xcc; 392],
    }
}

/// A `PT_LOAD` segment: `size` bytes of physical memory at `paddr`, with data `chunks`
/// (offset within the segment, bytes); the rest is zero.
pub struct LoadSpec {
    pub paddr: u64,
    pub size: u64,
    pub chunks: Vec<(u64, Vec<u8>)>,
}

fn pad4(v: &mut Vec<u8>) {
    while v.len() % 4 != 0 {
        v.push(0);
    }
}

/// Lays out an ELF64 core: returns the bytes of the headers and notes, and each load's file
/// offset (page-aligned, in the order given).
pub fn elf_layout(notes: &[NoteSpec], loads: &[LoadSpec]) -> (Vec<u8>, Vec<u64>) {
    let mut note_bytes = Vec::new();
    for n in notes {
        let mut name = n.name.clone();
        name.push(0);
        note_bytes.extend((name.len() as u32).to_le_bytes());
        note_bytes.extend((n.desc.len() as u32).to_le_bytes());
        note_bytes.extend(n.kind.to_le_bytes());
        note_bytes.extend(&name);
        pad4(&mut note_bytes);
        note_bytes.extend(&n.desc);
        pad4(&mut note_bytes);
    }
    let phnum = loads.len() + usize::from(!notes.is_empty());
    let phoff = 64u64;
    let notes_off = phoff + 56 * phnum as u64;
    let mut next = (notes_off + note_bytes.len() as u64).next_multiple_of(4096);
    let mut offsets = Vec::new();
    for l in loads {
        offsets.push(next);
        next = (next + l.size).next_multiple_of(4096);
    }
    let mut h = Vec::new();
    h.extend(b"\x7fELF");
    h.extend([2, 1, 1, 0]); // ELFCLASS64, little-endian, version 1, SysV
    h.extend([0u8; 8]);
    h.extend(4u16.to_le_bytes()); // ET_CORE
    h.extend(183u16.to_le_bytes()); // EM_AARCH64
    h.extend(1u32.to_le_bytes());
    h.extend(0u64.to_le_bytes()); // entry
    h.extend(phoff.to_le_bytes());
    h.extend(0u64.to_le_bytes()); // shoff
    h.extend(0u32.to_le_bytes()); // flags
    h.extend(64u16.to_le_bytes()); // ehsize
    h.extend(56u16.to_le_bytes()); // phentsize
    h.extend((phnum as u16).to_le_bytes());
    h.extend(64u16.to_le_bytes()); // shentsize
    h.extend(0u16.to_le_bytes()); // shnum
    h.extend(0u16.to_le_bytes()); // shstrndx
    assert_eq!(h.len(), 64);
    let mut phdr = |kind: u32, offset: u64, vaddr: u64, paddr: u64, size: u64, align: u64| {
        h.extend(kind.to_le_bytes());
        h.extend(if kind == 1 { 7u32 } else { 0 }.to_le_bytes());
        h.extend(offset.to_le_bytes());
        h.extend(vaddr.to_le_bytes());
        h.extend(paddr.to_le_bytes());
        h.extend(size.to_le_bytes());
        h.extend(size.to_le_bytes());
        h.extend(align.to_le_bytes());
    };
    if !notes.is_empty() {
        phdr(4, notes_off, 0, 0, note_bytes.len() as u64, 4);
    }
    for (l, &off) in loads.iter().zip(&offsets) {
        // Linear-map virtual address, as kdump writes it.
        let vaddr = 0xffff_0000_0000_0000u64 + (l.paddr - 0x4000_0000);
        phdr(1, off, vaddr, l.paddr, l.size, 4096);
    }
    h.extend(&note_bytes);
    (h, offsets)
}

/// Builds an ELF64 core in memory.
pub fn elf_core(notes: &[NoteSpec], loads: &[LoadSpec]) -> Vec<u8> {
    let (mut out, offsets) = elf_layout(notes, loads);
    for (l, &off) in loads.iter().zip(&offsets) {
        let end = (off + l.size) as usize;
        if out.len() < end {
            out.resize(end, 0);
        }
        for (rel, bytes) in &l.chunks {
            let at = (off + rel) as usize;
            out[at..at + bytes.len()].copy_from_slice(bytes);
        }
    }
    out
}

/// Writes an ELF64 core to `path` as a sparse file (only headers and chunks are written).
pub fn write_sparse_elf(path: &Path, notes: &[NoteSpec], loads: &[LoadSpec]) -> u64 {
    let (head, offsets) = elf_layout(notes, loads);
    let mut f = File::create(path).unwrap();
    f.write_all(&head).unwrap();
    let mut end = head.len() as u64;
    for (l, &off) in loads.iter().zip(&offsets) {
        for (rel, bytes) in &l.chunks {
            f.seek(SeekFrom::Start(off + rel)).unwrap();
            f.write_all(bytes).unwrap();
        }
        end = end.max(off + l.size);
    }
    f.set_len(end).unwrap();
    end
}

/// The vmcoreinfo text the kernel would publish for a region at `paddr`.
pub fn vmcoreinfo_text(paddr: u64, size: u64) -> String {
    let mut buf = [0u8; VMCOREINFO_TEXT_MAX];
    let n = format_vmcoreinfo(paddr, size, &mut buf).unwrap();
    format!(
        "OSRELEASE=7.3.0-cspd-test\nPAGESIZE=4096\nKERNELOFFSET=3b0000\n{}",
        std::str::from_utf8(&buf[..n]).unwrap()
    )
}

/// A small deterministic PRNG (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % (n as u64).max(1)) as usize
    }
}

/// arm64 page tables (48-bit virtual addresses, 4 KiB pages, four levels) built in memory at
/// physical address `base`, the first page the top level, as a kernel's `swapper_pg_dir`.
pub struct PageTables {
    base: u64,
    bytes: Vec<u8>,
}

impl PageTables {
    /// Empty tables at physical address `base`.
    pub fn new(base: u64) -> Self {
        Self {
            base,
            bytes: vec![0u8; 4096],
        }
    }

    /// Maps the page at virtual address `va` to physical address `pa`, adding the tables the walk
    /// needs.
    pub fn map(&mut self, va: u64, pa: u64) {
        let mut table = 0usize;
        for level in 0..4 {
            let entry = ((va >> (39 - 9 * level)) & 0x1FF) as usize;
            let at = table * 4096 + entry * 8;
            let desc = u64::from_le_bytes(self.bytes[at..at + 8].try_into().unwrap());
            if level == 3 {
                self.bytes[at..at + 8].copy_from_slice(&(pa | 3).to_le_bytes());
            } else if desc == 0 {
                let next = self.bytes.len() / 4096;
                self.bytes.resize(self.bytes.len() + 4096, 0);
                let d = (self.base + next as u64 * 4096) | 3;
                self.bytes[at..at + 8].copy_from_slice(&d.to_le_bytes());
                table = next;
            } else {
                table = ((desc & !0xFFF) - self.base) as usize / 4096;
            }
        }
    }

    /// The tables' memory, from `base` on.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Runs the csdump binary of this build with `args`; fails the test if it panicked.
pub fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> std::process::Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_csdump"));
    for a in args {
        c.arg(a);
    }
    let out = c.output().unwrap();
    assert_ne!(
        out.status.code(),
        Some(101),
        "csdump panicked: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// An ETMv4 saved state whose registers decode the test traces (tests/trace.rs's OpenCSD
/// snapshots): trace ID `0x10 + 2 * cpu`.
pub fn good_etm(cpu: u32) -> etm4x::SavedState {
    let mut s = etm4x::SavedState {
        cpu,
        flags: etm4x::SAVED_REGS_VALID,
        trcconfigr: 0x10C1,
        trctraceidr: 0x10 + 2 * cpu,
        authstatus: 0xCC,
        devarch: cspd_hw::etm4x::DEVARCH_ETMV4,
        ..etm4x::SavedState::default()
    };
    s.idr[0] = 0x28000EA1;
    s.idr[1] = 0x4100F403;
    s.idr[2] = 0x488;
    s
}
