// SPDX-License-Identifier: GPL-2.0

//! Register-level model of a CoreSight Trace Memory Controller in the ETB, ETF or ETR
//! configuration.
//!
//! Written from the Arm CoreSight TMC Technical Reference Manual (DDI 0461) and the trace formatter
//! protocol (CoreSight Architecture Specification, IHI 0029, "Trace formatter"). It models:
//!
//! - the trace RAM of `RSZ` 32-bit words, storage passed in by the caller;
//! - the formatter, which packs the bytes of several trace sources into 16-byte frames
//!   ([`TmcModel::push_trace`]), or already formatted words ([`TmcModel::push_raw_words`],
//!   [`TmcModel::load_formatted`]) such as the RAM dumps of real boards;
//! - Circular Buffer mode: `RWP` advances as words are written and wraps, setting `STS.Full`;
//! - the Disabled, Running and Stopped states: a manual flush (`FFCR.FlushMan`) that takes time,
//!   `FFCR.StopOnFl`, `FFSR.FtStopped`, and `STS.TMCReady` that rises some time after the stop;
//! - `RRD` reads with their side effect: in Stopped state each read returns the next word, oldest
//!   first, and advances `RRP`; once all was read it returns `0xFFFFFFFF` and `STS.Empty` is set;
//! - the software lock (`LAR`/`LSR`): writes other than to `LAR` are ignored while locked and `RRD`
//!   reads as `0xFFFFFFFF` without side effect;
//! - faults on demand: never ready, a flush that never completes, `RRD` stuck, a stuck lock;
//! - the ETR configuration ([`TmcModelConfig::Etr`]): the storage passed in is then system memory
//!   at an address of its own ([`TmcModel::set_etr_memory_base`]), and the trace buffer is the
//!   `RSZ` words at `DBA` (`DBALO`, `DBAHI`) in it, both written by the driver in Disabled state.
//!   `RWP` and `RRP` are bus addresses (with `RWPHI`, `RRPHI`); capture start sets both to `DBA`
//!   (a SoC-400 part keeps no pointers across sessions); a buffer outside the memory, an `RSZ` of
//!   0 or `AXICTL.ScatterGatherMode` (the model has no scatter-gather, `DEVID.NOSCAT`) set
//!   `STS.MemErr` at the first write and nothing is written;
//! - a count of every read and write per register offset, and of the delays.
//!
//! Time is the model's own clock in microseconds, advanced by [`CsAccess::delay_us`] only; the
//! latencies of the flush and of `TMCReady` are set with [`TmcModel::set_latencies`].
//!
//! Pointer management follows the TRM: "it is not necessary to write to the RRP and RWP registers
//! in most usage models because the pointers are managed automatically", and in Stopped state the
//! buffer is read "solely by successive reads of the RRD Register". The model therefore sets `RRP`
//! to `RWP` when capture starts (so that, as the C driver's perf path computes it, the data to read
//! is `RWP - RRP` bytes when the buffer has not wrapped), and to `RWP` again on entering Stopped
//! state when `STS.Full` is set (the oldest word is the one `RWP` points at). The C driver's
//! `tmc_etb_dump_hw()` never writes `RRP`: it reads `RRD` until `0xFFFFFFFF`; its perf path
//! (`tmc_update_etf_buffer()`) writes `RRP` in Stopped state to skip the oldest trace, and the reads
//! then go on from there to `RWP` (the TRM allows the write once `TMCReady` is set). In Disabled state
//! `RRD` returns the RAM word at `RRP` and advances `RRP`, wrapping, without an end marker.
//!
//! Host-side only: the host tests run the drivers' hardware sequences (`crates/cspd-hw`) against
//! it, and the QEMU plugin (`crates/cspd-emu`) puts it behind its register window. Uses only
//! `core` and `kernel::coresight::access` (the host's `kernel` crate, `crates/kernel-host`).

use kernel::coresight::access::RawFrame;

