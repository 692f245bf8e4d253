//! QEMU TCG plugin (plugin API v1, QEMU 7.2): CoreSight components behind memory-mapped
//! registers, whose ETMs trace what the vCPUs execute.
//!
//! Load it with
//!
//! ```text
//! -object memory-backend-file,id=mem,size=1G,mem-path=/dev/shm/NAME,share=on
//! -M virt,memory-backend=mem
//! -plugin file=libqemu_coresight.so,ram=/dev/shm/NAME,truth=truth.json
//! ```
//!
//! and boot the guest kernel with `mem=1023M` so that it leaves the register window (the top
//! 1 MiB of a 1 GiB machine) alone. Arguments: see [`cspd_emu::config::Config::parse`].
//!
//! API v1 cannot write guest memory, so the plugin maps the file that backs guest RAM and stages
//! register values there; memory callbacks (which run after the access) apply the side effects.
//! Every translated block gets an execution callback (each vCPU's trace), every load and store a
//! memory callback (the window, and the kernel saving `ELR_EL1`), and `mrs xN, elr_el1` an
//! instruction callback. Once no trace session has been active for a long stretch of execution
//! after one was (the panic dump is done), blocks get the memory callbacks only, until an ETM is
//! enabled again ([`cspd_emu::instrumentation`]).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use cspd_emu::a64::{self, StoredRegs};
use cspd_emu::config::Config;
use cspd_emu::instrumentation::Instrumentation;
use cspd_emu::tracker::TbInfo;
use cspd_emu::{Emu, GuestMem};
use memmap2::MmapRaw;
use qemu_plugin_sys::{
    qemu_info_t, qemu_plugin_cb_flags, qemu_plugin_get_hwaddr, qemu_plugin_hwaddr_phys_addr,
    qemu_plugin_id_t, qemu_plugin_insn_data, qemu_plugin_insn_size, qemu_plugin_mem_is_store,
    qemu_plugin_mem_rw, qemu_plugin_mem_size_shift, qemu_plugin_meminfo_t, qemu_plugin_outs,
    qemu_plugin_register_atexit_cb, qemu_plugin_register_vcpu_idle_cb,
    qemu_plugin_register_vcpu_insn_exec_cb, qemu_plugin_register_vcpu_mem_cb,
    qemu_plugin_register_vcpu_tb_exec_cb, qemu_plugin_register_vcpu_tb_trans_cb, qemu_plugin_reset,
    qemu_plugin_tb, qemu_plugin_tb_get_insn, qemu_plugin_tb_n_insns, qemu_plugin_tb_vaddr,
    QEMU_PLUGIN_VERSION,
};

const CB_NO_REGS: qemu_plugin_cb_flags = qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS;
const MEM_RW: qemu_plugin_mem_rw = qemu_plugin_mem_rw::QEMU_PLUGIN_MEM_RW;

/// The plugin API version this plugin is written for.
#[unsafe(no_mangle)]
pub static qemu_plugin_version: c_int = QEMU_PLUGIN_VERSION as c_int;

/// Block descriptions by start address and instruction words.
type Blocks = HashMap<(u64, Box<[u32]>), &'static TbInfo>;

struct Plugin {
    emu: Emu,
    log: Mutex<Option<File>>,
    /// Translated blocks, interned by start address and content: a block QEMU translates again
    /// reuses its description, so memory grows with distinct code, not with translations.
    blocks: Mutex<Blocks>,
}

static PLUGIN: OnceLock<Plugin> = OnceLock::new();

/// The plugin's id, for `qemu_plugin_reset`.
static ID: OnceLock<qemu_plugin_id_t> = OnceLock::new();

/// Light instrumentation: blocks are translated with memory callbacks only (the registers still
/// work), so that a capture kernel runs at full speed. The emulator decides
/// ([`cspd_emu::Emu::instrumentation`]): light once no trace session has been active for a long
/// stretch of execution after one was (the dump is done), not at each disable of a trace unit
/// (perf disables and enables them at every context switch); an ETM enabled again brings the
/// execution callbacks back.
static LIGHT: AtomicBool = AtomicBool::new(false);

