//! The TMC-ETR payload of the format (`format/etr.rs`): the record header, where the trace is in
//! the circular buffer, the warm-reboot attachment and the device dump name.

use cspd_format::crc32;
use cspd_format::etr::*;

fn header() -> EtrRecordHeader {
    EtrRecordHeader {
        version: ETR_RECORD_VERSION,
        outcome_code: EtrOutcome::Truncated.code(),
        flags: ETR_REC_WRAPPED | ETR_REC_TRUNCATED,
        rsz: 0x4_0000,
        sts: 0x0d,
        ctl: 1,
        mode: 0,
        ffcr: 0x1133,
        ffsr: 0x2,
        devid: 0x0151_0340,
        authstatus: 0x33,
        axictl: 0xf3e,
        rrp: 0x1_4123_4560,
        rwp: 0x1_4123_4560,
        dba: 0x1_4100_0000,
        buf_paddr: 0x1_4100_0000,
        buf_size: 0x10_0000,
        data_start: 0x23_4560,
        data_len: 0x10_0000,
        trace_len: 0x8000,
        flush_delays: 3,
        ready_delays: 4,
    }
}

#[test]
fn header_round_trips_at_the_documented_offsets() {
    let h = header();
    let mut b = [0xEEu8; ETR_RECORD_HEADER_LEN + 8];
    h.encode(&mut b).unwrap();
    assert_eq!(&b[0..4], b"ETRD");
    assert_eq!(u16::from_le_bytes([b[4], b[5]]), 1);
    assert_eq!(u16::from_le_bytes([b[6], b[7]]), 120);
    assert_eq!(u16::from_le_bytes([b[8], b[9]]), 7);
    assert_eq!(u32::from_le_bytes(b[12..16].try_into().unwrap()), 0x4_0000);
    assert_eq!(u32::from_le_bytes(b[44..48].try_into().unwrap()), 0xf3e);
    assert_eq!(
        u64::from_le_bytes(b[56..64].try_into().unwrap()),
        0x1_4123_4560
    );
    assert_eq!(
        u64::from_le_bytes(b[64..72].try_into().unwrap()),
        0x1_4100_0000
    );
    assert_eq!(
        u64::from_le_bytes(b[96..104].try_into().unwrap()),
        0x10_0000
    );
    assert_eq!(u32::from_le_bytes(b[104..108].try_into().unwrap()), 0x8000);
    assert_eq!(&b[116..120], &[0; 4]);
    // Nothing is written past the header.
    assert_eq!(&b[120..], &[0xEE; 8]);
    assert_eq!(EtrRecordHeader::decode(&b).unwrap(), h);
    assert!(h.encode(&mut [0u8; ETR_RECORD_HEADER_LEN - 1]).is_none());
}

#[test]
fn parse_bounds_the_trace_and_names_bad_headers() {
    let mut h = header();
    h.trace_len = 32;
    let mut b = vec![0u8; ETR_RECORD_HEADER_LEN + 40];
    h.encode(&mut b).unwrap();
    for (i, x) in b[ETR_RECORD_HEADER_LEN..].iter_mut().enumerate() {
        *x = i as u8;
    }
    let (got, trace) = EtrRecord::parse(&b).unwrap();
    assert_eq!(got, h);
    assert_eq!(trace, &b[ETR_RECORD_HEADER_LEN..ETR_RECORD_HEADER_LEN + 32]);

    h.trace_len = 41;
    h.encode(&mut b).unwrap();
    assert_eq!(
        EtrRecord::parse(&b).unwrap_err(),
        EtrRecordError::TraceLenOutOfBounds {
            trace_len: 41,
            available: 40
        }
    );
    assert_eq!(
        EtrRecord::parse(&b[..100]).unwrap_err(),
        EtrRecordError::TooShort
    );
    let mut bad = b.clone();
    bad[0] = b'X';
    assert_eq!(
        EtrRecord::parse(&bad).unwrap_err(),
        EtrRecordError::BadMagic
    );
    let mut bad = b.clone();
    bad[4] = 2;
    assert_eq!(
        EtrRecord::parse(&bad).unwrap_err(),
        EtrRecordError::BadVersion(2)
    );
    let mut bad = b.clone();
    bad[6] = 100;
    assert_eq!(
        EtrRecord::parse(&bad).unwrap_err(),
        EtrRecordError::BadHeaderLen(100)
    );
    // A TMC record is not an ETR record.
    let mut tmc = vec![0u8; 200];
    tmc[..4].copy_from_slice(b"TMCD");
    assert_eq!(
        EtrRecord::parse(&tmc).unwrap_err(),
        EtrRecordError::BadMagic
    );
}

#[test]
fn outcomes_have_stable_codes_and_names() {
    for code in 0..10u16 {
        let o = EtrOutcome::from_code(code).unwrap();
        assert_eq!(o.code(), code);
        assert!(!o.name().is_empty() && !o.name().contains(' '));
    }
    assert_eq!(EtrOutcome::from_code(10), None);
    assert_eq!(EtrOutcome::ReadyTimeout.name(), "ready_timeout");
    assert!(EtrOutcome::Truncated.has_trace());
    assert!(!EtrOutcome::MemErr.has_trace());
    assert!(!EtrOutcome::NotEnabled.has_trace());
}