/// Offset of `RSZ`.
pub const RSZ: u32 = 0x004;
/// Offset of `STS`.
pub const STS: u32 = 0x00C;
/// Offset of `RRD`.
pub const RRD: u32 = 0x010;
/// Offset of `RRP`.
pub const RRP: u32 = 0x014;
/// Offset of `RWP`.
pub const RWP: u32 = 0x018;
/// Offset of `TRG`.
pub const TRG: u32 = 0x01C;
/// Offset of `CTL`.
pub const CTL: u32 = 0x020;
/// Offset of `RWD`.
pub const RWD: u32 = 0x024;
/// Offset of `MODE`.
pub const MODE: u32 = 0x028;
/// Offset of `BUFWM`.
pub const BUFWM: u32 = 0x034;
/// Offset of `RRPHI` (ETR).
pub const RRPHI: u32 = 0x038;
/// Offset of `RWPHI` (ETR).
pub const RWPHI: u32 = 0x03C;
/// Offset of `AXICTL` (ETR).
pub const AXICTL: u32 = 0x110;
/// Offset of `DBALO` (ETR).
pub const DBALO: u32 = 0x118;
/// Offset of `DBAHI` (ETR).
pub const DBAHI: u32 = 0x11C;
/// Offset of `FFSR`.
pub const FFSR: u32 = 0x300;
/// Offset of `FFCR`.
pub const FFCR: u32 = 0x304;
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

/// The key that unlocks the software lock.
pub const UNLOCK_KEY: u32 = 0xC5AC_CE55;

/// The value `RRD` returns when there is nothing to read.
pub const RRD_EMPTY: u32 = 0xFFFF_FFFF;

/// Number of registers with their own access counter: the 16 of `0x000..0x040`, the 4 of
/// `0x300..0x310` (formatter) and the 64 of `0xF00..0x1000` (management and identification). The
/// TMC has no other registers; accesses elsewhere are counted together. Kept small so that a model
/// fits on a kernel stack.
pub const NR_REGS: usize = 16 + 4 + 64;

const STS_FULL: u32 = 1 << 0;
const STS_TRIGGERED: u32 = 1 << 1;
const STS_TMCREADY: u32 = 1 << 2;
const STS_FTEMPTY: u32 = 1 << 3;
const STS_EMPTY: u32 = 1 << 4;
const STS_MEMERR: u32 = 1 << 5;
/// `AXICTL.ScatterGatherMode`.
const AXICTL_SG: u32 = 1 << 7;
/// The implemented bits of `AXICTL` (SoC-400 layout).
const AXICTL_MASK: u32 = 0xFBF;
/// `DEVID` bits of the modelled ETR: `NOSCAT` (24), `AXIAW` = 40 (23:17), `AXIAW_VALID` (16).
const ETR_DEVID_BITS: u32 = (1 << 24) | (40 << 17) | (1 << 16);
/// The address bits an ETR keeps (40-bit AXI addresses, 8-byte aligned).
const ETR_ADDR_MASK: u64 = ((1 << 40) - 1) & !7;
const FFSR_FLINPROG: u32 = 1 << 0;
const FFSR_FTSTOPPED: u32 = 1 << 1;
const FFCR_FLUSHMAN: u32 = 1 << 6;
const FFCR_STOPONFL: u32 = 1 << 12;
/// `FFCR` bits the model stores (all defined ones but `FlushMan`, which is an action).
const FFCR_STORED: u32 = 0x3 | (0x3 << 4) | (0x3 << 8) | (0x3 << 12);
const LSR_SLI: u32 = 1 << 0;
const LSR_SLK: u32 = 1 << 1;

/// The TMC configuration the model presents in `DEVID.CONFIGTYPE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmcModelConfig {
    /// Embedded Trace Buffer (`CONFIGTYPE` 0).
    Etb,
    /// Embedded Trace FIFO (`CONFIGTYPE` 2).
    Etf,
    /// Embedded Trace Router (`CONFIGTYPE` 1): trace goes to a buffer in system memory.
    Etr,
}

/// How `RRD` misbehaves when the RAM-read fault is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RamStuck {
    /// `RRD` keeps returning the same word and `RRP` never moves.
    SameWord,
    /// `RRD` keeps returning RAM words, wrapping, and never the empty marker.
    NeverEmpty,
}

/// Counts of register accesses, per offset, and of delays.
#[derive(Clone, Debug)]
pub struct AccessCounts {
    reads: [u32; NR_REGS],
    writes: [u32; NR_REGS],
    other_reads: u32,
    other_writes: u32,
    /// Number of `delay_us` calls.
    pub delays: u32,
    /// Sum of the microseconds asked for by `delay_us`.
    pub delay_us: u64,
}

impl AccessCounts {
    const fn new() -> Self {
        Self {
            reads: [0; NR_REGS],
            writes: [0; NR_REGS],
            other_reads: 0,
            other_writes: 0,
            delays: 0,
            delay_us: 0,
        }
    }

    fn slot(offset: u32) -> Option<usize> {
        if offset & 3 != 0 {
            return None;
        }
        let i = usize::try_from(offset / 4).ok()?;
        match i {
            0..16 => Some(i),
            0xC0..0xC4 => Some(i - 0xC0 + 16),
            0x3C0..0x400 => Some(i - 0x3C0 + 20),
            _ => None,
        }
    }

