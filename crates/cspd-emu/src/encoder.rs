//! ETMv4 instruction trace packets for execution observed as it happens (Arm IHI 0064,
//! "Instruction trace packets"; A64, no cycle counts, timestamps, context ID, VMID, return stack
//! or speculation, as the emulated unit's `TRCIDRn` advertise).
//!
//! The [`Encoder`] is told each P0 element in program order ([`Encoder::atom`],
//! [`Encoder::address`], [`Encoder::exception`]) and writes the smallest packets that give a
//! decoder the same flow: atoms packed three to a packet, address packets compressed against the
//! three-entry address history (exact match, short, long 32-bit or 64-bit), context only when the
//! exception level changes, and a synchronisation (A-sync, Trace Info, address with context)
//! at the start, after a discontinuity and once the period programmed in `TRCSYNCPR` has passed.

/// The exception types of the Exception packet (IHI 0064, Exception packet, "TYPE" for the
/// A profile).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExceptionType {
    /// An exception-generating instruction: `SVC`, `HVC`, `SMC`.
    Call = 0x2,
    /// A trapped instruction or another synchronous exception.
    Trap = 0x3,
    /// SError.
    SystemError = 0x4,
    /// A breakpoint instruction (`BRK`, `HLT`).
    InstDebug = 0x6,
    /// An instruction abort.
    InstFault = 0xB,
    /// A data abort.
    DataFault = 0xC,
    /// IRQ.
    Irq = 0xE,
    /// FIQ.
    Fiq = 0xF,
}

impl ExceptionType {
    /// The name the truth file and the tests use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Call => "call",
            Self::Trap => "trap",
            Self::SystemError => "serror",
            Self::InstDebug => "debug",
            Self::InstFault => "inst-fault",
            Self::DataFault => "data-fault",
            Self::Irq => "irq",
            Self::Fiq => "fiq",
        }
    }
}

/// The exception level an address runs at: the upper half of the address space (TTBR1,
/// bit 55 set) is the kernel's, EL1; the lower half is EL0's.
pub fn el_of(addr: u64) -> u8 {
    if addr & (1 << 55) != 0 {
        1
    } else {
        0
    }
}

/// An ETMv4 packet encoder for one trace unit.
#[derive(Debug)]
pub struct Encoder {
    out: Vec<u8>,
    history: [u64; 3],
    atoms: u8,
    natoms: u8,
    el: Option<u8>,
    since_sync: usize,
    sync_period: usize,
    syncs: u64,
}

impl Encoder {
    /// Returns an encoder that synchronises every `sync_period` bytes (0: only when it must).
    pub fn new(sync_period: usize) -> Self {
        Self {
            out: Vec::with_capacity(256),
            history: [0; 3],
            atoms: 0,
            natoms: 0,
            el: None,
            since_sync: 0,
            sync_period,
            syncs: 0,
        }
    }

    fn byte(&mut self, b: u8) {
        self.out.push(b);
        self.since_sync = self.since_sync.saturating_add(1);
    }

    fn bytes(&mut self, bs: &[u8]) {
        self.out.extend_from_slice(bs);
        self.since_sync = self.since_sync.saturating_add(bs.len());
    }

    /// Returns the bytes written so far and forgets them.
    pub fn take(&mut self) -> Vec<u8> {
        core::mem::take(&mut self.out)
    }

    /// Returns how many bytes are waiting to be taken.
    pub fn pending(&self) -> usize {
        self.out.len()
    }

    /// Returns how many synchronisations were written.
    pub fn syncs(&self) -> u64 {
        self.syncs
    }

    /// Writes the buffered atoms as one Atom format 1, 2 or 3 packet.
    pub fn flush_atoms(&mut self) {
        let header = match self.natoms {
            0 => return,
            1 => 0xF6 | (self.atoms & 1),
            2 => 0xD8 | (self.atoms & 3),
            _ => 0xF8 | (self.atoms & 7),
        };
        self.atoms = 0;
        self.natoms = 0;
        self.byte(header);
    }

    /// One P0 element: `taken` is an E atom, else an N atom.
    pub fn atom(&mut self, taken: bool) {
        if taken {
            self.atoms |= 1 << self.natoms;
        }
        self.natoms += 1;
        if self.natoms == 3 {
            self.flush_atoms();
        }
    }

