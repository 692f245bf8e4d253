//! CPU debug decoding, PC calibration, arch data and the record format.
//!
//! Expected values are computed by hand from the Arm documents (DDI 0487 part H for EDPRSR,
//! EDVIDSR, EDDEVID/EDDEVID1; DDI 0406C C11.11.34 for the Armv7 PCSR offsets) and from the
//! C driver's format strings; the computation is written next to each case.

use cspd_hw::cpu_debug::calibrate_pc;
use cspd_hw::cpu_debug::ArchData;
use cspd_hw::cpu_debug::ArchError;
use cspd_hw::cpu_debug::CpuSample;
use cspd_hw::cpu_debug::Edcidsr;
use cspd_hw::cpu_debug::Edprsr;
use cspd_hw::cpu_debug::Edvidsr;
use cspd_hw::cpu_debug::Outcome;
use cspd_hw::cpu_debug::PcCalibration;
use cspd_hw::cpu_debug::PcKind;
use cspd_hw::cpu_debug::PcSample;
use cspd_hw::cpu_debug::PcsrOffset;
use cspd_hw::cpu_debug::RecordError;
use cspd_hw::cpu_debug::SampleEl;
use cspd_hw::cpu_debug::SecurityState;
use cspd_hw::cpu_debug::FLAG_EDCIDSR_PRESENT;
use cspd_hw::cpu_debug::FLAG_EDVIDSR_PRESENT;
use cspd_hw::cpu_debug::FLAG_MPIDR;
use cspd_hw::cpu_debug::FLAG_OS_LOCK_WAS_LOCKED;
use cspd_hw::cpu_debug::FLAG_PC64;
use cspd_hw::cpu_debug::RECORD_LEN;

fn v7() -> ArchData {
    // EDDEVID.PCSample 3 (full), EDDEVID1.PCSROffset 0 (offset by state), 32-bit kernel.
    ArchData::from_ids(3, 0, false).unwrap()
}

fn v8() -> ArchData {
    // EDDEVID.PCSample 3, EDDEVID1.PCSROffset 2, 64-bit kernel.
    ArchData::from_ids(3, 2, true).unwrap()
}

#[test]
fn arch_data_from_ids() {
    let a = v8();
    assert_eq!(a.pcsample, PcSample::Full);
    assert_eq!(a.pcsr_offset, PcsrOffset::NoOffsetNoAArch32);
    assert!(a.edcidsr_present() && a.edvidsr_present() && !a.pc_has_offset());

    // PCSample 2: EDPCSR + EDCIDSR; bits above 3:0 are other fields and must be ignored.
    let a = ArchData::from_ids(0xABC0_0012, 0xF0, true).unwrap();
    assert_eq!(a.pcsample, PcSample::PcsrCidsr);
    assert!(a.edcidsr_present() && !a.edvidsr_present());
    // 0xF0 & 0xF = 0: offset by instruction set.
    assert!(a.pc_has_offset());

    let a = ArchData::from_ids(1, 1, false).unwrap();
    assert_eq!(a.pcsample, PcSample::Pcsr);
    assert_eq!(a.pcsr_offset, PcsrOffset::NoOffset);
    assert!(!a.edcidsr_present() && !a.edvidsr_present() && !a.pc_has_offset());

    let a = ArchData::from_ids(3, 5, true).unwrap();
    assert_eq!(a.pcsr_offset, PcsrOffset::Reserved(5));
    assert_eq!(a.pcsr_offset.raw(), 5);
}

#[test]
fn arch_data_rejects_missing_sampling() {
    // PCSample 0: not implemented, probe must fail.
    assert_eq!(
        ArchData::from_ids(0, 2, true),
        Err(ArchError::NoPcSampling { pcsample: 0 })
    );
    // PCSample 4..15 are not values the driver knows: not usable.
    assert_eq!(
        ArchData::from_ids(0x7, 2, true),
        Err(ArchError::NoPcSampling { pcsample: 7 })
    );
    // PCSROffset 2 cannot sample AArch32, so a 32-bit kernel cannot use it.
    assert_eq!(
        ArchData::from_ids(3, 2, false),
        Err(ArchError::AArch32NotSampled)
    );
    // The same device is fine for a 64-bit kernel.
    assert!(ArchData::from_ids(3, 2, true).is_ok());
    let msg = ArchError::NoPcSampling { pcsample: 0 }.to_string();
    assert!(msg.contains("isn't implemented"), "{msg}");
}

