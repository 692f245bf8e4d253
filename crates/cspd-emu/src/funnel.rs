//! A CoreSight trace funnel with programmable port enables (`arm,coresight-dynamic-funnel`).
//!
//! Written from the Arm CoreSight SoC-400 Technical Reference Manual (DDI 0480), "ATB funnel",
//! and the CoreSight Architecture Specification (IHI 0029) for the management and identification
//! registers:
//!
//! - `FUNCTL` (0x000): bits 7:0 enable the slave ports (bits of unimplemented ports are RAZ/WI),
//!   bits 11:8 the hold time (the number of transactions minus one a port keeps the output);
//!   reset value 0x300 (all ports disabled, hold time 3);
//! - `PRICTL` (0x004): three priority bits per port; reset 0x00FA_C688 (port `n` has priority
//!   `n`), bits of unimplemented ports RAZ/WI;
//! - `CLAIMSET`/`CLAIMCLR` (0xFA0/0xFA4): four claim tags; `CLAIMSET` reads the implemented bits,
//!   `CLAIMCLR` the current tags;
//! - `LAR`/`LSR` (0xFB0/0xFB4): the software lock, set at reset; while it is set, writes to any
//!   register other than `LAR` are ignored;
//! - `AUTHSTATUS` (0xFB8) 0: the funnel implements no authentication interface;
//! - `DEVID` (0xFC8): `PORTCOUNT` in bits 3:0, `SCHEME` (bits 7:4) 0, the priority scheme of
//!   `PRICTL`;
//! - `DEVTYPE` (0xFCC) 0x12: link, funnel;
//! - identification: part number 0x908, designer Arm (JEP106 continuation 4, code 0x3B),
//!   revision 1, component class 0x9.
//!
//! The `linux` C driver `coresight-funnel` reads `FUNCTL`, claims the device when no port is
//! enabled yet, and writes `FUNCTL` (port enable, hold time 7) and `PRICTL`.

use crate::bus::{with_id_regs, Component, PrimeCellId};

/// Offset of `FUNCTL`.
pub const FUNCTL: u32 = 0x000;
/// Offset of `PRICTL`.
pub const PRICTL: u32 = 0x004;
/// Offset of `CLAIMSET`.
pub const CLAIMSET: u32 = 0xFA0;
/// Offset of `CLAIMCLR`.
pub const CLAIMCLR: u32 = 0xFA4;
/// Offset of `LAR`.
pub const LAR: u32 = 0xFB0;
/// Offset of `LSR`.
pub const LSR: u32 = 0xFB4;
/// Offset of `AUTHSTATUS`.
pub const AUTHSTATUS: u32 = 0xFB8;
/// Offset of `DEVID`.
pub const DEVID: u32 = 0xFC8;
/// Offset of `DEVTYPE`.
pub const DEVTYPE: u32 = 0xFCC;

/// The key that unlocks the software lock when written to `LAR`.
pub const UNLOCK_KEY: u32 = 0xC5AC_CE55;

/// `FUNCTL` at reset: ports disabled, hold time 3.
pub const FUNCTL_RESET: u32 = 0x300;

/// `PRICTL` at reset for eight ports: port `n` has priority `n`.
pub const PRICTL_RESET: u32 = 0x00FA_C688;

/// `DEVTYPE` of a funnel: major type 0x2 (link), sub-type 0x1 (funnel).
pub const FUNNEL_DEVTYPE: u32 = 0x12;

/// `CLAIMSET` read value: claim tag bits 3:0 implemented.
pub const CLAIM_IMPLEMENTED: u32 = 0xF;

/// Most slave ports a funnel has.
pub const MAX_PORTS: usize = 8;

/// Identification of a CoreSight SoC-400 funnel: part 0x908, designer Arm, revision 1, class 0x9.
pub const FUNNEL_ID: PrimeCellId = PrimeCellId {
    pid: 0x04_001B_B908,
    cid: PrimeCellId::CORESIGHT_CID,
};

const FUNCTL_HOLDTIME: u32 = 0xF << 8;
const LSR_SLI: u32 = 1 << 0;
const LSR_SLK: u32 = 1 << 1;

/// Every register of the frame, identification included.
const STAGED: &[u32] = &with_id_regs::<21>(&[
    FUNCTL, PRICTL, CLAIMSET, CLAIMCLR, LAR, LSR, AUTHSTATUS, DEVID, DEVTYPE,
]);

/// An emulated dynamic funnel behind the register window.
#[derive(Clone, Debug)]
pub struct Funnel {
    ports: usize,
    functl: u32,
    prictl: u32,
    claim: u32,
    locked: bool,
}

impl Funnel {
    /// Creates a funnel with `ports` slave ports (clamped to 1..=8) in its reset state.
    pub fn new(ports: usize) -> Funnel {
        let ports = ports.clamp(1, MAX_PORTS);
        let mut f = Funnel {
            ports,
            functl: FUNCTL_RESET,
            prictl: 0,
            claim: 0,
            locked: true,
        };
        f.prictl = PRICTL_RESET & f.prictl_mask();
        f
    }

    /// Returns whether slave port `port` is enabled (`FUNCTL.EN<port>`).
    pub fn port_enabled(&self, port: usize) -> bool {
        port < self.ports && self.functl & (1 << port) != 0
    }

    /// Returns the number of slave ports.
    pub fn ports(&self) -> usize {
        self.ports
    }

    /// The `FUNCTL` port-enable bits of the implemented ports.
    fn port_mask(&self) -> u32 {
        (1u32 << self.ports) - 1
    }

    /// The `PRICTL` bits of the implemented ports (three per port).
    fn prictl_mask(&self) -> u32 {
        // The shift is at most 24.
        (1u32 << (3 * self.ports)) - 1
    }
}

impl Component for Funnel {
    fn peek(&mut self, offset: u32) -> u32 {
        if let Some(v) = FUNNEL_ID.reg(offset) {
            return v;
        }
        match offset {
            FUNCTL => self.functl,
            PRICTL => self.prictl,
            CLAIMSET => CLAIM_IMPLEMENTED,
            CLAIMCLR => self.claim,
            LSR => LSR_SLI | if self.locked { LSR_SLK } else { 0 },
            // CAST: at most 8.
            DEVID => self.ports as u32,
            DEVTYPE => FUNNEL_DEVTYPE,
            _ => 0,
        }
    }

    fn read(&mut self, _offset: u32) {
        // No register of the funnel has a read side effect.
    }

    fn write(&mut self, offset: u32, value: u32) {
        if offset == LAR {
            self.locked = value != UNLOCK_KEY;
            return;
        }
        if self.locked {
            return;
        }
        match offset {
            FUNCTL => self.functl = value & (self.port_mask() | FUNCTL_HOLDTIME),
            PRICTL => self.prictl = value & self.prictl_mask(),
            CLAIMSET => self.claim |= value & CLAIM_IMPLEMENTED,
            CLAIMCLR => self.claim &= !(value & CLAIM_IMPLEMENTED),
            _ => {}
        }
    }

    fn staged(&self) -> &'static [u32] {
        STAGED
    }
}
