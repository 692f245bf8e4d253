//! Which trace source wrote which bytes of a sink: the CoreSight trace formatter's 16-byte
//! frames (CoreSight Architecture Specification v3.0, "Trace Formatter") undone into the order in
//! which each source's bytes entered the sink. The decode itself is OpenCSD's; this only tells
//! how the sink's space was shared, for the report's account of what a CPU wrote after the crash.

use std::collections::BTreeMap;

/// Length of one formatter frame.
pub const FRAME_LEN: usize = 16;

/// A frame of four full frame synchronisation packets (`0x7FFF_FFFF` each): what a TMC driver
/// writes over the start of a wrapped buffer (the barrier) so that a decoder synchronises there.
const BARRIER: [u8; FRAME_LEN] = [
    0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0x7F,
];

/// Trace ID 0: the formatter's padding, no source's data.
pub const NULL_ID: u8 = 0;

/// One source's consecutive bytes in the sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// The source's trace ID.
    pub id: u8,
    /// How many data bytes, in a row.
    pub bytes: u64,
}

/// The data bytes of `frames` (memory-aligned 16-byte frames; a trailing partial frame is
/// ignored), as runs of one trace ID each, oldest first. Padding (ID 0) is kept as runs of
/// [`NULL_ID`]; barrier frames carry no data. Bytes before the first ID change belong to no known
/// source and are left out.
pub fn runs(frames: &[u8]) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    let mut id: Option<u8> = None;
    let mut push = |id: Option<u8>, n: u64| {
        let Some(id) = id else {
            return;
        };
        match out.last_mut() {
            Some(r) if r.id == id => r.bytes += n,
            _ => out.push(Run { id, bytes: n }),
        }
    };
    for f in frames.chunks_exact(FRAME_LEN) {
        if f == BARRIER {
            continue;
        }
        let aux = f[15];
        for k in 0..8 {
            let b = f[2 * k];
            let odd = (2 * k + 1 < 15).then(|| 2 * k + 1);
            if b & 1 == 1 {
                // An ID change; the aux bit says whether the next byte is still the old ID's.
                let new = Some(b >> 1);
                let after = aux & (1 << k) != 0;
                if odd.is_some() {
                    if after {
                        push(id, 1);
                        id = new;
                    } else {
                        id = new;
                        push(id, 1);
                    }
                } else {
                    id = new;
                }
            } else {
                push(id, 1);
                if odd.is_some() {
                    push(id, 1);
                }
            }
        }
    }
    out
}

/// Per trace ID, the data bytes of `frames` that entered the sink after the last byte of
/// `after`'s trace, and all of them: `None` when `after` has no byte in the sink.
pub fn bytes_after(frames: &[u8], after: u8) -> Option<BTreeMap<u8, u64>> {
    let rs = runs(frames);
    let last = rs.iter().rposition(|r| r.id == after)?;
    let mut m = BTreeMap::new();
    for r in &rs[last + 1..] {
        if r.id != NULL_ID {
            *m.entry(r.id).or_insert(0) += r.bytes;
        }
    }
    Some(m)
}

/// Per trace ID, the data bytes of `frames` (padding left out).
pub fn bytes_per_id(frames: &[u8]) -> BTreeMap<u8, u64> {
    let mut m = BTreeMap::new();
    for r in runs(frames) {
        if r.id != NULL_ID {
            *m.entry(r.id).or_insert(0) += r.bytes;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame: `pairs` of (even byte, odd byte) for bytes 0..14, byte 14, and the aux byte. An
    /// even byte with its low bit set is an ID change.
    fn frame(pairs: [(u8, u8); 7], b14: u8, aux: u8) -> [u8; 16] {
        let mut f = [0u8; 16];
        for (k, (e, o)) in pairs.into_iter().enumerate() {
            f[2 * k] = e;
            f[2 * k + 1] = o;
        }
        f[14] = b14;
        f[15] = aux;
        f
    }

    fn id(n: u8) -> u8 {
        (n << 1) | 1
    }

    #[test]
    fn id_changes_take_effect_before_or_after_the_next_byte() {
        // ID 0x10, then 14 data bytes (byte 1, six pairs, byte 14).
        let a = frame(
            [
                (id(0x10), 1),
                (2, 3),
                (4, 5),
                (6, 7),
                (8, 9),
                (10, 11),
                (12, 13),
            ],
            14,
            0,
        );
        // Byte 0: ID 0x12 with its aux bit set: byte 1 is still 0x10's; then 0x12's bytes
        // until byte 8 changes to 0x10 (aux clear: byte 9 is 0x10's), byte 14 0x10's.
        let b = frame(
            [
                (id(0x12), 1),
                (2, 3),
                (4, 5),
                (6, 7),
                (id(0x10), 9),
                (10, 11),
                (12, 13),
            ],
            14,
            1,
        );
        let mut v = a.to_vec();
        v.extend_from_slice(&b);
        assert_eq!(
            runs(&v),
            vec![
                Run {
                    id: 0x10,
                    bytes: 15
                },
                Run { id: 0x12, bytes: 6 },
                Run { id: 0x10, bytes: 6 },
            ]
        );
        assert_eq!(bytes_per_id(&v), BTreeMap::from([(0x10, 21), (0x12, 6)]));
        // After 0x12's last byte: 0x10's last 6.
        assert_eq!(bytes_after(&v, 0x12), Some(BTreeMap::from([(0x10, 6)])));
        assert_eq!(bytes_after(&v, 0x10), Some(BTreeMap::new()));
        assert_eq!(bytes_after(&v, 0x14), None);
    }

    #[test]
    fn barriers_padding_and_partial_frames_carry_no_data() {
        let a = frame(
            [
                (id(0x10), 1),
                (2, 3),
                (4, 5),
                (id(0), 0),
                (0, 0),
                (0, 0),
                (0, 0),
            ],
            0,
            0,
        );
        let mut v = BARRIER.to_vec();
        v.extend_from_slice(&a);
        v.extend_from_slice(&[0xAB; 7]);
        let rs = runs(&v);
        assert_eq!(rs[0], Run { id: 0x10, bytes: 5 });
        assert_eq!(rs[1].id, NULL_ID);
        assert_eq!(bytes_per_id(&v), BTreeMap::from([(0x10, 5)]));
        // Data before any ID change is nobody's.
        let orphan = frame(
            [
                (2, 3),
                (id(0x10), 5),
                (6, 7),
                (8, 9),
                (10, 11),
                (12, 13),
                (14, 15),
            ],
            16,
            0,
        );
        assert_eq!(bytes_per_id(&orphan), BTreeMap::from([(0x10, 12)]));
        assert!(runs(&[]).is_empty());
    }
}
