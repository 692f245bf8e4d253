//! Tests of the dump container format: encoders, the parser, and every corruption it must name.

use cspd_format::*;

/// A small deterministic PRNG (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % (n as u64).max(1)) as usize
    }
    fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = self.next() as u8;
        }
    }
}

/// Bit-at-a-time CRC-32 reference, straight from the definition.
fn crc32_reference(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

const BOOT_ID: [u8; 16] = [
    0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01,
];

/// Offsets of the records of the sample region built by [`sample_region`].
struct Layout {
    identity: usize,
    panic: usize,
    sink: usize,
    free: usize,
    cpu: usize,
    commit: usize,
    used: usize,
}

fn sink_data() -> Vec<u8> {
    (0..200u32).map(|i| (i * 7 + 3) as u8).collect()
}

fn identity() -> Identity {
    let mut id = Identity::default();
    id.set_release(b"7.3.0-cspd").unwrap();
    id.set_build_id(&[0xab; 20]).unwrap();
    id.kaslr_offset = 0x1234_0000;
    id.text_addr = 0xffff_8000_8001_0000;
    id.page_offset = 0xffff_0000_0000_0000;
    id.memstart = 0x4000_0000;
    id.kimage_voffset = 0xffff_7fff_c000_0000;
    id.region_paddr = 0x7f00_0000;
    id.region_size = 0x1_0000;
    id
}

/// Writes `data` into the record at `offset` and seals it with `status`.
fn fill_record(region: &mut [u8], offset: usize, data: &[u8], status: RecordStatus, error: i32) {
    let mut h = RecordHeader::decode_at(&region[offset..], offset).unwrap();
    h.status = status;
    h.error = error;
    write_record(&mut region[offset..], &h, data).unwrap();
}

/// Builds a committed region with identity, panic info, a sink, a free slot and a CPU debug
/// record whose callback failed.
fn sample_region() -> (Vec<u8>, Layout) {
    let size = 4096;
    let mut region = vec![0xa5u8; size];
    let ch = ContainerHeader::new(size as u64, BOOT_ID, 7);
    init_region(&mut region, &ch).unwrap();
    let stamp = ch.stamp;

    let identity_off = append_record(
        &mut region,
        &RecordHeader::new(
            RecordKind::Identity,
            b"identity",
            IDENTITY_SIZE as u32,
            stamp,
        ),
    )
    .unwrap();
    let panic_off = append_record(
        &mut region,
        &RecordHeader::new(RecordKind::PanicInfo, b"panic", 256, stamp),
    )
    .unwrap();
    let mut sink = RecordHeader::new(RecordKind::Sink, b"tmc_etf0", 256, stamp);
    sink.cpu = CPU_NONE;
    let sink_off = append_record(&mut region, &sink).unwrap();
    let free_off = append_record(
        &mut region,
        &RecordHeader::new(RecordKind::Free, b"gone", 64, stamp),
    )
    .unwrap();
    let mut cpu = RecordHeader::new(RecordKind::CpuDebug, b"cpu_debug1", 64, stamp);
    cpu.cpu = 1;
    let cpu_off = append_record(&mut region, &cpu).unwrap();

    // Panic time: callbacks fill their slots.
    let mut buf = [0u8; IDENTITY_SIZE];
    let n = identity().encode(&mut buf).unwrap();
    fill_record(&mut region, identity_off, &buf[..n], RecordStatus::Ok, 0);
    let mut buf = [0u8; 256];
    let n = PanicInfo {
        cpu: 2,
        message: b"Oops: test panic",
        truncated: false,
    }
    .encode(&mut buf)
    .unwrap();
    fill_record(&mut region, panic_off, &buf[..n], RecordStatus::Ok, 0);
    fill_record(&mut region, sink_off, &sink_data(), RecordStatus::Ok, 0);
    fill_record(&mut region, cpu_off, &[], RecordStatus::CallbackError, -110);
    let used = write_commit(&mut region).unwrap();
    let commit_off = used - COMMIT_RECORD_SIZE;
    (
        region,
        Layout {
            identity: identity_off,
            panic: panic_off,
            sink: sink_off,
            free: free_off,
            cpu: cpu_off,
            commit: commit_off,
            used,
        },
    )
}

fn collect(region: &[u8]) -> Vec<Result<Record<'_>, FormatError>> {
    parse_region(region).unwrap().records().collect()
}

/// Rewrites the record header at `offset` with `f` applied, with a valid header CRC.
fn rewrite_header(region: &mut [u8], offset: usize, f: impl FnOnce(&mut RecordHeader)) {
    let mut h = RecordHeader::decode_at(&region[offset..], offset).unwrap();
    f(&mut h);
    region[offset..offset + RECORD_HEADER_SIZE].copy_from_slice(&h.encode());
}

/// Sets a raw u32 in a record header and fixes the header CRC.
fn poke_header_u32(region: &mut [u8], offset: usize, field: usize, value: u32) {
    region[offset + field..offset + field + 4].copy_from_slice(&value.to_le_bytes());
    let crc_at = offset + 72;
    region[crc_at..crc_at + 4].fill(0);
    let crc = crc32(&region[offset..offset + RECORD_HEADER_SIZE]);
    region[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
}

fn errors(items: &[Result<Record<'_>, FormatError>]) -> Vec<FormatError> {
    items.iter().filter_map(|r| r.err()).collect()
}

fn ok_offsets(items: &[Result<Record<'_>, FormatError>]) -> Vec<usize> {
    items
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|r| r.offset))
        .collect()
}

#[test]
fn crc32_known_vectors() {
    assert_eq!(crc32(b""), 0);
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(
        crc32(b"The quick brown fox jumps over the lazy dog"),
        0x414F_A339
    );
}

#[test]
fn crc32_matches_reference_and_streams() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..200 {
        let mut data = vec![0u8; rng.below(300)];
        rng.fill(&mut data);
        let want = crc32_reference(&data);
        assert_eq!(crc32(&data), want);
        // Streaming in random pieces gives the same value.
        let mut c = Crc32::new();
        let mut rest = &data[..];
        while !rest.is_empty() {
            let n = rng.below(rest.len() + 1).max(1);
            c.update(&rest[..n]);
            rest = &rest[n..];
        }
        assert_eq!(c.finish(), want);
    }
    let mut c = Crc32::new();
    c.update(b"abc");
    c.update_zeros(13);
    let mut v = b"abc".to_vec();
    v.extend([0u8; 13]);
    assert_eq!(c.finish(), crc32_reference(&v));
}

#[test]
fn container_header_round_trip_and_layout() {
    let h = ContainerHeader::new(0x10_0000, BOOT_ID, 42);
    assert_eq!(
        h.stamp,
        u64::from_le_bytes(BOOT_ID[..8].try_into().unwrap())
    );
    let b = h.encode();
    assert_eq!(&b[..8], b"CSPDUMP\0");
    assert_eq!(u16::from_le_bytes([b[8], b[9]]), 3);
    assert_eq!(u16::from_le_bytes([b[10], b[11]]), 64);
    assert_eq!(u64::from_le_bytes(b[16..24].try_into().unwrap()), 0x10_0000);
    assert_eq!(&b[24..40], &BOOT_ID);
    assert_eq!(u64::from_le_bytes(b[48..56].try_into().unwrap()), 42);
    assert_eq!(u32::from_le_bytes(b[56..60].try_into().unwrap()), 64);
    let mut z = b;
    z[60..64].fill(0);
    assert_eq!(u32::from_le_bytes(b[60..64].try_into().unwrap()), crc32(&z));
    assert_eq!(ContainerHeader::decode(&b).unwrap(), h);
}

