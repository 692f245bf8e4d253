//! GDB remote serial protocol framing: `$payload#cc` packets, `+`/`-` acknowledgements, the
//! interrupt byte, binary escapes and hex (GDB manual, "Overview" of the remote protocol).
//!
//! The reader never trusts the peer: a payload longer than [`MAX_PACKET`] is skipped up to its
//! `#` without being stored, a checksum that is not two hex digits or does not match is
//! reported, and the end of the stream inside a packet is reported as such. Memory use is
//! bounded by [`MAX_PACKET`] whatever arrives.

use std::fmt;
use std::io;
use std::io::BufRead;
use std::io::Write;

/// Largest packet payload the stub accepts and sends (advertised as `PacketSize`).
pub const MAX_PACKET: usize = 0x4_0000;

/// How many bytes of an over-long payload are skipped, looking for its `#`, before the stream
/// is declared broken.
pub const MAX_SKIP: usize = 64 << 20;

/// Why a packet was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadPacket {
    /// The checksum does not match the payload.
    Checksum {
        /// The checksum the packet carried.
        got: u8,
        /// The checksum of the payload received.
        want: u8,
    },
    /// The two characters after `#` are not hex digits.
    ChecksumNotHex([u8; 2]),
    /// The payload is longer than [`MAX_PACKET`] bytes.
    Oversized(usize),
    /// A `$` arrived before the `#` of the packet it interrupts (that packet is dropped; the
    /// new one is read next).
    Restarted(usize),
}

impl fmt::Display for BadPacket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Checksum { got, want } => write!(
                f,
                "bad checksum: the packet says {got:02x}, its payload sums to {want:02x}"
            ),
            Self::ChecksumNotHex(c) => write!(
                f,
                "bad checksum: {:?} after '#' is not two hex digits",
                String::from_utf8_lossy(c)
            ),
            Self::Oversized(n) => write!(
                f,
                "packet of {n} bytes is longer than the {MAX_PACKET} this stub accepts; skipped"
            ),
            Self::Restarted(n) => write!(
                f,
                "a new packet started after {n} bytes of one that was not terminated; \
                 the unterminated one is dropped"
            ),
        }
    }
}

/// What arrived from the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A packet with a good checksum: its payload.
    Packet(Vec<u8>),
    /// `+`: the last packet sent arrived.
    Ack,
    /// `-`: the last packet sent arrived damaged; send it again.
    Nak,
    /// `\x03`: the user pressed Ctrl-C.
    Interrupt,
    /// A packet that was not accepted.
    Bad(BadPacket),
    /// The stream ended between packets.
    Eof,
}