/// Switches the instrumentation when the emulator's decision changed; QEMU flushes its
/// translations. Called after every register access and every block: when nothing changed it
/// only reads two flags.
fn follow_sessions(p: &Plugin) {
    loop {
        let light = p.emu.instrumentation() == Instrumentation::Light;
        // A plain load first: the swap would write the flag's cache line on every block.
        if LIGHT.load(Ordering::Relaxed) == light || LIGHT.swap(light, Ordering::Relaxed) == light {
            return;
        }
        p.log(&format!(
            "qemu-coresight: {} instrumentation",
            if light {
                "light (no trace session left)"
            } else {
                "full (tracing)"
            }
        ));
        if let Some(&id) = ID.get() {
            // SAFETY: resetting this plugin's own callbacks; `after_reset` registers them again.
            unsafe { qemu_plugin_reset(id, Some(after_reset)) };
        }
        // The decision may have changed again on another vCPU meanwhile: look once more.
    }
}

unsafe extern "C" fn after_reset(id: qemu_plugin_id_t) {
    // SAFETY: registering this plugin's callbacks with its own id.
    unsafe { register(id) };
}

/// Registers the translation, idle and exit callbacks.
///
/// # Safety
///
/// `id` is this plugin's id.
unsafe fn register(id: qemu_plugin_id_t) {
    // SAFETY: the caller passes this plugin's id.
    unsafe {
        qemu_plugin_register_vcpu_tb_trans_cb(id, Some(tb_trans));
        qemu_plugin_register_vcpu_idle_cb(id, Some(vcpu_idle));
        qemu_plugin_register_atexit_cb(id, Some(at_exit), std::ptr::null_mut());
    }
}

impl Plugin {
    fn log(&self, msg: &str) {
        let mut f = self.log.lock().unwrap_or_else(|e| e.into_inner());
        match f.as_mut() {
            Some(f) => {
                let _ = writeln!(f, "{msg}");
            }
            None => outs(msg),
        }
    }
}

fn outs(msg: &str) {
    if let Ok(c) = CString::new(format!("qemu-coresight: {msg}\n")) {
        // SAFETY: `c` is a NUL-terminated string that outlives the call.
        unsafe { qemu_plugin_outs(c.as_ptr()) };
    }
}

/// Guest RAM, through the shared file that backs it.
struct SharedRam {
    map: MmapRaw,
    base: u64,
}

impl SharedRam {
    fn ptr(&self, paddr: u64, len: usize) -> Option<*mut u8> {
        let off = usize::try_from(paddr.checked_sub(self.base)?).ok()?;
        if off.checked_add(len)? > self.map.len() {
            return None;
        }
        // SAFETY: `off + len` is within the mapping.
        Some(unsafe { self.map.as_mut_ptr().add(off) })
    }
}

impl GuestMem for SharedRam {
    fn read_u32(&self, paddr: u64) -> Option<u32> {
        let p = self.ptr(paddr, 4)?;
        // SAFETY: `p..p+4` is in the mapping; the guest may write it concurrently, hence volatile.
        Some(u32::from_le(unsafe { p.cast::<u32>().read_volatile() }))
    }

    fn write_u32(&self, paddr: u64, value: u32) {
        if let Some(p) = self.ptr(paddr & !3, 4) {
            // SAFETY: `p..p+4` is in the mapping and 4-byte aligned (the file is page aligned).
            unsafe { p.cast::<u32>().write_volatile(value.to_le()) };
        }
    }

    fn read_u64(&self, paddr: u64) -> Option<u64> {
        let lo = self.read_u32(paddr)?;
        let hi = self.read_u32(paddr.checked_add(4)?)?;
        Some(u64::from(lo) | (u64::from(hi) << 32))
    }

    fn writable(&self, paddr: u64, len: u64) -> bool {
        usize::try_from(len).is_ok_and(|l| self.ptr(paddr, l).is_some())
    }
}

/// Userdata of a memory callback: the registers a 64-bit store writes, or 0.
fn store_userdata(regs: Option<StoredRegs>) -> usize {
    match regs {
        None => 0,
        Some(r) => {
            let rt2 = r.rt2.map_or(0, |x| usize::from(x) + 1);
            0x1_0000 | usize::from(r.rt) | (rt2 << 8)
        }
    }
}

