// SPDX-License-Identifier: GPL-2.0

//! The module list record's payload: which loadable modules were loaded where.
//!
//! The core keeps this record current from a module notifier (a module coming, going live,
//! going), so the panic path writes nothing for it. A host tool names the code it decodes in a
//! module from it: `name+offset` from the text range alone, or the module's own symbols when it
//! has the module's `.ko` (checked by build ID), placed with the addresses of its executable
//! sections.
//!
//! Layout (little-endian): a 16-byte header (count u32, capacity u32, dropped u32: modules that
//! did not fit, generation u32: changes counted), then `count` entries of [`MODULE_ENTRY_SIZE`]
//! bytes: name `[u8; 56]` (NUL-padded), build ID `[u8; 20]`, build ID length u8, state u8
//! ([`ModuleState`]), section count u8, reserved u8, then u64 each: text address, text size,
//! init text address, init text size (0 once the init memory is freed), then
//! [`MODULE_SECTIONS_MAX`] sections of 16 bytes (address u64, section index u32 in the `.ko`,
//! reserved u32).
//!
//! Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use super::{
    bytes::{get_array, get_u32, get_u64, need, out_need, put, put_padded, trim_nul},
    FormatError,
    BUILD_ID_MAX, //
};

/// Maximum size in bytes of a module name (the kernel's `MODULE_NAME_LEN` on 64-bit).
pub const MODULE_NAME_MAX: usize = 56;

/// Number of executable sections an entry can place.
pub const MODULE_SECTIONS_MAX: usize = 9;

/// Size in bytes of the module list's header.
pub const MODULES_HEADER_SIZE: usize = 16;

/// Size in bytes of one module entry.
pub const MODULE_ENTRY_SIZE: usize = 256;

/// Most modules the core's record holds; more are counted as dropped.
pub const MODULES_MAX: usize = 128;

/// Number of modules the core's record holds in a region of `region_size` bytes: as many
/// entries as an eighth of the region has room for, at most [`MODULES_MAX`] (32 KiB of entries
/// in a region of 256 KiB or more).
pub const fn modules_capacity(region_size: usize) -> usize {
    let n = region_size / 8 / MODULE_ENTRY_SIZE;
    if n < MODULES_MAX {
        n
    } else {
        MODULES_MAX
    }
}

/// Size in bytes of a module list payload with room for `capacity` modules.
pub const fn modules_size(capacity: usize) -> usize {
    MODULES_HEADER_SIZE + capacity * MODULE_ENTRY_SIZE
}

// Offsets in the header.
const MH_COUNT: usize = 0;
const MH_CAPACITY: usize = 4;
const MH_DROPPED: usize = 8;
const MH_GENERATION: usize = 12;

// Offsets in an entry.
const ME_NAME: usize = 0;
const ME_BUILD_ID: usize = 56;
const ME_BUILD_ID_LEN: usize = 76;
const ME_STATE: usize = 77;
const ME_SECTIONS: usize = 78;
const ME_TEXT: usize = 80;
const ME_TEXT_SIZE: usize = 88;
const ME_INIT: usize = 96;
const ME_INIT_SIZE: usize = 104;
const ME_SECTION0: usize = 112;
const SECTION_SIZE: usize = 16;

/// Where a module is in its life when the entry was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ModuleState {
    /// Loaded and running its init function (its init text exists).
    Coming = 1,
    /// Initialised; its init text is freed.
    Live = 2,
}

impl ModuleState {
    /// Returns a short lower-case name, used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Coming => "coming",
            Self::Live => "live",
        }
    }
}

/// One executable section of a module: its index in the module's ELF file and its address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModuleSection {
    /// Address the section was loaded at.
    pub addr: u64,
    /// Index of the section in the module's `.ko` file.
    pub index: u32,
}

