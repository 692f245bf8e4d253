//! exec-record: a QEMU TCG plugin (API v1, QEMU 7.2) that records which translated blocks each
//! vCPU executed, with their instruction words, into a file: an execution record written by
//! nothing but QEMU's own callbacks. It shares no code with the CoreSight emulation
//! (tools/qemu-coresight, crates/cspd-emu), so a mistake there cannot make this record agree
//! with a wrong trace. `scripts/check_exec.py` derives the branches from it.
//!
//! ```text
//! -plugin file=libexec_record.so,out=exec.rec,ram=0x40000000+0x40000000
//! ```
//!
//! Arguments: `out=FILE` (the record), `ram=BASE+SIZE` (guest RAM's physical range),
//! `entries=N` (ring entries per vCPU, default 16 Mi), `table=BYTES` (room for the blocks'
//! instruction words, default 1 GiB; the file is sparse), `freeze_at=ADDR` (a block that also
//! freezes the record, below, when a vCPU starts it: where a run must keep what came before a
//! long stretch of one vCPU's execution the ring could not hold).
//!
//! The file is a shared mapping, so it is whole whenever QEMU stops, however it stops. Its
//! layout (little-endian):
//!
//! | offset | what |
//! | --- | --- |
//! | 0 | magic `EXECREC1` |
//! | 8 | u32 version (2), u32 vCPUs |
//! | 16 | u64 ring entries per vCPU |
//! | 24 | u64 table size in bytes |
//! | 32 | u64 table bytes used |
//! | 40 | u64 frozen: 0, or 1 + the vCPU whose block froze the record |
//! | 48 | u64 the address of the block that froze it |
//! | 56 | u64 table full: blocks translated after it filled are not recorded (their runs end) |
//! | 64 + 8·v | u64 entries written by vCPU `v` (the ring holds the last `entries` of them) |
//! | 4096 | the rings, one after the other, `entries` u64 each |
//! | after them | the table |
//!
//! A ring entry is `table offset / 8` in its low 40 bits and, above, how many more times the
//! vCPU ran that same block right after (a one-block loop takes one entry). A loop of two to
//! eight blocks (a CPU spinning on a lock, polling a flag) takes one entry too, after its first
//! pass: a *cycle entry*, whose low 40 bits are `2^40 - 1 - (p - 2)` for a loop of `p` blocks
//! and whose upper bits count the blocks it stands for, less one; those blocks are the `p`
//! entries before it (each one block run once) again and again, the oldest first, and it may
//! end in the middle of a pass. So `A B A B A C` is the entries `A`, `B`, a cycle entry of period
//! 2 holding 3 blocks (`A B A`), then `C`. The oldest entries of a ring that wrapped can be cycle
//! entries whose `p` entries were overwritten: a reader drops them. A table entry is a u64
//! start address, a u32 instruction count `n`, a u32 0, and `n` u32 instruction words, padded
//! to 8 bytes; QEMU translating a block again writes a new entry.
//!
//! The record freezes, for every vCPU at once, at the first block that the kernel that ran
//! could not have executed with its MMU on: once a vCPU has run kernel code (an address in
//! the upper half), a block in guest RAM's physical range that is either the first block vCPU 0
//! ever ran (QEMU's boot code: a reset) or in a 2 MiB region of RAM no vCPU executed before
//! running the kernel (the kernel's own boot and idmap code are in those; a kexec'd kernel is
//! not). The capture kernel and the next boot therefore never overwrite it. With `freeze_at=`,
//! the first block at that address freezes it too.
//!
//! Once frozen, the record has all it will ever hold, so the plugin then removes its callbacks
//! (`qemu_plugin_reset`, which also flushes QEMU's translated code once): a kdump capture kernel
//! or the next boot runs as fast as it would without the recorder, instead of paying an
//! execution callback on every block and a table entry on every translation.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::fs::OpenOptions;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use memmap2::MmapRaw;
use qemu_plugin_sys::{
    qemu_info_t, qemu_plugin_cb_flags, qemu_plugin_id_t, qemu_plugin_insn_data,
    qemu_plugin_insn_size, qemu_plugin_outs, qemu_plugin_register_vcpu_tb_exec_cb,
    qemu_plugin_register_vcpu_tb_trans_cb, qemu_plugin_reset, qemu_plugin_tb,
    qemu_plugin_tb_get_insn, qemu_plugin_tb_n_insns, qemu_plugin_tb_vaddr, QEMU_PLUGIN_VERSION,
};