fn store_regs(ud: usize) -> Option<StoredRegs> {
    if ud & 0x1_0000 == 0 {
        return None;
    }
    // CAST: masked to a byte.
    let rt = (ud & 0xFF) as u8;
    // CAST: masked to a byte.
    let rt2 = ((ud >> 8) & 0xFF) as u8;
    Some(StoredRegs {
        rt,
        rt2: rt2.checked_sub(1),
    })
}

unsafe extern "C" fn tb_exec(vcpu: c_uint, userdata: *mut c_void) {
    let Some(p) = PLUGIN.get() else {
        return;
    };
    // SAFETY: the userdata of a block callback is a leaked `&'static TbInfo` (see `tb_trans`).
    let tb: &'static TbInfo = unsafe { &*userdata.cast::<TbInfo>() };
    p.emu.tb_exec(vcpu as usize, tb);
    follow_sessions(p);
}

/// A vCPU goes idle: one that a firmware call halted is powered off ([`Emu::vcpu_idle`]).
unsafe extern "C" fn vcpu_idle(_id: qemu_plugin_id_t, vcpu: c_uint) {
    if let Some(p) = PLUGIN.get() {
        p.emu.vcpu_idle(vcpu as usize);
        for e in p.emu.take_events() {
            p.log(&format!("qemu-coresight: {e}"));
        }
    }
}

unsafe extern "C" fn mrs_elr(vcpu: c_uint, userdata: *mut c_void) {
    if let Some(p) = PLUGIN.get() {
        // CAST: the userdata is a register number, 0..=30.
        p.emu.mrs_elr(vcpu as usize, userdata as usize as u8);
    }
}

unsafe extern "C" fn dc_clean(vcpu: c_uint, _userdata: *mut c_void) {
    if let Some(p) = PLUGIN.get() {
        p.emu.dc_clean(vcpu as usize);
    }
}

/// Whether `w` is `DC CVAC, Xt` or `DC CIVAC, Xt` (`SYS #3, C7, C10/C14, #1, Xt`): a clean of a
/// data cache line to the point of coherency, what the kernel's `dcache_clean_poc()` runs.
fn is_dc_clean_poc(w: u32) -> bool {
    matches!(w & !0x1F, 0xD50B_7A20 | 0xD50B_7E20)
}

unsafe extern "C" fn mem_access(
    vcpu: c_uint,
    info: qemu_plugin_meminfo_t,
    vaddr: u64,
    userdata: *mut c_void,
) {
    let Some(p) = PLUGIN.get() else {
        return;
    };
    // SAFETY: called from a memory callback with its own `info` and `vaddr`.
    let hw = unsafe { qemu_plugin_get_hwaddr(info, vaddr) };
    if hw.is_null() {
        return;
    }
    // SAFETY: `hw` is the non-null handle QEMU just returned.
    let pa = unsafe { qemu_plugin_hwaddr_phys_addr(hw) };
    // SAFETY: `info` is this callback's.
    let store = unsafe { qemu_plugin_mem_is_store(info) };
    let vcpu = vcpu as usize;
    if p.emu.window().contains(&pa) {
        // SAFETY: `info` is this callback's.
        let size = 1u32 << unsafe { qemu_plugin_mem_size_shift(info) }.min(4);
        p.emu.mmio(vcpu, pa, size, store);
        for e in p.emu.take_events() {
            p.log(&format!("qemu-coresight: {e}"));
        }
        follow_sessions(p);
        return;
    }
    if store && p.emu.watching_stores(vcpu) {
        p.emu.stored(vcpu, store_regs(userdata as usize), pa);
    }
}

