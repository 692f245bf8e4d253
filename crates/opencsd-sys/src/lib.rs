//! A narrow, hand-written binding to OpenCSD's C API (`libopencsd_c_api`): decode trees, the
//! ETMv4 and ETE decoders, memory-access callbacks, the generic trace element and error
//! strings. The safe interface is the `opencsd` crate.
//!
//! The library is OpenCSD 1.5, built from Debian's `libopencsd` source package (trixie's) by
//! `scripts/setup.sh` and linked statically (see `build.rs`): bookworm's libopencsd1 (1.3.3)
//! dereferences a dangling P0 stack element (`TrcPktDecodeEtmV4I::mispredictAtom`) on some
//! corrupt traces, a segfault that took csdump down with it (its own `trc_pkt_lister` crashes
//! the same way); 1.5 reports the error and goes on.
//!
//! Why hand-written and not generated with bindgen at build time: csdump needs about fifteen
//! functions and four structures of a C API, and a generated binding would make libclang a build
//! dependency of every host build (the fuzz target's and CI's included) for that. What a
//! hand-written binding risks, a layout that drifts from the library's, is checked instead:
//! `build.rs` compiles `csrc/layout.c` against the library's own headers, where `_Static_assert`s
//! hold every size, field offset and constant this file declares, so a library with another
//! layout fails the build (1.3 to 1.5 grew the generic element by 8 bytes and renumbered two
//! constants: the check caught both); the bit-field masks are compared at test time through a C
//! helper compiled the same way.
//!
//! Names follow the C headers (`opencsd/c_api/opencsd_c_api.h`, `opencsd/ocsd_if_types.h`,
//! `opencsd/trc_gen_elem_types.h`, `opencsd/etmv4/trc_pkt_types_etmv4.h`,
//! `opencsd/ete/trc_pkt_types_ete.h`).

#![expect(non_camel_case_types, non_upper_case_globals)]

use core::ffi::c_char;
use core::ffi::c_int;
use core::ffi::c_uchar;
use core::ffi::c_void;

/// Handle of a decode tree.
pub type dcd_tree_handle_t = *mut c_void;
/// Library error code (`ocsd_err_t`).
pub type ocsd_err_t = c_int;
/// Index of a byte in the trace source (32-bit in Debian's build).
pub type ocsd_trc_index_t = u32;
/// Virtual address (64-bit in Debian's build).
pub type ocsd_vaddr_t = u64;
/// Data path operation (`ocsd_datapath_op_t`).
pub type ocsd_datapath_op_t = c_int;
/// Data path response (`ocsd_datapath_resp_t`).
pub type ocsd_datapath_resp_t = c_int;
/// Input format of a decode tree (`ocsd_dcd_tree_src_t`).
pub type ocsd_dcd_tree_src_t = c_int;
/// Generic trace element type (`ocsd_gen_trc_elem_t`).
pub type ocsd_gen_trc_elem_t = c_int;
/// Instruction set (`ocsd_isa`).
pub type ocsd_isa = c_int;
/// Instruction type (`ocsd_instr_type`).
pub type ocsd_instr_type = c_int;
/// Instruction sub-type (`ocsd_instr_subtype`).
pub type ocsd_instr_subtype = c_int;
/// Architecture version (`ocsd_arch_version_t`).
pub type ocsd_arch_version_t = c_int;
/// Core profile (`ocsd_core_profile_t`).
pub type ocsd_core_profile_t = c_int;
/// Memory space (`ocsd_mem_space_acc_t`).
pub type ocsd_mem_space_acc_t = c_int;
/// Error severity (`ocsd_err_severity_t`).
pub type ocsd_err_severity_t = c_int;

/// No error.
pub const OCSD_OK: ocsd_err_t = 0;

/// The input is CoreSight formatted frames (from an ETB, ETF, ETR or TPIU).
pub const OCSD_TRC_SRC_FRAME_FORMATTED: ocsd_dcd_tree_src_t = 0;
/// The input is one source's raw byte stream.
pub const OCSD_TRC_SRC_SINGLE: ocsd_dcd_tree_src_t = 1;