/// One loaded module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleEntry {
    /// Module name, NUL-padded.
    pub name: [u8; MODULE_NAME_MAX],
    /// GNU build ID of the module; the first `build_id_len` bytes are meaningful (0: the kernel
    /// keeps none, `CONFIG_STACKTRACE_BUILD_ID` off).
    pub build_id: [u8; BUILD_ID_MAX],
    /// Number of meaningful bytes in `build_id`.
    pub build_id_len: u8,
    /// Where the module was in its life.
    pub state: ModuleState,
    /// Address of the module's text.
    pub text_addr: u64,
    /// Size in bytes of the module's text.
    pub text_size: u64,
    /// Address of the module's init text (0 once freed).
    pub init_addr: u64,
    /// Size in bytes of the module's init text (0 once freed).
    pub init_size: u64,
    /// The executable sections placed; the first `section_count` are meaningful.
    pub sections: [ModuleSection; MODULE_SECTIONS_MAX],
    /// Number of meaningful entries in `sections`.
    pub section_count: u8,
}

impl ModuleEntry {
    /// An entry for the module `name` (cut to [`MODULE_NAME_MAX`] bytes) with nothing placed.
    pub fn new(name: &[u8], state: ModuleState) -> Self {
        let mut e = Self {
            name: [0; MODULE_NAME_MAX],
            build_id: [0; BUILD_ID_MAX],
            build_id_len: 0,
            state,
            text_addr: 0,
            text_size: 0,
            init_addr: 0,
            init_size: 0,
            sections: [ModuleSection::default(); MODULE_SECTIONS_MAX],
            section_count: 0,
        };
        let n = name.len().min(MODULE_NAME_MAX);
        if let (Some(d), Some(s)) = (e.name.get_mut(..n), name.get(..n)) {
            d.copy_from_slice(s);
        }
        e
    }

    /// Returns the name without its padding.
    pub fn name(&self) -> &[u8] {
        trim_nul(&self.name)
    }

    /// Returns the meaningful bytes of the build ID.
    pub fn build_id(&self) -> &[u8] {
        let n = usize::from(self.build_id_len).min(BUILD_ID_MAX);
        self.build_id.get(..n).unwrap_or(&[])
    }

    /// Sets the build ID; fails if it is longer than [`BUILD_ID_MAX`].
    pub fn set_build_id(&mut self, id: &[u8]) -> Result<(), FormatError> {
        let mut b = [0u8; BUILD_ID_MAX];
        put_padded(&mut b, 0, "module build id", id, BUILD_ID_MAX)?;
        self.build_id = b;
        // CAST: at most BUILD_ID_MAX, checked by put_padded.
        self.build_id_len = id.len() as u8;
        Ok(())
    }

    /// Returns the sections placed.
    pub fn sections(&self) -> &[ModuleSection] {
        let n = usize::from(self.section_count).min(MODULE_SECTIONS_MAX);
        self.sections.get(..n).unwrap_or(&[])
    }

    /// Adds a section; returns false (and places nothing) when [`MODULE_SECTIONS_MAX`] are
    /// placed already.
    pub fn add_section(&mut self, section: ModuleSection) -> bool {
        let n = usize::from(self.section_count);
        match self.sections.get_mut(n) {
            Some(s) => {
                *s = section;
                self.section_count = self.section_count.saturating_add(1);
                true
            }
            None => false,
        }
    }

    /// Whether `addr` lies in the module's text or (not yet freed) init text.
    pub fn contains(&self, addr: u64) -> bool {
        let within = |start: u64, size: u64| addr >= start && addr - start < size;
        within(self.text_addr, self.text_size) || within(self.init_addr, self.init_size)
    }

    fn encode(&self, out: &mut [u8]) {
        if let Some(o) = out.get_mut(..MODULE_ENTRY_SIZE) {
            o.fill(0);
        }
        put(out, ME_NAME, &self.name);
        put(out, ME_BUILD_ID, &self.build_id);
        put(out, ME_BUILD_ID_LEN, &[self.build_id_len]);
        put(out, ME_STATE, &[self.state as u8]);
        put(out, ME_SECTIONS, &[self.section_count]);
        put(out, ME_TEXT, &self.text_addr.to_le_bytes());
        put(out, ME_TEXT_SIZE, &self.text_size.to_le_bytes());
        put(out, ME_INIT, &self.init_addr.to_le_bytes());
        put(out, ME_INIT_SIZE, &self.init_size.to_le_bytes());
        for (i, s) in self.sections().iter().enumerate() {
            let at = ME_SECTION0.saturating_add(i.saturating_mul(SECTION_SIZE));
            put(out, at, &s.addr.to_le_bytes());
            put(out, at.saturating_add(8), &s.index.to_le_bytes());
        }
    }