/// The plugin API version this plugin is written for.
#[unsafe(no_mangle)]
pub static qemu_plugin_version: c_int = QEMU_PLUGIN_VERSION as c_int;

const MAGIC: &[u8; 8] = b"EXECREC1";
const HEADER: u64 = 4096;
/// The most vCPUs the header has counters for.
const MAX_VCPUS: usize = 500;
const OFF_TABLE_USED: usize = 32;
const OFF_FROZEN: usize = 40;
const OFF_FROZEN_AT: usize = 48;
const OFF_TABLE_FULL: usize = 56;
const OFF_COUNTS: usize = 64;
/// Low bits of a ring entry: the table offset in 8-byte units.
const INDEX_BITS: u32 = 40;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
/// One more run of an entry's block (or one more block of a cycle entry).
const REPEAT: u64 = 1 << INDEX_BITS;
/// The most an entry's upper bits count.
const MAX_REPEATS: u64 = (1 << (64 - INDEX_BITS)) - 1;
/// The longest loop a cycle entry stands for, in blocks.
const MAX_PERIOD: u64 = 8;
/// The record's format version (2: cycle entries).
const VERSION: u32 = 2;
/// Upper-half addresses: the kernel's.
const KERNEL_VA: u64 = 0xffff_0000_0000_0000;
const REGION_SHIFT: u32 = 21;

struct Recorder {
    map: MmapRaw,
    vcpus: usize,
    entries: u64,
    table_start: u64,
    table_size: u64,
    ram: std::ops::Range<u64>,
    /// 2 MiB regions of RAM a vCPU executed before it ran the kernel.
    known: Box<[AtomicBool]>,
    kernel_ran: Box<[AtomicBool]>,
    /// The first block vCPU 0 ran (QEMU's boot code), + 1; 0 until then.
    reset_pc: AtomicU64,
    /// `freeze_at=`: a block that also freezes the record when a vCPU starts it.
    freeze_at: Option<u64>,
}

static REC: OnceLock<Recorder> = OnceLock::new();

/// The plugin's id, for `qemu_plugin_reset` once the record is frozen.
static ID: OnceLock<qemu_plugin_id_t> = OnceLock::new();

fn outs(msg: &str) {
    if let Ok(c) = CString::new(format!("exec-record: {msg}\n")) {
        // SAFETY: `c` is a NUL-terminated string that outlives the call.
        unsafe { qemu_plugin_outs(c.as_ptr()) };
    }
}