/// Deformatter: the frames carry full syncs (a TPIU capture such as DSTREAM's).
pub const OCSD_DFRMTR_HAS_FSYNCS: u32 = 0x01;
/// Deformatter: the frames carry half-word syncs.
pub const OCSD_DFRMTR_HAS_HSYNCS: u32 = 0x02;
/// Deformatter: 16-byte frames aligned in memory, no syncs (ETB, ETF, ETR).
pub const OCSD_DFRMTR_FRAME_MEM_ALIGN: u32 = 0x04;
/// Deformatter: reset the decoders on four frame-aligned full syncs.
pub const OCSD_DFRMTR_RESET_ON_4X_FSYNC: u32 = 0x20;

/// Data path operation: a block of trace.
pub const OCSD_OP_DATA: ocsd_datapath_op_t = 0;
/// Data path operation: end of trace.
pub const OCSD_OP_EOT: ocsd_datapath_op_t = 1;
/// Data path operation: flush.
pub const OCSD_OP_FLUSH: ocsd_datapath_op_t = 2;
/// Data path operation: reset.
pub const OCSD_OP_RESET: ocsd_datapath_op_t = 3;

/// Continue.
pub const OCSD_RESP_CONT: ocsd_datapath_resp_t = 0;
/// Continue; a component logged a warning.
pub const OCSD_RESP_WARN_CONT: ocsd_datapath_resp_t = 1;
/// Continue; a component logged an error.
pub const OCSD_RESP_ERR_CONT: ocsd_datapath_resp_t = 2;
/// Wait (the client asked to pause).
pub const OCSD_RESP_WAIT: ocsd_datapath_resp_t = 3;
/// Wait; a component logged an error.
pub const OCSD_RESP_ERR_WAIT: ocsd_datapath_resp_t = 5;
/// First fatal response; every response from here on is fatal.
pub const OCSD_RESP_FATAL_NOT_INIT: ocsd_datapath_resp_t = 6;
/// Fatal: internal system error (also what a client returns to stop the decode).
pub const OCSD_RESP_FATAL_SYS_ERR: ocsd_datapath_resp_t = 10;

/// Element: unknown.
pub const OCSD_GEN_TRC_ELEM_UNKNOWN: ocsd_gen_trc_elem_t = 0;
/// Element: not synchronised (decode start, or after an overflow or a bad packet).
pub const OCSD_GEN_TRC_ELEM_NO_SYNC: ocsd_gen_trc_elem_t = 1;
/// Element: trace on (start, or after a discontinuity).
pub const OCSD_GEN_TRC_ELEM_TRACE_ON: ocsd_gen_trc_elem_t = 2;
/// Element: end of trace.
pub const OCSD_GEN_TRC_ELEM_EO_TRACE: ocsd_gen_trc_elem_t = 3;
/// Element: PE context change.
pub const OCSD_GEN_TRC_ELEM_PE_CONTEXT: ocsd_gen_trc_elem_t = 4;
/// Element: a range of executed instructions.
pub const OCSD_GEN_TRC_ELEM_INSTR_RANGE: ocsd_gen_trc_elem_t = 5;
/// Element: instructions executed in a range whose path is not known.
pub const OCSD_GEN_TRC_ELEM_I_RANGE_NOPATH: ocsd_gen_trc_elem_t = 6;
/// Element: the decoder has no memory image at an address.
pub const OCSD_GEN_TRC_ELEM_ADDR_NACC: ocsd_gen_trc_elem_t = 7;
/// Element: address unknown until the next address packet.
pub const OCSD_GEN_TRC_ELEM_ADDR_UNKNOWN: ocsd_gen_trc_elem_t = 8;
/// Element: exception.
pub const OCSD_GEN_TRC_ELEM_EXCEPTION: ocsd_gen_trc_elem_t = 9;
/// Element: exception return.
pub const OCSD_GEN_TRC_ELEM_EXCEPTION_RET: ocsd_gen_trc_elem_t = 10;
/// Element: timestamp.
pub const OCSD_GEN_TRC_ELEM_TIMESTAMP: ocsd_gen_trc_elem_t = 11;
/// Element: cycle count.
pub const OCSD_GEN_TRC_ELEM_CYCLE_COUNT: ocsd_gen_trc_elem_t = 12;
/// Element: event.
pub const OCSD_GEN_TRC_ELEM_EVENT: ocsd_gen_trc_elem_t = 13;
/// Element: software trace.
pub const OCSD_GEN_TRC_ELEM_SWTRACE: ocsd_gen_trc_elem_t = 14;
/// Element: synchronisation marker.
pub const OCSD_GEN_TRC_ELEM_SYNC_MARKER: ocsd_gen_trc_elem_t = 15;
/// Element: transactional memory.
pub const OCSD_GEN_TRC_ELEM_MEMTRANS: ocsd_gen_trc_elem_t = 16;
/// Element: PE instrumentation (FEAT_ITE).
pub const OCSD_GEN_TRC_ELEM_INSTRUMENTATION: ocsd_gen_trc_elem_t = 17;
/// Element: custom.
pub const OCSD_GEN_TRC_ELEM_CUSTOM: ocsd_gen_trc_elem_t = 18;