    fn decode(raw: &[u8], offset: usize) -> Result<Self, FormatError> {
        need(raw, 0, MODULE_ENTRY_SIZE)?;
        let state = match raw.get(ME_STATE).copied().unwrap_or(0) {
            1 => ModuleState::Coming,
            2 => ModuleState::Live,
            v => {
                return Err(FormatError::BadValue {
                    offset: offset.saturating_add(ME_STATE),
                    field: "module state",
                    value: u64::from(v),
                })
            }
        };
        let build_id_len = raw.get(ME_BUILD_ID_LEN).copied().unwrap_or(0);
        let section_count = raw.get(ME_SECTIONS).copied().unwrap_or(0);
        for (field, v, max) in [
            ("module build id length", build_id_len, BUILD_ID_MAX),
            ("module section count", section_count, MODULE_SECTIONS_MAX),
        ] {
            if usize::from(v) > max {
                return Err(FormatError::FieldTooLong {
                    field,
                    length: usize::from(v),
                    max,
                });
            }
        }
        let mut sections = [ModuleSection::default(); MODULE_SECTIONS_MAX];
        for (i, s) in sections
            .iter_mut()
            .take(usize::from(section_count))
            .enumerate()
        {
            let at = ME_SECTION0.saturating_add(i.saturating_mul(SECTION_SIZE));
            *s = ModuleSection {
                addr: get_u64(raw, at),
                index: get_u32(raw, at.saturating_add(8)),
            };
        }
        Ok(Self {
            name: get_array(raw, ME_NAME).unwrap_or([0; MODULE_NAME_MAX]),
            build_id: get_array(raw, ME_BUILD_ID).unwrap_or([0; BUILD_ID_MAX]),
            build_id_len,
            state,
            text_addr: get_u64(raw, ME_TEXT),
            text_size: get_u64(raw, ME_TEXT_SIZE),
            init_addr: get_u64(raw, ME_INIT),
            init_size: get_u64(raw, ME_INIT_SIZE),
            sections,
            section_count,
        })
    }
}

/// A decoded module list payload (a record's `data[..length]`).
#[derive(Clone, Copy, Debug)]
pub struct Modules<'a> {
    /// Number of entries.
    pub count: u32,
    /// Number of entries the record has room for.
    pub capacity: u32,
    /// Modules that were loaded but did not fit.
    pub dropped: u32,
    /// Changes made to the list since boot.
    pub generation: u32,
    entries: &'a [u8],
}

impl<'a> Modules<'a> {
    /// Decodes a payload; its entries are decoded one by one by [`Modules::entries`].
    pub fn decode(bytes: &'a [u8]) -> Result<Self, FormatError> {
        need(bytes, 0, MODULES_HEADER_SIZE)?;
        let count = get_u32(bytes, MH_COUNT);
        let capacity = get_u32(bytes, MH_CAPACITY);
        if count > capacity {
            return Err(FormatError::FieldTooLong {
                field: "module count",
                length: usize::try_from(count).unwrap_or(usize::MAX),
                max: usize::try_from(capacity).unwrap_or(usize::MAX),
            });
        }
        let len = usize::try_from(count)
            .unwrap_or(usize::MAX)
            .saturating_mul(MODULE_ENTRY_SIZE);
        need(bytes, MODULES_HEADER_SIZE, len)?;
        Ok(Self {
            count,
            capacity,
            dropped: get_u32(bytes, MH_DROPPED),
            generation: get_u32(bytes, MH_GENERATION),
            entries: bytes
                .get(MODULES_HEADER_SIZE..MODULES_HEADER_SIZE.saturating_add(len))
                .unwrap_or(&[]),
        })
    }

