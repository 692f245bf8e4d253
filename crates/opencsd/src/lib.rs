//! OpenCSD's trace decoders in process, safely: a [`DecodeTree`] takes CoreSight trace (formatted
//! frames from a trace sink, or one source's raw stream), decodes it with the library's ETMv4 or
//! ETE decoders, reads the traced code through a memory callback the caller provides, and hands
//! every generic trace element to a callback as it is decoded. Nothing is buffered here: memory
//! use is what the callbacks keep.
//!
//! ```no_run
//! use opencsd::{DecodeTree, Etmv4Config, Flow, Format};
//!
//! # fn main() -> Result<(), opencsd::Error> {
//! let text = vec![0u8; 4096];
//! let mut tree = DecodeTree::new(Format::FRAMES)?;
//! tree.add_etmv4(&Etmv4Config::default())?;
//! tree.set_memory(move |addr, buf: &mut [u8]| {
//!     let off = addr.wrapping_sub(0xffff_8000_8000_0000) as usize;
//!     let src = text.get(off..).unwrap_or(&[]);
//!     let n = src.len().min(buf.len());
//!     buf[..n].copy_from_slice(&src[..n]);
//!     n
//! })?;
//! let trace: &[u8] = &[];
//! tree.decode(trace, |id, el| {
//!     println!("{id:#x}: {:?}", el.kind());
//!     Flow::Continue
//! })?;
//! # Ok(())
//! # }
//! ```
//!
//! The library's error logger is global: decodes are serialised by a lock, so that each one
//! reads its own errors.

use std::any::Any;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ffi::CStr;
use std::panic::catch_unwind;
use std::panic::resume_unwind;
use std::panic::AssertUnwindSafe;
use std::ptr::NonNull;
use std::sync::Mutex;

use opencsd_sys as ffi;
use thiserror::Error;

/// Most error messages kept from one decode (the count goes on).
pub const MAX_ERRORS: usize = 64;

/// The library's lock: its error logger and its map of every tree's callback objects are one
/// per process, so creating, decoding and destroying trees take turns.
static LOCK: Mutex<()> = Mutex::new(());

/// Runs `f` while no other thread of this process is inside the library.
///
/// For a caller that forks: a child forked inside `f` starts with the library's global state
/// (its error logger, its map of callback objects) consistent, not caught half-changed by
/// another thread, and may use the library once `f` has returned in it.
pub fn exclusive<R>(f: impl FnOnce() -> R) -> R {
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    f()
}

/// An error from the library: what was being done, the error code and its description.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("OpenCSD: {what}: {text} (error {code})")]
pub struct Error {
    /// What was being done.
    pub what: &'static str,
    /// The library's error code (`ocsd_err_t`).
    pub code: i32,
    /// The library's description of the code.
    pub text: String,
}

impl Error {
    fn new(what: &'static str, code: i32) -> Self {
        let mut buf = [0 as std::ffi::c_char; 128];
        // SAFETY: the buffer is writable for its whole length, which is passed.
        unsafe { ffi::ocsd_err_str(code, buf.as_mut_ptr(), buf.len() as i32) };
        // SAFETY: ocsd_err_str writes a NUL-terminated string within the buffer; the last byte
        // is zero whatever it wrote, as the buffer starts zeroed and is at most filled to len-1.
        let text = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .trim()
            .to_string();
        Self { what, code, text }
    }
}

fn check(what: &'static str, err: ffi::ocsd_err_t) -> Result<(), Error> {
    if err == ffi::OCSD_OK {
        Ok(())
    } else {
        Err(Error::new(what, err))
    }
}

/// The library's version string (`1.3.3`, say).
pub fn version() -> String {
    // SAFETY: returns a pointer to a static NUL-terminated string, or null.
    let p = unsafe { ffi::ocsd_get_version_str() };
    if p.is_null() {
        return "unknown".into();
    }
    // SAFETY: non-null, NUL-terminated, static.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// How the trace given to a tree is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// CoreSight formatted frames; the deformatter flags (`OCSD_DFRMTR_*`).
    Frames(u32),
    /// One source's raw stream (no formatter).
    Single,
}

impl Format {
    /// 16-byte frames aligned in memory: what an ETB, ETF or ETR holds.
    pub const FRAMES: Self = Self::Frames(ffi::OCSD_DFRMTR_FRAME_MEM_ALIGN);
    /// Frames with full syncs: a TPIU capture (`dstream_coresight` in a snapshot).
    pub const TPIU: Self = Self::Frames(ffi::OCSD_DFRMTR_HAS_FSYNCS);
}