    /// Returns how many times the register at `offset` was read.
    pub fn reads(&self, offset: u32) -> u32 {
        match Self::slot(offset).and_then(|i| self.reads.get(i)) {
            Some(&n) => n,
            None => self.other_reads,
        }
    }

    /// Returns how many times the register at `offset` was written.
    pub fn writes(&self, offset: u32) -> u32 {
        match Self::slot(offset).and_then(|i| self.writes.get(i)) {
            Some(&n) => n,
            None => self.other_writes,
        }
    }

    /// Returns the total number of reads (including unaligned or out-of-frame offsets).
    pub fn total_reads(&self) -> u64 {
        self.reads.iter().map(|&n| u64::from(n)).sum::<u64>() + u64::from(self.other_reads)
    }

    /// Returns the total number of writes (including unaligned or out-of-frame offsets).
    pub fn total_writes(&self) -> u64 {
        self.writes.iter().map(|&n| u64::from(n)).sum::<u64>() + u64::from(self.other_writes)
    }

    /// Returns the total number of reads and writes of every register but `RRD`.
    pub fn total_except_rrd(&self) -> u64 {
        self.total_reads() + self.total_writes()
            - u64::from(self.reads(RRD))
            - u64::from(self.writes(RRD))
    }

    fn count_read(&mut self, offset: u32) {
        match Self::slot(offset).and_then(|i| self.reads.get_mut(i)) {
            Some(n) => *n = n.saturating_add(1),
            None => self.other_reads = self.other_reads.saturating_add(1),
        }
    }

    fn count_write(&mut self, offset: u32) {
        match Self::slot(offset).and_then(|i| self.writes.get_mut(i)) {
            Some(n) => *n = n.saturating_add(1),
            None => self.other_writes = self.other_writes.saturating_add(1),
        }
    }
}

/// The trace formatter: packs source bytes into 16-byte frames (IHI 0029, "Trace formatter").
///
/// A frame is 15 bytes of data and IDs plus an auxiliary byte. Even bytes (0, 2, ..., 14) are
/// either an ID (bit 0 set, ID in bits 7:1) or data whose bit 0 is carried by the auxiliary byte
/// (bit `n / 2`); odd bytes are always data. For an ID byte, the auxiliary bit says whether the
/// following odd byte still belongs to the previous ID (1) or already to the new one (0). An ID in
/// byte 14 applies from the next frame. The current ID carries over from frame to frame.
#[derive(Clone, Debug)]
struct Formatter {
    frame: [u8; 16],
    pos: usize,
    aux: u8,
    /// The ID of the data being emitted, `None` until the first ID byte.
    cur_id: Option<u8>,
    /// Start every frame with the ID of its first data byte, so that a wrapped buffer can be
    /// decoded from any frame.
    id_every_frame: bool,
}

impl Formatter {
    const fn new() -> Self {
        Self {
            frame: [0; 16],
            pos: 0,
            aux: 0,
            cur_id: None,
            id_every_frame: false,
        }
    }

    fn set(&mut self, at: usize, v: u8) {
        if let Some(b) = self.frame.get_mut(at) {
            *b = v;
        }
    }

    fn get(&self, at: usize) -> u8 {
        self.frame.get(at).copied().unwrap_or(0)
    }

    /// Writes the ID byte for a change to `id`; returns the frame it completed, if any.
    fn change_id(&mut self, id: u8) -> Option<[u8; 16]> {
        let id_byte = (id << 1) | 1;
        self.cur_id = Some(id);
        if self.pos & 1 == 1 {
            // The even byte before is data of the old ID: move it to the odd position and put
            // the ID in its place, flagging that the odd byte still belongs to the old ID.
            let j = (self.pos - 1) / 2;
            let old = (self.get(self.pos - 1) & 0xFE) | ((self.aux >> j) & 1);
            self.set(self.pos - 1, id_byte);
            self.set(self.pos, old);
            self.aux |= 1 << j;
            self.pos += 1;
            None
        } else {
            let j = self.pos / 2;
            self.set(self.pos, id_byte);
            self.aux &= !(1 << j);
            self.pos += 1;
            if self.pos == 15 {
                Some(self.finish())
            } else {
                None
            }
        }
    }