/// Why the stream cannot be read any further.
#[derive(Debug)]
pub enum ReadError {
    /// The stream ended inside a packet.
    Truncated {
        /// Payload bytes received before the end.
        received: usize,
    },
    /// More than [`MAX_SKIP`] bytes followed a `$` without a `#`.
    Unterminated,
    /// Reading failed.
    Io(io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated { received } => write!(
                f,
                "the connection ended inside a packet ({received} bytes of it received, no '#' \
                 and checksum)"
            ),
            Self::Unterminated => write!(
                f,
                "a packet ran on for more than {MAX_SKIP} bytes without its '#': not the GDB \
                 remote protocol"
            ),
            Self::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads [`Event`]s from a byte stream.
pub struct Reader<R> {
    r: R,
    /// A `$` was read while reading the previous packet: the next call reads a payload.
    started: bool,
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Returns the checksum of `payload`: the sum of its bytes modulo 256.
pub fn checksum(payload: &[u8]) -> u8 {
    payload.iter().fold(0u8, |s, &b| s.wrapping_add(b))
}

impl<R: BufRead> Reader<R> {
    /// Returns a reader of `r`.
    pub fn new(r: R) -> Self {
        Self { r, started: false }
    }

    fn byte(&mut self) -> io::Result<Option<u8>> {
        loop {
            let buf = match self.r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let Some(&b) = buf.first() else {
                return Ok(None);
            };
            self.r.consume(1);
            return Ok(Some(b));
        }
    }

    /// Returns the next event.
    pub fn next_event(&mut self) -> Result<Event, ReadError> {
        if !std::mem::take(&mut self.started) {
            loop {
                match self.byte().map_err(ReadError::Io)? {
                    None => return Ok(Event::Eof),
                    Some(b'+') => return Ok(Event::Ack),
                    Some(b'-') => return Ok(Event::Nak),
                    Some(0x03) => return Ok(Event::Interrupt),
                    Some(b'$') => break,
                    // Noise between packets (a newline, a stray byte) is not a packet.
                    Some(_) => {}
                }
            }
        }
        let mut payload = Vec::new();
        let mut len = 0usize;
        loop {
            let Some(b) = self.byte().map_err(ReadError::Io)? else {
                return Err(ReadError::Truncated { received: len });
            };
            match b {
                b'#' => break,
                b'$' => {
                    self.started = true;
                    return Ok(Event::Bad(BadPacket::Restarted(len)));
                }
                _ => {
                    len += 1;
                    if len <= MAX_PACKET {
                        payload.push(b);
                    } else if len > MAX_SKIP {
                        return Err(ReadError::Unterminated);
                    }
                }
            }
        }
        let mut cs = [0u8; 2];
        for c in &mut cs {
            *c = self
                .byte()
                .map_err(ReadError::Io)?
                .ok_or(ReadError::Truncated { received: len })?;
        }
        if len > MAX_PACKET {
            return Ok(Event::Bad(BadPacket::Oversized(len)));
        }
        let (Some(h), Some(l)) = (hex_val(cs[0]), hex_val(cs[1])) else {
            return Ok(Event::Bad(BadPacket::ChecksumNotHex(cs)));
        };
        let got = h << 4 | l;
        let want = checksum(&payload);
        if got != want {
            return Ok(Event::Bad(BadPacket::Checksum { got, want }));
        }
        Ok(Event::Packet(payload))
    }
}

/// Writes one packet with payload `payload` (sent as is: escape binary data first with
/// [`escape_binary`]).
pub fn write_packet(w: &mut dyn Write, payload: &[u8]) -> io::Result<()> {
    let mut out = Vec::with_capacity(payload.len() + 4);
    out.push(b'$');
    out.extend_from_slice(payload);
    out.push(b'#');
    out.extend_from_slice(format!("{:02x}", checksum(payload)).as_bytes());
    w.write_all(&out)?;
    w.flush()
}

/// Writes one notification (`%payload#cc`). GDB ignores a notification it does not know, and
/// each one it reads restarts the time it waits for an acknowledgement or a reply: the stub
/// sends them while it decodes, before its first reply.
pub fn write_notification(w: &mut dyn Write, payload: &[u8]) -> io::Result<()> {
    let mut out = Vec::with_capacity(payload.len() + 4);
    out.push(b'%');
    out.extend_from_slice(payload);
    out.push(b'#');
    out.extend_from_slice(format!("{:02x}", checksum(payload)).as_bytes());
    w.write_all(&out)?;
    w.flush()
}

/// Whether `b` must be escaped in binary data: the frame characters, the escape itself and
/// `*`, which GDB reads as run-length encoding.
fn special(b: u8) -> bool {
    matches!(b, b'$' | b'#' | b'}' | b'*')
}

/// Appends to `out` as many bytes of `data` as fit in `room` bytes once escaped (`}` followed
/// by the byte XOR 0x20); returns how many bytes of `data` it took.
pub fn escape_binary(data: &[u8], room: usize, out: &mut Vec<u8>) -> usize {
    let mut used = 0;
    for (i, &b) in data.iter().enumerate() {
        let n = if special(b) { 2 } else { 1 };
        if used + n > room {
            return i;
        }
        if special(b) {
            out.push(b'}');
            out.push(b ^ 0x20);
        } else {
            out.push(b);
        }
        used += n;
    }
    data.len()
}

/// Undoes [`escape_binary`]. A trailing lone `}` is dropped.
pub fn unescape_binary(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut it = data.iter();
    while let Some(&b) = it.next() {
        if b == b'}' {
            if let Some(&n) = it.next() {
                out.push(n ^ 0x20);
            }
        } else {
            out.push(b);
        }
    }
    out
}

/// Appends the hex digits of `bytes` to `out`.
pub fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 15)]);
    }
}

