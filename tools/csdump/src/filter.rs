//! What a trace unit was set to trace, from its registers saved at panic: the Non-secure
//! exception levels ViewInst leaves out, the address ranges it includes or excludes, its start
//! and stop points. Where the trace goes off inside a filtered window is where the filter left
//! code out, not where trace was lost; the report says which.

use cspd_format::etm4x::SavedState;
use cspd_format::etm4x::SAVED_FILTER_VALID;
use cspd_format::etm4x::SAVED_VIEWINST_VALID;

/// `TRCVICTLR.EXLEVEL_NS`, bits 23:20: bit `n` set leaves Non-secure ELn out of the trace.
const VICTLR_EXLEVEL_NS_SHIFT: u32 = 20;

/// The Non-secure level the kernel leaves out by default (a kernel at EL1 does not trace EL2).
const EL2: u8 = 0b100;

/// A unit's ViewInst filter as saved at panic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Non-secure exception levels left out: bit `n` for ELn (`TRCVICTLR.EXLEVEL_NS`).
    pub excluded_ns: u8,
    /// Address ranges traced (`TRCVIIECTLR.INCLUDE`), both ends included; none: everywhere.
    pub include: Vec<(u64, u64)>,
    /// Address ranges not traced (`TRCVIIECTLR.EXCLUDE`), both ends included.
    pub exclude: Vec<(u64, u64)>,
    /// Start points (`TRCVISSCTLR.START`).
    pub start: Vec<u64>,
    /// Stop points (`TRCVISSCTLR.STOP`): the user's and the crash path's hardware stop.
    pub stop: Vec<u64>,
}

/// Where a branch went that the trace does not follow, as the filter explains it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Untraced {
    /// Into an exception level the unit leaves out (the level, 0 to 2).
    Level(u8),
    /// Outside every included range.
    NotIncluded,
    /// Into an excluded range.
    Excluded,
    /// The filter leaves code out, the target is not known (an indirect branch).
    Filtered,
}

impl Untraced {
    /// A few words for reports.
    pub fn describe(self) -> String {
        match self {
            Self::Level(n) => format!("EL{n} not traced"),
            Self::NotIncluded => "outside the traced ranges".into(),
            Self::Excluded => "in an excluded range".into(),
            Self::Filtered => "into code the filter leaves out".into(),
        }
    }
}

impl Filter {
    /// The filter a saved state holds; `None` for a record from before the filter was saved
    /// (format version 2 and older) or a unit whose registers were not read.
    pub fn from_state(s: &SavedState) -> Option<Self> {
        let need = SAVED_FILTER_VALID | SAVED_VIEWINST_VALID;
        if s.flags & need != need {
            return None;
        }
        let cmp = |n: usize| (s.cmp_saved & (1 << n) != 0).then(|| s.acvr[n]);
        let mut f = Self {
            // CAST: a 4-bit field, of which the three Non-secure levels are kept.
            excluded_ns: ((s.trcvictlr >> VICTLR_EXLEVEL_NS_SHIFT) & 0b111) as u8,
            ..Self::default()
        };
        for pair in 0..8 {
            let (Some(lo), Some(hi)) = (cmp(2 * pair), cmp(2 * pair + 1)) else {
                continue;
            };
            if s.trcviiectlr & (1 << pair) != 0 {
                f.include.push((lo, hi));
            }
            if s.trcviiectlr & (1 << (pair + 16)) != 0 {
                f.exclude.push((lo, hi));
            }
        }
        for n in 0..16 {
            if let Some(a) = cmp(n) {
                if s.trcvissctlr & (1 << n) != 0 {
                    f.start.push(a);
                }
                if s.trcvissctlr & (1 << (n + 16)) != 0 {
                    f.stop.push(a);
                }
            }
        }
        Some(f)
    }

    /// Whether the filter leaves any code out other than by its stop points (the crash path's
    /// hardware stop ends the trace, it does not cut it).
    pub fn cuts(&self) -> bool {
        self.excluded_ns & !EL2 != 0
            || !self.include.is_empty()
            || !self.exclude.is_empty()
            || !self.start.is_empty()
    }