#[test]
fn record_header_round_trip_and_layout() {
    let mut h = RecordHeader::new(RecordKind::Source, b"etm0", 1024, 0xdead_beef_0000_0001);
    h.status = RecordStatus::Partial;
    h.cpu = 3;
    h.error = -5;
    h.length = 1000;
    h.data_crc = 0x1234_5678;
    let b = h.encode();
    assert_eq!(&b[..4], b"CSPR");
    assert_eq!(u16::from_le_bytes([b[4], b[5]]), RecordKind::Source as u16);
    assert_eq!(
        u16::from_le_bytes([b[6], b[7]]),
        RecordStatus::Partial as u16
    );
    assert_eq!(i32::from_le_bytes(b[12..16].try_into().unwrap()), -5);
    assert_eq!(&b[40..44], b"etm0");
    assert!(b[44..72].iter().all(|&x| x == 0));
    let d = RecordHeader::decode(&b).unwrap();
    assert_eq!(d, h);
    assert_eq!(d.name_bytes(), b"etm0");
    // A 40-byte name is cut to 32 bytes.
    let long = RecordHeader::new(RecordKind::Other, &[b'x'; 40], 8, 0);
    assert_eq!(long.name_bytes(), &[b'x'; 32][..]);
}

#[test]
fn kinds_and_statuses_convert() {
    for v in 0..=20u16 {
        if let Ok(k) = RecordKind::try_from(v) {
            assert_eq!(k as u16, v);
        } else {
            assert!(!(1..=8).contains(&v));
        }
        if let Ok(s) = RecordStatus::try_from(v) {
            assert_eq!(s as u16, v);
        } else {
            assert!(v > 4);
        }
    }
}

#[test]
fn payloads_round_trip() {
    let id = identity();
    let mut buf = [0u8; IDENTITY_SIZE];
    assert_eq!(id.encode(&mut buf).unwrap(), IDENTITY_SIZE);
    let d = Identity::decode(&buf).unwrap();
    assert_eq!(d, id);
    assert_eq!(d.release_bytes(), b"7.3.0-cspd");
    assert_eq!(d.build_id_bytes(), &[0xab; 20]);
    assert!(matches!(
        id.encode(&mut [0u8; IDENTITY_SIZE - 1]),
        Err(FormatError::BufferTooSmall {
            needed: IDENTITY_SIZE,
            ..
        })
    ));
    let mut id2 = Identity::default();
    assert!(id2.set_release(&[b'r'; 65]).is_err());
    assert!(id2.set_build_id(&[0; 21]).is_err());

    let msg = b"Kernel panic - not syncing: sysrq triggered crash";
    let p = PanicInfo {
        cpu: 5,
        message: msg,
        truncated: false,
    };
    let mut buf = [0u8; PANIC_INFO_MAX_SIZE];
    let n = p.encode(&mut buf).unwrap();
    assert_eq!(n, PANIC_INFO_HEADER_SIZE + msg.len());
    assert_eq!(PanicInfo::decode(&buf[..n]).unwrap(), p);

    // A message longer than the maximum is cut and flagged.
    let long = vec![b'm'; 2000];
    let p = PanicInfo {
        cpu: 0,
        message: &long,
        truncated: false,
    };
    let n = p.encode(&mut buf).unwrap();
    assert_eq!(n, PANIC_INFO_MAX_SIZE);
    let d = PanicInfo::decode(&buf[..n]).unwrap();
    assert!(d.truncated);
    assert_eq!(d.message, &long[..PANIC_MESSAGE_MAX]);
    // A small buffer cuts it too.
    let mut small = [0u8; PANIC_INFO_HEADER_SIZE + 4];
    let n = PanicInfo {
        cpu: 0,
        message: b"abcdefgh",
        truncated: false,
    }
    .encode(&mut small)
    .unwrap();
    let d = PanicInfo::decode(&small[..n]).unwrap();
    assert_eq!((d.message, d.truncated), (&b"abcd"[..], true));
    // A stored length past the payload is refused.
    assert!(matches!(
        PanicInfo::decode(&small[..n - 1]),
        Err(FormatError::Truncated { .. })
    ));

    let c = Commit {
        stamp: 1,
        sequence: 2,
        records: 3,
        headers_crc: 4,
        used_bytes: 5,
    };
    let mut buf = [0u8; COMMIT_SIZE];
    assert_eq!(c.encode(&mut buf).unwrap(), COMMIT_SIZE);
    assert_eq!(Commit::decode(&buf).unwrap(), c);
    buf[3] ^= 1;
    assert!(matches!(
        Commit::decode_at(&buf, 0x200),
        Err(FormatError::CommitCrc { offset: 0x200, .. })
    ));
}

#[test]
fn full_container_round_trip() {
    let (region, l) = sample_region();
    let r = parse_region(&region).unwrap();
    assert_eq!(r.header().sequence, 7);
    assert_eq!(r.header().boot_id, BOOT_ID);
    let items = collect(&region);
    assert!(errors(&items).is_empty(), "{:?}", errors(&items));
    let recs: Vec<_> = items.into_iter().map(Result::unwrap).collect();
    // Free slot skipped; commit last.
    let kinds: Vec<_> = recs.iter().map(|r| r.header.kind).collect();
    assert_eq!(
        kinds,
        [
            RecordKind::Identity,
            RecordKind::PanicInfo,
            RecordKind::Sink,
            RecordKind::CpuDebug,
            RecordKind::Commit
        ]
    );
    assert_eq!(recs[0].offset, l.identity);
    assert_eq!(Identity::decode(recs[0].data).unwrap(), identity());
    let p = PanicInfo::decode(recs[1].data).unwrap();
    assert_eq!((p.cpu, p.message), (2, &b"Oops: test panic"[..]));
    assert_eq!(recs[2].data, &sink_data()[..]);
    assert_eq!(recs[2].header.name_bytes(), b"tmc_etf0");
    assert_eq!(recs[2].header.capacity, 256);
    assert_eq!(recs[3].header.status, RecordStatus::CallbackError);
    assert_eq!(recs[3].header.error, -110);
    assert_eq!(recs[3].header.cpu, 1);
    assert_eq!(recs[4].offset, l.commit);
    let c = Commit::decode(recs[4].data).unwrap();
    assert_eq!(c.records, 5);
    assert_eq!(c.used_bytes, l.used as u64);
    // Records are back to back.
    assert_eq!(l.panic, l.identity + RECORD_HEADER_SIZE + IDENTITY_SIZE);
    assert_eq!(l.sink, l.panic + RECORD_HEADER_SIZE + 256);

    let with_free: Vec<_> = parse_region(&region)
        .unwrap()
        .records_with_free()
        .map(Result::unwrap)
        .collect();
    assert_eq!(with_free.len(), 6);
    assert_eq!(with_free[3].offset, l.free);

    let s = validate(&region).unwrap();
    assert_eq!(s.records, 4);
    assert_eq!(s.ok, 3);
    assert_eq!(s.free, 1);
    assert_eq!(s.errors, 0);
    assert!(s.committed && s.is_clean());
    assert_eq!(s.used_bytes, l.used);
    let _ = l.cpu;
}