#[test]
fn edprsr_c_text() {
    // C: " EDPRSR:  %08x (Power:%s DLK:%s)", PU = bit 0, DLK = bit 6.
    // 0x1: PU=1, DLK=0.
    assert_eq!(
        Edprsr(0x1).to_string(),
        "EDPRSR:  00000001 (Power:On DLK:Unlock)"
    );
    // 0x0: PU=0, DLK=0.
    assert_eq!(
        Edprsr(0x0).to_string(),
        "EDPRSR:  00000000 (Power:Off DLK:Unlock)"
    );
    // 0x41 = bit 6 + bit 0.
    assert_eq!(
        Edprsr(0x41).to_string(),
        "EDPRSR:  00000041 (Power:On DLK:Lock)"
    );
    // 0x40 = bit 6 only.
    assert_eq!(
        Edprsr(0x40).to_string(),
        "EDPRSR:  00000040 (Power:Off DLK:Lock)"
    );
    // 0x23 = OSLK (bit 5) + SPD (bit 1) + PU (bit 0): OSLK is not DLK.
    assert_eq!(
        Edprsr(0x23).to_string(),
        "EDPRSR:  00000023 (Power:On DLK:Unlock)"
    );
}

#[test]
fn edprsr_bits() {
    let e = Edprsr(0x23);
    assert!(e.powered_up() && e.sticky_powered_down() && e.os_locked());
    assert!(!e.double_locked() && !e.halted() && !e.in_reset() && !e.sticky_reset());
    assert!(e.access_permitted());
    assert_eq!(e.bits().to_string(), "PU SPD OSLK");
    // 0x14 = HALTED (bit 4) + R (bit 2); PU clear: no access.
    let e = Edprsr(0x14);
    assert!(e.halted() && e.in_reset() && !e.access_permitted());
    assert_eq!(e.bits().to_string(), "R HALTED");
    // 0x41: powered but double-locked: no access.
    assert!(!Edprsr(0x41).access_permitted());
    // 0x280 = EPMAD (bit 9) + EDAD (bit 7).
    let e = Edprsr(0x280);
    assert!(e.pmu_access_disabled() && e.debug_access_disabled());
    assert_eq!(e.bits().to_string(), "EDAD EPMAD");
    // 0xFFF: every named bit, in bit order.
    assert_eq!(
        Edprsr(0xFFF).bits().to_string(),
        "PU SPD R SR HALTED OSLK DLK EDAD SDAD EPMAD SPMAD SDR"
    );
    // Bits above 11 are reported raw; 0 reads "-".
    assert_eq!(Edprsr(0x1001).bits().to_string(), "PU other:0x1000");
    assert_eq!(Edprsr(0).bits().to_string(), "-");
}

