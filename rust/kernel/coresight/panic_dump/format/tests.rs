// SPDX-License-Identifier: GPL-2.0

//! KUnit tests of the format, compiled the way the kernel compiles it: the kernel's CRC against
//! the check value of CRC-32/IEEE, records, commit, validation, as the panic-dump core writes
//! them.

use kernel::prelude::*;

#[kunit_tests(coresight_panic_dump_format)]
mod kunit {
    use kernel::coresight::panic_dump::format::{
        self,
        ContainerHeader,
        Crc32,
        Identity,
        PanicInfo,
        RecordHeader,
        RecordKind,
        RecordStatus,
        BOOT_ID_SIZE,
        CONTAINER_HEADER_SIZE,
        IDENTITY_SIZE,
        PANIC_INFO_MAX_SIZE,
        RECORD_HEADER_SIZE, //
    };
    use kernel::prelude::*;

    const BOOT_ID: [u8; BOOT_ID_SIZE] = [
        0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE, 1, 2, 3, 4, 5, 6, 7, 8,
    ];

    /// Size of the test region.
    const REGION: usize = 8192;

    /// Bytes of the "other" record's data.
    const OTHER_LEN: usize = 200;

    #[test]
    fn crc32_known_vectors_and_streaming() {
        assert_eq!(format::crc32(b""), 0);
        assert_eq!(format::crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(
            format::crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
        // Fed in pieces, with a run of zeros, it gives the CRC of the whole.
        let whole = *b"123456789\0\0\0\0";
        let mut c = Crc32::new();
        c.update(b"1234");
        c.update(b"56789");
        c.update_zeros(4);
        assert_eq!(c.finish(), format::crc32(&whole));
    }

    /// Writes a fresh container the way the core does at boot: header, identity record and
    /// the panic-info slot, not run. Returns the panic-info slot's offset.
    fn boot(region: &mut [u8]) -> Option<usize> {
        let header = ContainerHeader::new(REGION as u64, BOOT_ID, 5);
        format::init_region(region, &header).ok()?;
        let mut ident = Identity::default();
        ident.set_release(b"7.3.0-kunit").ok()?;
        ident.set_build_id(&[0xAB; 20]).ok()?;
        ident.region_size = REGION as u64;
        let mut buf = [0u8; IDENTITY_SIZE];
        let n = ident.encode(&mut buf).ok()?;
        let mut h = RecordHeader::new(
            RecordKind::Identity,
            b"identity",
            IDENTITY_SIZE as u32,
            header.stamp,
        );
        h.status = RecordStatus::Ok;
        format::write_record(region.get_mut(CONTAINER_HEADER_SIZE..)?, &h, buf.get(..n)?).ok()?;
        let h = RecordHeader::new(
            RecordKind::PanicInfo,
            b"panic",
            PANIC_INFO_MAX_SIZE as u32,
            header.stamp,
        );
        format::append_record(region, &h).ok()
    }

    /// Writes the panic info and a client's data into their slots and commits, as at panic.
    fn panic(region: &mut [u8], panic_slot: usize, other_slot: usize) -> Option<usize> {
        let stamp = ContainerHeader::decode(region).ok()?.stamp;
        let mut pi = [0u8; PANIC_INFO_MAX_SIZE];
        let n = PanicInfo {
            cpu: 1,
            message: b"kunit: not really",
            truncated: false,
        }
        .encode(&mut pi)
        .ok()?;
        let mut h = RecordHeader::new(
            RecordKind::PanicInfo,
            b"panic",
            PANIC_INFO_MAX_SIZE as u32,
            stamp,
        );
        h.cpu = 1;
        h.status = RecordStatus::Ok;
        format::write_record(region.get_mut(panic_slot..)?, &h, pi.get(..n)?).ok()?;

        let mut data = [0u8; OTHER_LEN];
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(7);
        }
        let mut h = RecordHeader::new(RecordKind::Other, b"kunit-client", 256, stamp);
        h.status = RecordStatus::Ok;
        format::write_record(region.get_mut(other_slot..)?, &h, &data).ok()?;
        format::write_commit(region).ok()
    }

    #[test]
    fn dump_lifecycle_commits_and_validates() -> Result {
        let mut region = KVec::from_elem(0u8, REGION, GFP_KERNEL)?;
        let panic_slot = boot(&mut region);
        assert!(panic_slot.is_some());
        let panic_slot = panic_slot.unwrap_or(0);
        assert_eq!(
            panic_slot,
            CONTAINER_HEADER_SIZE + RECORD_HEADER_SIZE + IDENTITY_SIZE
        );
        // A client registers: its slot follows, not run.
        let stamp = format::stamp_from_boot_id(&BOOT_ID);
        let other = format::append_record(
            &mut region,
            &RecordHeader::new(RecordKind::Other, b"kunit-client", 256, stamp),
        );
        assert!(other.is_ok());
        let other_slot = other.unwrap_or(0);
        assert_eq!(
            other_slot,
            panic_slot + RECORD_HEADER_SIZE + PANIC_INFO_MAX_SIZE
        );

        // Before the panic there is no commit: not a complete dump.
        let before = format::validate(&region);
        assert!(before.is_ok_and(|s| !s.committed && !s.is_clean()));

        let used = panic(&mut region, panic_slot, other_slot);
        assert_eq!(
            used,
            Some(other_slot + RECORD_HEADER_SIZE + 256 + format::COMMIT_RECORD_SIZE)
        );
        let summary = format::validate(&region);
        assert!(summary.is_ok_and(|s| s.is_clean() && s.records == 3 && s.ok == 3));

        // Records come back in order with their data, the commit last.
        let parsed = format::parse_region(&region);
        assert!(parsed.is_ok());
        if let Ok(r) = parsed {
            assert_eq!(r.header().sequence, 5);
            let mut kinds = [RecordKind::Free; 4];
            let mut n = 0usize;
            for rec in r.records().flatten() {
                if let Some(k) = kinds.get_mut(n) {
                    *k = rec.header.kind;
                }
                n += 1;
                if rec.header.kind == RecordKind::Identity {
                    let id = Identity::decode(rec.data);
                    assert!(id.is_ok_and(|i| i.release_bytes() == b"7.3.0-kunit"));
                }
                if rec.header.kind == RecordKind::PanicInfo {
                    let pi = PanicInfo::decode(rec.data);
                    assert!(pi.is_ok_and(|p| p.cpu == 1 && p.message == b"kunit: not really"));
                }
                if rec.header.kind == RecordKind::Other {
                    assert_eq!(rec.data.len(), OTHER_LEN);
                    assert_eq!(rec.data.get(3).copied(), Some(21));
                }
            }
            // The commit comes last and ends the walk.
            assert_eq!(n, 4);
            assert!(
                kinds
                    == [
                        RecordKind::Identity,
                        RecordKind::PanicInfo,
                        RecordKind::Other,
                        RecordKind::Commit
                    ]
            );
        }
        Ok(())
    }

    #[test]
    fn damaged_dump_is_named_and_the_rest_still_read() -> Result {
        let mut region = KVec::from_elem(0u8, REGION, GFP_KERNEL)?;
        let panic_slot = boot(&mut region).unwrap_or(0);
        let stamp = format::stamp_from_boot_id(&BOOT_ID);
        let other_slot = format::append_record(
            &mut region,
            &RecordHeader::new(RecordKind::Other, b"kunit-client", 256, stamp),
        )
        .unwrap_or(0);
        assert!(panic(&mut region, panic_slot, other_slot).is_some());

        // One bit of the client's data flips: its data CRC names it, the others still read.
        let at = other_slot + RECORD_HEADER_SIZE + 10;
        if let Some(b) = region.get_mut(at) {
            *b ^= 0x10;
        }
        let s = format::validate(&region);
        assert!(s.is_ok_and(|s| s.errors == 1 && s.records == 2 && s.committed));
        let first = s.ok().and_then(|s| s.first_error);
        assert!(first.is_some_and(|e| e.name() == "data-crc" && e.offset() == Some(other_slot)));

        // A broken container header is fatal.
        if let Some(b) = region.get_mut(20) {
            *b ^= 1;
        }
        let s = format::validate(&region);
        assert!(s.is_err_and(|e| e.name() == "header-crc"));
        Ok(())
    }

    /// Writes the first `torn` bytes of `header` at `offset`, as a CPU stopped in the middle of
    /// the core's byte-by-byte header write leaves them.
    fn tear(region: &mut [u8], offset: usize, header: &RecordHeader, torn: usize) {
        let bytes = header.encode();
        for (i, b) in bytes.iter().take(torn).enumerate() {
            if let Some(r) = region.get_mut(offset + i) {
                *r = *b;
            }
        }
    }

    /// A header torn at every byte costs its own slot only: after the core's repair the commit
    /// is written, and every other record reads back whole (a released slot being reused, and a
    /// new slot at the end of the chain).
    #[test]
    fn a_torn_header_costs_its_slot_only() -> Result {
        let stamp = format::stamp_from_boot_id(&BOOT_ID);
        let mut base = KVec::from_elem(0u8, REGION, GFP_KERNEL)?;
        let panic_slot = boot(&mut base).unwrap_or(0);
        let reused = format::append_record(
            &mut base,
            &RecordHeader::new(RecordKind::Free, b"", 128, stamp),
        )
        .unwrap_or(0);
        let other_slot = format::append_record(
            &mut base,
            &RecordHeader::new(RecordKind::Other, b"kunit-client", 256, stamp),
        )
        .unwrap_or(0);
        let fresh = other_slot + RECORD_HEADER_SIZE + 256;
        let new_client = RecordHeader::new(RecordKind::Source, b"kunit-new-client", 128, stamp);
        let new_bytes = new_client.encode();
        let mut old_bytes = [0u8; RECORD_HEADER_SIZE];
        old_bytes.copy_from_slice(
            base.get(reused..reused + RECORD_HEADER_SIZE)
                .unwrap_or(&[0; RECORD_HEADER_SIZE]),
        );
        let mut repaired = 0u32;
        for slot in [reused, fresh] {
            for torn in 0..=RECORD_HEADER_SIZE {
                let mut region = KVec::new();
                region.extend_from_slice(&base, GFP_KERNEL)?;
                tear(&mut region, slot, &new_client, torn);
                let was = region.get(slot..slot + RECORD_HEADER_SIZE).unwrap_or(&[]);
                let whole_new = was == new_bytes;
                // Only a header that is neither the old one nor the new one is rewritten (a new
                // slot's old bytes are zeros, no header at all).
                let expect = !(whole_new || slot == reused && was == old_bytes);
                let fixed = format::repair_header(&mut region, slot, 128, stamp);
                if !fixed.is_ok_and(|f| f == expect) {
                    pr_err!("slot {:#x} torn at {}: repaired {:?}\n", slot, torn, fixed);
                }
                assert!(fixed.is_ok_and(|f| f == expect));
                repaired += u32::from(expect);
                assert!(panic(&mut region, panic_slot, other_slot).is_some());
                let s = format::validate(&region);
                // Identity, panic info and the client always; the torn slot's new record only
                // when its header was written whole.
                let records = if whole_new { 4 } else { 3 };
                assert!(s.is_ok_and(|s| s.committed && s.errors == 0 && s.records == records));
            }
        }
        assert!(repaired > 100);
        Ok(())
    }

    #[test]
    fn vmcoreinfo_lines_round_trip() {
        let mut text = [0u8; format::VMCOREINFO_TEXT_MAX];
        let n = format::format_vmcoreinfo(0x8_4000_0000, 0x10_0000, &mut text);
        assert!(n.is_ok());
        let text = text.get(..n.unwrap_or(0)).unwrap_or(&[]);
        assert!(text == b"CSPD_REGION_PADDR=0x840000000\nCSPD_REGION_SIZE=0x100000\n");
        assert_eq!(
            format::vmcoreinfo_hex(text, format::VMCOREINFO_PADDR_KEY),
            Some(0x8_4000_0000)
        );
        assert_eq!(
            format::vmcoreinfo_hex(text, format::VMCOREINFO_SIZE_KEY),
            Some(0x10_0000)
        );
        assert_eq!(format::vmcoreinfo_hex(text, "KERNELOFFSET"), None);
    }

    #[test]
    fn phase_times_round_trip_and_give_durations() {
        use format::{
            Phase,
            Phases,
            PHASES_SIZE, //
        };
        let mut p = Phases {
            frequency: 62_500_000,
            entry: 1_000,
            ..Phases::default()
        };
        let t = p.get_mut(Phase::SampleCpus);
        t.start = 1_000 + 625;
        // 50 ms at 62.5 MHz.
        t.end = t.start + 3_125_000;
        t.callbacks = 2;
        let mut buf = [0u8; PHASES_SIZE];
        assert!(p.encode(&mut buf) == Ok(PHASES_SIZE));
        let back = Phases::decode(&buf);
        assert!(back == Ok(p));
        assert_eq!(p.duration_ns(Phase::SampleCpus), Some(50_000_000));
        assert_eq!(p.duration_ns(Phase::DrainSinks), None);
        assert_eq!(p.total_ns(), Some(50_010_000));
        // A phase that ends before it starts is refused.
        buf[40..48].copy_from_slice(&0u64.to_le_bytes());
        buf[48..56].copy_from_slice(&5u64.to_le_bytes());
        assert!(Phases::decode(&buf).is_err());
    }
}