impl Recorder {
    /// The header word at byte offset `off` (8-byte aligned, inside the header).
    fn word(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off.is_multiple_of(8) && (off as u64) < HEADER);
        // SAFETY: the mapping is page aligned and at least `HEADER` bytes long, so `off` is an
        // aligned u64 inside it; it lives as long as `self`, and every access is atomic.
        unsafe { &*self.map.as_mut_ptr().add(off).cast::<AtomicU64>() }
    }

    /// Writes `value` at byte offset `off` of the file (8-byte aligned, inside the mapping).
    fn put(&self, off: u64, value: u64) {
        if let Ok(o) = usize::try_from(off) {
            if o.is_multiple_of(8) && o + 8 <= self.map.len() {
                // SAFETY: checked to be an aligned u64 inside the mapping; each vCPU writes
                // only its own ring slots and table entries it reserved.
                unsafe {
                    self.map
                        .as_mut_ptr()
                        .add(o)
                        .cast::<u64>()
                        .write_volatile(value.to_le())
                };
            }
        }
    }

    fn get(&self, off: u64) -> u64 {
        match usize::try_from(off) {
            Ok(o) if o.is_multiple_of(8) && o + 8 <= self.map.len() => {
                // SAFETY: as in `put`.
                u64::from_le(unsafe { self.map.as_mut_ptr().add(o).cast::<u64>().read_volatile() })
            }
            _ => 0,
        }
    }

    fn region(&self, addr: u64) -> Option<usize> {
        self.ram
            .contains(&addr)
            .then(|| ((addr - self.ram.start) >> REGION_SHIFT) as usize)
    }

    /// Whether running the block at `addr` on `vcpu` freezes the record (see the module
    /// documentation).
    fn freezes(&self, vcpu: usize, addr: u64) -> bool {
        if self.freeze_at == Some(addr) {
            return true;
        }
        // Each flag is read before it is written: a write on every block, or a locked
        // compare-exchange, would bounce their cache lines between the vCPUs' threads.
        if vcpu == 0 && self.reset_pc.load(Ordering::Relaxed) == 0 {
            let _ =
                self.reset_pc
                    .compare_exchange(0, addr + 1, Ordering::Relaxed, Ordering::Relaxed);
        }
        if addr >= KERNEL_VA {
            if let Some(k) = self.kernel_ran.get(vcpu) {
                if !k.load(Ordering::Relaxed) {
                    k.store(true, Ordering::Relaxed);
                }
            }
            return false;
        }
        let Some(r) = self.region(addr) else {
            return false;
        };
        let ran = self
            .kernel_ran
            .get(vcpu)
            .is_some_and(|k| k.load(Ordering::Relaxed));
        let known = self.known.get(r);
        if !ran {
            if let Some(k) = known.filter(|k| !k.load(Ordering::Relaxed)) {
                k.store(true, Ordering::Relaxed);
            }
            return false;
        }
        self.reset_pc.load(Ordering::Relaxed) == addr + 1
            || !known.is_some_and(|k| k.load(Ordering::Relaxed))
    }

    fn exec(&self, vcpu: usize, index: u64) {
        if vcpu >= self.vcpus || self.word(OFF_FROZEN).load(Ordering::Relaxed) != 0 {
            return;
        }
        let addr = self.get(self.table_start + index * 8);
        if self.freezes(vcpu, addr) {
            if self
                .word(OFF_FROZEN)
                .compare_exchange(0, 1 + vcpu as u64, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                self.word(OFF_FROZEN_AT).store(addr, Ordering::Relaxed);
                outs(&format!("frozen: vCPU {vcpu} ran {addr:#x}"));
                if let Some(&id) = ID.get() {
                    // SAFETY: resetting this plugin's own callbacks, from one of them (QEMU
                    // does it when every vCPU is out of its translated code); `after_freeze`
                    // registers none again. Until then the callbacks see the record frozen.
                    unsafe { qemu_plugin_reset(id, Some(after_freeze)) };
                }
            }
            return;
        }
        let count = self.word(OFF_COUNTS + 8 * vcpu);
        let n = count.load(Ordering::Relaxed);
        let ring = HEADER + vcpu as u64 * self.entries * 8;
        // One division per block: the looks back from the head (at most `MAX_PERIOD + 1`
        // entries, fewer than the ring holds) wrap by a comparison.
        let head = n % self.entries;
        let at = |back: u64| {
            let slot = if head >= back {
                head - back
            } else {
                head + self.entries - back
            };
            ring + slot * 8
        };
        match next_entry(n.min(self.entries), |back| self.get(at(back)), index) {
            Entry::Newest(e) => self.put(at(1), e),
            Entry::New(e) => {
                self.put(ring + head * 8, e);
                count.store(n + 1, Ordering::Relaxed);
            }
        }
    }

    /// Reserves and writes a table entry for a block; returns its index, or `None` when the
    /// table is full.
    fn add_block(&self, addr: u64, words: &[u32]) -> Option<u64> {
        let len = 16 + (words.len() as u64 * 4).next_multiple_of(8);
        let off = self.word(OFF_TABLE_USED).fetch_add(len, Ordering::Relaxed);
        if off + len > self.table_size {
            self.word(OFF_TABLE_FULL).store(1, Ordering::Relaxed);
            return None;
        }
        let at = self.table_start + off;
        self.put(at, addr);
        self.put(at + 8, words.len() as u64);
        for (i, pair) in words.chunks(2).enumerate() {
            let w = u64::from(pair[0]) | pair.get(1).map_or(0, |&h| u64::from(h) << 32);
            self.put(at + 16 + i as u64 * 8, w);
        }
        Some(off / 8)
    }
}