#[test]
fn edvidsr_decoding_and_c_text() {
    // NS=bit31, E2=bit30, E3=bit29, HV=bit28, NSE=bit27, VMID=7:0.
    // C: " EDVIDSR: %08x (State:%s Mode:%s Width:%dbits VMID:%x)".
    let cases: [(u32, SecurityState, SampleEl, u8, u8, &str); 9] = [
        // 0x90000000 = NS + HV: Non-secure, EL1/0, 64-bit (the kernel doc's example).
        (
            0x9000_0000,
            SecurityState::NonSecure,
            SampleEl::El1El0,
            64,
            0,
            "EDVIDSR: 90000000 (State:Non-secure Mode:EL1/0 Width:64bits VMID:0)",
        ),
        // 0: Secure, EL1/0, HV clear: 32-bit.
        (
            0,
            SecurityState::Secure,
            SampleEl::El1El0,
            32,
            0,
            "EDVIDSR: 00000000 (State:Secure Mode:EL1/0 Width:32bits VMID:0)",
        ),
        // 0xC0000000 = NS + E2, HV clear.
        (
            0xC000_0000,
            SecurityState::NonSecure,
            SampleEl::El2,
            32,
            0,
            "EDVIDSR: c0000000 (State:Non-secure Mode:EL2 Width:32bits VMID:0)",
        ),
        // 0x30000000 = E3 + HV, NS clear.
        (
            0x3000_0000,
            SecurityState::Secure,
            SampleEl::El3,
            64,
            0,
            "EDVIDSR: 30000000 (State:Secure Mode:EL3 Width:64bits VMID:0)",
        ),
        // 0x60000000 = E2 + E3: the C driver tests E3 first, so EL3.
        (
            0x6000_0000,
            SecurityState::Secure,
            SampleEl::El3,
            32,
            0,
            "EDVIDSR: 60000000 (State:Secure Mode:EL3 Width:32bits VMID:0)",
        ),
        // 0x9000002A: VMID 0x2a printed with %x: "2a".
        (
            0x9000_002A,
            SecurityState::NonSecure,
            SampleEl::El1El0,
            64,
            0x2A,
            "EDVIDSR: 9000002a (State:Non-secure Mode:EL1/0 Width:64bits VMID:2a)",
        ),
        // 0x900012AB: the C driver masks VMID to 7:0 = 0xab.
        (
            0x9000_12AB,
            SecurityState::NonSecure,
            SampleEl::El1El0,
            64,
            0xAB,
            "EDVIDSR: 900012ab (State:Non-secure Mode:EL1/0 Width:64bits VMID:ab)",
        ),
        // 0x98000005 = NS + HV + NSE: Realm (FEAT_RME), VMID 5.
        (
            0x9800_0005,
            SecurityState::Realm,
            SampleEl::El1El0,
            64,
            5,
            "EDVIDSR: 98000005 (State:Realm Mode:EL1/0 Width:64bits VMID:5)",
        ),
        // 0x38000000 = E3 + HV + NSE, NS clear: Root.
        (
            0x3800_0000,
            SecurityState::Root,
            SampleEl::El3,
            64,
            0,
            "EDVIDSR: 38000000 (State:Root Mode:EL3 Width:64bits VMID:0)",
        ),
    ];
    for (raw, state, el, width, vmid, text) in cases {
        let v = Edvidsr(raw);
        assert_eq!(v.state(), state, "{raw:#x}");
        assert_eq!(v.el(), el, "{raw:#x}");
        assert_eq!(v.width(), width, "{raw:#x}");
        assert_eq!(v.vmid(), vmid, "{raw:#x}");
        assert_eq!(v.to_string(), text);
    }
    // VMID16: bits 15:0.
    assert_eq!(Edvidsr(0x9000_12AB).vmid16(), 0x12AB);
    // C: " EDCIDSR: %08x".
    assert_eq!(Edcidsr(0x1234).to_string(), "EDCIDSR: 00001234");
}

#[test]
fn calibrate_v7_arm() {
    // Armv7 DBGPCSR in Arm state: sample = address + 8, bits 1:0 = 0b00.
    // Instruction at 0x8000_1000 -> sample 0x8000_1008 -> 0x8000_1008 - 8 = 0x8000_1000.
    assert_eq!(
        calibrate_pc(&v7(), 0x8000_1008, 0, Some(0x8000_0000)),
        PcCalibration {
            pc: 0x8000_1000,
            kind: PcKind::Arm
        }
    );
}

#[test]
fn calibrate_v7_thumb() {
    // Thumb state: sample = (address + 4) with bit 0 set.
    // Instruction at 0x8000_2002 -> 0x8000_2006 | 1 = 0x8000_2007
    // -> (0x8000_2007 & !1) - 4 = 0x8000_2006 - 4 = 0x8000_2002.
    assert_eq!(
        calibrate_pc(&v7(), 0x8000_2007, 0, Some(0x8000_0000)),
        PcCalibration {
            pc: 0x8000_2002,
            kind: PcKind::Thumb
        }
    );
}

