// SPDX-License-Identifier: GPL-2.0

//! The ETMv4 trace generator of the model-backed trace units (`coresight_sim/etm4x_gen.rs`).

use kernel::prelude::*;

#[kunit_tests(coresight_etm4x_gen)]
mod tests {
    use super::KernelText;
    use crate::etm4x_gen::{
        generate,
        BranchKind,
        CodeImage,
        Decision,
        ExecRange,
        GenConfig,
        GenError,
        StopReason, //
    };
    use kernel::prelude::*;

    /// An A-sync packet: eleven zero bytes and `0x80`.
    const A_SYNC: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80];

    const BASE: u64 = 0xFFFF_8000_0808_0000;
    const NOP: u32 = 0xD503_201F;

    /// A small program: a loop that calls a function and leaves through a `b.eq`.
    ///
    /// ```text
    /// 0x00 add x0, x0, #1
    /// 0x04 cmp x0, x1
    /// 0x08 b.eq 0x20
    /// 0x0c bl 0x100
    /// 0x10 b 0x00
    /// 0x20 nop
    /// 0x24 b.ne 0x00
    /// 0x100 add x0, x0, #1
    /// 0x104 ret
    /// ```
    fn program() -> [u8; 0x140] {
        let mut words = [NOP; 0x140 / 4];
        words[0] = 0x9100_0400;
        words[1] = 0xEB01_001F;
        words[2] = 0x5400_00C0;
        words[3] = 0x9400_003D;
        words[4] = 0x17FF_FFFC;
        words[9] = 0x54FF_FEE1;
        words[0x40] = 0x9100_0400;
        words[0x41] = 0xD65F_03C0;
        let mut bytes = [0u8; 0x140];
        for (b, w) in bytes.chunks_exact_mut(4).zip(words) {
            b.copy_from_slice(&w.to_le_bytes());
        }
        bytes
    }

    /// The stream of the path of [`walk_of_a_known_program_gives_the_host_stream`], as the host
    /// build of the generator writes it (and OpenCSD decodes it).
    const STREAM: [u8; 34] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x01, 0x01, 0x00,
        0x04, 0x85, 0x00, 0x00, 0x08, 0x08, 0x00, 0x80, 0xFF, 0xFF, 0xB1, 0x00, 0x00, 0x00, 0x00,
        0xFE, 0x95, 0x04, 0xDB,
    ];

    #[test]
    fn walk_of_a_known_program_gives_the_host_stream() {
        let code = program();
        let image = CodeImage {
            base: BASE,
            bytes: &code,
        };
        let decisions = [Decision::NotTaken, Decision::Taken, Decision::Taken];
        let mut out = [0u8; 256];
        let mut ranges = [None::<ExecRange>; 8];
        let mut n = 0usize;
        let s = generate(
            &image,
            BASE,
            &decisions,
            &GenConfig::kernel(),
            &mut out,
            |r| {
                if let Some(slot) = ranges.get_mut(n) {
                    *slot = Some(r);
                }
                n += 1;
            },
        );
        assert!(s.is_ok());
        let Ok(s) = s else { return };
        assert!(s.stop == StopReason::DecisionsExhausted);
        assert_eq!(
            (s.ranges, s.insns, s.decisions_used, s.syncs),
            (5, 10, 3, 1)
        );
        assert_eq!(n, 5);
        assert!(out.get(..A_SYNC.len()) == Some(&A_SYNC[..]));
        assert!(out.get(..s.bytes) == Some(&STREAM[..]));

        // The ranges a decoder recovers: (start, end, instructions, branch, taken).
        let want = [
            (0x00, 0x0C, 3, BranchKind::Conditional, false),
            (0x0C, 0x10, 1, BranchKind::DirectLink, true),
            (0x100, 0x108, 2, BranchKind::Return, true),
            (0x10, 0x14, 1, BranchKind::Direct, true),
            (0x00, 0x0C, 3, BranchKind::Conditional, true),
        ];
        for (got, (start, end, insns, kind, taken)) in ranges.iter().zip(want) {
            assert!(got.is_some_and(|r| r.start == BASE + start
                && r.end == BASE + end
                && r.insns == insns
                && r.kind == kind
                && r.taken == taken));
        }
    }

    #[test]
    fn bad_start_and_full_buffer_are_refused() {
        let code = program();
        let image = CodeImage {
            base: BASE,
            bytes: &code,
        };
        let cfg = GenConfig::kernel();
        let mut out = [0u8; 256];
        let r = generate(&image, BASE + 2, &[], &cfg, &mut out, |_| {});
        assert!(r == Err(GenError::BadStart(BASE + 2)));
        let r = generate(&image, BASE - 4, &[], &cfg, &mut out, |_| {});
        assert!(r == Err(GenError::BadStart(BASE - 4)));
        // Room for the A-sync only.
        let mut small = [0u8; 12];
        let r = generate(&image, BASE, &[Decision::Taken], &cfg, &mut small, |_| {});
        assert!(matches!(r, Err(GenError::OutOfSpace(12))));
    }

    #[test]
    fn path_through_the_kernel_text_is_a_valid_stream() -> Result {
        use crate::etm4x_gen::{
            generate_with,
            BranchSite, //
        };
        use kernel::coresight::sim::{
            self,
            PathStart, //
        };

        let image = KernelText;
        let (base, end) = sim::kernel_text();
        let start = sim::path_start(PathStart::Panic);
        assert!(start >= base && start < end);
        assert!(sim::text_word(start).is_some());
        assert!(sim::text_word(start + 2).is_none() && sim::text_word(end).is_none());
        let cfg = GenConfig {
            max_insns: 3000,
            ..GenConfig::kernel()
        };

        // The simulated units' policy: returns go back, other indirect branches end the path,
        // a conditional branch is taken at every fourth visit.
        let walk = |out: &mut [u8]| {
            let mut policy = crate::etm4x_gen::LoopBreaker::new();
            let decide = |site: BranchSite| policy.decide(site);
            let mut first = None;
            let mut inside = true;
            let s = generate_with(&image, start, decide, &cfg, out, |r| {
                first.get_or_insert(r.start);
                inside &= r.start >= base && r.end <= end && r.start < r.end && r.start & 3 == 0;
            });
            (s, first, inside)
        };

        let mut out = KVec::from_elem(0u8, 8192, GFP_KERNEL)?;
        let (s, first, inside) = walk(&mut out);
        assert!(s.is_ok());
        let s = s.map_err(|_| EINVAL)?;
        assert!(s.ranges >= 1 && s.insns >= 1 && s.insns <= 3000);
        assert!(first == Some(start));
        assert!(inside);
        assert!(out.get(..A_SYNC.len()) == Some(&A_SYNC[..]));

        // The same path gives the same stream.
        let mut again = KVec::from_elem(0u8, 8192, GFP_KERNEL)?;
        let (s2, _, _) = walk(&mut again);
        assert!(s2 == Ok(s));
        assert!(out.get(..s.bytes) == again.get(..s.bytes));
        Ok(())
    }
}

/// The running kernel's text, read as the sim ETMs read it.
pub(crate) struct KernelText;

impl crate::etm4x_gen::Code for KernelText {
    fn word(&self, addr: u64) -> Option<u32> {
        kernel::coresight::sim::text_word(addr)
    }
}