#[test]
fn region_may_be_followed_by_other_bytes() {
    let (mut region, _) = sample_region();
    region.extend_from_slice(&[0xffu8; 100]);
    assert!(validate(&region).unwrap().is_clean());
}

#[test]
fn bad_magic() {
    let (mut region, _) = sample_region();
    region[0] = b'X';
    assert_eq!(
        parse_region(&region).unwrap_err(),
        FormatError::BadMagic { offset: 0 }
    );
    assert_eq!(
        validate(&[0u8; 4096]).unwrap_err(),
        FormatError::BadMagic { offset: 0 }
    );
}

#[test]
fn unsupported_version() {
    let (mut region, _) = sample_region();
    region[8] = 4;
    let e = parse_region(&region).unwrap_err();
    assert_eq!(
        e,
        FormatError::UnsupportedVersion {
            offset: 0,
            version: 4
        }
    );
    assert!(
        e.to_string().contains("unsupported format version 4"),
        "{e}"
    );
    assert!(e.to_string().contains("newer csdump"), "{e}");
    // A region of the first layout, whose records do not say their payload type, is refused
    // with a message that says why.
    region[8] = 1;
    let e = parse_region(&region).unwrap_err();
    assert_eq!(
        e,
        FormatError::UnsupportedVersion {
            offset: 0,
            version: 1
        }
    );
    assert!(
        e.to_string().contains("older than this reader's 2 to 3"),
        "{e}"
    );
    assert!(e.to_string().contains("payload type"), "{e}");
}

#[test]
fn version_2_regions_are_still_read() {
    // A region of the layout before the phase times record: same frame, read as it is.
    let (mut region, _) = sample_region();
    let mut h = ContainerHeader::decode(&region).unwrap();
    assert_eq!(h.version, FORMAT_VERSION);
    h.version = 2;
    region[..CONTAINER_HEADER_SIZE].copy_from_slice(&h.encode());
    let parsed = parse_region(&region).unwrap();
    assert_eq!(parsed.header().version, 2);
    assert!(validate(&region).unwrap().is_clean());
}

#[test]
fn phase_times_round_trip_and_reject_bad_payloads() {
    let mut p = Phases {
        frequency: 62_500_000,
        entry: 10_000,
        ..Phases::default()
    };
    for (i, phase) in Phase::ALL.iter().enumerate() {
        let t = p.get_mut(*phase);
        t.start = 10_000 + 1000 * i as u64;
        t.end = t.start + 625 * (i as u64 + 1);
        t.callbacks = i as u32;
        t.errors = u32::from(i == 2);
    }
    let mut buf = vec![0xA5u8; PHASES_SIZE + 3];
    assert_eq!(p.encode(&mut buf), Ok(PHASES_SIZE));
    assert_eq!(buf[PHASES_SIZE], 0xA5);
    assert_eq!(Phases::decode(&buf), Ok(p));
    // 625 ticks at 62.5 MHz are 10 us.
    assert_eq!(p.duration_ns(Phase::StopSources), Some(10_000));
    assert_eq!(p.duration_ns(Phase::Commit), Some(50_000));
    assert_eq!(p.total_ns(), Some((4000 + 3125) * 16));
    assert_eq!(Phase::SampleCpus.name(), "sample-cpus");
    // Unknown frequency: no duration, still decodes.
    let mut q = p;
    q.frequency = 0;
    q.encode(&mut buf).unwrap();
    assert_eq!(
        Phases::decode(&buf).unwrap().duration_ns(Phase::Other),
        None
    );
    // Bad payloads are named.
    assert_eq!(
        Phases::decode(&buf[..PHASES_SIZE - 1]),
        Err(PhasesError::TooShort(PHASES_SIZE - 1))
    );
    let mut bad = buf.clone();
    bad[0] = 7;
    assert_eq!(Phases::decode(&bad), Err(PhasesError::Version(7)));
    let mut bad = buf.clone();
    bad[4] = 4;
    assert!(matches!(
        Phases::decode(&bad),
        Err(PhasesError::Layout { count: 4, .. })
    ));
    let mut bad = buf.clone();
    // The drain phase (index 2) ends before it starts.
    let at = 24 + 2 * 24 + 8;
    bad[at..at + 8].copy_from_slice(&1u64.to_le_bytes());
    assert_eq!(
        Phases::decode(&bad),
        Err(PhasesError::Inconsistent(Phase::DrainSinks))
    );
    assert!(PhasesError::Inconsistent(Phase::DrainSinks)
        .to_string()
        .contains("drain-sinks"));
    // A phase record is a record kind of its own, known to the frame.
    assert_eq!(RecordKind::try_from(9), Ok(RecordKind::Phases));
    assert_eq!(RecordKind::Phases.name(), "phases");
}

#[test]
fn record_header_carries_its_payload_type() {
    let mut h = RecordHeader::new(RecordKind::Sink, b"c_sink", 64, 7);
    assert_eq!(h.payload, PayloadType::Opaque);
    h.payload = PayloadType::Tmc;
    let b = h.encode();
    assert_eq!(u16::from_le_bytes([b[76], b[77]]), 1);
    assert_eq!(RecordHeader::decode(&b).unwrap().payload, PayloadType::Tmc);
    for (p, v) in [
        (PayloadType::Opaque, 0u16),
        (PayloadType::Tmc, 1),
        (PayloadType::Etm4x, 2),
        (PayloadType::CpuDebug, 3),
        (PayloadType::Etr, 4),
    ] {
        assert_eq!(PayloadType::try_from(v), Ok(p));
    }
    // A payload type this version does not know is an error that names the record.
    let mut b = h.encode();
    b[76] = 9;
    let crc = {
        let mut z = b;
        z[72..76].fill(0);
        crc32(&z)
    };
    b[72..76].copy_from_slice(&crc.to_le_bytes());
    let e = RecordHeader::decode_at(&b, 0x40).unwrap_err();
    assert_eq!(
        e,
        FormatError::UnknownPayload {
            offset: 0x40,
            payload: 9
        }
    );
    assert_eq!(e.name(), "unknown-payload");
    assert!(
        e.to_string().contains("unknown record payload type 9"),
        "{e}"
    );
}

#[test]
fn slot_allocator_keeps_room_for_the_commit() {
    let mut a = SlotAllocator::new(0x100, 0x100 + RECORD_HEADER_SIZE + 64 + COMMIT_RECORD_SIZE);
    assert_eq!(SlotAllocator::capacity_for(60), Some(64));
    assert_eq!(SlotAllocator::capacity_for(usize::MAX), None);
    assert_eq!(a.reserve(64), Ok(0x100));
    assert_eq!(a.used(), 0x100 + RECORD_HEADER_SIZE + 64);
    assert!(matches!(
        a.reserve(8),
        Err(FormatError::BufferTooSmall { .. })
    ));
    assert!(matches!(
        a.reserve(12),
        Err(FormatError::BadCapacity { .. })
    ));
}