/// What running a block does to a ring: its newest entry becomes this value, or this entry is
/// added.
#[derive(Debug, PartialEq)]
enum Entry {
    Newest(u64),
    New(u64),
}

/// The low bits of a cycle entry of `period` blocks.
const fn cycle(period: u64) -> u64 {
    INDEX_MASK - (period - 2)
}

/// The period of a cycle entry, 0 for a block's entry.
const fn period(entry: u64) -> u64 {
    let low = entry & INDEX_MASK;
    if low > INDEX_MASK - (MAX_PERIOD - 1) {
        INDEX_MASK - low + 2
    } else {
        0
    }
}

/// The ring's change when the block at table index `index` runs: `kept` entries are in the
/// ring, `at(k)` is the `k`-th newest (1 the newest). See the module documentation.
fn next_entry(kept: u64, at: impl Fn(u64) -> u64, index: u64) -> Entry {
    if kept == 0 {
        return Entry::New(index);
    }
    let newest = at(1);
    let repeats = newest >> INDEX_BITS;
    let p = period(newest);
    if p == 0 {
        if newest & INDEX_MASK == index {
            return if repeats < MAX_REPEATS {
                Entry::Newest(newest + REPEAT)
            } else {
                Entry::New(index)
            };
        }
        // A loop's second pass begins: the `p` newest entries are one run of each block, the
        // oldest of them this one.
        let once = |k: u64| {
            let e = at(k);
            e >> INDEX_BITS == 0 && period(e) == 0
        };
        for p in 2..=MAX_PERIOD.min(kept) {
            if at(p) == index && (1..p).all(once) {
                return Entry::New(cycle(p));
            }
        }
        return Entry::New(index);
    }
    // A cycle entry holding `repeats + 1` blocks: the next is its loop's block number
    // `(repeats + 1) % p`.
    if kept > p && repeats < MAX_REPEATS && at(1 + p - (repeats + 1) % p) == index {
        return Entry::Newest(newest + REPEAT);
    }
    Entry::New(index)
}

unsafe extern "C" fn after_freeze(_id: qemu_plugin_id_t) {
    outs("frozen: callbacks removed");
}

unsafe extern "C" fn tb_exec(vcpu: c_uint, userdata: *mut c_void) {
    if let Some(r) = REC.get() {
        r.exec(vcpu as usize, userdata as u64);
    }
}

unsafe extern "C" fn tb_trans(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    let Some(r) = REC.get() else {
        return;
    };
    // SAFETY: `tb` is the block QEMU is translating, valid during this callback.
    let n = unsafe { qemu_plugin_tb_n_insns(tb) };
    // SAFETY: as above.
    let addr = unsafe { qemu_plugin_tb_vaddr(tb) };
    let mut words = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: `i < n`.
        let insn = unsafe { qemu_plugin_tb_get_insn(tb, i) };
        // SAFETY: `insn` belongs to `tb`.
        let size = unsafe { qemu_plugin_insn_size(insn) };
        // SAFETY: as above; the data is `size` bytes long.
        let data = unsafe { qemu_plugin_insn_data(insn) }.cast::<u8>();
        let mut w = [0u8; 4];
        if size == 4 && !data.is_null() {
            // SAFETY: `data` points at the instruction's 4 bytes.
            unsafe { std::ptr::copy_nonoverlapping(data, w.as_mut_ptr(), 4) };
        }
        words.push(u32::from_le_bytes(w));
    }
    if let Some(index) = r.add_block(addr, &words) {
        // SAFETY: registering a callback on the block being translated; the userdata is a
        // number, never dereferenced.
        unsafe {
            qemu_plugin_register_vcpu_tb_exec_cb(
                tb,
                Some(tb_exec),
                qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                index as usize as *mut c_void,
            )
        };
    }
}

fn number(key: &str, v: &str) -> Result<u64, String> {
    let r = match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => v.parse(),
    };
    r.map_err(|_| format!("{key}={v}: not a number"))
}