    /// The entries, each decoded (an entry that does not decode is an error of its own).
    pub fn entries(&self) -> impl Iterator<Item = Result<ModuleEntry, FormatError>> + 'a {
        self.entries
            .chunks_exact(MODULE_ENTRY_SIZE)
            .enumerate()
            .map(|(i, raw)| {
                ModuleEntry::decode(
                    raw,
                    MODULES_HEADER_SIZE.saturating_add(i.saturating_mul(MODULE_ENTRY_SIZE)),
                )
            })
    }
}

/// Writes an empty module list for `capacity` entries into `out`; returns its length.
pub fn modules_init(out: &mut [u8], capacity: u32) -> Result<usize, FormatError> {
    out_need(out, MODULES_HEADER_SIZE)?;
    if let Some(o) = out.get_mut(..MODULES_HEADER_SIZE) {
        o.fill(0);
    }
    put(out, MH_CAPACITY, &capacity.to_le_bytes());
    Ok(MODULES_HEADER_SIZE)
}

/// The list in `buf` (written by [`modules_init`]): its count and the room `buf` has.
fn list_of(buf: &[u8]) -> Result<(usize, usize), FormatError> {
    let m = Modules::decode(buf)?;
    let count = usize::try_from(m.count).unwrap_or(usize::MAX);
    let room = buf.len().saturating_sub(MODULES_HEADER_SIZE) / MODULE_ENTRY_SIZE;
    let room = room.min(usize::try_from(m.capacity).unwrap_or(usize::MAX));
    Ok((count, room))
}

fn entry_at(i: usize) -> usize {
    MODULES_HEADER_SIZE.saturating_add(i.saturating_mul(MODULE_ENTRY_SIZE))
}

fn bump(buf: &mut [u8], field: usize) {
    let v = get_u32(buf, field).wrapping_add(1);
    put(buf, field, &v.to_le_bytes());
}

/// Adds `entry` to the list in `buf`, or replaces the entry of the same name; returns the
/// list's length in bytes. A new module that does not fit is counted as dropped.
pub fn modules_upsert(buf: &mut [u8], entry: &ModuleEntry) -> Result<usize, FormatError> {
    let (count, room) = list_of(buf)?;
    let found = (0..count).find(|&i| {
        let at = entry_at(i);
        buf.get(at..at.saturating_add(MODULE_NAME_MAX))
            .is_some_and(|n| trim_nul(n) == entry.name())
    });
    let slot = match found {
        Some(i) => Some(i),
        None if count < room => {
            // CAST: count < room, which is at most the u32 capacity.
            put(buf, MH_COUNT, &((count + 1) as u32).to_le_bytes());
            Some(count)
        }
        None => None,
    };
    match slot {
        Some(i) => {
            let at = entry_at(i);
            if let Some(out) = buf.get_mut(at..at.saturating_add(MODULE_ENTRY_SIZE)) {
                entry.encode(out);
            }
        }
        None => bump(buf, MH_DROPPED),
    }
    bump(buf, MH_GENERATION);
    let (count, _) = list_of(buf)?;
    Ok(entry_at(count))
}

/// Removes the module `name` from the list in `buf` (the last entry takes its place); returns
/// the list's length in bytes. A module the list does not hold (one that was dropped) leaves
/// the entries as they are.
pub fn modules_remove(buf: &mut [u8], name: &[u8]) -> Result<usize, FormatError> {
    let (count, _) = list_of(buf)?;
    let found = (0..count).find(|&i| {
        let at = entry_at(i);
        buf.get(at..at.saturating_add(MODULE_NAME_MAX))
            .is_some_and(|n| trim_nul(n) == name)
    });
    if let Some(i) = found {
        let last = count - 1;
        if i != last {
            let from = entry_at(last);
            buf.copy_within(from..from.saturating_add(MODULE_ENTRY_SIZE), entry_at(i));
        }
        let at = entry_at(last);
        if let Some(o) = buf.get_mut(at..at.saturating_add(MODULE_ENTRY_SIZE)) {
            o.fill(0);
        }
        // CAST: last < count, a u32.
        put(buf, MH_COUNT, &(last as u32).to_le_bytes());
    }
    bump(buf, MH_GENERATION);
    let (count, _) = list_of(buf)?;
    Ok(entry_at(count))
}