/// ISA: A32.
pub const ocsd_isa_arm: ocsd_isa = 0;
/// ISA: T32.
pub const ocsd_isa_thumb2: ocsd_isa = 1;
/// ISA: A64.
pub const ocsd_isa_aarch64: ocsd_isa = 2;
/// ISA: not yet known.
pub const ocsd_isa_unknown: ocsd_isa = 6;

/// Instruction: not a waypoint.
pub const OCSD_INSTR_OTHER: ocsd_instr_type = 0;
/// Instruction: direct branch.
pub const OCSD_INSTR_BR: ocsd_instr_type = 1;
/// Instruction: indirect branch.
pub const OCSD_INSTR_BR_INDIRECT: ocsd_instr_type = 2;
/// Instruction: ISB.
pub const OCSD_INSTR_ISB: ocsd_instr_type = 3;
/// Instruction: DSB or DMB.
pub const OCSD_INSTR_DSB_DMB: ocsd_instr_type = 4;
/// Instruction: WFI or WFE traced as a branch.
pub const OCSD_INSTR_WFI_WFE: ocsd_instr_type = 5;
/// Instruction: TSTART.
pub const OCSD_INSTR_TSTART: ocsd_instr_type = 6;

/// Sub-type: none.
pub const OCSD_S_INSTR_NONE: ocsd_instr_subtype = 0;
/// Sub-type: branch with link.
pub const OCSD_S_INSTR_BR_LINK: ocsd_instr_subtype = 1;
/// Sub-type: A64 RET.
pub const OCSD_S_INSTR_V8_RET: ocsd_instr_subtype = 2;
/// Sub-type: A64 ERET.
pub const OCSD_S_INSTR_V8_ERET: ocsd_instr_subtype = 3;
/// Sub-type: an A32/T32 instruction that implies a return.
pub const OCSD_S_INSTR_V7_IMPLIED_RET: ocsd_instr_subtype = 4;

/// Architecture: unknown.
pub const ARCH_UNKNOWN: ocsd_arch_version_t = 0;
/// Architecture: v7.
pub const ARCH_V7: ocsd_arch_version_t = 0x0700;
/// Architecture: v8.
pub const ARCH_V8: ocsd_arch_version_t = 0x0800;
/// Architecture: v8.3.
pub const ARCH_V8r3: ocsd_arch_version_t = 0x0803;
/// Architecture: v8.3 and later AArch64 features.
pub const ARCH_AA64: ocsd_arch_version_t = 0x0864;

/// Profile: unknown.
pub const profile_Unknown: ocsd_core_profile_t = 0;
/// Profile: Cortex-M.
pub const profile_CortexM: ocsd_core_profile_t = 1;
/// Profile: Cortex-R.
pub const profile_CortexR: ocsd_core_profile_t = 2;
/// Profile: Cortex-A.
pub const profile_CortexA: ocsd_core_profile_t = 3;

/// Memory space: any exception level and security state.
pub const OCSD_MEM_SPACE_ANY: ocsd_mem_space_acc_t = 0xFF;

