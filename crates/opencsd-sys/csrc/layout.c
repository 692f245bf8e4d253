// SPDX-License-Identifier: GPL-2.0-only
/*
 * Compile-time check that the declarations of opencsd-sys (src/lib.rs) match the installed
 * OpenCSD headers: every struct size and field offset, and every constant, it declares. A
 * library with another layout fails the build here instead of decoding garbage at run time.
 */
#include <stddef.h>
#include <opencsd/c_api/opencsd_c_api.h>

#define SAME(a, b) _Static_assert((a) == (b), #a " != " #b)

/* ocsd_generic_trace_elem */
SAME(sizeof(ocsd_generic_trace_elem), 96);
SAME(offsetof(ocsd_generic_trace_elem, elem_type), 0);
SAME(offsetof(ocsd_generic_trace_elem, isa), 4);
SAME(offsetof(ocsd_generic_trace_elem, st_addr), 8);
SAME(offsetof(ocsd_generic_trace_elem, en_addr), 16);
SAME(offsetof(ocsd_generic_trace_elem, context), 24);
SAME(offsetof(ocsd_generic_trace_elem, timestamp), 48);
SAME(offsetof(ocsd_generic_trace_elem, cycle_count), 56);
SAME(offsetof(ocsd_generic_trace_elem, last_i_type), 60);
SAME(offsetof(ocsd_generic_trace_elem, last_i_subtype), 64);
SAME(offsetof(ocsd_generic_trace_elem, flag_bits), 68);
SAME(offsetof(ocsd_generic_trace_elem, exception_number), 72);
SAME(offsetof(ocsd_generic_trace_elem, num_instr_range), 72);
SAME(offsetof(ocsd_generic_trace_elem, trace_on_reason), 72);
SAME(offsetof(ocsd_generic_trace_elem, unsync_eot_info), 72);
SAME(offsetof(ocsd_generic_trace_elem, sw_ite), 72);
SAME(offsetof(ocsd_generic_trace_elem, ptr_extended_data), 88);
SAME(sizeof(ocsd_gen_trc_elem_t), 4);
SAME(sizeof(ocsd_isa), 4);
SAME(sizeof(ocsd_instr_type), 4);
SAME(sizeof(ocsd_instr_subtype), 4);

/* ocsd_pe_context */
SAME(sizeof(ocsd_pe_context), 20);
SAME(offsetof(ocsd_pe_context, security_level), 0);
SAME(offsetof(ocsd_pe_context, exception_level), 4);
SAME(offsetof(ocsd_pe_context, context_id), 8);
SAME(offsetof(ocsd_pe_context, vmid), 12);

/* ocsd_etmv4_cfg and ocsd_ete_cfg */
SAME(sizeof(ocsd_etmv4_cfg), 52);
SAME(offsetof(ocsd_etmv4_cfg, reg_idr0), 0);
SAME(offsetof(ocsd_etmv4_cfg, reg_idr1), 4);
SAME(offsetof(ocsd_etmv4_cfg, reg_idr2), 8);
SAME(offsetof(ocsd_etmv4_cfg, reg_idr8), 12);
SAME(offsetof(ocsd_etmv4_cfg, reg_idr13), 32);
SAME(offsetof(ocsd_etmv4_cfg, reg_configr), 36);
SAME(offsetof(ocsd_etmv4_cfg, reg_traceidr), 40);
SAME(offsetof(ocsd_etmv4_cfg, arch_ver), 44);
SAME(offsetof(ocsd_etmv4_cfg, core_prof), 48);
SAME(sizeof(ocsd_ete_cfg), 36);
SAME(offsetof(ocsd_ete_cfg, reg_idr8), 12);
SAME(offsetof(ocsd_ete_cfg, reg_devarch), 16);
SAME(offsetof(ocsd_ete_cfg, reg_configr), 20);
SAME(offsetof(ocsd_ete_cfg, reg_traceidr), 24);
SAME(offsetof(ocsd_ete_cfg, arch_ver), 28);
SAME(offsetof(ocsd_ete_cfg, core_prof), 32);

/* The head of ocsd_etmv4_i_pkt that the packet monitor reads, and ocsd_pkt_vaddr */
SAME(offsetof(ocsd_etmv4_i_pkt, type), 0);
SAME(sizeof(ocsd_etmv4_i_pkt_type), 4);
SAME(offsetof(ocsd_etmv4_i_pkt, v_addr), 8);
SAME(sizeof(ocsd_pkt_vaddr), 24);
SAME(sizeof(ocsd_pkt_va_size), 4);
SAME(offsetof(ocsd_pkt_vaddr, size), 0);
SAME(offsetof(ocsd_pkt_vaddr, val), 8);
SAME(offsetof(ocsd_pkt_vaddr, pkt_bits), 16);
SAME(offsetof(ocsd_pkt_vaddr, valid_bits), 17);