#[test]
fn init_with_core_records_writes_what_the_kernel_writes() {
    let mut r = vec![0xEEu8; 8192];
    let ch = ContainerHeader::new(8192, BOOT_ID, 5);
    let mut id = Identity::default();
    id.set_release(b"7.3.0").unwrap();
    let slots = init_with_core_records(&mut r, &ch, &id).unwrap();
    assert_eq!(slots.panic_info, 64 + RECORD_HEADER_SIZE + IDENTITY_SIZE);
    assert_eq!(
        slots.phases,
        slots.panic_info + RECORD_HEADER_SIZE + PANIC_INFO_MAX_SIZE
    );
    assert_eq!(
        slots.modules,
        slots.phases + RECORD_HEADER_SIZE + PHASES_SIZE
    );
    // An eighth of the 8 KiB region: 4 modules.
    assert_eq!(modules_capacity(8192), 4);
    assert_eq!(modules_capacity(256 << 10), MODULES_MAX);
    assert_eq!(
        slots.first_free,
        slots.modules + RECORD_HEADER_SIZE + modules_size(4)
    );
    let region = parse_region(&r).unwrap();
    let recs: Vec<_> = region.records().collect();
    let first = recs[0].as_ref().unwrap();
    assert_eq!(first.header.kind, RecordKind::Identity);
    assert_eq!(
        Identity::decode(first.data).unwrap().release_bytes(),
        b"7.3.0"
    );
    let panic = recs[1].as_ref().unwrap();
    assert_eq!(panic.header.kind, RecordKind::PanicInfo);
    assert_eq!(panic.header.status, RecordStatus::NotRun);
    assert_eq!(panic.offset, slots.panic_info);
    let phases = recs[2].as_ref().unwrap();
    assert_eq!(phases.header.kind, RecordKind::Phases);
    assert_eq!(phases.header.status, RecordStatus::NotRun);
    assert_eq!(phases.offset, slots.phases);
    let modules = recs[3].as_ref().unwrap();
    assert_eq!(modules.header.kind, RecordKind::Modules);
    assert_eq!(modules.header.status, RecordStatus::Ok);
    assert_eq!(modules.offset, slots.modules);
    let list = Modules::decode(modules.data).unwrap();
    assert_eq!((list.count, list.capacity, list.dropped), (0, 4, 0));
    // Not committed yet: the chain ends without a commit.
    assert!(matches!(recs[4], Err(FormatError::MissingCommit { .. })));
    write_commit(&mut r).unwrap();
    assert!(validate(&r).unwrap().is_clean());
}

#[test]
fn truncated_region() {
    let (region, _) = sample_region();
    assert_eq!(
        parse_region(&region[..4000]).unwrap_err(),
        FormatError::Truncated {
            offset: 0,
            needed: 4096,
            available: 4000
        }
    );
    assert!(matches!(
        parse_region(&region[..20]).unwrap_err(),
        FormatError::Truncated { offset: 0, .. }
    ));
    assert!(parse_region(&region[..3]).is_err());
    assert!(parse_region(&[]).is_err());
}