unsafe extern "C" fn tb_trans(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    let Some(p) = PLUGIN.get() else {
        return;
    };
    // SAFETY: `tb` is the block QEMU is translating, valid during this callback.
    let n = unsafe { qemu_plugin_tb_n_insns(tb) };
    // SAFETY: as above.
    let start = unsafe { qemu_plugin_tb_vaddr(tb) };
    let mut words = Vec::with_capacity(n);
    let mut insns = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: `i < n`.
        let insn = unsafe { qemu_plugin_tb_get_insn(tb, i) };
        // SAFETY: `insn` belongs to `tb`.
        let (size, data) = unsafe { (qemu_plugin_insn_size(insn), qemu_plugin_insn_data(insn)) };
        if size != 4 || data.is_null() {
            // Not A64 (AArch32 code): not traced.
            return;
        }
        // SAFETY: `data` points at the instruction's `size` (4) bytes.
        let w = u32::from_le(unsafe { data.cast::<u32>().read_unaligned() });
        words.push(w);
        insns.push(insn);
    }
    let light = LIGHT.load(Ordering::Relaxed);
    let Some(info) = intern(p, start, words) else {
        return;
    };
    // Cache cleans are counted whether or not a trace unit is on: the panic path cleans the dump
    // region after every source has stopped.
    for (i, &insn) in insns.iter().enumerate() {
        if info.words.get(i).is_some_and(|&w| is_dc_clean_poc(w)) {
            // SAFETY: `insn` belongs to `tb`; no userdata.
            unsafe {
                qemu_plugin_register_vcpu_insn_exec_cb(
                    insn,
                    Some(dc_clean),
                    CB_NO_REGS,
                    std::ptr::null_mut(),
                )
            };
        }
    }
    if light {
        for (i, &insn) in insns.iter().enumerate() {
            if info.words.get(i).is_some_and(|&w| a64::is_word_access(w)) {
                // SAFETY: `insn` belongs to `tb`; no userdata.
                unsafe {
                    qemu_plugin_register_vcpu_mem_cb(
                        insn,
                        Some(mem_access),
                        CB_NO_REGS,
                        MEM_RW,
                        std::ptr::null_mut(),
                    )
                };
            }
        }
        return;
    }
    // SAFETY: registering callbacks during translation, with a `'static` userdata.
    unsafe {
        qemu_plugin_register_vcpu_tb_exec_cb(
            tb,
            Some(tb_exec),
            CB_NO_REGS,
            std::ptr::from_ref(info).cast_mut().cast(),
        );
    }
    // The register that holds ELR_EL1 after an `mrs xN, elr_el1` earlier in the block: the
    // stores of it are watched (the kernel's exception entry saves it a few instructions on).
    let mut elr_reg: Option<u8> = None;
    for (i, &insn) in insns.iter().enumerate() {
        let Some(&w) = info.words.get(i) else {
            break;
        };
        let saves_elr = elr_reg
            .is_some_and(|r| a64::stored_regs(w).is_some_and(|s| s.rt == r || s.rt2 == Some(r)));
        if a64::is_word_access(w) || saves_elr {
            let ud = store_userdata(a64::stored_regs(w).filter(|_| saves_elr));
            // SAFETY: `insn` belongs to `tb`; the userdata is a plain integer.
            unsafe {
                qemu_plugin_register_vcpu_mem_cb(
                    insn,
                    Some(mem_access),
                    CB_NO_REGS,
                    MEM_RW,
                    ud as *mut c_void,
                )
            };
        } else if let Some(reg) = a64::mrs_elr_el1(w) {
            elr_reg = Some(reg);
            // SAFETY: as above.
            unsafe {
                qemu_plugin_register_vcpu_insn_exec_cb(
                    insn,
                    Some(mrs_elr),
                    CB_NO_REGS,
                    usize::from(reg) as *mut c_void,
                )
            };
        }
    }
}

fn intern(p: &Plugin, start: u64, words: Vec<u32>) -> Option<&'static TbInfo> {
    let mut blocks = p.blocks.lock().unwrap_or_else(|e| e.into_inner());
    let key = (start, words.into_boxed_slice());
    if let Some(&b) = blocks.get(&key) {
        return Some(b);
    }
    let info: &'static TbInfo = Box::leak(Box::new(TbInfo::new(start, &key.1)?));
    blocks.insert(key, info);
    Some(info)
}