#[test]
fn calibrate_v7_special_cases() {
    // Bits 1:0 = 0b10: implementation defined, kept as read.
    assert_eq!(
        calibrate_pc(&v7(), 0x8000_300A, 0, None),
        PcCalibration {
            pc: 0x8000_300A,
            kind: PcKind::ImplementationDefined
        }
    );
    // Sample 4 in Arm state: 4 - 8 wraps to 0xFFFF_FFFC in 32 bits (no overflow panic).
    assert_eq!(calibrate_pc(&v7(), 4, 0, None).pc, 0xFFFF_FFFC);
    // PCSROffset 1 (no offset): Thumb 0x8000_2003 -> 0x8000_2002 (only bit 0 stripped).
    let no_off = ArchData::from_ids(3, 1, false).unwrap();
    assert_eq!(
        calibrate_pc(&no_off, 0x8000_2003, 0, None),
        PcCalibration {
            pc: 0x8000_2002,
            kind: PcKind::Thumb
        }
    );
    // Arm 0x8000_1000 -> 0x8000_1000.
    assert_eq!(calibrate_pc(&no_off, 0x8000_1000, 0, None).pc, 0x8000_1000);
}

#[test]
fn calibrate_v8_aarch64() {
    // HV set: PC = EDPCSR_HI:EDPCSR = 0xFFFF_8000 << 32 | 0x0812_3454, no offset.
    assert_eq!(
        calibrate_pc(&v8(), 0x0812_3454, 0xFFFF_8000, Some(0x9000_0000)),
        PcCalibration {
            pc: 0xFFFF_8000_0812_3454,
            kind: PcKind::AArch64
        }
    );
    // No EDVIDSR (PCSample 1) on a 64-bit kernel: assumed AArch64, as the C driver does.
    let pcsr_only = ArchData::from_ids(1, 2, true).unwrap();
    assert_eq!(
        calibrate_pc(&pcsr_only, 0x0812_3454, 0xFFFF_8000, None).pc,
        0xFFFF_8000_0812_3454
    );
}

#[test]
fn calibrate_v8_aarch32_not_sampled() {
    // PCSROffset 2, HV clear (AArch32): EDPCSR_HI is UNKNOWN (0x5a5a_a5a5 here) and must not
    // appear; bit 0 is not a Thumb flag; nothing is subtracted: PC = 0x0001_0235 as read.
    assert_eq!(
        calibrate_pc(&v8(), 0x0001_0235, 0x5A5A_A5A5, Some(0x8000_0000)),
        PcCalibration {
            pc: 0x0001_0235,
            kind: PcKind::AArch32NoState
        }
    );
}

fn sampled_v8() -> CpuSample {
    let arch = v8();
    let mut s = CpuSample::not_implemented(2, 3, 2);
    s.outcome = Outcome::Sampled;
    s.flags = FLAG_PC64 | FLAG_EDCIDSR_PRESENT | FLAG_EDVIDSR_PRESENT | FLAG_OS_LOCK_WAS_LOCKED;
    s.edprsr_first = 0x23;
    s.edprsr = 0x21;
    s.edprcr_saved = 0;
    s.power_polls = 1;
    s.edpcsr = 0x0812_3454;
    s.edpcsr_hi = 0xFFFF_8000;
    s.edcidsr = 0x42;
    s.edvidsr = 0x9000_0007;
    s.pc = calibrate_pc(&arch, s.edpcsr, s.edpcsr_hi, Some(s.edvidsr));
    s
}