/// Architecture and profile of the traced core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Core {
    /// `ocsd_arch_version_t`.
    pub arch: i32,
    /// `ocsd_core_profile_t`.
    pub profile: i32,
}

impl Core {
    /// An Armv8-A core (what every arm64 kernel runs on).
    pub const ARMV8_A: Self = Self {
        arch: ffi::ARCH_V8,
        profile: ffi::profile_CortexA,
    };
}

/// The registers an ETMv4 decoder needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Etmv4Config {
    /// TRCIDR0, 1, 2, 8, 9, 10, 11, 12, 13.
    pub idr: [u32; 9],
    /// TRCCONFIGR.
    pub configr: u32,
    /// TRCTRACEIDR.
    pub traceidr: u32,
    /// The traced core.
    pub core: Core,
}

impl Default for Etmv4Config {
    fn default() -> Self {
        Self {
            idr: [0x2800_0EA1, 0x4100_F403, 0x0000_0488, 0, 0, 0, 0, 0, 0],
            configr: 0x10C1,
            traceidr: 0x10,
            core: Core::ARMV8_A,
        }
    }
}

/// The registers an ETE decoder needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EteConfig {
    /// TRCIDR0, 1, 2, 8.
    pub idr: [u32; 4],
    /// TRCDEVARCH.
    pub devarch: u32,
    /// TRCCONFIGR.
    pub configr: u32,
    /// TRCTRACEIDR.
    pub traceidr: u32,
    /// The traced core.
    pub core: Core,
}

/// What a callback tells the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// Stop decoding now ([`DecodeTree::decode`] returns with `stopped` set).
    Stop,
}

/// Kind of a generic trace element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElemKind {
    /// Not synchronised: decode start, or after an overflow or a bad packet.
    NoSync,
    /// Trace on: start, or after a gap.
    TraceOn,
    /// End of the trace.
    EndOfTrace,
    /// PE context (exception level, security state, context ID).
    PeContext,
    /// Executed instructions.
    InstrRange,
    /// Instructions executed in a range whose path is unknown.
    InstrRangeNoPath,
    /// No memory image at the address the decoder reached.
    AddrNacc,
    /// Address unknown until the next address packet.
    AddrUnknown,
    /// An exception.
    Exception,
    /// An exception return.
    ExceptionReturn,
    /// Anything else (timestamp, cycle count, event, software trace, marker, …), by number.
    Other(i32),
}

/// Type of the last instruction of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstrType {
    /// Not a waypoint (a range cut by an exception ends in one).
    Other,
    /// Direct branch.
    Branch,
    /// Indirect branch.
    IndirectBranch,
    /// ISB.
    Isb,
    /// DSB or DMB.
    DsbDmb,
    /// WFI or WFE.
    WfiWfe,
    /// TSTART.
    Tstart,
}

/// Sub-type of the last instruction of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstrSubtype {
    /// None.
    None,
    /// Branch with link (a call).
    Link,
    /// A64 RET.
    Ret,
    /// A64 ERET.
    Eret,
    /// An A32/T32 instruction that implies a return.
    ImpliedRet,
}

/// Why the trace is not synchronised (a no-sync element) or ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsync {
    /// Not said.
    Unknown,
    /// The decoder started.
    InitDecoder,
    /// The decoder was reset.
    ResetDecoder,
    /// An overflow packet: trace was lost.
    Overflow,
    /// Speculative trace discarded.
    Discard,
    /// A packet the decoder could not make sense of (corrupt trace): it resynchronises.
    BadPacket,
    /// The program image does not match the trace (wrong or missing code).
    BadImage,
    /// End of trace.
    EndOfTrace,
}

/// One generic trace element, borrowed from the decoder for the duration of the callback.
#[derive(Clone, Copy)]
pub struct Element<'a>(&'a ffi::ocsd_generic_trace_elem, u32);