#[test]
fn container_header_crc() {
    let (mut region, _) = sample_region();
    region[30] ^= 0x40;
    let e = parse_region(&region).unwrap_err();
    assert!(
        matches!(e, FormatError::HeaderCrc { offset: 0, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("container header CRC"));
}

#[test]
fn bad_first_record() {
    let (mut region, _) = sample_region();
    let mut h = ContainerHeader::decode(&region).unwrap();
    h.first_record = 12;
    region[..64].copy_from_slice(&h.encode());
    assert!(matches!(
        parse_region(&region).unwrap_err(),
        FormatError::BadFirstRecord {
            first_record: 12,
            ..
        }
    ));
}

#[test]
fn record_header_crc_is_named_and_others_still_read() {
    let (mut region, l) = sample_region();
    region[l.panic + 45] ^= 1; // a name byte
    let items = collect(&region);
    let errs = errors(&items);
    assert!(
        matches!(errs[0], FormatError::RecordHeaderCrc { offset, .. } if offset == l.panic),
        "{errs:?}"
    );
    // Identity, sink, cpu debug still read; the commit sees one header fewer and a bad CRC.
    assert_eq!(ok_offsets(&items), [l.identity, l.sink, l.cpu]);
    assert!(matches!(
        errs[1],
        FormatError::CommitCount { offset, stored: 5, counted: 4 } if offset == l.commit
    ));
    let s = validate(&region).unwrap();
    assert_eq!((s.records, s.errors, s.committed), (3, 2, false));
    assert!(matches!(
        s.first_error,
        Some(FormatError::RecordHeaderCrc { .. })
    ));
}

#[test]
fn data_crc_is_named() {
    let (mut region, l) = sample_region();
    region[l.sink + RECORD_HEADER_SIZE + 10] ^= 0xff;
    let items = collect(&region);
    let errs = errors(&items);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(matches!(errs[0], FormatError::DataCrc { offset, .. } if offset == l.sink));
    assert_eq!(ok_offsets(&items), [l.identity, l.panic, l.cpu, l.commit]);
    // Salvage still gives the damaged data.
    let r = parse_region(&region).unwrap();
    let s = r.salvage(l.sink).unwrap();
    assert_eq!(s.data.len(), 200);
    assert_ne!(s.data, &sink_data()[..]);
}

#[test]
fn bytes_past_length_are_not_covered() {
    let (mut region, l) = sample_region();
    // Inside the capacity but past the length: no CRC covers it, no error.
    region[l.sink + RECORD_HEADER_SIZE + 250] ^= 0xff;
    assert!(validate(&region).unwrap().is_clean());
}

#[test]
fn length_exceeds_capacity() {
    let (mut region, l) = sample_region();
    poke_header_u32(&mut region, l.sink, 20, 300);
    let items = collect(&region);
    let errs = errors(&items);
    assert_eq!(
        errs[0],
        FormatError::LengthExceedsCapacity {
            offset: l.sink,
            length: 300,
            capacity: 256
        }
    );
    // The capacity still leads to the next record.
    assert_eq!(ok_offsets(&items), [l.identity, l.panic, l.cpu]);
    assert!(matches!(errs[1], FormatError::CommitHeadersCrc { offset, .. } if offset == l.commit));
}

#[test]
fn unknown_kind_and_status() {
    let (mut region, l) = sample_region();
    let mut raw = region[l.panic..l.panic + 4].to_vec();
    raw.extend(99u16.to_le_bytes());
    raw.extend(&region[l.panic + 6..l.panic + 8]);
    poke_header_u32(
        &mut region,
        l.panic,
        4,
        u32::from_le_bytes(raw[4..8].try_into().unwrap()),
    );
    let items = collect(&region);
    assert_eq!(
        errors(&items)[0],
        FormatError::UnknownKind {
            offset: l.panic,
            kind: 99
        }
    );
    assert_eq!(ok_offsets(&items), [l.identity, l.sink, l.cpu]);

    let (mut region, l) = sample_region();
    let kind_status = u32::from(RecordKind::Sink as u16) | (77u32 << 16);
    poke_header_u32(&mut region, l.sink, 4, kind_status);
    let items = collect(&region);
    assert_eq!(
        errors(&items)[0],
        FormatError::UnknownStatus {
            offset: l.sink,
            status: 77
        }
    );
}

#[test]
fn stale_record() {
    let (mut region, l) = sample_region();
    rewrite_header(&mut region, l.cpu, |h| h.stamp ^= 1);
    let items = collect(&region);
    let errs = errors(&items);
    let stamp = ContainerHeader::decode(&region).unwrap().stamp;
    assert_eq!(
        errs[0],
        FormatError::StaleRecord {
            offset: l.cpu,
            stamp: stamp ^ 1,
            expected: stamp
        }
    );
    assert!(errs[0].to_string().contains("stale"));
    assert_eq!(ok_offsets(&items), [l.identity, l.panic, l.sink]);
    // The commit covered the old header.
    assert!(matches!(errs[1], FormatError::CommitHeadersCrc { offset, .. } if offset == l.commit));
}

#[test]
fn missing_commit() {
    let (mut region, l) = sample_region();
    region[l.commit..l.used].fill(0);
    let items = collect(&region);
    assert_eq!(
        errors(&items),
        [FormatError::MissingCommit { offset: l.commit }]
    );
    assert_eq!(ok_offsets(&items), [l.identity, l.panic, l.sink, l.cpu]);
    let s = validate(&region).unwrap();
    assert!(!s.committed && !s.is_clean());
    assert!(FormatError::MissingCommit { offset: l.commit }
        .to_string()
        .contains("without a commit"));
}

#[test]
fn region_that_ends_exactly_at_the_last_record_misses_commit() {
    let (region, l) = sample_region();
    let mut h = ContainerHeader::decode(&region).unwrap();
    h.region_size = l.commit as u64;
    let mut cut = region[..l.commit].to_vec();
    cut[..64].copy_from_slice(&h.encode());
    assert_eq!(
        errors(&collect(&cut)),
        [FormatError::MissingCommit { offset: l.commit }]
    );
}

#[test]
fn commit_crc() {
    let (mut region, l) = sample_region();
    // Change the commit payload and re-seal the data CRC, so only the commit's own CRC fails.
    let payload = l.commit + RECORD_HEADER_SIZE;
    region[payload + 16] ^= 1;
    let h = RecordHeader::decode_at(&region[l.commit..], l.commit).unwrap();
    seal_record(&mut region[l.commit..], &h).unwrap();
    let items = collect(&region);
    assert!(matches!(
        errors(&items)[..],
        [FormatError::CommitCrc { offset, .. }] if offset == l.commit
    ));

    // Without re-sealing, the commit record's data CRC names it.
    let (mut region, l) = sample_region();
    region[l.commit + RECORD_HEADER_SIZE + 16] ^= 1;
    assert!(matches!(
        errors(&collect(&region))[..],
        [FormatError::DataCrc { offset, .. }] if offset == l.commit
    ));
}

fn rewrite_commit(region: &mut [u8], l: &Layout, f: impl FnOnce(&mut Commit)) {
    let payload = l.commit + RECORD_HEADER_SIZE;
    let mut c = Commit::decode(&region[payload..payload + COMMIT_SIZE]).unwrap();
    f(&mut c);
    c.encode(&mut region[payload..payload + COMMIT_SIZE])
        .unwrap();
    let h = RecordHeader::decode_at(&region[l.commit..], l.commit).unwrap();
    seal_record(&mut region[l.commit..], &h).unwrap();
}

#[test]
fn commit_count_and_fields() {
    let (mut region, l) = sample_region();
    rewrite_commit(&mut region, &l, |c| c.records = 9);
    assert_eq!(
        errors(&collect(&region)),
        [FormatError::CommitCount {
            offset: l.commit,
            stored: 9,
            counted: 5
        }]
    );
    let (mut region, l) = sample_region();
    rewrite_commit(&mut region, &l, |c| c.headers_crc ^= 1);
    assert!(matches!(
        errors(&collect(&region))[..],
        [FormatError::CommitHeadersCrc { offset, .. }] if offset == l.commit
    ));
    let (mut region, l) = sample_region();
    rewrite_commit(&mut region, &l, |c| c.sequence = 8);
    assert!(matches!(
        errors(&collect(&region))[..],
        [FormatError::CommitMismatch { offset, field: "sequence", stored: 8, expected: 7 }] if offset == l.commit
    ));
    let (mut region, l) = sample_region();
    rewrite_commit(&mut region, &l, |c| c.used_bytes += 8);
    assert!(matches!(
        errors(&collect(&region))[..],
        [FormatError::CommitMismatch {
            field: "used bytes",
            ..
        }]
    ));
}

#[test]
fn truncated_record() {
    let (mut region, l) = sample_region();
    // The sink now claims a data area past the end of the region.
    poke_header_u32(&mut region, l.sink, 16, 0x10_0000);
    let items = collect(&region);
    let errs = errors(&items);
    assert!(
        matches!(errs[0], FormatError::Truncated { offset, needed, .. } if offset == l.sink && needed == RECORD_HEADER_SIZE + 0x10_0000),
        "{errs:?}"
    );
    // The walk finds the next header by itself.
    assert_eq!(ok_offsets(&items), [l.identity, l.panic, l.cpu]);
}

#[test]
fn bad_capacity() {
    let (mut region, l) = sample_region();
    poke_header_u32(&mut region, l.sink, 16, 255);
    let items = collect(&region);
    assert_eq!(
        errors(&items)[0],
        FormatError::BadCapacity {
            offset: l.sink,
            capacity: 255
        }
    );
}

#[test]
fn bad_record_magic_then_resync() {
    let (mut region, l) = sample_region();
    region[l.panic..l.panic + 4].copy_from_slice(b"JUNK");
    let items = collect(&region);
    let errs = errors(&items);
    assert_eq!(
        errs[0],
        FormatError::BadRecordMagic {
            offset: l.panic,
            found: u32::from_le_bytes(*b"JUNK")
        }
    );
    assert_eq!(ok_offsets(&items), [l.identity, l.sink, l.cpu]);

    // A zeroed header in the middle is a hole, not the end.
    let (mut region, l) = sample_region();
    region[l.sink..l.sink + RECORD_HEADER_SIZE].fill(0);
    let items = collect(&region);
    assert_eq!(
        errors(&items)[0],
        FormatError::BadRecordMagic {
            offset: l.sink,
            found: 0
        }
    );
    assert_eq!(ok_offsets(&items), [l.identity, l.panic, l.cpu]);
}

#[test]
fn chain_end_and_append_limits() {
    let size = 1024;
    let mut region = vec![0u8; size];
    let ch = ContainerHeader::new(size as u64, BOOT_ID, 0);
    init_region(&mut region, &ch).unwrap();
    let e = chain_end(&region).unwrap();
    assert_eq!((e.offset, e.records), (CONTAINER_HEADER_SIZE, 0));
    // A fresh region has no commit yet.
    assert_eq!(
        errors(&collect(&region)),
        [FormatError::MissingCommit { offset: 64 }]
    );
    // Room for the commit is always kept.
    let room = size - 64 - RECORD_HEADER_SIZE - COMMIT_RECORD_SIZE;
    let too_big = RecordHeader::new(RecordKind::Other, b"x", room as u32 + 8, ch.stamp);
    assert!(matches!(
        append_record(&mut region, &too_big),
        Err(FormatError::BufferTooSmall { .. })
    ));
    let fits = RecordHeader::new(RecordKind::Other, b"x", room as u32, ch.stamp);
    assert_eq!(append_record(&mut region, &fits).unwrap(), 64);
    let odd = RecordHeader::new(RecordKind::Other, b"x", 0, ch.stamp);
    // No room left for even an empty record plus the commit.
    assert!(append_record(&mut region, &odd).is_err());
    assert_eq!(write_commit(&mut region).unwrap(), size);
    let s = validate(&region).unwrap();
    assert!(s.is_clean());
    assert_eq!((s.records, s.ok), (1, 0));
}

#[test]
fn vmcoreinfo_lines() {
    let mut buf = [0u8; VMCOREINFO_TEXT_MAX];
    let n = format_vmcoreinfo(0x7f00_0000, 0x20_0000, &mut buf).unwrap();
    assert_eq!(
        &buf[..n],
        b"CSPD_REGION_PADDR=0x7f000000\nCSPD_REGION_SIZE=0x200000\n"
    );
    let n = format_vmcoreinfo(u64::MAX, 0, &mut buf).unwrap();
    assert_eq!(
        &buf[..n],
        b"CSPD_REGION_PADDR=0xffffffffffffffff\nCSPD_REGION_SIZE=0x0\n"
    );
    assert_eq!(n, VMCOREINFO_TEXT_MAX - 15);
    assert!(format_vmcoreinfo(1, 1, &mut [0u8; 10]).is_err());

    let text = b"OSRELEASE=7.3.0\nKERNELOFFSET=2a0000\nCSPD_REGION_PADDR=0x7f000000\nCSPD_REGION_SIZE=0x200000\n\0\0";
    assert_eq!(
        vmcoreinfo_hex(text, VMCOREINFO_PADDR_KEY),
        Some(0x7f00_0000)
    );
    assert_eq!(vmcoreinfo_hex(text, VMCOREINFO_SIZE_KEY), Some(0x20_0000));
    assert_eq!(
        vmcoreinfo_hex(text, VMCOREINFO_KERNELOFFSET_KEY),
        Some(0x2a_0000)
    );
    assert_eq!(vmcoreinfo_field(text, "OSRELEASE"), Some(&b"7.3.0"[..]));
    assert_eq!(vmcoreinfo_hex(text, "MISSING"), None);
    assert_eq!(
        vmcoreinfo_hex(b"CSPD_REGION_SIZE=0xzz\n", "CSPD_REGION_SIZE"),
        None
    );
    assert_eq!(parse_hex(b"0x10000000000000000"), None);
}

#[test]
fn errors_display_offsets() {
    let e = FormatError::DataCrc {
        offset: 0x1a0,
        stored: 1,
        computed: 2,
    };
    assert_eq!(e.offset(), Some(0x1a0));
    let s = e.to_string();
    assert!(s.starts_with("offset 0x1a0:"), "{s}");
    assert!(s.contains("data CRC"));
    assert_eq!(e.name(), "data-crc");
}

/// Walks a region fully; the walk must end within a bound set by the region size.
fn walk(bytes: &[u8]) -> usize {
    let _ = validate(bytes);
    let _ = chain_end(bytes);
    let Ok(r) = parse_region(bytes) else {
        return 0;
    };
    let mut n = 0;
    for item in r.records_with_free() {
        if let Ok(rec) = item {
            assert!(rec.data.len() <= rec.header.capacity as usize);
            let _ = Identity::decode(rec.data);
            let _ = PanicInfo::decode(rec.data);
            let _ = Commit::decode(rec.data);
        }
        n += 1;
        assert!(n <= bytes.len() / RECORD_ALIGN + 2, "walk does not end");
    }
    for off in (0..bytes.len()).step_by(8) {
        let _ = r.salvage(off);
    }
    n
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0xfeed_face_cafe_beef);
    for _ in 0..2000 {
        let mut buf = vec![0u8; rng.below(600)];
        rng.fill(&mut buf);
        // Half the time, give it a valid container header so the record walk runs.
        if buf.len() >= 64 && rng.below(2) == 0 {
            let h = ContainerHeader::new(rng.below(buf.len() + 64) as u64, BOOT_ID, 1);
            buf[..64].copy_from_slice(&h.encode());
        }
        walk(&buf);
        let _ = RecordHeader::decode(&buf);
        let _ = Identity::decode(&buf);
        let _ = PanicInfo::decode(&buf);
    }
}

#[test]
fn mutated_regions_never_panic() {
    let (region, _) = sample_region();
    let mut rng = Rng(42);
    for i in 0..3000 {
        let mut buf = region.clone();
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(buf.len());
            buf[at] = rng.next() as u8;
        }
        if i % 5 == 0 {
            buf.truncate(rng.below(buf.len()));
        }
        // Keep the container header valid most of the time so the walk is exercised.
        if buf.len() >= 64 && i % 3 != 0 {
            let h = ContainerHeader::new(4096, BOOT_ID, 7);
            buf[..64].copy_from_slice(&h.encode());
        }
        walk(&buf);
    }
}