    /// Emits one byte of source `id`; returns a completed frame, if any.
    fn emit(&mut self, id: u8, byte: u8) -> Option<[u8; 16]> {
        let mut done = None;
        if self.cur_id != Some(id) || (self.id_every_frame && self.pos == 0) {
            done = self.change_id(id);
        }
        if self.pos & 1 == 0 {
            let j = self.pos / 2;
            self.set(self.pos, byte & 0xFE);
            if byte & 1 != 0 {
                self.aux |= 1 << j;
            } else {
                self.aux &= !(1 << j);
            }
        } else {
            self.set(self.pos, byte);
        }
        self.pos += 1;
        if self.pos == 15 {
            // At most one frame completes per byte: an ID in byte 14 leaves `pos` at 1 here.
            done = Some(self.finish());
        }
        done
    }

    /// Completes a partial frame with the null source ID (0) and zero data, as a flush does.
    fn pad(&mut self) -> Option<[u8; 16]> {
        if self.pos == 0 {
            return None;
        }
        if self.cur_id != Some(0) {
            if let Some(f) = self.change_id(0) {
                return Some(f);
            }
        }
        while self.pos < 15 {
            self.set(self.pos, 0);
            if self.pos & 1 == 0 {
                self.aux &= !(1 << (self.pos / 2));
            }
            self.pos += 1;
        }
        Some(self.finish())
    }

    fn finish(&mut self) -> [u8; 16] {
        self.set(15, self.aux);
        let f = self.frame;
        self.frame = [0; 16];
        self.pos = 0;
        self.aux = 0;
        f
    }
}

/// The state of the TMC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// `CTL.TraceCaptEn` is clear.
    Disabled,
    /// Capturing (or stopping: flush in progress, or formatter stopped but not yet ready).
    Running,
    /// The formatter stopped and `TMCReady` rose: the RAM can be read.
    Stopped,
}

/// A register-level model of a TMC-ETB, TMC-ETF or TMC-ETR.
pub struct TmcModel<'a> {
    /// The trace RAM (ETB, ETF), or the system memory an ETR writes into.
    ram: &'a mut [u32],
    config: TmcModelConfig,
    memwidth_code: u32,
    authstatus: u32,
    state: State,
    locked: bool,
    mode: u32,
    ffcr: u32,
    trg: u32,
    bufwm: u32,
    claim: u32,
    /// Write pointer, a word index into the RAM (the ETR's buffer).
    wr: usize,
    /// Read pointer, a word index into the RAM (the ETR's buffer).
    rd: usize,
    /// ETR: the bus address of `ram[0]`.
    etr_base: u64,
    /// ETR: `DBA`.
    dba: u64,
    /// ETR: `RSZ`, written by the driver.
    etr_rsz: u32,
    /// ETR: `AXICTL`.
    axictl: u32,
    /// ETR: `STS.MemErr`.
    memerr: bool,
    /// Words left to read through `RRD` in Stopped state.
    unread: usize,
    full: bool,
    triggered: bool,
    ft_stopped: bool,
    formatter: Formatter,
    now_us: u64,
    flush_latency_us: u64,
    ready_latency_us: u64,
    flush_done_at: Option<u64>,
    ready_at: Option<u64>,
    fault_never_ready: bool,
    fault_flush_stuck: bool,
    fault_ram: Option<RamStuck>,
    fault_lock_stuck: bool,
    counts: AccessCounts,
}

impl<'a> TmcModel<'a> {
    /// Creates a model whose trace RAM is `ram` (`RSZ` = `ram.len()` words).
    ///
    /// The RAM must hold at least one frame, a whole number of frames, and at most 2^30 words;
    /// otherwise `None`. The device starts reset: Disabled, locked, 32-bit memory interface,
    /// the RAM content as given and `RWP` = `RRP` = 0.
    pub fn new(config: TmcModelConfig, ram: &'a mut [u32]) -> Option<Self> {
        let len = ram.len();
        if len < 4 || len & 3 != 0 || len > (1 << 30) {
            return None;
        }
        Some(Self {
            ram,
            config,
            memwidth_code: 2,
            authstatus: 0x0000_0033,
            state: State::Disabled,
            locked: true,
            mode: 0,
            ffcr: 0,
            trg: 0,
            bufwm: 0,
            claim: 0,
            wr: 0,
            rd: 0,
            etr_base: 0x8000_0000,
            dba: 0,
            etr_rsz: 0,
            axictl: 0,
            memerr: false,
            unread: 0,
            full: false,
            triggered: false,
            ft_stopped: true,
            formatter: Formatter::new(),
            now_us: 0,
            flush_latency_us: 0,
            ready_latency_us: 0,
            flush_done_at: None,
            ready_at: None,
            fault_never_ready: false,
            fault_flush_stuck: false,
            fault_ram: None,
            fault_lock_stuck: false,
            counts: AccessCounts::new(),
        })
    }

