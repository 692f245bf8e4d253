//! The register window: where each emulated component sits, and how a guest access reaches it.
//!
//! The window is guest RAM that the kernel does not own (above its `mem=` limit), shared with the
//! plugin through the memory-backend file. A read returns what the plugin staged there; the
//! plugin sees the access afterwards, applies its side effects and stages the new values. A write
//! lands in the window; the plugin reads the value back, applies it and restages the register.
//!
//! Guest memory ([`GuestMem`]) is the other thing a component reaches: an ETR writes its trace
//! there.

/// Default physical base of the window: the top 1 MiB of a 1 GiB `virt` machine, so that
/// `mem=1023M` keeps the kernel out of it.
pub const DEFAULT_WINDOW_BASE: u64 = 0x7ff0_0000;

/// Size of one component's register frame.
pub const FRAME: u64 = 0x1000;

/// Offset of the TMC frame in the window.
pub const TMC_OFFSET: u64 = 0x0000;
/// Offset of the funnel frame in the window.
pub const FUNNEL_OFFSET: u64 = 0x1000;
/// Offset of CPU 0's ETM frame; CPU `n`'s is `ETM_OFFSET + n * FRAME`.
pub const ETM_OFFSET: u64 = 0x1_0000;
/// Offset of CPU 0's debug frame; CPU `n`'s is `DEBUG_OFFSET + n * FRAME`.
pub const DEBUG_OFFSET: u64 = 0x2_0000;
/// Most CPUs the window has frames for.
pub const MAX_CPUS: usize = 16;
/// Size of the whole window.
pub const WINDOW_SIZE: u64 = 0x3_0000;

/// One memory-mapped component behind the window.
///
/// Offsets are byte offsets in the component's 4 KiB frame; accesses are 32-bit.
pub trait Component {
    /// Returns what a read of `offset` returns now, without any side effect of the read.
    fn peek(&mut self, offset: u32) -> u32;

    /// Applies the side effects of a guest read of `offset` (the guest already got the staged
    /// value).
    fn read(&mut self, offset: u32);

    /// Applies a guest write of `value` to `offset`.
    fn write(&mut self, offset: u32, value: u32);

    /// Returns the offsets of every register the component defines, to be staged in the window.
    fn staged(&self) -> &'static [u32];
}

/// Which component a window offset belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The TMC.
    Tmc,
    /// The funnel.
    Funnel,
    /// The ETM of this CPU.
    Etm(usize),
    /// The debug interface of this CPU.
    Debug(usize),
}

/// Finds the component and the offset in its frame for a window offset, given `cpus` CPUs.
pub fn decode(window_offset: u64, cpus: usize) -> Option<(Target, u32)> {
    let frame = window_offset & !(FRAME - 1);
    // CAST: masked to the frame size.
    let off = (window_offset & (FRAME - 1)) as u32;
    let cpu_of = |base: u64| -> Option<usize> {
        let n = usize::try_from((frame.checked_sub(base)?) / FRAME).ok()?;
        (n < cpus.min(MAX_CPUS)).then_some(n)
    };
    let target = match frame {
        TMC_OFFSET => Target::Tmc,
        FUNNEL_OFFSET => Target::Funnel,
        f if (ETM_OFFSET..DEBUG_OFFSET).contains(&f) => Target::Etm(cpu_of(ETM_OFFSET)?),
        f if (DEBUG_OFFSET..WINDOW_SIZE).contains(&f) => Target::Debug(cpu_of(DEBUG_OFFSET)?),
        _ => return None,
    };
    Some((target, off))
}

/// Returns the window offset of `target`'s frame.
pub fn frame_of(target: Target) -> u64 {
    match target {
        Target::Tmc => TMC_OFFSET,
        Target::Funnel => FUNNEL_OFFSET,
        Target::Etm(n) => ETM_OFFSET + n as u64 * FRAME,
        Target::Debug(n) => DEBUG_OFFSET + n as u64 * FRAME,
    }
}

/// CoreSight identification registers: `PIDR4..7` at 0xFD0, `PIDR0..3` at 0xFE0, `CIDR0..3` at
/// 0xFF0, each holding one byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrimeCellId {
    /// The 64-bit peripheral ID, `PIDR7..PIDR0` (only the low 40 bits are defined).
    pub pid: u64,
    /// The 32-bit component ID, `CIDR3..CIDR0`.
    pub cid: u32,
}

impl PrimeCellId {
    /// Component ID of a CoreSight component (class 0x9).
    pub const CORESIGHT_CID: u32 = 0xB105_900D;

    /// Returns the identification register at `offset`, or `None` if `offset` is not one.
    pub fn reg(&self, offset: u32) -> Option<u32> {
        let byte = |v: u64, i: u32| -> u32 {
            // CAST: masked to a byte.
            ((v >> (8 * i)) & 0xFF) as u32
        };
        match offset {
            0xFD0..=0xFDC => Some(byte(self.pid, 4 + (offset - 0xFD0) / 4)),
            0xFE0..=0xFEC => Some(byte(self.pid, (offset - 0xFE0) / 4)),
            0xFF0..=0xFFC => Some(byte(u64::from(self.cid), (offset - 0xFF0) / 4)),
            _ => None,
        }
    }

    /// The offsets of the identification registers.
    pub const OFFSETS: [u32; 12] = [
        0xFD0, 0xFD4, 0xFD8, 0xFDC, 0xFE0, 0xFE4, 0xFE8, 0xFEC, 0xFF0, 0xFF4, 0xFF8, 0xFFC,
    ];
}

/// The identification registers every CoreSight component has: `PIDR4`..`PIDR7`,
/// `PIDR0`..`PIDR3`, `CIDR0`..`CIDR3`.
const ID_REGS: [u32; 12] = [
    0xFD0, 0xFD4, 0xFD8, 0xFDC, 0xFE0, 0xFE4, 0xFE8, 0xFEC, 0xFF0, 0xFF4, 0xFF8, 0xFFC,
];

/// A component's staged registers: `own`, then the identification registers. `N` must be
/// `own.len() + 12` (checked when the constant is evaluated).
pub(crate) const fn with_id_regs<const N: usize>(own: &[u32]) -> [u32; N] {
    assert!(N == own.len() + ID_REGS.len());
    let mut out = [0; N];
    let mut i = 0;
    while i < own.len() {
        out[i] = own[i];
        i += 1;
    }
    let mut j = 0;
    while j < ID_REGS.len() {
        out[i + j] = ID_REGS[j];
        j += 1;
    }
    out
}

/// Guest physical memory as the plugin reaches it (the shared RAM file).
pub trait GuestMem: Send + Sync {
    /// Reads the 32-bit little-endian word at `paddr`.
    fn read_u32(&self, paddr: u64) -> Option<u32>;
    /// Writes the 32-bit little-endian word at `paddr`.
    fn write_u32(&self, paddr: u64, value: u32);
    /// Reads the 64-bit little-endian word at `paddr`.
    fn read_u64(&self, paddr: u64) -> Option<u64>;
    /// Returns whether the `len` bytes at `paddr` are guest RAM that can be written.
    fn writable(&self, paddr: u64, len: u64) -> bool;
}