/// Create the packet processor only.
pub const OCSD_CREATE_FLG_PACKET_PROC: c_int = 0x01;
/// Create the packet processor and the decoder.
pub const OCSD_CREATE_FLG_FULL_DECODER: c_int = 0x02;

/// Severity: no logging.
pub const OCSD_ERR_SEV_NONE: ocsd_err_severity_t = 0;
/// Severity: errors.
pub const OCSD_ERR_SEV_ERROR: ocsd_err_severity_t = 1;
/// Severity: warnings.
pub const OCSD_ERR_SEV_WARN: ocsd_err_severity_t = 2;

/// Name of the ETMv4 instruction trace decoder.
pub const OCSD_BUILTIN_DCD_ETMV4I: &core::ffi::CStr = c"ETMV4I";
/// Name of the ETE decoder.
pub const OCSD_BUILTIN_DCD_ETE: &core::ffi::CStr = c"ETE";

/// `flag_bits`: the last instruction of a range was executed (a branch taken).
pub const FLAG_LAST_INSTR_EXEC: u32 = 1 << 0;
/// `flag_bits`: size of the last instruction of a range, bits 3:1.
pub const FLAG_LAST_INSTR_SZ_MASK: u32 = 0x7 << 1;
/// Shift of [`FLAG_LAST_INSTR_SZ_MASK`].
pub const FLAG_LAST_INSTR_SZ_SHIFT: u32 = 1;
/// `flag_bits`: `en_addr` of an exception is its preferred return address.
pub const FLAG_EXCEP_RET_ADDR: u32 = 1 << 6;
/// `flag_bits`: the last instruction of a range is conditional.
pub const FLAG_LAST_INSTR_COND: u32 = 1 << 10;
/// `flag_bits`: an exception's return address is also the target of the previous range's
/// taken branch.
pub const FLAG_EXCEP_RET_ADDR_BR_TGT: u32 = 1 << 11;

/// Processing element context (`ocsd_pe_context`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ocsd_pe_context {
    /// Security state.
    pub security_level: c_int,
    /// Exception level (-1 unknown).
    pub exception_level: c_int,
    /// Context ID.
    pub context_id: u32,
    /// VMID.
    pub vmid: u32,
    /// Bit-fields: bits64, ctxt_id_valid, vmid_valid, el_valid.
    pub flags: u32,
}

/// A generic trace element (`ocsd_generic_trace_elem`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ocsd_generic_trace_elem {
    /// Element type.
    pub elem_type: ocsd_gen_trc_elem_t,
    /// Instruction set of the executed instructions.
    pub isa: ocsd_isa,
    /// Start address of a range; the address of a NACC element.
    pub st_addr: ocsd_vaddr_t,
    /// End address (exclusive) of a range; an exception's preferred return address.
    pub en_addr: ocsd_vaddr_t,
    /// PE context.
    pub context: ocsd_pe_context,
    /// Timestamp.
    pub timestamp: u64,
    /// Cycle count.
    pub cycle_count: u32,
    /// Type of the last instruction of a range.
    pub last_i_type: ocsd_instr_type,
    /// Sub-type of the last instruction of a range.
    pub last_i_subtype: ocsd_instr_subtype,
    /// Per-element flags (the `FLAG_*` masks).
    pub flag_bits: u32,
    /// The payload union: exception number, instruction count of a range, trace-on reason,
    /// unsync reason, … (all at its start).
    pub payload: [u32; 4],
    /// Extended data.
    pub ptr_extended_data: *const c_void,
}

/// ETMv4 decoder configuration (`ocsd_etmv4_cfg`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ocsd_etmv4_cfg {
    /// TRCIDR0.
    pub reg_idr0: u32,
    /// TRCIDR1.
    pub reg_idr1: u32,
    /// TRCIDR2.
    pub reg_idr2: u32,
    /// TRCIDR8.
    pub reg_idr8: u32,
    /// TRCIDR9.
    pub reg_idr9: u32,
    /// TRCIDR10.
    pub reg_idr10: u32,
    /// TRCIDR11.
    pub reg_idr11: u32,
    /// TRCIDR12.
    pub reg_idr12: u32,
    /// TRCIDR13.
    pub reg_idr13: u32,
    /// TRCCONFIGR.
    pub reg_configr: u32,
    /// TRCTRACEIDR.
    pub reg_traceidr: u32,
    /// Architecture of the traced core.
    pub arch_ver: ocsd_arch_version_t,
    /// Profile of the traced core.
    pub core_prof: ocsd_core_profile_t,
}