unsafe extern "C" fn at_exit(_id: qemu_plugin_id_t, _userdata: *mut c_void) {
    let Some(p) = PLUGIN.get() else {
        return;
    };
    let s = p.emu.exit();
    let blocks = p.blocks.lock().map(|b| b.len()).unwrap_or(0);
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|st| {
            st.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l.trim_start_matches("VmHWM:").trim().to_string())
        })
        .unwrap_or_default();
    let dc: Vec<String> = s
        .dc_clean_since_tmc_stop
        .iter()
        .take(p.emu.cpus().min(cspd_emu::COUNTED_CPUS))
        .map(u64::to_string)
        .collect();
    p.log(&format!(
        "qemu-coresight: data cache cleans to the point of coherency since the TMC stopped, by \
         cpu: {}",
        dc.join(",")
    ));
    p.log(&format!(
        "qemu-coresight: exit: {} register accesses, {} trace sessions, {} trace bytes to the TMC \
         ({} dropped, {} of them after the TMC took its last byte), {} traced blocks, {} exceptions \
         resolved by ELR, {} lost, {} gaps; \
         {} distinct blocks described (~{} KiB); QEMU peak RSS {} {}",
        s.mmio,
        s.sessions,
        s.trace_bytes,
        s.dropped_bytes,
        s.dropped_after_last_taken,
        s.tracker.blocks,
        s.tracker.elr_resolved,
        s.tracker.elr_lost,
        s.tracker.gaps,
        blocks,
        blocks * 160 / 1024,
        rss,
        s.counters(p.emu.cpus())
    ));
}

fn install(info: &qemu_info_t, args: &[String]) -> Result<Plugin, String> {
    if !info.system_emulation {
        return Err("needs full-system emulation (qemu-system-aarch64)".into());
    }
    // SAFETY: QEMU passes a NUL-terminated target name.
    let target = unsafe { CStr::from_ptr(info.target_name) }.to_string_lossy();
    if target != "aarch64" {
        return Err(format!("needs an aarch64 guest, not {target}"));
    }
    let cfg = Config::parse(args.iter().map(String::as_str))?;
    let ram_path = cfg
        .ram
        .clone()
        .ok_or("ram=FILE is required: the mem-path of a shared memory-backend-file")?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&ram_path)
        .map_err(|e| format!("ram={}: {e}", ram_path.display()))?;
    let map =
        MmapRaw::map_raw(&file).map_err(|e| format!("ram={}: mmap: {e}", ram_path.display()))?;
    let ram = SharedRam {
        map,
        base: cfg.ram_base,
    };
    if ram
        .ptr(cfg.window, cspd_emu::bus::WINDOW_SIZE as usize)
        .is_none()
    {
        return Err(format!(
            "window={:#x}: not inside guest RAM {:#x}..{:#x} (ram_base + the size of {})",
            cfg.window,
            cfg.ram_base,
            cfg.ram_base + ram.map.len() as u64,
            ram_path.display()
        ));
    }
    // SAFETY: system emulation, so the `system` member of the union is the valid one.
    let vcpus = unsafe { info.__bindgen_anon_1.system.max_vcpus }.max(1) as usize;
    let log = match cfg.log.as_deref() {
        Some(path) => Some(File::create(path).map_err(|e| format!("log={}: {e}", path.display()))?),
        None => None,
    };
    let emu = Emu::new(cfg, vcpus, Box::new(ram))?;
    Ok(Plugin {
        emu,
        log: Mutex::new(log),
        blocks: Mutex::new(HashMap::new()),
    })
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
    let plugin = match install(info, &args) {
        Ok(p) => p,
        Err(e) => {
            outs(&format!("cannot start: {e}"));
            return -1;
        }
    };
    plugin.log(&format!(
        "qemu-coresight: {} CPUs, window {:#x}..{:#x}",
        plugin.emu.cpus(),
        plugin.emu.window().start,
        plugin.emu.window().end
    ));
    if PLUGIN.set(plugin).is_err() {
        outs("loaded twice");
        return -1;
    }
    let _ = ID.set(id);
    // SAFETY: this plugin's id.
    unsafe { register(id) };
    0
}

#[cfg(test)]
mod tests {
    use super::is_dc_clean_poc;

    #[test]
    fn data_cache_cleans_to_the_point_of_coherency_are_recognised() {
        // dc cvac, x0; dc civac, x3 (the kernel's dcache_clean_poc and its erratum variant).
        assert!(is_dc_clean_poc(0xD50B_7A20));
        assert!(is_dc_clean_poc(0xD50B_7E23));
        // dc cvau (to the point of unification), dc ivac, dc zva, a nop: not counted.
        for w in [0xD50B_7B20, 0xD508_7620, 0xD50B_7420, 0xD503_201F] {
            assert!(!is_dc_clean_poc(w), "{w:#x}");
        }
    }
}