#[test]
fn record_round_trip() {
    let s = sampled_v8();
    let mut buf = [0xEEu8; RECORD_LEN + 8];
    assert_eq!(s.encode(&mut buf), Ok(RECORD_LEN));
    // Bytes after the record are untouched.
    assert_eq!(&buf[RECORD_LEN..], &[0xEE; 8]);
    // Header: version 2, size 64, cpu 2 (little-endian).
    assert_eq!(&buf[..8], &[2, 0, 64, 0, 2, 0, 0, 0]);
    // Calibrated PC at 0x28, little-endian.
    assert_eq!(&buf[0x28..0x30], &0xFFFF_8000_0812_3454u64.to_le_bytes());
    // Decoded EDVIDSR at 0x30: Non-secure (1), EL1/0 (1), 64, VMID 7.
    assert_eq!(&buf[0x30..0x34], &[1, 1, 64, 7]);
    let d = CpuSample::decode(&buf).unwrap();
    assert_eq!(d, s);
    assert!(d.os_lock_was_locked());

    assert_eq!(d.mpidr, None);
    // No MPIDR: the last 8 bytes are zero, as version 1's reserved bytes were, and the same
    // bytes with version 1 decode to the same sample.
    assert_eq!(&buf[0x38..RECORD_LEN], &[0; 8]);
    buf[0] = 1;
    assert_eq!(CpuSample::decode(&buf[..RECORD_LEN]), Ok(s));

    // The MPIDR, at 0x38 with its flag.
    let mut m = s;
    m.set_mpidr(Some(0x81_0000_0203));
    assert_ne!(m.flags & FLAG_MPIDR, 0);
    let mut buf = [0u8; RECORD_LEN];
    m.encode(&mut buf).unwrap();
    assert_eq!(&buf[0x38..0x40], &0x81_0000_0203u64.to_le_bytes());
    assert_eq!(
        CpuSample::decode(&buf).map(|d| d.mpidr),
        Ok(Some(0x81_0000_0203))
    );
    // MPIDR 0 is an MPIDR: the flag says it is there.
    m.set_mpidr(Some(0));
    m.encode(&mut buf).unwrap();
    assert_eq!(CpuSample::decode(&buf).map(|d| d.mpidr), Ok(Some(0)));
    // A version 1 record knew no MPIDR: its flag there is an error.
    buf[0] = 1;
    assert_eq!(
        CpuSample::decode(&buf),
        Err(RecordError::Inconsistent("flags"))
    );

    let n = CpuSample::not_implemented(5, 0, 2);
    let mut buf = [0u8; RECORD_LEN];
    n.encode(&mut buf).unwrap();
    assert_eq!(CpuSample::decode(&buf), Ok(n));
}

#[test]
fn record_encode_short_buffer() {
    let mut buf = [0u8; RECORD_LEN - 1];
    assert_eq!(
        sampled_v8().encode(&mut buf),
        Err(RecordError::TooShort {
            need: RECORD_LEN,
            got: RECORD_LEN - 1
        })
    );
}

#[test]
fn record_decode_rejects_bad_input() {
    let mut good = [0u8; RECORD_LEN];
    sampled_v8().encode(&mut good).unwrap();
    for len in 0..RECORD_LEN {
        assert_eq!(
            CpuSample::decode(&good[..len]),
            Err(RecordError::TooShort {
                need: RECORD_LEN,
                got: len
            })
        );
    }
    for v in [0, 3] {
        let mut b = good;
        b[0] = v;
        assert_eq!(
            CpuSample::decode(&b),
            Err(RecordError::BadVersion(v.into()))
        );
    }
    let mut b = good;
    b[2] = 63;
    assert_eq!(CpuSample::decode(&b), Err(RecordError::BadSize(63)));
    let mut b = good;
    b[8] = 9;
    assert_eq!(CpuSample::decode(&b), Err(RecordError::BadOutcome(9)));
    let mut b = good;
    b[9] = 77;
    assert_eq!(CpuSample::decode(&b), Err(RecordError::BadPcKind(77)));
    // Calibrated PC that does not match the raw registers.
    let mut b = good;
    b[0x28] ^= 4;
    assert!(matches!(
        CpuSample::decode(&b),
        Err(RecordError::Inconsistent(_))
    ));
    // Decoded VMID that does not match EDVIDSR.
    let mut b = good;
    b[0x33] = 8;
    assert!(matches!(
        CpuSample::decode(&b),
        Err(RecordError::Inconsistent(_))
    ));
    // An MPIDR without its flag.
    let mut b = good;
    b[RECORD_LEN - 1] = 1;
    assert_eq!(
        CpuSample::decode(&b),
        Err(RecordError::Inconsistent("MPIDR without its flag"))
    );
    // Outcome "powered down" with a PC kind.
    let mut b = good;
    b[8] = Outcome::PoweredDown as u8;
    assert!(matches!(
        CpuSample::decode(&b),
        Err(RecordError::Inconsistent(_))
    ));
    // The error texts name the problem.
    assert!(RecordError::BadVersion(3).to_string().contains("version 3"));
}