/// ETE decoder configuration (`ocsd_ete_cfg`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ocsd_ete_cfg {
    /// TRCIDR0.
    pub reg_idr0: u32,
    /// TRCIDR1.
    pub reg_idr1: u32,
    /// TRCIDR2.
    pub reg_idr2: u32,
    /// TRCIDR8.
    pub reg_idr8: u32,
    /// TRCDEVARCH.
    pub reg_devarch: u32,
    /// TRCCONFIGR.
    pub reg_configr: u32,
    /// TRCTRACEIDR.
    pub reg_traceidr: u32,
    /// Architecture of the traced core.
    pub arch_ver: ocsd_arch_version_t,
    /// Profile of the traced core.
    pub core_prof: ocsd_core_profile_t,
}

/// Kind of callback [`ocsd_dt_attach_packet_callback`] attaches (`ocsd_c_api_cb_types`).
pub type ocsd_c_api_cb_types = c_int;
/// The packet processor's primary packet output (`FnDefPktDataIn`).
pub const OCSD_C_API_CB_PKT_SINK: ocsd_c_api_cb_types = 0;
/// The packet processor's packet monitor output ([`FnDefPktDataMon`]): every packet, before the
/// decoder takes it.
pub const OCSD_C_API_CB_PKT_MON: ocsd_c_api_cb_types = 1;

/// ETMv4 and ETE instruction trace packet type (`ocsd_etmv4_i_pkt_type`).
pub type ocsd_etmv4_i_pkt_type = c_int;
/// Packet types an ETMv4 or ETE packet monitor sees (IHI 0064; the values are the header byte
/// of the packet, or above 0xFF for what the packet processor adds).
pub mod etmv4_pkt {
    use super::ocsd_etmv4_i_pkt_type as T;
    /// No synchronisation found yet.
    pub const NOTSYNC: T = 0x200;
    /// Trace info.
    pub const TRACE_INFO: T = 0x01;
    /// Trace on.
    pub const TRACE_ON: T = 0x04;
    /// Exception.
    pub const EXCEPT: T = 0x06;
    /// Exception return.
    pub const EXCEPT_RTN: T = 0x07;
    /// Address and context, long 32-bit, IS0 (the first of five: 0x82, 0x83, 0x85, 0x86).
    pub const ADDR_CTXT_L_32IS0: T = 0x82;
    /// Address and context, long 32-bit, IS1.
    pub const ADDR_CTXT_L_32IS1: T = 0x83;
    /// Address and context, long 64-bit, IS0.
    pub const ADDR_CTXT_L_64IS0: T = 0x85;
    /// Address and context, long 64-bit, IS1.
    pub const ADDR_CTXT_L_64IS1: T = 0x86;
    /// Address exact match (to the address history).
    pub const ADDR_MATCH: T = 0x90;
    /// Short address, IS0.
    pub const ADDR_S_IS0: T = 0x95;
    /// Short address, IS1.
    pub const ADDR_S_IS1: T = 0x96;
    /// Long 32-bit address, IS0.
    pub const ADDR_L_32IS0: T = 0x9A;
    /// Long 32-bit address, IS1.
    pub const ADDR_L_32IS1: T = 0x9B;
    /// Long 64-bit address, IS0.
    pub const ADDR_L_64IS0: T = 0x9D;
    /// Long 64-bit address, IS1.
    pub const ADDR_L_64IS1: T = 0x9E;
    /// Q (instruction count) packet.
    pub const Q: T = 0xA0;
    /// Atom format 6.
    pub const ATOM_F6: T = 0xC0;
    /// Atom format 5.
    pub const ATOM_F5: T = 0xD5;
    /// Atom format 2.
    pub const ATOM_F2: T = 0xD8;
    /// Atom format 4.
    pub const ATOM_F4: T = 0xDC;
    /// Atom format 1.
    pub const ATOM_F1: T = 0xF6;
    /// Atom format 3.
    pub const ATOM_F3: T = 0xF8;
    /// Overflow.
    pub const OVERFLOW: T = 0x105;
    /// Discard.
    pub const DISCARD: T = 0x103;
    /// ETE: PE reset (an exception).
    pub const ETE_PE_RESET: T = 0x400;
    /// ETE: transaction failure (an exception).
    pub const ETE_TRANS_FAIL: T = 0x401;
}

