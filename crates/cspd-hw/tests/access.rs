//! The register path the hardware sequences are generic over (`cspd_hw::access`): typed accesses
//! through a [`RawFrame`] land on the offsets `register!` declares, and `CsAccess::poll` keeps
//! the contract every implementation has (`read_poll_timeout_atomic()`'s bound).

use cspd_hw::access::{offset_of, CsAccess, Polled, RawFrame, LAR, LSR};
use cspd_hw::etm4x::regs::{TRCACATR, TRCACVR};
use cspd_hw::Array;

/// A frame whose `LSR` reads `ready_after` zeros, then the value with `SLI` set; records every
/// access and every wait.
#[derive(Default)]
struct Clocked {
    ready_after: u32,
    reads: u32,
    waits: Vec<u32>,
    writes: Vec<(u32, u32)>,
}

impl RawFrame for Clocked {
    fn read32(&mut self, offset: u32) -> u32 {
        assert_eq!(offset, offset_of::<LSR>(), "a read of another register");
        self.reads += 1;
        u32::from(self.waits.len() as u32 >= self.ready_after)
    }

    fn write32(&mut self, offset: u32, value: u32) {
        self.writes.push((offset, value));
    }

    fn delay_us(&mut self, us: u32) {
        self.waits.push(us);
    }
}

fn poll_lsr(f: &mut Clocked, retry: u32) -> Result<Polled<LSR>, Polled<LSR>> {
    f.poll(retry, 7, |io| io.read(LSR), |lsr: &LSR| lsr.sli())
}

#[test]
fn a_poll_that_succeeds_reads_once_per_wait_plus_one() {
    for ready_after in [0, 1, 5, 10] {
        let mut f = Clocked {
            ready_after,
            ..Clocked::default()
        };
        let p = poll_lsr(&mut f, 10).expect("ready within the bound");
        assert!(p.value.sli());
        assert_eq!(
            p.delays, ready_after,
            "waits before the read that met the condition"
        );
        assert_eq!(f.reads, ready_after + 1);
        assert_eq!(
            f.waits,
            vec![7; ready_after as usize],
            "each wait is the delay asked for"
        );
    }
}

#[test]
fn a_poll_that_times_out_reads_retry_plus_one_times_and_keeps_the_last_value() {
    for retry in [0, 1, 3, 1000] {
        let mut f = Clocked {
            ready_after: u32::MAX,
            ..Clocked::default()
        };
        let p = poll_lsr(&mut f, retry).expect_err("never ready");
        assert!(!p.value.sli(), "the last value read");
        assert_eq!(p.delays, retry);
        assert_eq!(f.reads, retry + 1, "at most retry + 1 reads");
        assert_eq!(f.waits.len() as u32, retry, "no wait after the last read");
    }
}

#[test]
fn typed_writes_land_on_the_declared_offsets() {
    let mut f = Clocked::default();
    f.write_reg(LAR::from_raw(0xC5AC_CE55));
    f.write64(
        TRCACVR::try_at(3).expect("comparator 3"),
        TRCACVR::from_raw(0xffff_8000_1234_5678),
    );
    f.write(
        TRCACATR::try_at(15).expect("comparator 15"),
        TRCACATR::from_raw(0x1000),
    );
    assert_eq!(
        f.writes,
        vec![
            (0xFB0, 0xC5AC_CE55),
            // A frame writes a 64-bit register as its low word, then its high word.
            (0x418, 0x1234_5678),
            (0x41C, 0xffff_8000),
            (0x4F8, 0x1000),
        ]
    );
    assert!(TRCACVR::try_at(16).is_none() && TRCACATR::try_at(16).is_none());
}