impl std::fmt::Debug for Element<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Element<'_> {
    /// Index of the trace byte where the packet that gave the element starts.
    pub fn index(&self) -> u32 {
        self.1
    }

    /// Why a no-sync (or end-of-trace) element happened.
    pub fn unsync_reason(&self) -> Unsync {
        match self.0.payload[0] {
            1 => Unsync::InitDecoder,
            2 => Unsync::ResetDecoder,
            3 => Unsync::Overflow,
            4 => Unsync::Discard,
            5 => Unsync::BadPacket,
            6 => Unsync::BadImage,
            7 => Unsync::EndOfTrace,
            _ => Unsync::Unknown,
        }
    }

    /// The element's kind.
    pub fn kind(&self) -> ElemKind {
        match self.0.elem_type {
            ffi::OCSD_GEN_TRC_ELEM_NO_SYNC => ElemKind::NoSync,
            ffi::OCSD_GEN_TRC_ELEM_TRACE_ON => ElemKind::TraceOn,
            ffi::OCSD_GEN_TRC_ELEM_EO_TRACE => ElemKind::EndOfTrace,
            ffi::OCSD_GEN_TRC_ELEM_PE_CONTEXT => ElemKind::PeContext,
            ffi::OCSD_GEN_TRC_ELEM_INSTR_RANGE => ElemKind::InstrRange,
            ffi::OCSD_GEN_TRC_ELEM_I_RANGE_NOPATH => ElemKind::InstrRangeNoPath,
            ffi::OCSD_GEN_TRC_ELEM_ADDR_NACC => ElemKind::AddrNacc,
            ffi::OCSD_GEN_TRC_ELEM_ADDR_UNKNOWN => ElemKind::AddrUnknown,
            ffi::OCSD_GEN_TRC_ELEM_EXCEPTION => ElemKind::Exception,
            ffi::OCSD_GEN_TRC_ELEM_EXCEPTION_RET => ElemKind::ExceptionReturn,
            n => ElemKind::Other(n),
        }
    }

    /// Start of a range; the address of an `AddrNacc`.
    pub fn start(&self) -> u64 {
        self.0.st_addr
    }

    /// End (exclusive) of a range; an exception's preferred return address (see
    /// [`Self::return_address`]).
    pub fn end(&self) -> u64 {
        self.0.en_addr
    }

    /// Instructions in a range.
    pub fn instructions(&self) -> u32 {
        self.0.payload[0]
    }

    /// The exception number of an exception.
    pub fn exception_number(&self) -> u32 {
        self.0.payload[0]
    }

    /// Size in bytes of the last instruction of a range.
    pub fn last_size(&self) -> u32 {
        (self.0.flag_bits & ffi::FLAG_LAST_INSTR_SZ_MASK) >> ffi::FLAG_LAST_INSTR_SZ_SHIFT
    }

    /// Whether the last instruction of a range was executed (a branch taken).
    pub fn last_executed(&self) -> bool {
        self.0.flag_bits & ffi::FLAG_LAST_INSTR_EXEC != 0
    }

    /// Whether the last instruction of a range is conditional.
    pub fn last_conditional(&self) -> bool {
        self.0.flag_bits & ffi::FLAG_LAST_INSTR_COND != 0
    }

    /// Type of the last instruction of a range.
    pub fn last_type(&self) -> InstrType {
        match self.0.last_i_type {
            ffi::OCSD_INSTR_BR => InstrType::Branch,
            ffi::OCSD_INSTR_BR_INDIRECT => InstrType::IndirectBranch,
            ffi::OCSD_INSTR_ISB => InstrType::Isb,
            ffi::OCSD_INSTR_DSB_DMB => InstrType::DsbDmb,
            ffi::OCSD_INSTR_WFI_WFE => InstrType::WfiWfe,
            ffi::OCSD_INSTR_TSTART => InstrType::Tstart,
            _ => InstrType::Other,
        }
    }

    /// Sub-type of the last instruction of a range.
    pub fn last_subtype(&self) -> InstrSubtype {
        match self.0.last_i_subtype {
            ffi::OCSD_S_INSTR_BR_LINK => InstrSubtype::Link,
            ffi::OCSD_S_INSTR_V8_RET => InstrSubtype::Ret,
            ffi::OCSD_S_INSTR_V8_ERET => InstrSubtype::Eret,
            ffi::OCSD_S_INSTR_V7_IMPLIED_RET => InstrSubtype::ImpliedRet,
            _ => InstrSubtype::None,
        }
    }

    /// An exception's preferred return address, when the trace gave one.
    pub fn return_address(&self) -> Option<u64> {
        (self.0.flag_bits & ffi::FLAG_EXCEP_RET_ADDR != 0).then_some(self.0.en_addr)
    }

    /// Whether the instruction set is A64.
    pub fn is_a64(&self) -> bool {
        self.0.isa == ffi::ocsd_isa_aarch64
    }

    /// The element as OpenCSD's tools print it (`OCSD_GEN_TRC_ELEM_INSTR_RANGE(exec range=…)`).
    pub fn describe(&self) -> String {
        let mut buf = [0 as std::ffi::c_char; 256];
        // SAFETY: the element is valid for the callback's duration; the buffer is writable for
        // the length passed.
        let err = unsafe { ffi::ocsd_gen_elem_str(self.0, buf.as_mut_ptr(), buf.len() as i32) };
        if err != ffi::OCSD_OK {
            return format!("element type {}", self.0.elem_type);
        }
        // The library terminates within the buffer; make sure of it.
        if let Some(last) = buf.last_mut() {
            *last = 0;
        }
        // SAFETY: NUL-terminated within the buffer (set above).
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }
}