/* Scalar types */
SAME(sizeof(ocsd_trc_index_t), 4);
SAME(sizeof(ocsd_vaddr_t), 8);
SAME(sizeof(ocsd_err_t), 4);
SAME(sizeof(ocsd_datapath_resp_t), 4);
SAME(sizeof(ocsd_mem_space_acc_t), 4);

/* Constants */
SAME(OCSD_OK, 0);
SAME(OCSD_TRC_SRC_FRAME_FORMATTED, 0);
SAME(OCSD_TRC_SRC_SINGLE, 1);
SAME(OCSD_DFRMTR_HAS_FSYNCS, 0x01);
SAME(OCSD_DFRMTR_HAS_HSYNCS, 0x02);
SAME(OCSD_DFRMTR_FRAME_MEM_ALIGN, 0x04);
SAME(OCSD_DFRMTR_RESET_ON_4X_FSYNC, 0x20);
SAME(OCSD_OP_DATA, 0);
SAME(OCSD_OP_EOT, 1);
SAME(OCSD_OP_FLUSH, 2);
SAME(OCSD_OP_RESET, 3);
SAME(OCSD_RESP_CONT, 0);
SAME(OCSD_RESP_WARN_CONT, 1);
SAME(OCSD_RESP_ERR_CONT, 2);
SAME(OCSD_RESP_WAIT, 3);
SAME(OCSD_RESP_ERR_WAIT, 5);
SAME(OCSD_RESP_FATAL_NOT_INIT, 6);
SAME(OCSD_RESP_FATAL_SYS_ERR, 10);
SAME(OCSD_GEN_TRC_ELEM_UNKNOWN, 0);
SAME(OCSD_GEN_TRC_ELEM_NO_SYNC, 1);
SAME(OCSD_GEN_TRC_ELEM_TRACE_ON, 2);
SAME(OCSD_GEN_TRC_ELEM_EO_TRACE, 3);
SAME(OCSD_GEN_TRC_ELEM_PE_CONTEXT, 4);
SAME(OCSD_GEN_TRC_ELEM_INSTR_RANGE, 5);
SAME(OCSD_GEN_TRC_ELEM_I_RANGE_NOPATH, 6);
SAME(OCSD_GEN_TRC_ELEM_ADDR_NACC, 7);
SAME(OCSD_GEN_TRC_ELEM_ADDR_UNKNOWN, 8);
SAME(OCSD_GEN_TRC_ELEM_EXCEPTION, 9);
SAME(OCSD_GEN_TRC_ELEM_EXCEPTION_RET, 10);
SAME(OCSD_GEN_TRC_ELEM_TIMESTAMP, 11);
SAME(OCSD_GEN_TRC_ELEM_CYCLE_COUNT, 12);
SAME(OCSD_GEN_TRC_ELEM_EVENT, 13);
SAME(OCSD_GEN_TRC_ELEM_SWTRACE, 14);
SAME(OCSD_GEN_TRC_ELEM_SYNC_MARKER, 15);
SAME(OCSD_GEN_TRC_ELEM_MEMTRANS, 16);
SAME(OCSD_GEN_TRC_ELEM_INSTRUMENTATION, 17);
SAME(OCSD_GEN_TRC_ELEM_CUSTOM, 18);
SAME(ocsd_isa_arm, 0);
SAME(ocsd_isa_thumb2, 1);
SAME(ocsd_isa_aarch64, 2);
SAME(ocsd_isa_unknown, 6);
SAME(OCSD_INSTR_OTHER, 0);
SAME(OCSD_INSTR_BR, 1);
SAME(OCSD_INSTR_BR_INDIRECT, 2);
SAME(OCSD_INSTR_ISB, 3);
SAME(OCSD_INSTR_DSB_DMB, 4);
SAME(OCSD_INSTR_WFI_WFE, 5);
SAME(OCSD_INSTR_TSTART, 6);
SAME(OCSD_S_INSTR_NONE, 0);
SAME(OCSD_S_INSTR_BR_LINK, 1);
SAME(OCSD_S_INSTR_V8_RET, 2);
SAME(OCSD_S_INSTR_V8_ERET, 3);
SAME(OCSD_S_INSTR_V7_IMPLIED_RET, 4);
SAME(ARCH_UNKNOWN, 0);
SAME(ARCH_V7, 0x0700);
SAME(ARCH_V8, 0x0800);
SAME(ARCH_V8r3, 0x0803);
SAME(ARCH_AA64, 0x0864);
SAME(profile_Unknown, 0);
SAME(profile_CortexM, 1);
SAME(profile_CortexR, 2);
SAME(profile_CortexA, 3);
SAME(OCSD_MEM_SPACE_ANY, 0xFF);
SAME(OCSD_VER_MAJOR, 1);
SAME(OCSD_VER_MINOR, 5);
SAME(OCSD_CREATE_FLG_PACKET_PROC, 0x01);
SAME(OCSD_CREATE_FLG_FULL_DECODER, 0x02);
SAME(OCSD_ERR_SEV_NONE, 0);
SAME(OCSD_ERR_SEV_ERROR, 1);
SAME(OCSD_ERR_SEV_WARN, 2);
SAME(C_API_MSGLOGOUT_FLG_NONE, 0);
SAME(UNSYNC_UNKNOWN, 0);
SAME(UNSYNC_INIT_DECODER, 1);
SAME(UNSYNC_RESET_DECODER, 2);
SAME(UNSYNC_OVERFLOW, 3);
SAME(UNSYNC_DISCARD, 4);
SAME(UNSYNC_BAD_PACKET, 5);
SAME(UNSYNC_BAD_IMAGE, 6);
SAME(UNSYNC_EOT, 7);
SAME(OCSD_C_API_CB_PKT_SINK, 0);
SAME(OCSD_C_API_CB_PKT_MON, 1);
SAME(sizeof(ocsd_c_api_cb_types), 4);
SAME(ETM4_PKT_I_NOTSYNC, 0x200);
SAME(ETM4_PKT_I_TRACE_INFO, 0x01);
SAME(ETM4_PKT_I_TRACE_ON, 0x04);
SAME(ETM4_PKT_I_EXCEPT, 0x06);
SAME(ETM4_PKT_I_EXCEPT_RTN, 0x07);
SAME(ETM4_PKT_I_ADDR_CTXT_L_32IS0, 0x82);
SAME(ETM4_PKT_I_ADDR_CTXT_L_32IS1, 0x83);
SAME(ETM4_PKT_I_ADDR_CTXT_L_64IS0, 0x85);
SAME(ETM4_PKT_I_ADDR_CTXT_L_64IS1, 0x86);
SAME(ETM4_PKT_I_ADDR_MATCH, 0x90);
SAME(ETM4_PKT_I_ADDR_S_IS0, 0x95);
SAME(ETM4_PKT_I_ADDR_S_IS1, 0x96);
SAME(ETM4_PKT_I_ADDR_L_32IS0, 0x9A);
SAME(ETM4_PKT_I_ADDR_L_32IS1, 0x9B);
SAME(ETM4_PKT_I_ADDR_L_64IS0, 0x9D);
SAME(ETM4_PKT_I_ADDR_L_64IS1, 0x9E);
SAME(ETM4_PKT_I_Q, 0xA0);
SAME(ETM4_PKT_I_ATOM_F6, 0xC0);
SAME(ETM4_PKT_I_ATOM_F5, 0xD5);
SAME(ETM4_PKT_I_ATOM_F2, 0xD8);
SAME(ETM4_PKT_I_ATOM_F4, 0xDC);
SAME(ETM4_PKT_I_ATOM_F1, 0xF6);
SAME(ETM4_PKT_I_ATOM_F3, 0xF8);
SAME(ETM4_PKT_I_DISCARD, 0x103);
SAME(ETM4_PKT_I_OVERFLOW, 0x105);
SAME(ETE_PKT_I_PE_RESET, 0x400);
SAME(ETE_PKT_I_TRANS_FAIL, 0x401);

/*
 * Flag bits of ocsd_generic_trace_elem are bit-fields, which a static assertion cannot read:
 * this returns `flag_bits` with one field set to all ones, for a test of src/lib.rs to compare
 * with its masks (0: last_instr_exec, 1: last_instr_sz, 2: excep_ret_addr,
 * 3: excep_ret_addr_br_tgt, 4: last_instr_cond).
 */
unsigned int opencsd_sys_flag_mask(int field)
{
	ocsd_generic_trace_elem e = { 0 };

	switch (field) {
	case 0:
		e.last_instr_exec = 1;
		break;
	case 1:
		e.last_instr_sz = 7;
		break;
	case 2:
		e.excep_ret_addr = 1;
		break;
	case 3:
		e.excep_ret_addr_br_tgt = 1;
		break;
	case 4:
		e.last_instr_cond = 1;
		break;
	default:
		break;
	}
	return e.flag_bits;
}