#[test]
fn layout_of_a_buffer_that_did_not_wrap_runs_from_dba_to_rwp() {
    let l = EtrLayout::from_registers(1024, 0, 0x8000_0400, 0x8000_0000).unwrap();
    assert_eq!(
        l,
        EtrLayout {
            size: 4096,
            start: 0,
            len: 0x400,
            wrapped: false
        }
    );
    assert_eq!(l.ranges(), [(0, 0x400), (0, 0)]);
    // Empty: RWP at DBA.
    let l = EtrLayout::from_registers(1024, 0, 0x8000_0000, 0x8000_0000).unwrap();
    assert_eq!(l.len, 0);
    assert_eq!(l.ranges(), [(0, 0), (0, 0)]);
}

#[test]
fn the_trace_is_copied_oldest_first_with_a_barrier_when_wrapped() {
    let buffer: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    // Not wrapped: DBA up to RWP, as it is.
    let l = EtrLayout::from_registers(1024, 0x4, 0x8000_0300, 0x8000_0000).unwrap();
    let mut out = vec![0u8; 0x300];
    l.copy_oldest_first(&buffer, &mut out).unwrap();
    assert_eq!(out, buffer[..0x300]);
    // Wrapped: from RWP to the end, then from DBA, the barrier packet over the first 16 bytes.
    let l = EtrLayout::from_registers(1024, ETR_STS_FULL, 0x8000_0300, 0x8000_0000).unwrap();
    let mut out = vec![0u8; 4096];
    l.copy_oldest_first(&buffer, &mut out).unwrap();
    let barrier = cspd_format::tmc::CS_BARRIER_WORD.to_le_bytes().repeat(4);
    assert_eq!(out[..16], barrier[..]);
    assert_eq!(out[16..4096 - 0x300], buffer[0x310..]);
    assert_eq!(out[4096 - 0x300..], buffer[..0x300]);
    // A buffer shorter than the ETR's, or an output of another length: nothing copied.
    let mut out = vec![7u8; 4096];
    assert_eq!(l.copy_oldest_first(&buffer[..4095], &mut out), None);
    assert_eq!(l.copy_oldest_first(&buffer, &mut out[..4095]), None);
    assert!(out.iter().all(|&b| b == 7));
}

#[test]
fn layout_of_a_full_buffer_starts_at_rwp_and_wraps() {
    // STS.Full: oldest byte at RWP, the whole buffer, in two pieces.
    let l = EtrLayout::from_registers(1024, ETR_STS_FULL | 0x4, 0x8000_0300, 0x8000_0000).unwrap();
    assert!(l.wrapped);
    assert_eq!((l.start, l.len), (0x300, 4096));
    assert_eq!(l.ranges(), [(0x300, 4096 - 0x300), (0, 0x300)]);
    // RWP back at DBA exactly: one piece.
    let l = EtrLayout::from_registers(1024, ETR_STS_FULL, 0x8000_0000, 0x8000_0000).unwrap();
    assert_eq!(l.ranges(), [(0, 4096), (0, 0)]);
}

#[test]
fn layout_refuses_pointers_outside_the_buffer() {
    assert_eq!(
        EtrLayout::from_registers(0, 0, 0x1000, 0x1000).unwrap_err(),
        EtrRecordError::NoBuffer
    );
    for rwp in [0xFFC, 0x2000, 0x2004, 0x1002] {
        let e = EtrLayout::from_registers(1024, 0, rwp, 0x1000).unwrap_err();
        assert_eq!(
            e,
            EtrRecordError::PointerOutside {
                rwp,
                dba: 0x1000,
                size: 4096
            }
        );
        assert!(e.to_string().contains("not a word inside"), "{e}");
    }
}

#[test]
fn newest_keeps_the_end_of_the_stream_on_frame_boundaries() {
    let full = EtrLayout::from_registers(1024, ETR_STS_FULL, 0x8000_0310, 0x8000_0000).unwrap();
    // Room for everything: unchanged.
    assert_eq!(full.newest(8192), full);
    assert!(
        !EtrLayout::from_registers(1024, 0, 0x8000_0100, 0x8000_0000)
            .unwrap()
            .starts_mid_stream(
                &EtrLayout::from_registers(1024, 0, 0x8000_0100, 0x8000_0000).unwrap()
            )
    );
    // The newest 0x400 bytes end at RWP (0x310) and wrap back over the end of the buffer.
    let n = full.newest(0x400);
    assert_eq!((n.start, n.len), (4096 - 0xF0, 0x400));
    assert_eq!(n.ranges(), [(4096 - 0xF0, 0xF0), (0, 0x310)]);
    assert!(n.starts_mid_stream(&full));
    // A cap that is not a whole number of frames: the first byte is moved up to a frame.
    let n = full.newest(0x408);
    assert_eq!(n.start % ETR_FRAME_LEN, 0);
    assert_eq!((n.start, n.len), (4096 - 0xF0, 0x400));
    // Not wrapped: the newest bytes of DBA..RWP.
    let part = EtrLayout::from_registers(1024, 0, 0x8000_0800, 0x8000_0000).unwrap();
    let n = part.newest(0x100);
    assert_eq!(n.ranges(), [(0x700, 0x100), (0, 0)]);
    assert!(n.starts_mid_stream(&part));
    assert_eq!(part.newest(0).len, 0);
}