    /// Sets the time a manual flush takes and the time from the formatter stop to `TMCReady`.
    pub fn set_latencies(&mut self, flush_us: u64, ready_us: u64) {
        self.flush_latency_us = flush_us;
        self.ready_latency_us = ready_us;
    }

    /// Makes the formatter start every frame with the ID of its first data byte (as a formatter
    /// may: repeating the current ID is a valid ID change), so that a decoder finds the source
    /// of the data in any frame of a wrapped buffer.
    pub fn set_id_every_frame(&mut self, on: bool) {
        self.formatter.id_every_frame = on;
    }

    /// Sets `DEVID.MEMWIDTH` (2: 32-bit, 3: 64-bit, 4: 128-bit, 5: 256-bit).
    pub fn set_memwidth_code(&mut self, code: u32) {
        self.memwidth_code = code & 0x7;
    }

    /// ETR: sets the bus address of the first word of the model's memory (0x8000_0000 unless
    /// set); the driver's `DBA` must point into it.
    pub fn set_etr_memory_base(&mut self, base: u64) {
        self.etr_base = base & ETR_ADDR_MASK;
    }

    /// ETR: returns the bus address of the first word of the model's memory.
    pub fn etr_memory_base(&self) -> u64 {
        self.etr_base
    }

    /// Sets the value `AUTHSTATUS` reads.
    pub fn set_authstatus(&mut self, v: u32) {
        self.authstatus = v;
    }

    /// Fault: `STS.TMCReady` never rises after a stop.
    pub fn set_fault_never_ready(&mut self, on: bool) {
        self.fault_never_ready = on;
    }

    /// Fault: a manual flush never completes (`FFCR.FlushMan` stays set).
    pub fn set_fault_flush_stuck(&mut self, on: bool) {
        self.fault_flush_stuck = on;
    }

    /// Fault: `RRD` misbehaves in Stopped state, see [`RamStuck`]; `None` turns it off.
    pub fn set_fault_ram_stuck(&mut self, f: Option<RamStuck>) {
        self.fault_ram = f;
    }

    /// Fault: the software lock ignores writes to `LAR` and stays as it is.
    pub fn set_fault_lock_stuck(&mut self, on: bool) {
        self.fault_lock_stuck = on;
    }

    /// Returns the access counters.
    pub fn counts(&self) -> &AccessCounts {
        &self.counts
    }

    /// Clears the access counters.
    pub fn reset_counts(&mut self) {
        self.counts = AccessCounts::new();
    }

    /// Returns the trace RAM (an ETR's: the memory it writes into).
    pub fn ram(&self) -> &[u32] {
        self.ram
    }

    /// Returns `RSZ`, the RAM (an ETR's: buffer) size in words.
    pub fn rsz(&self) -> usize {
        self.size()
    }

    /// Returns the model's clock in microseconds.
    pub fn now_us(&self) -> u64 {
        self.now_us
    }

    /// Returns whether capture is running (trace is accepted).
    pub fn is_capturing(&self) -> bool {
        self.state == State::Running && !self.ft_stopped
    }

    /// Returns whether the TMC is in Stopped state.
    pub fn is_stopped(&self) -> bool {
        self.state == State::Stopped
    }

    /// Returns whether the software lock is set.
    pub fn is_locked(&self) -> bool {
        self.locked
    }

    /// Returns the number of words between `RRP` and `RWP`, or `RSZ` once the buffer has wrapped.
    ///
    /// Before any `RRD` read this is the number of words a drain returns.
    pub fn words_held(&self) -> usize {
        let size = self.size().max(1);
        if self.full {
            self.size()
        } else {
            (self.wr + size - self.rd) % size
        }
    }

    /// Returns the buffer size in words: the RAM's (ETB, ETF), `RSZ` (ETR).
    fn size(&self) -> usize {
        match self.config {
            TmcModelConfig::Etr => usize::try_from(self.etr_rsz).unwrap_or(0),
            _ => self.ram.len(),
        }
    }

    /// Returns the index in `ram` of the buffer's first word, when the whole buffer is there.
    fn base(&self) -> Option<usize> {
        if self.config != TmcModelConfig::Etr {
            return Some(0);
        }
        let off = self.dba.checked_sub(self.etr_base)?;
        let first = usize::try_from(off / 4).ok()?;
        let end = first.checked_add(self.size())?;
        (self.size() > 0 && end <= self.ram.len()).then_some(first)
    }