    /// Why the trace does not follow a branch to `target` (`None`: an indirect branch's
    /// unknown target), when the filter explains it; `None` when it does not.
    pub fn untraced(&self, target: Option<u64>) -> Option<Untraced> {
        let Some(a) = target else {
            return self.cuts().then_some(Untraced::Filtered);
        };
        // User space is below the kernel's half of the address space (TTBR0): EL0.
        let level = if a >> 63 == 0 { 0 } else { 1 };
        if self.excluded_ns & (1 << level) != 0 {
            return Some(Untraced::Level(level));
        }
        if self.exclude.iter().any(|&(lo, hi)| (lo..=hi).contains(&a)) {
            return Some(Untraced::Excluded);
        }
        if !self.include.is_empty() && !self.include.iter().any(|&(lo, hi)| (lo..=hi).contains(&a))
        {
            return Some(Untraced::NotIncluded);
        }
        // A start/stop pair can have the trace off anywhere.
        (!self.start.is_empty()).then_some(Untraced::Filtered)
    }

    /// The levels traced, for reports: "EL0 and EL1", "EL1 only (EL0 excluded)".
    pub fn levels(&self) -> String {
        let traced: Vec<String> = (0..2u8)
            .filter(|n| self.excluded_ns & (1 << n) == 0)
            .map(|n| format!("EL{n}"))
            .collect();
        match traced.as_slice() {
            [] => "no Non-secure EL0 or EL1 code".into(),
            [one] => format!("{one} only"),
            _ => traced.join(" and "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> SavedState {
        SavedState {
            flags: SAVED_FILTER_VALID | SAVED_VIEWINST_VALID,
            ..SavedState::default()
        }
    }

    #[test]
    fn reads_levels_ranges_and_points_from_the_registers() {
        let mut s = state();
        s.trcvictlr = 0b101 << 20 | 1 << 9;
        s.trcviiectlr = 0b10 | 1 << 16;
        s.trcvissctlr = 1 << 4 | 1 << (16 + 5);
        s.cmp_saved = 0b11_1111;
        s.acvr[..6].copy_from_slice(&[0x100, 0x1FC, 0x200, 0x2FC, 0x400, 0x500]);
        let f = Filter::from_state(&s).unwrap();
        assert_eq!(f.excluded_ns, 0b101);
        assert_eq!(f.include, [(0x200, 0x2FC)]);
        assert_eq!(f.exclude, [(0x100, 0x1FC)]);
        assert_eq!(
            (f.start.as_slice(), f.stop.as_slice()),
            (&[0x400][..], &[0x500][..])
        );
        assert_eq!(f.levels(), "EL1 only");
        // A comparator the record did not save is not made up.
        s.cmp_saved = 0b11_1101;
        assert_eq!(Filter::from_state(&s).unwrap().exclude, []);
        // An older record has no filter.
        s.flags &= !SAVED_FILTER_VALID;
        assert_eq!(Filter::from_state(&s), None);
    }

    #[test]
    fn explains_only_what_the_filter_leaves_out() {
        let kernel = 0xFFFF_8000_8000_1000;
        let mut f = Filter {
            excluded_ns: EL2,
            stop: vec![kernel],
            ..Filter::default()
        };
        // The default levels and a stop point cut nothing.
        assert!(!f.cuts());
        assert_eq!(f.untraced(Some(0x40_0000)), None);
        assert_eq!(f.untraced(None), None);
        f.excluded_ns |= 1;
        assert_eq!(f.untraced(Some(0x40_0000)), Some(Untraced::Level(0)));
        assert_eq!(f.untraced(Some(kernel)), None);
        assert_eq!(f.untraced(None), Some(Untraced::Filtered));
        f.include.push((kernel, kernel + 0xFC));
        assert_eq!(f.untraced(Some(kernel + 0x40)), None);
        assert_eq!(
            f.untraced(Some(kernel + 0x100)),
            Some(Untraced::NotIncluded)
        );
        f.exclude.push((kernel + 0x40, kernel + 0x4C));
        assert_eq!(f.untraced(Some(kernel + 0x44)), Some(Untraced::Excluded));
    }
}