    fn push_history(&mut self, addr: u64) {
        self.history = [addr, self.history[0], self.history[1]];
    }

    /// Writes the 64-bit IS0 address field (bits 63:2).
    fn addr64(&mut self, a: u64) {
        // CAST: each value is masked to its byte.
        let b = [
            ((a >> 2) & 0x7F) as u8,
            ((a >> 9) & 0x7F) as u8,
            (a >> 16) as u8,
            (a >> 24) as u8,
            (a >> 32) as u8,
            (a >> 40) as u8,
            (a >> 48) as u8,
            (a >> 56) as u8,
        ];
        self.bytes(&b);
    }

    /// Writes a long address with context: the address `a`, at exception level `el`,
    /// Non-secure, AArch64.
    fn address_with_context(&mut self, a: u64, el: u8) {
        self.byte(0x85);
        self.addr64(a);
        self.byte((el & 3) | (1 << 4) | (1 << 5));
        self.el = Some(el);
        self.push_history(a);
    }

    /// The address of the next instruction, after an indirect branch, an exception or an
    /// exception return: the smallest address packet, with context when the exception level
    /// changes.
    pub fn address(&mut self, a: u64) {
        self.flush_atoms();
        let el = el_of(a);
        if self.el != Some(el) {
            self.address_with_context(a, el);
            return;
        }
        if let Some(i) = self.history.iter().position(|h| *h == a) {
            // CAST: `i < 3`.
            self.byte(0x90 | i as u8);
            self.push_history(a);
            return;
        }
        let last = self.history[0];
        // CAST: every value below is masked to its byte.
        if a >> 9 == last >> 9 {
            self.bytes(&[0x95, ((a >> 2) & 0x7F) as u8]);
        } else if a >> 17 == last >> 17 {
            self.bytes(&[
                0x95,
                0x80 | ((a >> 2) & 0x7F) as u8,
                ((a >> 9) & 0xFF) as u8,
            ]);
        } else if a >> 32 == last >> 32 {
            self.bytes(&[
                0x9A,
                ((a >> 2) & 0x7F) as u8,
                ((a >> 9) & 0x7F) as u8,
                (a >> 16) as u8,
                (a >> 24) as u8,
            ]);
        } else {
            self.byte(0x9D);
            self.addr64(a);
        }
        self.push_history(a);
    }

    /// An exception whose preferred return address is `ret`, taken to `vector`.
    ///
    /// The decoder runs the instructions from its current address up to `ret` (exclusive),
    /// reports the exception and continues at `vector`.
    pub fn exception(&mut self, ty: ExceptionType, ret: u64, vector: u64) {
        self.flush_atoms();
        // E1:E0 = 0b01: the address is the preferred return address. CAST: a 5-bit type.
        self.bytes(&[0x06, ((ty as u8) << 1) | 1]);
        // The return address is an address of the interrupted context (whose level is known).
        self.address(ret);
        self.address(vector);
    }

    /// Starts trace at `pc`, or restarts it after a discontinuity: A-sync, Trace Info, Trace On,
    /// and the address with context.
    pub fn trace_on(&mut self, pc: u64) {
        self.sync_at(pc, true);
    }

    /// Writes a periodic synchronisation at `pc`, the address of the next instruction, when the
    /// period has passed. Returns whether it did.
    pub fn maybe_sync(&mut self, pc: u64) -> bool {
        if self.sync_period == 0 || self.since_sync < self.sync_period {
            return false;
        }
        self.sync_at(pc, false);
        true
    }

    fn sync_at(&mut self, pc: u64, trace_on: bool) {
        self.flush_atoms();
        self.bytes(&[0; 11]);
        self.byte(0x80);
        // Trace Info: PLCTL says an INFO field follows; INFO = 0 (no cycle counting, no
        // conditional or load/store tracing).
        self.bytes(&[0x01, 0x01, 0x00]);
        self.history = [0; 3];
        if trace_on {
            self.byte(0x04);
        }
        self.address_with_context(pc, el_of(pc));
        self.since_sync = 0;
        self.syncs = self.syncs.saturating_add(1);
    }
}