fn install(info: &qemu_info_t, args: &[String]) -> Result<Recorder, String> {
    let mut out = None;
    let mut ram = None;
    let mut entries = 16u64 << 20;
    let mut table = 1u64 << 30;
    let mut freeze_at = None;
    for a in args {
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| format!("argument '{a}' is not KEY=VALUE"))?;
        match k {
            "out" => out = Some(v.to_string()),
            "ram" => {
                let (b, s) = v
                    .split_once('+')
                    .ok_or_else(|| format!("ram={v}: not BASE+SIZE"))?;
                let (b, s) = (number(k, b)?, number(k, s)?);
                ram = Some(
                    b..b.checked_add(s)
                        .ok_or_else(|| format!("ram={v}: too large"))?,
                );
            }
            "entries" => entries = number(k, v)?.clamp(1024, 1 << 30),
            "freeze_at" => freeze_at = Some(number(k, v)?),
            "table" => table = number(k, v)?.clamp(1 << 20, 8 << 30),
            _ => return Err(format!("unknown argument '{k}'")),
        }
    }
    let out = out.ok_or("out=FILE is required")?;
    let ram = ram.ok_or("ram=BASE+SIZE is required")?;
    // SAFETY: system emulation, so the `system` member of the union is the valid one.
    let vcpus = usize::try_from(unsafe { info.__bindgen_anon_1.system.max_vcpus })
        .unwrap_or(1)
        .clamp(1, MAX_VCPUS);
    let table_start = HEADER + vcpus as u64 * entries * 8;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&out)
        .map_err(|e| format!("out={out}: {e}"))?;
    file.set_len(table_start + table)
        .map_err(|e| format!("out={out}: {e}"))?;
    let map = MmapRaw::map_raw(&file).map_err(|e| format!("out={out}: cannot map: {e}"))?;
    let regions = ((ram.end - ram.start) >> REGION_SHIFT) as usize + 1;
    let r = Recorder {
        map,
        vcpus,
        entries,
        table_start,
        table_size: table,
        ram,
        known: (0..regions).map(|_| AtomicBool::new(false)).collect(),
        kernel_ran: (0..vcpus).map(|_| AtomicBool::new(false)).collect(),
        reset_pc: AtomicU64::new(0),
        freeze_at,
    };
    let mut head = [0u8; 32];
    head[..8].copy_from_slice(MAGIC);
    head[8..12].copy_from_slice(&VERSION.to_le_bytes());
    head[12..16].copy_from_slice(&(vcpus as u32).to_le_bytes());
    head[16..24].copy_from_slice(&entries.to_le_bytes());
    head[24..32].copy_from_slice(&table.to_le_bytes());
    for (i, c) in head.chunks(8).enumerate() {
        r.put(
            i as u64 * 8,
            u64::from_le_bytes(c.try_into().unwrap_or([0; 8])),
        );
    }
    Ok(r)
}