/// A small deterministic generator (xorshift64*), so that failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[test]
fn record_decode_garbage_never_panics() {
    let mut good = [0u8; RECORD_LEN];
    sampled_v8().encode(&mut good).unwrap();
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    let mut accepted = 0;
    for i in 0..20_000 {
        let mut b = [0u8; RECORD_LEN];
        if i % 2 == 0 {
            // Pure garbage, with a plausible header half of the time.
            for x in b.iter_mut() {
                // Truncation to the low byte is intended.
                *x = rng.next() as u8;
            }
            if i % 4 == 0 {
                b[..4].copy_from_slice(&[1 + (i % 8 == 0) as u8, 0, 64, 0]);
            }
        } else {
            // One corrupted byte in a good record.
            b = good;
            let at = (rng.next() % RECORD_LEN as u64) as usize;
            b[at] ^= (rng.next() as u8) | 1;
        }
        let len = (rng.next() % (RECORD_LEN as u64 + 1)) as usize;
        let short = CpuSample::decode(&b[..len]);
        if len < RECORD_LEN {
            assert!(short.is_err());
        }
        // Whatever is accepted re-encodes to the same bytes: nothing is silently changed (but
        // the version: a version 1 record is written again as version 2).
        if let Ok(s) = CpuSample::decode(&b) {
            let mut again = [0u8; RECORD_LEN];
            s.encode(&mut again).unwrap();
            assert_eq!(again[0], 2);
            assert_eq!(again[1..], b[1..]);
            accepted += 1;
        }
    }
    // Single-bit changes of flags like "OS lock was locked" are valid records.
    assert!(accepted > 0);
}

#[test]
fn report_sampled_matches_c_lines() {
    let text = sampled_v8().report().to_string();
    assert_eq!(
        text,
        "CPU[2]:\n EDPRSR:  00000021 (Power:On DLK:Unlock)\n EDPCSR:  0xffff800008123454\n \
         EDCIDSR: 00000042\n EDVIDSR: 90000007 (State:Non-secure Mode:EL1/0 Width:64bits VMID:7)"
    );
}

#[test]
fn report_not_sampled_says_why() {
    let mut s = sampled_v8();
    s.outcome = Outcome::PoweredDown;
    s.edprsr = 0;
    s.pc = PcCalibration {
        pc: 0,
        kind: PcKind::None,
    };
    let text = s.report().to_string();
    assert_eq!(
        text,
        "CPU[2]:\n EDPRSR:  00000000 (Power:Off DLK:Unlock)\nNo permission to access debug \
         registers!\n not sampled: powered down (EDPRSR.PU never set)"
    );
    s.outcome = Outcome::Prohibited;
    s.edprsr = 1;
    let text = s.report().to_string();
    assert!(text.contains("CPU is in Debug state or profiling is prohibited!"));
    assert!(text.ends_with("not sampled: sampling prohibited (EDPCSR all ones)"));
    let n = CpuSample::not_implemented(3, 0, 0);
    assert_eq!(
        n.report().to_string(),
        "CPU[3]:\n not sampled: PC sampling not implemented"
    );
}