/// An error the library logged during a decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// Trace byte index it refers to.
    pub index: u32,
    /// Trace ID it refers to (`0xFF`: none).
    pub trace_id: u8,
    /// The library's message.
    pub message: String,
}

/// What a decode did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Trace bytes the library took.
    pub bytes: u64,
    /// Whether a callback stopped the decode.
    pub stopped: bool,
    /// Errors and warnings the library logged, the first [`MAX_ERRORS`].
    pub errors: Vec<Logged>,
    /// How many it logged in all.
    pub error_count: u64,
    /// Why the decode stopped before the end of the trace, when the library met an error it
    /// cannot go on from (a corrupt frame, say): the elements before it were delivered.
    pub fatal: Option<String>,
}

type MemFn<'m> = dyn FnMut(u64, &mut [u8]) -> usize + 'm;

/// The memory callback's state: the caller's reader and a panic it raised, if any.
struct MemCtx<'m> {
    read: Box<MemFn<'m>>,
    panic: Option<Box<dyn Any + Send>>,
}

/// The element callback's state during one [`DecodeTree::decode`].
struct SinkCtx<'f, F> {
    f: &'f mut F,
    stopped: bool,
    panic: Option<Box<dyn Any + Send>>,
}

/// What the packet monitor of one source keeps: the address of its newest address packet, as
/// long as no packet that moves the trace on (an atom, an exception, a trace-on...) followed it.
type TailCtx = Cell<Option<u64>>;

/// A decode tree: one trace input, its decoders (one per trace ID) and a memory reader.
pub struct DecodeTree<'m> {
    handle: NonNull<c_void>,
    memory: Option<Box<MemCtx<'m>>>,
    /// Per trace ID, the context of its packet monitor (registered with the library until the
    /// tree is destroyed).
    tails: BTreeMap<u8, Box<TailCtx>>,
    index: u32,
}

// SAFETY: the tree is used by one thread at a time (every method takes `&mut self` or `self`),
// and the library's global state (its error logger) is behind LOCK.
unsafe impl Send for DecodeTree<'_> {}