    /// Returns the word at index `i` of the buffer.
    fn word(&self, i: usize) -> u32 {
        self.base()
            .and_then(|b| self.ram.get(b.wrapping_add(i)))
            .copied()
            .unwrap_or(0)
    }

    /// The bus address of word `i` of an ETR's buffer.
    fn etr_addr(&self, i: usize) -> u64 {
        // CAST: `usize` fits in `u64`.
        self.dba.wrapping_add(i as u64 * 4)
    }

    fn rsz_u32(&self) -> u32 {
        u32::try_from(self.size()).unwrap_or(u32::MAX)
    }

    fn memwords(&self) -> usize {
        match self.memwidth_code {
            3 => 2,
            4 => 4,
            5 => 8,
            _ => 1,
        }
    }

    fn devid(&self) -> u32 {
        let cfg = match self.config {
            TmcModelConfig::Etb => 0,
            TmcModelConfig::Etr => 1,
            TmcModelConfig::Etf => 2,
        };
        let etr = if self.config == TmcModelConfig::Etr {
            ETR_DEVID_BITS
        } else {
            0
        };
        etr | (self.memwidth_code << 8) | (cfg << 6)
    }

    fn write_word(&mut self, w: u32) {
        if self.memerr {
            return;
        }
        let Some(base) = self.base().filter(|_| self.axictl & AXICTL_SG == 0) else {
            // ETR: no buffer in memory (or scatter-gather asked for): a failed write.
            self.memerr = true;
            return;
        };
        if let Some(slot) = self.ram.get_mut(base.wrapping_add(self.wr)) {
            *slot = w;
        }
        self.wr += 1;
        if self.wr >= self.size() {
            self.wr = 0;
            self.full = true;
        }
    }