#[test]
fn the_header_gives_its_layout() {
    let mut h = header();
    h.rsz = 256;
    h.sts = ETR_STS_FULL;
    h.dba = 0x4000;
    h.rwp = 0x4040;
    let l = h.layout().unwrap();
    assert_eq!((l.size, l.start, l.len), (1024, 0x40, 1024));
}

#[test]
fn attachments_round_trip_and_name_damage() {
    let a: Vec<u8> = (0..100u8).collect();
    let b: Vec<u8> = vec![7; 16];
    let mut tail = Vec::new();
    for (paddr, data) in [(0x7e00_0000u64, &a), (0x7f00_0000, &b)] {
        tail.extend_from_slice(&TracedataAttachment::header(paddr, data));
        tail.extend_from_slice(data);
        while !tail.len().is_multiple_of(8) {
            tail.push(0);
        }
    }
    assert_eq!(
        TracedataAttachment::total_len(100),
        Some(ATTACHMENT_HEADER_LEN + 104)
    );
    let mut got = Vec::new();
    TracedataAttachment::parse_all(&tail, |x| got.push((x.paddr, x.data.to_vec()))).unwrap();
    assert_eq!(
        got,
        vec![(0x7e00_0000, a.clone()), (0x7f00_0000, b.clone())]
    );
    // Zeros after the region: nothing attached.
    TracedataAttachment::parse_all(&[0u8; 64], |_| panic!("no attachment")).unwrap();
    TracedataAttachment::parse_all(&[], |_| panic!("no attachment")).unwrap();

    // A data byte changed: the CRC names it; the first attachment was still given.
    let mut bad = tail.clone();
    bad[ATTACHMENT_HEADER_LEN + 104 + ATTACHMENT_HEADER_LEN + 3] ^= 1;
    let mut n = 0;
    let e = TracedataAttachment::parse_all(&bad, |_| n += 1).unwrap_err();
    assert_eq!(n, 1);
    assert_eq!(
        e,
        AttachmentError::DataCrc {
            offset: ATTACHMENT_HEADER_LEN + 104,
            paddr: 0x7f00_0000
        }
    );
    // A header byte changed, or the data cut short.
    let mut bad = tail.clone();
    bad[9] ^= 1;
    assert_eq!(
        TracedataAttachment::parse_all(&bad, |_| ()).unwrap_err(),
        AttachmentError::BadHeader { offset: 0 }
    );
    assert_eq!(
        TracedataAttachment::parse_all(&tail[..80], |_| ()).unwrap_err(),
        AttachmentError::Truncated { offset: 0 }
    );
    assert_eq!(
        TracedataAttachment::parse_all(&tail[..20], |_| ()).unwrap_err(),
        AttachmentError::Truncated { offset: 0 }
    );
    // The header's data CRC is the format's CRC.
    let h = TracedataAttachment::header(1, &a);
    assert_eq!(u32::from_le_bytes(h[24..28].try_into().unwrap()), crc32(&a));
}

#[test]
fn device_dump_names_carry_the_address() {
    let mut out = [0u8; TRACEDATA_DUMP_NAME_MAX];
    let n = tracedata_dump_name(0x7e00_0000, &mut out).unwrap();
    assert_eq!(&out[..n], b"coresight_tracedata@7e000000");
    assert_eq!(parse_tracedata_dump_name(&out[..n]), Some(0x7e00_0000));
    let n = tracedata_dump_name(u64::MAX, &mut out).unwrap();
    assert_eq!(n, TRACEDATA_DUMP_NAME_MAX);
    assert_eq!(parse_tracedata_dump_name(&out[..n]), Some(u64::MAX));
    let n = tracedata_dump_name(0, &mut out).unwrap();
    assert_eq!(&out[..n], b"coresight_tracedata@0");
    // The kernel's device dump names hold at most 43 bytes.
    const { assert!(TRACEDATA_DUMP_NAME_MAX <= 43) };
    assert_eq!(tracedata_dump_name(0x7e00_0000, &mut [0u8; 10]), None);
    for bad in [
        &b"coresight_panic_dump"[..],
        b"coresight_tracedata@",
        b"coresight_tracedata@0x10",
        b"coresight_tracedata@xyz",
        b"coresight_tracedata@11112222333344445",
    ] {
        assert_eq!(parse_tracedata_dump_name(bad), None, "{bad:?}");
    }
}