unsafe extern "C" fn mem_trampoline(
    ctx: *const c_void,
    address: ffi::ocsd_vaddr_t,
    _space: ffi::ocsd_mem_space_acc_t,
    req: u32,
    buf: *mut u8,
) -> u32 {
    if ctx.is_null() || buf.is_null() || req == 0 {
        return 0;
    }
    // SAFETY: ctx is the MemCtx registered with this callback; it lives in a Box owned by the
    // tree, which outlives every decode, and the library calls back only from inside
    // ocsd_dt_process_data, while the tree is borrowed mutably.
    let m = unsafe { &mut *(ctx as *mut MemCtx<'_>) };
    if m.panic.is_some() {
        return 0;
    }
    // SAFETY: the library passes a buffer of `req` writable bytes.
    let out = unsafe { std::slice::from_raw_parts_mut(buf, req as usize) };
    match catch_unwind(AssertUnwindSafe(|| (m.read)(address, out))) {
        // CAST: bounded by `req`, a u32.
        Ok(n) => n.min(req as usize) as u32,
        Err(p) => {
            m.panic = Some(p);
            0
        }
    }
}

unsafe extern "C" fn packet_monitor(
    ctx: *const c_void,
    op: ffi::ocsd_datapath_op_t,
    _index: ffi::ocsd_trc_index_t,
    packet: *const c_void,
    _size: u32,
    _data: *const u8,
) {
    use ffi::etmv4_pkt as P;
    if ctx.is_null() {
        return;
    }
    // SAFETY: ctx is the TailCtx registered with this callback; it lives in a Box owned by the
    // tree, which outlives the decoder, and is only read through shared references (a Cell).
    let tail = unsafe { &*ctx.cast::<TailCtx>() };
    if op == ffi::OCSD_OP_RESET {
        tail.set(None);
        return;
    }
    if op != ffi::OCSD_OP_DATA || packet.is_null() {
        return;
    }
    // SAFETY: an ETMv4 or ETE packet processor passes its `ocsd_etmv4_i_pkt`, valid for the
    // call, whose first fields `ocsd_etmv4_i_pkt_head` declares (csrc/layout.c checks them).
    let head = unsafe { &*packet.cast::<ffi::ocsd_etmv4_i_pkt_head>() };
    match head.type_ {
        P::ADDR_CTXT_L_32IS0
        | P::ADDR_CTXT_L_32IS1
        | P::ADDR_CTXT_L_64IS0
        | P::ADDR_CTXT_L_64IS1
        | P::ADDR_MATCH
        | P::ADDR_S_IS0
        | P::ADDR_S_IS1
        | P::ADDR_L_32IS0
        | P::ADDR_L_32IS1
        | P::ADDR_L_64IS0
        | P::ADDR_L_64IS1 => tail.set(Some(head.v_addr.val)),
        // What follows such a packet is not the target of the branch before it.
        P::ATOM_F1
        | P::ATOM_F2
        | P::ATOM_F3
        | P::ATOM_F4
        | P::ATOM_F5
        | P::ATOM_F6
        | P::Q
        | P::EXCEPT
        | P::EXCEPT_RTN
        | P::TRACE_ON
        | P::OVERFLOW
        | P::DISCARD
        | P::NOTSYNC
        | P::ETE_PE_RESET
        | P::ETE_TRANS_FAIL => tail.set(None),
        // ETE's source address packets stand for taken branches.
        0xB0..=0xB9 => tail.set(None),
        _ => {}
    }
}

unsafe extern "C" fn elem_trampoline<F: FnMut(u8, Element<'_>) -> Flow>(
    ctx: *const c_void,
    index: ffi::ocsd_trc_index_t,
    chan: u8,
    elem: *const ffi::ocsd_generic_trace_elem,
) -> ffi::ocsd_datapath_resp_t {
    if ctx.is_null() || elem.is_null() {
        return ffi::OCSD_RESP_CONT;
    }
    // SAFETY: ctx is the SinkCtx<F> of the decode in progress (set just before
    // ocsd_dt_process_data and cleared after it).
    let s = unsafe { &mut *(ctx as *mut SinkCtx<'_, F>) };
    if s.panic.is_some() || s.stopped {
        return ffi::OCSD_RESP_FATAL_SYS_ERR;
    }
    // SAFETY: the library passes a valid element for the duration of the call.
    let el = Element(unsafe { &*elem }, index);
    match catch_unwind(AssertUnwindSafe(|| (s.f)(chan, el))) {
        Ok(Flow::Continue) => ffi::OCSD_RESP_CONT,
        Ok(Flow::Stop) => {
            s.stopped = true;
            ffi::OCSD_RESP_FATAL_SYS_ERR
        }
        Err(p) => {
            s.panic = Some(p);
            ffi::OCSD_RESP_FATAL_SYS_ERR
        }
    }
}

impl<'m> DecodeTree<'m> {
    /// Creates a tree for trace laid out as `format`.
    pub fn new(format: Format) -> Result<Self, Error> {
        let (src, flags) = match format {
            Format::Frames(flags) => (ffi::OCSD_TRC_SRC_FRAME_FORMATTED, flags),
            Format::Single => (ffi::OCSD_TRC_SRC_SINGLE, 0),
        };
        let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: plain values; returns null on failure.
        let h = unsafe { ffi::ocsd_create_dcd_tree(src, flags) };
        let handle = NonNull::new(h).ok_or_else(|| Error::new("create decode tree", 1))?;
        Ok(Self {
            handle,
            memory: None,
            tails: BTreeMap::new(),
            index: 0,
        })
    }

    fn create(&mut self, name: &CStr, cfg: *const c_void) -> Result<u8, Error> {
        // The library keeps every tree's callback objects in one global map (and its decoder
        // register is a global too): no other thread may touch them meanwhile.
        let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut id: u8 = 0;
        // SAFETY: the handle is live, the name NUL-terminated, `cfg` points to the structure the
        // named decoder takes (the library copies it), `id` is writable.
        let err = unsafe {
            ffi::ocsd_dt_create_decoder(
                self.handle.as_ptr(),
                name.as_ptr(),
                ffi::OCSD_CREATE_FLG_FULL_DECODER,
                cfg,
                &mut id,
            )
        };
        check("create decoder", err)?;
        let tail = Box::new(TailCtx::new(None));
        let p: *const TailCtx = &*tail;
        let monitor: unsafe extern "C" fn(
            *const c_void,
            ffi::ocsd_datapath_op_t,
            ffi::ocsd_trc_index_t,
            *const c_void,
            u32,
            *const u8,
        ) = packet_monitor;
        // SAFETY: the handle is live and has a decoder for `id`; the callback has the type the
        // library calls a packet monitor with; `p` stays valid as long as the tree (the Box is
        // kept in `self.tails` and dropped after the tree is destroyed).
        let err = unsafe {
            ffi::ocsd_dt_attach_packet_callback(
                self.handle.as_ptr(),
                id,
                ffi::OCSD_C_API_CB_PKT_MON,
                monitor as *mut c_void,
                p.cast(),
            )
        };
        check("attach packet monitor", err)?;
        self.tails.insert(id, tail);
        Ok(id)
    }

    /// The address of the newest address packet of the source with trace ID `id`, when no
    /// packet that moves the trace on (an atom, an exception, a trace-on, an overflow) followed
    /// it. After a decode that ended with a taken indirect branch, this is the branch's target:
    /// the trace unit named it, then traced nothing more (it stopped, or its buffer ended), so
    /// the library put it on no element.
    pub fn trailing_address(&self, id: u8) -> Option<u64> {
        self.tails.get(&id).and_then(|t| t.get())
    }

    /// Adds an ETMv4 instruction trace decoder; returns its trace ID.
    pub fn add_etmv4(&mut self, c: &Etmv4Config) -> Result<u8, Error> {
        let cfg = ffi::ocsd_etmv4_cfg {
            reg_idr0: c.idr[0],
            reg_idr1: c.idr[1],
            reg_idr2: c.idr[2],
            reg_idr8: c.idr[3],
            reg_idr9: c.idr[4],
            reg_idr10: c.idr[5],
            reg_idr11: c.idr[6],
            reg_idr12: c.idr[7],
            reg_idr13: c.idr[8],
            reg_configr: c.configr,
            reg_traceidr: c.traceidr,
            arch_ver: c.core.arch,
            core_prof: c.core.profile,
        };
        self.create(ffi::OCSD_BUILTIN_DCD_ETMV4I, (&raw const cfg).cast())
    }

    /// Adds an ETE decoder; returns its trace ID.
    pub fn add_ete(&mut self, c: &EteConfig) -> Result<u8, Error> {
        let cfg = ffi::ocsd_ete_cfg {
            reg_idr0: c.idr[0],
            reg_idr1: c.idr[1],
            reg_idr2: c.idr[2],
            reg_idr8: c.idr[3],
            reg_devarch: c.devarch,
            reg_configr: c.configr,
            reg_traceidr: c.traceidr,
            arch_ver: c.core.arch,
            core_prof: c.core.profile,
        };
        self.create(ffi::OCSD_BUILTIN_DCD_ETE, (&raw const cfg).cast())
    }

    /// Sets the reader of the traced code, for every address: `read(addr, buf)` fills `buf`
    /// from `addr` on as far as it can and returns how many bytes it filled (0: no code
    /// there, which the decoder reports as an `AddrNacc` element). Replaces an earlier reader.
    pub fn set_memory(
        &mut self,
        read: impl FnMut(u64, &mut [u8]) -> usize + 'm,
    ) -> Result<(), Error> {
        if self.memory.is_some() {
            // SAFETY: the handle is live; the accessor registered at 0 is removed before its
            // context is freed.
            let err = unsafe {
                ffi::ocsd_dt_remove_mem_acc(self.handle.as_ptr(), 0, ffi::OCSD_MEM_SPACE_ANY)
            };
            check("remove memory accessor", err)?;
            self.memory = None;
        }
        let ctx = Box::new(MemCtx {
            read: Box::new(read),
            panic: None,
        });
        let p: *const MemCtx<'m> = &*ctx;
        // SAFETY: the handle is live; `p` stays valid while the accessor is registered (the Box
        // is kept in `self.memory` until the accessor is removed or the tree destroyed).
        let err = unsafe {
            ffi::ocsd_dt_add_callback_mem_acc(
                self.handle.as_ptr(),
                0,
                u64::MAX,
                ffi::OCSD_MEM_SPACE_ANY,
                Some(mem_trampoline),
                p.cast(),
            )
        };
        check("add memory accessor", err)?;
        self.memory = Some(ctx);
        Ok(())
    }

    /// Decodes `trace` (continuing the stream of earlier calls), giving each element and its
    /// trace ID to `f` as it is decoded, then ends the trace (flushing every decoder). An error
    /// the library cannot go on from ends the decode there, as `trc_pkt_lister` does, and is
    /// [`Outcome::fatal`].
    ///
    /// A panic in `f` or in the memory reader stops the decode and is resumed here.
    pub fn decode<F: FnMut(u8, Element<'_>) -> Flow>(
        &mut self,
        trace: &[u8],
        mut f: F,
    ) -> Result<Outcome, Error> {
        let mut out = Outcome::default();
        if u32::try_from(trace.len())
            .ok()
            .and_then(|n| self.index.checked_add(n))
            .is_none()
        {
            return Err(Error {
                what: "decode",
                code: 0,
                text: format!(
                    "{} bytes of trace is more than the library indexes (4 GiB)",
                    trace.len()
                ),
            });
        }
        let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut sink = SinkCtx {
            f: &mut f,
            stopped: false,
            panic: None,
        };
        let h = self.handle.as_ptr();
        let ctx: *mut SinkCtx<'_, F> = &mut sink;
        // SAFETY: the handle is live; `ctx` outlives every call below and is unregistered
        // before this function returns.
        check("set element output", unsafe {
            ffi::ocsd_dt_set_gen_elem_outfn(h, Some(elem_trampoline::<F>), ctx.cast_const().cast())
        })?;
        let mut off = 0usize;
        let mut fatal = None;
        let mut op = ffi::OCSD_OP_DATA;
        loop {
            let rest = trace.get(off..).unwrap_or(&[]);
            if op == ffi::OCSD_OP_DATA && rest.is_empty() {
                op = ffi::OCSD_OP_EOT;
            }
            let mut used: u32 = 0;
            // CAST: checked above that the whole trace fits in u32.
            let len = rest.len() as u32;
            // SAFETY: the handle is live, `rest` is readable for `len` bytes, `used` writable.
            let resp = unsafe {
                ffi::ocsd_dt_process_data(
                    h,
                    op,
                    self.index,
                    if op == ffi::OCSD_OP_DATA { len } else { 0 },
                    if op == ffi::OCSD_OP_DATA {
                        rest.as_ptr()
                    } else {
                        std::ptr::null()
                    },
                    &mut used,
                )
            };
            if resp != ffi::OCSD_RESP_CONT && resp != ffi::OCSD_RESP_WAIT {
                self.log_last_error(&mut out);
            }
            if op == ffi::OCSD_OP_DATA {
                let used = used.min(len);
                off += used as usize;
                self.index = self.index.saturating_add(used);
                out.bytes += u64::from(used);
            }
            if resp >= ffi::OCSD_RESP_FATAL_NOT_INIT {
                if !sink.stopped && sink.panic.is_none() {
                    fatal = Some(resp);
                }
                break;
            }
            if op == ffi::OCSD_OP_EOT {
                break;
            }
            if op == ffi::OCSD_OP_DATA && used == 0 && resp < ffi::OCSD_RESP_WAIT {
                // No progress and no reason to wait: the library refused the data.
                fatal = Some(resp);
                break;
            }
        }
        // SAFETY: the handle is live; a null callback clears the output.
        unsafe { ffi::ocsd_dt_set_gen_elem_outfn(h, None, std::ptr::null()) };
        if let Some(p) = sink.panic.take() {
            resume_unwind(p);
        }
        if let Some(p) = self.memory.as_mut().and_then(|m| m.panic.take()) {
            resume_unwind(p);
        }
        out.stopped = sink.stopped;
        if let Some(resp) = fatal {
            let last = out.errors.last().map(|l| l.message.clone());
            out.fatal = Some(format!(
                "decode stopped at trace byte {} (data path response {resp}){}",
                self.index,
                last.map(|m| format!(": {m}")).unwrap_or_default()
            ));
        }
        Ok(out)
    }

    fn log_last_error(&self, out: &mut Outcome) {
        let mut index: u32 = 0;
        let mut chan: u8 = 0xFF;
        let mut buf = [0 as std::ffi::c_char; 512];
        // SAFETY: every pointer is writable, the buffer for the length passed.
        let err = unsafe {
            ffi::ocsd_get_last_err(&mut index, &mut chan, buf.as_mut_ptr(), buf.len() as i32)
        };
        if err == ffi::OCSD_OK {
            return;
        }
        if let Some(last) = buf.last_mut() {
            *last = 0;
        }
        // SAFETY: NUL-terminated within the buffer (set above).
        let message = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .trim()
            .to_string();
        let logged = Logged {
            index,
            trace_id: chan,
            message,
        };
        if out.errors.last() == Some(&logged) {
            return;
        }
        out.error_count += 1;
        if out.errors.len() < MAX_ERRORS {
            out.errors.push(logged);
        }
    }
}

impl Drop for DecodeTree<'_> {
    fn drop(&mut self) {
        let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the handle is live and destroyed once; the memory context is dropped after.
        unsafe { ffi::ocsd_destroy_dcd_tree(self.handle.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_is_known() {
        assert!(version().starts_with('1'), "{}", version());
    }

    /// One ETMv4 source's raw stream: a synchronisation at `start` (EL1, AArch64), then `rest`.
    fn stream(start: u64, rest: &[u8]) -> Vec<u8> {
        let mut s = vec![0u8; 11];
        // A-sync, Trace Info (no sections), Trace On, long 64-bit address with context.
        s.extend_from_slice(&[0x80, 0x01, 0x00, 0x04, 0x85]);
        s.extend_from_slice(&addr64(start));
        s.push(0x31);
        s.extend_from_slice(rest);
        s
    }

    /// The 64-bit IS0 address field of a long address packet.
    fn addr64(a: u64) -> [u8; 8] {
        let mut b = a.to_le_bytes();
        b[0] = ((a >> 2) & 0x7F) as u8;
        b[1] = ((a >> 9) & 0x7F) as u8;
        b
    }

    /// Decodes one source's raw stream against `code` (address, word); returns the ranges
    /// (start, end) and the trailing address.
    fn decode_single(trace: &[u8], code: &[(u64, u32)]) -> (Vec<(u64, u64)>, Option<u64>) {
        let mut t = DecodeTree::new(Format::Single).unwrap();
        let id = t.add_etmv4(&Etmv4Config::default()).unwrap();
        let code = code.to_vec();
        t.set_memory(move |addr, buf| {
            let Some(&(_, w)) = code.iter().find(|(a, _)| *a == addr) else {
                return 0;
            };
            let n = buf.len().min(4);
            buf[..n].copy_from_slice(&w.to_le_bytes()[..n]);
            n
        })
        .unwrap();
        let mut ranges = Vec::new();
        let out = t
            .decode(trace, |_, e| {
                if e.kind() == ElemKind::InstrRange {
                    ranges.push((e.start(), e.end()));
                }
                Flow::Continue
            })
            .unwrap();
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        (ranges, t.trailing_address(id))
    }

    #[test]
    fn the_address_after_a_last_indirect_branch_is_its_target() {
        const RET: u32 = 0xD65F_03C0;
        const B_8: u32 = 0x1400_0002;
        let code = [(0x1000, RET), (0x4000, B_8)];
        // RET taken (an E atom), then the address packet of its target, then nothing.
        let mut target = vec![0xF7, 0x9D];
        target.extend_from_slice(&addr64(0x4000));
        let (ranges, tail) = decode_single(&stream(0x1000, &target), &code);
        assert_eq!(ranges, [(0x1000, 0x1004)]);
        assert_eq!(tail, Some(0x4000));
        // One more E atom: the branch at the target ran, the address is no longer trailing.
        target.push(0xF7);
        let (ranges, tail) = decode_single(&stream(0x1000, &target), &code);
        assert_eq!(ranges, [(0x1000, 0x1004), (0x4000, 0x4004)]);
        assert_eq!(tail, None);
        // The trace ends with the RET's atom: no target named.
        let (ranges, tail) = decode_single(&stream(0x1000, &[0xF7]), &code);
        assert_eq!(ranges, [(0x1000, 0x1004)]);
        assert_eq!(tail, None);
    }

    #[test]
    fn garbage_decodes_to_no_sync_without_a_fault() {
        let reads = std::cell::Cell::new(0);
        let mut t = DecodeTree::new(Format::FRAMES).unwrap();
        assert_eq!(t.add_etmv4(&Etmv4Config::default()).unwrap(), 0x10);
        t.set_memory(|_, _| {
            reads.set(reads.get() + 1);
            0
        })
        .unwrap();
        let data: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
            .collect();
        let mut kinds = Vec::new();
        let out = t
            .decode(&data, |_, e| {
                kinds.push(e.kind());
                Flow::Continue
            })
            .unwrap();
        assert_eq!(out.bytes, 4096);
        assert!(!out.stopped);
        // Random bytes hold no A-sync: the decoder never synchronises, so it reads no code.
        assert!(!kinds.contains(&ElemKind::InstrRange));
        assert_eq!(reads.get(), 0);
    }

    #[test]
    fn a_callback_can_stop_the_decode() {
        // An ETMv4 A-sync followed by a trace-info packet and a long address: enough for the
        // decoder to emit elements (NO_SYNC, then TRACE_ON).
        let mut stream = vec![0u8; 11];
        stream.push(0x80); // A-sync: 11 zeros then 0x80
        stream.extend_from_slice(&[0x01, 0x00]); // TraceInfo, no sections
        stream.extend_from_slice(&[0x9d, 0x00, 0x00, 0x00, 0x80, 0x00, 0x80, 0xff, 0xff]); // long address IS0
        let mut t = DecodeTree::new(Format::Single).unwrap();
        t.add_etmv4(&Etmv4Config::default()).unwrap();
        t.set_memory(|_, _| 0).unwrap();
        let mut n = 0;
        let out = t
            .decode(&stream, |_, _| {
                n += 1;
                Flow::Stop
            })
            .unwrap();
        assert_eq!(n, 1);
        assert!(out.stopped);
    }
}