/// An address a packet broadcast (`ocsd_pkt_vaddr`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ocsd_pkt_vaddr {
    /// 32 or 64 bits (`ocsd_pkt_va_size`).
    pub size: c_int,
    /// The address, with the bits earlier packets gave.
    pub val: ocsd_vaddr_t,
    /// Bits this packet updated.
    pub pkt_bits: u8,
    /// Bits valid in all.
    pub valid_bits: u8,
}

/// The first fields of an ETMv4 or ETE instruction trace packet (`ocsd_etmv4_i_pkt`): its type
/// and the most recently broadcast address. Only ever read through a pointer the library
/// passes; the rest of the structure is not declared.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ocsd_etmv4_i_pkt_head {
    /// Packet type.
    pub type_: ocsd_etmv4_i_pkt_type,
    /// The most recently broadcast address (the packet's own, for an address packet).
    pub v_addr: ocsd_pkt_vaddr,
}

/// Packet monitor callback (`FnDefPktDataMon`): `p_packet_in` is the decoder's packet structure
/// (`ocsd_etmv4_i_pkt` for ETMv4 and ETE), `p_data` its `size` raw bytes.
pub type FnDefPktDataMon = Option<
    unsafe extern "C" fn(
        p_context: *const c_void,
        op: ocsd_datapath_op_t,
        index_sop: ocsd_trc_index_t,
        p_packet_in: *const c_void,
        size: u32,
        p_data: *const u8,
    ),
>;

/// Generic element output callback (`FnTraceElemIn`).
pub type FnTraceElemIn = Option<
    unsafe extern "C" fn(
        p_context: *const c_void,
        index_sop: ocsd_trc_index_t,
        trc_chan_id: u8,
        elem: *const ocsd_generic_trace_elem,
    ) -> ocsd_datapath_resp_t,
>;

/// String output callback of the default error logger (`FnDefLoggerPrintStrCB`).
pub type FnDefLoggerPrintStrCB = Option<
    unsafe extern "C" fn(p_context: *const c_void, psz_msg_str: *const c_char, str_len: c_int),
>;

/// Memory access callback (`Fn_MemAcc_CB`): fills `byte_buffer` with up to `req_bytes` bytes
/// at `address`, returns how many it filled (0: no memory there).
pub type Fn_MemAcc_CB = Option<
    unsafe extern "C" fn(
        p_context: *const c_void,
        address: ocsd_vaddr_t,
        mem_space: ocsd_mem_space_acc_t,
        req_bytes: u32,
        byte_buffer: *mut u8,
    ) -> u32,
>;