    fn write_frame(&mut self, f: &[u8; 16]) {
        for c in f.chunks_exact(4) {
            self.write_word(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        }
    }

    /// Feeds `bytes` of trace from the source with trace ID `id` through the formatter.
    ///
    /// Accepted only while capturing in Circular Buffer mode; complete frames are written to the
    /// RAM at `RWP`. Returns the number of bytes accepted (0 when not capturing, or for an ID
    /// above 0x7F).
    pub fn push_trace(&mut self, id: u8, bytes: &[u8]) -> usize {
        if !self.is_capturing() || self.mode != 0 || id > 0x7F {
            return 0;
        }
        for &b in bytes {
            if let Some(f) = self.formatter.emit(id, b) {
                self.write_frame(&f);
            }
        }
        bytes.len()
    }

    /// Writes already formatted 32-bit words to the RAM as the formatter would.
    ///
    /// Accepted only while capturing in Circular Buffer mode; returns the words accepted.
    pub fn push_raw_words(&mut self, words: &[u32]) -> usize {
        if !self.is_capturing() || self.mode != 0 {
            return 0;
        }
        for &w in words {
            self.write_word(w);
        }
        words.len()
    }

    /// Loads an already formatted stream (little-endian words, e.g. an ETB dump file).
    ///
    /// Accepted only while capturing in Circular Buffer mode; a trailing partial word is ignored.
    /// Returns the bytes accepted.
    pub fn load_formatted(&mut self, bytes: &[u8]) -> usize {
        if !self.is_capturing() || self.mode != 0 {
            return 0;
        }
        let mut n = 0;
        for c in bytes.chunks_exact(4) {
            self.write_word(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            n += 4;
        }
        n
    }

    /// Signals the trigger input: sets `STS.Triggered` while capturing.
    pub fn trigger_in(&mut self) {
        if self.is_capturing() {
            self.triggered = true;
        }
    }

    fn flush_formatter(&mut self) {
        if let Some(f) = self.formatter.pad() {
            self.write_frame(&f);
        }
    }

    fn enter_stopped(&mut self) {
        self.state = State::Stopped;
        let size = self.size().max(1);
        if self.full {
            self.rd = self.wr;
            self.unread = self.size();
        } else {
            self.unread = (self.wr + size - self.rd) % size;
        }
    }

    /// Applies the events whose time has come.
    fn advance(&mut self) {
        if let Some(t) = self.flush_done_at {
            if !self.fault_flush_stuck && self.now_us >= t {
                self.flush_done_at = None;
                self.flush_formatter();
                if self.ffcr & FFCR_STOPONFL != 0 {
                    self.ft_stopped = true;
                    self.ready_at = Some(t.saturating_add(self.ready_latency_us));
                }
            }
        }
        if let Some(t) = self.ready_at {
            if !self.fault_never_ready && self.now_us >= t {
                self.ready_at = None;
                self.enter_stopped();
            }
        }
    }

    fn sts(&self) -> u32 {
        let mut v = 0;
        if self.full {
            v |= STS_FULL;
        }
        if self.triggered {
            v |= STS_TRIGGERED;
        }
        if matches!(self.state, State::Disabled | State::Stopped) {
            v |= STS_TMCREADY;
        }
        if self.formatter.pos == 0 {
            v |= STS_FTEMPTY;
        }
        if self.state == State::Stopped && self.unread == 0 {
            v |= STS_EMPTY;
        }
        if self.memerr {
            v |= STS_MEMERR;
        }
        v
    }

    fn rrp(&self) -> u32 {
        let aligned = self.rd / self.memwords() * self.memwords();
        u32::try_from(aligned * 4).unwrap_or(u32::MAX)
    }

    fn read_rrd(&mut self) -> u32 {
        if self.locked {
            return RRD_EMPTY;
        }
        let size = self.size().max(1);
        match self.state {
            State::Running => RRD_EMPTY,
            State::Disabled => {
                let w = self.word(self.rd);
                self.rd = (self.rd + 1) % size;
                w
            }
            State::Stopped if self.mode != 0 => RRD_EMPTY,
            State::Stopped => match self.fault_ram {
                Some(RamStuck::SameWord) => self.word(self.rd),
                Some(RamStuck::NeverEmpty) => {
                    let w = self.word(self.rd);
                    self.rd = (self.rd + 1) % size;
                    w
                }
                None => {
                    if self.unread == 0 {
                        return RRD_EMPTY;
                    }
                    let w = self.word(self.rd);
                    self.rd = (self.rd + 1) % size;
                    self.unread -= 1;
                    w
                }
            },
        }
    }

    fn write_ctl(&mut self, v: u32) {
        let en = v & 1 != 0;
        match (self.state, en) {
            (State::Disabled, true) => {
                self.state = State::Running;
                self.full = false;
                self.triggered = false;
                self.ft_stopped = false;
                if self.config == TmcModelConfig::Etr {
                    // No pointers kept across sessions: both start at `DBA`.
                    self.wr = 0;
                    self.memerr = false;
                }
                self.rd = self.wr;
                self.unread = 0;
                let id_every_frame = self.formatter.id_every_frame;
                self.formatter = Formatter::new();
                self.formatter.id_every_frame = id_every_frame;
                self.flush_done_at = None;
                self.ready_at = None;
            }
            (State::Running | State::Stopped, false) => {
                self.state = State::Disabled;
                self.ft_stopped = true;
                self.flush_done_at = None;
                self.ready_at = None;
            }
            _ => {}
        }
    }

    fn write_ffcr(&mut self, v: u32) {
        self.ffcr = v & FFCR_STORED;
        if v & FFCR_FLUSHMAN != 0
            && self.state == State::Running
            && !self.ft_stopped
            && self.flush_done_at.is_none()
        {
            self.flush_done_at = Some(self.now_us.saturating_add(self.flush_latency_us));
        }
    }

    fn ptr_from(&self, v: u32) -> usize {
        let word = usize::try_from(v / 4).unwrap_or(0);
        let word = word / self.memwords() * self.memwords();
        word % self.ram.len()
    }

    /// ETR: the buffer index of a bus address, 0 outside the buffer.
    fn etr_index(&self, addr: u64) -> usize {
        addr.checked_sub(self.dba)
            .and_then(|o| usize::try_from(o / 4).ok())
            .filter(|&i| i < self.size())
            .unwrap_or(0)
    }

    /// ETR: reads the registers the ETB and ETF do not have; `None` for the others.
    fn read_etr(&self, offset: u32) -> Option<u32> {
        if self.config != TmcModelConfig::Etr {
            return None;
        }
        // CAST: each value is cut to its 32-bit half on purpose.
        let (lo, hi) = (|a: u64| a as u32, |a: u64| (a >> 32) as u32);
        Some(match offset {
            RRP => lo(self.etr_addr(self.rd)),
            RRPHI => hi(self.etr_addr(self.rd)),
            RWP => lo(self.etr_addr(self.wr)),
            RWPHI => hi(self.etr_addr(self.wr)),
            AXICTL => self.axictl,
            DBALO => lo(self.dba),
            DBAHI => hi(self.dba),
            _ => return None,
        })
    }

    /// ETR: writes the registers the ETB and ETF do not have (in Disabled state); returns
    /// whether `offset` is one of them.
    fn write_etr(&mut self, offset: u32, value: u32) -> bool {
        if self.config != TmcModelConfig::Etr {
            return false;
        }
        let disabled = self.state == State::Disabled;
        let lo = |a: u64| ((a & !0xFFFF_FFFF) | u64::from(value)) & ETR_ADDR_MASK;
        let hi = |a: u64| ((a & 0xFFFF_FFFF) | (u64::from(value) << 32)) & ETR_ADDR_MASK;
        match offset {
            RSZ if disabled => self.etr_rsz = value & 0x7FFF_FFFF,
            AXICTL if disabled => self.axictl = value & AXICTL_MASK,
            DBALO if disabled => self.dba = lo(self.dba),
            DBAHI if disabled => self.dba = hi(self.dba),
            RRP if disabled => self.rd = self.etr_index(lo(self.etr_addr(self.rd))),
            RRPHI if disabled => self.rd = self.etr_index(hi(self.etr_addr(self.rd))),
            RWP if disabled => self.wr = self.etr_index(lo(self.etr_addr(self.wr))),
            RWPHI if disabled => self.wr = self.etr_index(hi(self.etr_addr(self.wr))),
            RSZ | AXICTL | DBALO | DBAHI | RRP | RRPHI | RWP | RWPHI => {}
            _ => return false,
        }
        true
    }
}

impl RawFrame for TmcModel<'_> {
    fn read32(&mut self, offset: u32) -> u32 {
        self.counts.count_read(offset);
        self.advance();
        if let Some(v) = self.read_etr(offset) {
            return v;
        }
        match offset {
            RSZ => self.rsz_u32(),
            STS => self.sts(),
            RRD => self.read_rrd(),
            RRP => self.rrp(),
            RWP => u32::try_from(self.wr * 4).unwrap_or(u32::MAX),
            TRG => self.trg,
            CTL => u32::from(self.state != State::Disabled),
            MODE => self.mode,
            BUFWM => self.bufwm,
            FFSR => {
                let mut v = 0;
                if self.flush_done_at.is_some() {
                    v |= FFSR_FLINPROG;
                }
                if self.ft_stopped {
                    v |= FFSR_FTSTOPPED;
                }
                v
            }
            FFCR => {
                if self.flush_done_at.is_some() {
                    self.ffcr | FFCR_FLUSHMAN
                } else {
                    self.ffcr
                }
            }
            CLAIMSET | CLAIMCLR => self.claim,
            LSR => {
                if self.locked {
                    LSR_SLI | LSR_SLK
                } else {
                    LSR_SLI
                }
            }
            AUTHSTATUS => self.authstatus,
            DEVID => self.devid(),
            // Major type 0x1 (trace sink), sub-type 0x2 (buffer): ETB and ETF as sinks.
            DEVTYPE => 0x21,
            _ => 0,
        }
    }

    fn write32(&mut self, offset: u32, value: u32) {
        self.counts.count_write(offset);
        self.advance();
        if offset == LAR {
            if !self.fault_lock_stuck {
                self.locked = value != UNLOCK_KEY;
            }
            return;
        }
        if self.locked || self.write_etr(offset, value) {
            return;
        }
        match offset {
            CTL => self.write_ctl(value),
            MODE if self.state == State::Disabled => self.mode = value & 0x3,
            FFCR => self.write_ffcr(value),
            TRG if self.state == State::Disabled => self.trg = value,
            BUFWM => self.bufwm = value,
            RRP if self.state == State::Disabled => self.rd = self.ptr_from(value),
            RRP if self.state == State::Stopped => {
                // The reads go on from the new pointer up to `RWP` (all of the RAM when the
                // pointer is `RWP` of a wrapped buffer), as upstream's perf path relies on.
                let size = self.size().max(1);
                self.rd = self.ptr_from(value);
                self.unread = match (self.wr + size - self.rd) % size {
                    0 if self.full => self.size(),
                    n => n,
                };
            }
            RWP if self.state == State::Disabled => self.wr = self.ptr_from(value),
            RWD if self.state == State::Disabled => {
                if let Some(b) = self.base() {
                    if let Some(w) = self.ram.get_mut(b.wrapping_add(self.wr)) {
                        *w = value;
                    }
                }
                self.wr = (self.wr + 1) % self.size().max(1);
            }
            CLAIMSET => self.claim |= value & 0xF,
            CLAIMCLR => self.claim &= !value,
            _ => {}
        }
    }

    fn delay_us(&mut self, us: u32) {
        self.counts.delays = self.counts.delays.saturating_add(1);
        self.counts.delay_us = self.counts.delay_us.saturating_add(u64::from(us));
        self.now_us = self.now_us.saturating_add(u64::from(us));
        self.advance();
    }
}