#[test]
fn write_record_seals_data_and_refuses_more_than_capacity() {
    let mut slot = vec![0u8; RECORD_HEADER_SIZE + 16];
    let h = RecordHeader::new(RecordKind::Other, b"w", 16, 7);
    let written = write_record(&mut slot, &h, b"0123456789").unwrap();
    assert_eq!(written.length, 10);
    assert_eq!(written.data_crc, crc32(b"0123456789"));
    assert_eq!(
        &slot[RECORD_HEADER_SIZE..RECORD_HEADER_SIZE + 10],
        b"0123456789"
    );
    assert_eq!(RecordHeader::decode(&slot).unwrap(), written);

    let before = slot.clone();
    let err = write_record(&mut slot, &h, &[1u8; 17]).unwrap_err();
    assert!(
        matches!(
            err,
            FormatError::FieldTooLong {
                length: 17,
                max: 16,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(slot, before, "a refused write changes nothing");

    let mut short = vec![0u8; RECORD_HEADER_SIZE + 4];
    assert!(write_record(&mut short, &h, b"0123456789").is_err());
}

/// The host twin of the KUnit test `a_torn_header_costs_its_slot_only`: a registration's header
/// cut short at every byte (a released slot being reused, a new slot at the end of the chain)
/// costs that slot only once the core has repaired it; the commit and every other record survive.
#[test]
fn a_torn_header_costs_its_slot_only() {
    let ch = ContainerHeader::new(8192, BOOT_ID, 5);
    let stamp = ch.stamp;
    let mut base = vec![0u8; 8192];
    init_with_core_records(&mut base, &ch, &Identity::default()).unwrap();
    let reused = append_record(
        &mut base,
        &RecordHeader::new(RecordKind::Free, b"", 128, stamp),
    )
    .unwrap();
    let client = append_record(
        &mut base,
        &RecordHeader::new(RecordKind::Other, b"client", 256, stamp),
    )
    .unwrap();
    let fresh = client + RECORD_HEADER_SIZE + 256;
    let new = RecordHeader::new(RecordKind::Source, b"new-client", 128, stamp).encode();
    let old = base[reused..reused + RECORD_HEADER_SIZE].to_vec();
    let mut repaired = 0;
    for slot in [reused, fresh] {
        for torn in 0..=RECORD_HEADER_SIZE {
            let mut r = base.clone();
            r[slot..slot + torn].copy_from_slice(&new[..torn]);
            let was = r[slot..slot + RECORD_HEADER_SIZE].to_vec();
            let whole_new = was == new;
            let expect = !(whole_new || slot == reused && was == old);
            assert_eq!(
                repair_header(&mut r, slot, 128, stamp),
                Ok(expect),
                "slot {slot:#x} torn at {torn}"
            );
            repaired += usize::from(expect);
            let mut h = RecordHeader::new(RecordKind::Other, b"client", 256, stamp);
            h.status = RecordStatus::Ok;
            write_record(&mut r[client..], &h, &[7u8; 200]).unwrap();
            write_commit(&mut r).unwrap();
            let s = validate(&r).unwrap();
            assert!(s.is_clean(), "slot {slot:#x} torn at {torn}: {s:?}");
            // Identity, panic info, phases, modules and the client; the new record only when
            // whole.
            assert_eq!(
                s.records,
                if whole_new { 6 } else { 5 },
                "slot {slot:#x} torn at {torn}"
            );
        }
    }
    assert!(repaired > 100, "{repaired}");
    // Without the repair, the same torn header loses the whole commit.
    let mut r = base.clone();
    r[reused..reused + 40].copy_from_slice(&new[..40]);
    assert!(write_commit(&mut r).is_err());
}

fn module(name: &[u8], text: u64) -> ModuleEntry {
    let mut e = ModuleEntry::new(name, ModuleState::Live);
    e.text_addr = text;
    e.text_size = 0x4000;
    e.set_build_id(&[0xab; 20]).unwrap();
    assert!(e.add_section(ModuleSection {
        addr: text,
        index: 3
    }));
    e
}

/// The module list as the core keeps it: modules added, replaced by name, removed (the last
/// takes the freed place), counted as dropped when the record is full, every change counted.
#[test]
fn module_list_follows_loads_and_unloads() {
    let cap = 3;
    let mut buf = vec![0u8; modules_size(cap)];
    // CAST: small.
    let mut len = modules_init(&mut buf, cap as u32).unwrap();
    assert_eq!(len, MODULES_HEADER_SIZE);
    let names = |b: &[u8], len: usize| -> Vec<Vec<u8>> {
        Modules::decode(&b[..len])
            .unwrap()
            .entries()
            .map(|e| e.unwrap().name().to_vec())
            .collect()
    };
    for (i, n) in [&b"a"[..], b"b", b"c"].iter().enumerate() {
        len = modules_upsert(&mut buf, &module(n, 0x1000 * (i as u64 + 1))).unwrap();
    }
    assert_eq!(
        names(&buf, len),
        [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
    );
    // Full: a fourth is dropped, a known one is replaced in place.
    let full = modules_upsert(&mut buf, &module(b"d", 0x9000)).unwrap();
    assert_eq!(full, len);
    let mut a = module(b"a", 0x7000);
    a.state = ModuleState::Coming;
    a.init_addr = 0x8000;
    a.init_size = 0x100;
    len = modules_upsert(&mut buf, &a).unwrap();
    let m = Modules::decode(&buf[..len]).unwrap();
    assert_eq!((m.count, m.dropped, m.generation), (3, 1, 5));
    let first = m.entries().next().unwrap().unwrap();
    assert_eq!(first, a);
    assert!(first.contains(0x8010) && first.contains(0x7000) && !first.contains(0x6fff));
    assert_eq!(first.build_id(), &[0xab; 20]);
    assert_eq!(first.sections()[0].index, 3);
    // Removing the first moves the last into its place; removing an unknown one changes nothing.
    len = modules_remove(&mut buf, b"a").unwrap();
    assert_eq!(names(&buf, len), [b"c".to_vec(), b"b".to_vec()]);
    len = modules_remove(&mut buf, b"zz").unwrap();
    assert_eq!(names(&buf, len), [b"c".to_vec(), b"b".to_vec()]);
    assert_eq!(len, MODULES_HEADER_SIZE + 2 * MODULE_ENTRY_SIZE);
}

/// A module list that lies is refused with the field named, never read past its end.
#[test]
fn module_list_refuses_what_it_cannot_hold() {
    let mut buf = vec![0u8; modules_size(2)];
    modules_init(&mut buf, 2).unwrap();
    let len = modules_upsert(&mut buf, &module(b"x", 0x1000)).unwrap();
    // A count beyond the capacity, a count beyond the bytes, a state and a length out of range.
    let mut b = buf.clone();
    b[0] = 3;
    assert!(matches!(
        Modules::decode(&b[..len]),
        Err(FormatError::FieldTooLong {
            field: "module count",
            ..
        })
    ));
    let mut b = buf.clone();
    b[0] = 2;
    assert!(matches!(
        Modules::decode(&b[..len]),
        Err(FormatError::Truncated { .. })
    ));
    let mut b = buf[..len].to_vec();
    b[MODULES_HEADER_SIZE + 77] = 9;
    let e = Modules::decode(&b).unwrap().entries().next().unwrap();
    assert!(matches!(
        e,
        Err(FormatError::BadValue {
            field: "module state",
            value: 9,
            ..
        })
    ));
    let mut b = buf[..len].to_vec();
    b[MODULES_HEADER_SIZE + 78] = MODULE_SECTIONS_MAX as u8 + 1;
    let e = Modules::decode(&b).unwrap().entries().next().unwrap();
    assert!(matches!(
        e,
        Err(FormatError::FieldTooLong {
            field: "module section count",
            ..
        })
    ));
    // Too long a build ID is refused when set; one section more than the entry holds is not placed.
    let mut e = ModuleEntry::new(b"y", ModuleState::Live);
    assert!(e.set_build_id(&[1; 21]).is_err());
    for i in 0..MODULE_SECTIONS_MAX {
        assert!(e.add_section(ModuleSection {
            addr: 0,
            index: i as u32
        }));
    }
    assert!(!e.add_section(ModuleSection { addr: 0, index: 99 }));
    // A name longer than the field is cut, as the kernel's are never longer.
    assert_eq!(
        ModuleEntry::new(&[b'n'; 60], ModuleState::Live)
            .name()
            .len(),
        MODULE_NAME_MAX
    );
}

/// A commit made while the kernel ran carries `RECORD_FLAG_RUNTIME` in its header and is
/// otherwise the commit `write_commit` makes: same offset, same payload, a clean region.
#[test]
fn commit_flagged_at_run_time() {
    let (region, l) = sample_region();
    let mut runtime = region.clone();
    // Back to before the commit: the chain ends where the commit was.
    runtime[l.commit..l.used].fill(0);
    assert!(matches!(
        parse_region(&runtime).unwrap().records().last(),
        Some(Err(FormatError::MissingCommit { .. }))
    ));
    assert_eq!(
        write_commit_flagged(&mut runtime, RECORD_FLAG_RUNTIME).unwrap(),
        l.used
    );
    let recs: Vec<_> = parse_region(&runtime)
        .unwrap()
        .records()
        .map(Result::unwrap)
        .collect();
    let commit = recs.last().unwrap();
    assert_eq!(commit.header.kind, RecordKind::Commit);
    assert_eq!(commit.offset, l.commit);
    assert_eq!(commit.header.flags, RECORD_FLAG_RUNTIME);
    let plain: Vec<_> = parse_region(&region)
        .unwrap()
        .records()
        .map(Result::unwrap)
        .collect();
    let plain_commit = plain.last().unwrap();
    assert_eq!(plain_commit.header.flags, 0, "write_commit sets no flag");
    assert_eq!(commit.data, plain_commit.data);
    assert!(validate(&runtime).unwrap().is_clean());
    // Only the commit record's header differs.
    let diff: Vec<usize> = (0..region.len())
        .filter(|&i| region[i] != runtime[i])
        .collect();
    assert!(!diff.is_empty());
    assert!(
        diff.iter()
            .all(|&i| (l.commit..l.commit + RECORD_HEADER_SIZE).contains(&i)),
        "{diff:?}"
    );
    // A flagged commit is refused, as a plain one is, when there is no room for it.
    let mut full = runtime.clone();
    full[l.commit..].fill(0);
    let cut = &mut full[..l.commit + COMMIT_RECORD_SIZE - 8];
    assert!(write_commit_flagged(cut, RECORD_FLAG_RUNTIME).is_err());
}

/// A capture kernel's container: one record, flagged `RECORD_FLAG_CAPTURE` whatever flags it
/// was given, stamped with the container's stamp, then the commit; read back by `parse_region`
/// with every check passing.
#[test]
fn seal_capture_round_trips_through_parse_region() {
    use cspd_format::capture::*;
    let data: Vec<u8> = (0..100u32).map(|i| (i * 13 + 1) as u8).collect();
    let cap = 104;
    let size = capture_container_size(cap).unwrap();
    assert_eq!(
        size,
        CONTAINER_HEADER_SIZE + RECORD_HEADER_SIZE + 104 + COMMIT_RECORD_SIZE
    );
    assert_eq!(capture_container_size(100), None, "not a multiple of 8");
    assert_eq!(
        capture_container_size(u32::MAX - 7).map(|n| n > 0),
        Some(true)
    );
    // Leftovers of a previous use of the buffer.
    let mut buf = vec![0xEEu8; size];
    assert!(capture_data_mut(&mut buf, cap + COMMIT_RECORD_SIZE as u32 + 8).is_none());
    capture_data_mut(&mut buf, cap).unwrap()[..data.len()].copy_from_slice(&data);
    let mut h = RecordHeader::new(RecordKind::Sink, b"tmc_etf0", cap, 0x1234);
    h.status = RecordStatus::Ok;
    h.payload = PayloadType::Tmc;
    h.length = data.len() as u32;
    h.flags = 1 << 7;
    assert_eq!(seal_capture(&mut buf, [3; 16], &h).unwrap(), size);

    let region = parse_region(&buf).unwrap();
    assert_eq!(region.header().boot_id, [3; 16]);
    assert_eq!(region.header().region_size, size as u64);
    let recs: Vec<_> = region.records().map(Result::unwrap).collect();
    assert_eq!(recs.len(), 2);
    let r = &recs[0];
    assert_eq!(r.header.kind, RecordKind::Sink);
    assert_eq!(r.header.name_bytes(), b"tmc_etf0");
    assert_eq!(r.header.payload, PayloadType::Tmc);
    assert_eq!(r.header.status, RecordStatus::Ok);
    assert_eq!(r.header.flags, RECORD_FLAG_CAPTURE | 1 << 7);
    assert_eq!(r.header.flags & RECORD_FLAG_RUNTIME, 0);
    assert_eq!(r.header.stamp, region.header().stamp);
    assert_eq!(r.data, &data[..]);
    assert_eq!(recs[1].header.kind, RecordKind::Commit);
    let c = Commit::decode(recs[1].data).unwrap();
    assert_eq!((c.records, c.used_bytes), (1, size as u64));
    assert!(validate(&buf).unwrap().is_clean());

    // A buffer of another size, or a capacity that is no multiple of 8: refused.
    let mut short = vec![0u8; size - 8];
    assert!(matches!(
        seal_capture(&mut short, [3; 16], &h),
        Err(FormatError::BufferTooSmall { .. })
    ));
    let mut odd = h;
    odd.capacity = 100;
    assert!(matches!(
        seal_capture(&mut buf.clone(), [3; 16], &odd),
        Err(FormatError::BadCapacity { .. })
    ));
    // A flipped data byte is named by the reader.
    let mut bad = buf.clone();
    bad[CONTAINER_HEADER_SIZE + RECORD_HEADER_SIZE + 7] ^= 1;
    assert!(parse_region(&bad).unwrap().records().any(|r| r.is_err()));
}

/// The device dump name: the prefix and the record's name, cut to the kernel's 43 bytes.
#[test]
fn capture_dump_name_is_the_prefix_and_the_record_name_cut_to_43_bytes() {
    use cspd_format::capture::*;
    let mut out = [0u8; 64];
    let n = capture_dump_name(b"tmc_etf0", &mut out).unwrap();
    assert_eq!(&out[..n], b"coresight_capture:tmc_etf0");
    assert!(is_capture_dump_name(&out[..n]));
    // A record name of 32 bytes (NAME_SIZE): the dump name is cut to 43.
    let long = [b'x'; NAME_SIZE];
    let n = capture_dump_name(&long, &mut out).unwrap();
    assert_eq!(n, 43);
    assert_eq!(CAPTURE_DUMP_NAME_MAX, 43);
    assert_eq!(&out[..18], CAPTURE_DUMP_PREFIX.as_bytes());
    assert_eq!(&out[18..43], &[b'x'; 25]);
    assert_eq!(out[43], 0, "nothing written past the cut");
    // Exactly room for it; one byte less; an empty name.
    assert_eq!(capture_dump_name(b"etb", &mut [0u8; 21]), Some(21));
    assert_eq!(capture_dump_name(b"etb", &mut [0u8; 20]), None);
    assert_eq!(capture_dump_name(b"", &mut out), None);
    // Only the prefix and a name is a capture dump's name.
    assert!(!is_capture_dump_name(b"coresight_capture:"));
    assert!(!is_capture_dump_name(b"coresight_panic_dump"));
    assert!(!is_capture_dump_name(b"coresight_tracedata@7e000000"));
    assert!(!is_capture_dump_name(b"xcoresight_capture:tmc_etf0"));
}