/// Returns `bytes` as hex digits.
pub fn hex(bytes: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(bytes.len() * 2);
    push_hex(&mut v, bytes);
    v
}

/// Decodes hex digits into bytes; `None` when `s` is not an even number of hex digits.
pub fn unhex(s: &[u8]) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    s.chunks_exact(2)
        .map(|p| Some(hex_val(p[0])? << 4 | hex_val(p[1])?))
        .collect()
}

/// Parses a hex number of at most 16 digits (no prefix, no sign).
pub fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    s.iter()
        .try_fold(0u64, |v, &c| Some(v << 4 | u64::from(hex_val(c)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(input: &[u8]) -> (Vec<Event>, Option<String>) {
        let mut r = Reader::new(input);
        let mut v = Vec::new();
        loop {
            match r.next_event() {
                Ok(Event::Eof) => return (v, None),
                Ok(e) => v.push(e),
                Err(e) => return (v, Some(e.to_string())),
            }
        }
    }

    #[test]
    fn reads_packets_acks_and_interrupts() {
        let (ev, err) = events(b"+$qSupported:multiprocess+#c6-\x03\n$g#67");
        assert_eq!(err, None);
        assert_eq!(
            ev,
            [
                Event::Ack,
                Event::Packet(b"qSupported:multiprocess+".to_vec()),
                Event::Nak,
                Event::Interrupt,
                Event::Packet(b"g".to_vec()),
            ]
        );
    }

    #[test]
    fn reports_bad_packets_and_carries_on() {
        let (ev, err) = events(b"$g#00$g#zz$m0,4$g#67");
        assert_eq!(err, None);
        assert_eq!(
            ev,
            [
                Event::Bad(BadPacket::Checksum { got: 0, want: 0x67 }),
                Event::Bad(BadPacket::ChecksumNotHex(*b"zz")),
                Event::Bad(BadPacket::Restarted(4)),
                Event::Packet(b"g".to_vec()),
            ]
        );
    }

    #[test]
    fn an_oversized_packet_is_skipped_without_being_stored() {
        let mut input = b"$".to_vec();
        input.resize(MAX_PACKET + 10, b'a');
        input.extend_from_slice(b"#00$g#67");
        let (ev, err) = events(&input);
        assert_eq!(err, None);
        assert_eq!(
            ev,
            [
                Event::Bad(BadPacket::Oversized(MAX_PACKET + 9)),
                Event::Packet(b"g".to_vec())
            ]
        );
    }

    #[test]
    fn the_end_inside_a_packet_is_an_error() {
        for input in [&b"$qSupp"[..], b"$g#6", b"$g#"] {
            let (_, err) = events(input);
            assert!(err.unwrap().contains("ended inside a packet"), "{input:?}");
        }
    }

    #[test]
    fn escapes_round_trip_and_respect_the_room() {
        let data = b"a$b#c}d*e";
        let mut out = Vec::new();
        assert_eq!(escape_binary(data, 100, &mut out), data.len());
        assert_eq!(out, b"a}\x04b}\x03c}]d}\x0ae");
        assert_eq!(unescape_binary(&out), data);
        let mut out = Vec::new();
        // "a" then "$" needs two more bytes than the room of 2 leaves.
        assert_eq!(escape_binary(data, 2, &mut out), 1);
        assert_eq!(out, b"a");
    }

    #[test]
    fn hex_helpers() {
        assert_eq!(hex(&[0, 0xab, 0x10]), b"00ab10");
        assert_eq!(unhex(b"00aB10"), Some(vec![0, 0xab, 0x10]));
        assert_eq!(unhex(b"0"), None);
        assert_eq!(unhex(b"zz"), None);
        assert_eq!(parse_hex(b"ffff800080000000"), Some(0xffff_8000_8000_0000));
        assert_eq!(parse_hex(b"1ffff800080000000"), None);
        assert_eq!(parse_hex(b""), None);
        let mut w = Vec::new();
        write_packet(&mut w, b"OK").unwrap();
        assert_eq!(w, b"$OK#9a");
    }
}