extern "C" {
    /// Library version, `0x00MMmmpp`.
    pub fn ocsd_get_version() -> u32;
    /// Library version string.
    pub fn ocsd_get_version_str() -> *const c_char;
    /// Creates a decode tree; null on failure.
    pub fn ocsd_create_dcd_tree(
        src_type: ocsd_dcd_tree_src_t,
        deformatter_cfg_flags: u32,
    ) -> dcd_tree_handle_t;
    /// Destroys a decode tree and everything created on it.
    pub fn ocsd_destroy_dcd_tree(handle: dcd_tree_handle_t);
    /// Pushes trace (or an operation) through the tree.
    pub fn ocsd_dt_process_data(
        handle: dcd_tree_handle_t,
        op: ocsd_datapath_op_t,
        index: ocsd_trc_index_t,
        data_block_size: u32,
        p_data_block: *const u8,
        num_bytes_processed: *mut u32,
    ) -> ocsd_datapath_resp_t;
    /// Sets the generic element output callback.
    pub fn ocsd_dt_set_gen_elem_outfn(
        handle: dcd_tree_handle_t,
        p_fn: FnTraceElemIn,
        p_context: *const c_void,
    ) -> ocsd_err_t;
    /// Creates a decoder by name with its configuration structure; returns its trace ID.
    pub fn ocsd_dt_create_decoder(
        handle: dcd_tree_handle_t,
        decoder_name: *const c_char,
        create_flags: c_int,
        decoder_cfg: *const c_void,
        p_csid: *mut c_uchar,
    ) -> ocsd_err_t;
    /// Adds a memory-access callback for `[st_address, en_address]`.
    pub fn ocsd_dt_add_callback_mem_acc(
        handle: dcd_tree_handle_t,
        st_address: ocsd_vaddr_t,
        en_address: ocsd_vaddr_t,
        mem_space: ocsd_mem_space_acc_t,
        p_cb_func: Fn_MemAcc_CB,
        p_context: *const c_void,
    ) -> ocsd_err_t;
    /// Attaches a packet callback of `callback_type` to the decoder of trace ID `CSID`
    /// (`p_fn_callback_data` is a [`FnDefPktDataMon`] for [`OCSD_C_API_CB_PKT_MON`]).
    pub fn ocsd_dt_attach_packet_callback(
        handle: dcd_tree_handle_t,
        CSID: c_uchar,
        callback_type: ocsd_c_api_cb_types,
        p_fn_callback_data: *mut c_void,
        p_context: *const c_void,
    ) -> ocsd_err_t;
    /// Removes the memory accessor that starts at `st_address`.
    pub fn ocsd_dt_remove_mem_acc(
        handle: dcd_tree_handle_t,
        st_address: ocsd_vaddr_t,
        mem_space: ocsd_mem_space_acc_t,
    ) -> ocsd_err_t;
    /// Initialises the library's default error logger.
    pub fn ocsd_def_errlog_init(
        verbosity: ocsd_err_severity_t,
        create_output_logger: c_int,
    ) -> ocsd_err_t;
    /// Describes an error code.
    pub fn ocsd_err_str(err: ocsd_err_t, buffer: *mut c_char, buffer_size: c_int);
    /// The last error the default logger recorded: its trace index, channel and message.
    pub fn ocsd_get_last_err(
        index: *mut ocsd_trc_index_t,
        chan_id: *mut u8,
        message: *mut c_char,
        message_len: c_int,
    ) -> ocsd_err_t;
    /// Describes a generic element as OpenCSD's tools print it.
    pub fn ocsd_gen_elem_str(
        p_pkt: *const ocsd_generic_trace_elem,
        buffer: *mut c_char,
        buffer_size: c_int,
    ) -> ocsd_err_t;
}

extern "C" {
    /// `flag_bits` with one bit-field set (see `csrc/layout.c`), for the layout test.
    pub fn opencsd_sys_flag_mask(field: c_int) -> u32;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_field_masks_are_the_headers() {
        // SAFETY: a pure C function of an integer.
        let mask = |f| unsafe { opencsd_sys_flag_mask(f) };
        assert_eq!(mask(0), FLAG_LAST_INSTR_EXEC);
        assert_eq!(mask(1), FLAG_LAST_INSTR_SZ_MASK);
        assert_eq!(mask(2), FLAG_EXCEP_RET_ADDR);
        assert_eq!(mask(3), FLAG_EXCEP_RET_ADDR_BR_TGT);
        assert_eq!(mask(4), FLAG_LAST_INSTR_COND);
    }

    #[test]
    fn links_and_reports_a_version() {
        // SAFETY: returns a constant.
        let v = unsafe { ocsd_get_version() };
        assert!(v >= 0x0001_0500, "OpenCSD {v:#x}, 1.5 or later expected");
        assert_eq!(core::mem::size_of::<ocsd_generic_trace_elem>(), 96);
        assert_eq!(core::mem::size_of::<ocsd_etmv4_cfg>(), 52);
        assert_eq!(core::mem::size_of::<ocsd_ete_cfg>(), 36);
        assert_eq!(core::mem::size_of::<ocsd_pkt_vaddr>(), 24);
        assert_eq!(core::mem::offset_of!(ocsd_etmv4_i_pkt_head, v_addr), 8);
    }
}