/// Called by QEMU when it loads the plugin.
///
/// # Safety
///
/// QEMU passes a valid `info` and `argc` NUL-terminated argument strings in `argv`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qemu_plugin_install(
    id: qemu_plugin_id_t,
    info: *const qemu_info_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    let n = usize::try_from(argc).unwrap_or(0);
    let args: Vec<String> = (0..n)
        .filter_map(|i| {
            // SAFETY: `i < argc`.
            let a = unsafe { *argv.add(i) };
            // SAFETY: QEMU's argument strings are NUL-terminated.
            (!a.is_null()).then(|| unsafe { CStr::from_ptr(a) }.to_string_lossy().into_owned())
        })
        .collect();
    // SAFETY: QEMU passes a valid `info`.
    let Some(info) = (unsafe { info.as_ref() }) else {
        return -1;
    };
    match install(info, &args) {
        Ok(r) => {
            if REC.set(r).is_err() {
                outs("loaded twice");
                return -1;
            }
        }
        Err(e) => {
            outs(&format!("cannot start: {e}"));
            return -1;
        }
    }
    let _ = ID.set(id);
    // SAFETY: this plugin's id.
    unsafe { qemu_plugin_register_vcpu_tb_trans_cb(id, Some(tb_trans)) };
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodes `blocks` (table indices) into a ring of `size` entries, as the recorder does;
    /// returns the entries written and the ring, oldest first.
    fn encode(blocks: &[u64], size: u64) -> (u64, Vec<u64>) {
        let mut ring = vec![0u64; size as usize];
        let mut n = 0u64;
        for &b in blocks {
            let at = |back: u64| ring[((n - back) % size) as usize];
            match next_entry(n.min(size), at, b) {
                Entry::Newest(e) => ring[((n - 1) % size) as usize] = e,
                Entry::New(e) => {
                    ring[(n % size) as usize] = e;
                    n += 1;
                }
            }
        }
        let kept = n.min(size);
        let order = (n - kept..n).map(|i| ring[(i % size) as usize]).collect();
        (n, order)
    }

    /// The blocks a ring stands for, as a reader expands it (scripts/check_exec.py): cycle
    /// entries whose loop is not in the ring are dropped.
    fn expand(order: &[u64]) -> Vec<u64> {
        let mut out = Vec::new();
        let mut drop = 0usize;
        for (j, &e) in order.iter().enumerate() {
            let p = period(e) as usize;
            if p == 0 {
                for _ in 0..=(e >> INDEX_BITS) {
                    out.push(e & INDEX_MASK);
                }
                continue;
            }
            if j < p + drop {
                drop = j + 1;
                out.clear();
                continue;
            }
            for r in 0..=(e >> INDEX_BITS) as usize {
                out.push(order[j - p + r % p] & INDEX_MASK);
            }
        }
        out
    }

    /// A small deterministic generator (no crate needed for it).
    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn loops_take_one_entry_after_their_first_pass() {
        let spin: Vec<u64> = [3u64, 5].iter().copied().cycle().take(1001).collect();
        let (n, order) = encode(&spin, 64);
        assert_eq!(n, 3, "{order:x?}");
        assert_eq!(order[2], cycle(2) | (998 << INDEX_BITS));
        assert_eq!(expand(&order), spin);

        let three: Vec<u64> = [7u64, 8, 9]
            .iter()
            .copied()
            .cycle()
            .take(30)
            .chain([4])
            .collect();
        let (n, order) = encode(&three, 64);
        assert_eq!(n, 5, "{order:x?}");
        assert_eq!(expand(&order), three);

        // A loop with a block run twice in a pass is not a cycle of single runs: it stays
        // entries with repeats.
        let uneven: Vec<u64> = [1u64, 1, 2].iter().copied().cycle().take(12).collect();
        let (_, order) = encode(&uneven, 64);
        assert!(order.iter().all(|&e| period(e) == 0), "{order:x?}");
        assert_eq!(expand(&order), uneven);

        // A loop longer than MAX_PERIOD is recorded block by block.
        let long: Vec<u64> = (0..9u64).cycle().take(40).collect();
        let (n, _) = encode(&long, 64);
        assert_eq!(n, 40);
    }

    #[test]
    fn every_sequence_expands_back() {
        let mut seed = 0x5eed;
        for case in 0..400 {
            // Few distinct blocks, so loops and repeats come up often.
            let alphabet = 2 + case % 6;
            let len = 1 + lcg(&mut seed) % 300;
            let mut blocks = Vec::new();
            while (blocks.len() as u64) < len {
                let b = lcg(&mut seed) % alphabet;
                let times = if lcg(&mut seed).is_multiple_of(4) {
                    1 + lcg(&mut seed) % 5
                } else {
                    1
                };
                for _ in 0..times {
                    blocks.push(b);
                }
            }
            let (_, order) = encode(&blocks, 1 << 12);
            assert_eq!(expand(&order), blocks, "case {case}: {order:x?}");
        }
    }

    #[test]
    fn a_wrapped_ring_expands_to_the_newest_blocks() {
        let mut seed = 7;
        for case in 0..200 {
            let blocks: Vec<u64> = (0..500).map(|_| lcg(&mut seed) % (2 + case % 4)).collect();
            let (n, order) = encode(&blocks, 16);
            let got = expand(&order);
            assert!(n > 16, "case {case}");
            assert!(
                !got.is_empty() && blocks.ends_with(&got),
                "case {case}: {order:x?}"
            );
        }
    }

    #[test]
    fn a_saturated_entry_starts_another() {
        let full = 3 | (MAX_REPEATS << INDEX_BITS);
        assert_eq!(next_entry(1, |_| full, 3), Entry::New(3));
        let spin = [5, 3, cycle(2) | (MAX_REPEATS << INDEX_BITS)];
        let at = |k: u64| spin[spin.len() - k as usize];
        assert_eq!(next_entry(3, at, 5), Entry::New(5));
    }
}
