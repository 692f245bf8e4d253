// SPDX-License-Identifier: GPL-2.0

//! The identity record's payload: which kernel wrote the dump, and where it lived.
//!
//! Shared with the host (`crates/kernel-host`): uses only `core` and its siblings.

use super::{
    bytes::{get_array, get_u64, need, out_need, put, put_padded, trim_nul},
    FormatError, //
};

/// Maximum size in bytes of the kernel release string in an identity record.
pub const RELEASE_MAX: usize = 64;

/// Maximum size in bytes of the build id in an identity record.
pub const BUILD_ID_MAX: usize = 20;

/// Size in bytes of an identity record payload.
pub const IDENTITY_SIZE: usize = 144;

// Offsets in the identity payload.
const ID_RELEASE: usize = 0;
const ID_BUILD_ID: usize = 64;
const ID_BUILD_ID_LEN: usize = 84;
const ID_KASLR: usize = 88;
const ID_TEXT: usize = 96;
const ID_PAGE_OFFSET: usize = 104;
const ID_MEMSTART: usize = 112;
const ID_KIMAGE_VOFFSET: usize = 120;
const ID_REGION_PADDR: usize = 128;
const ID_REGION_SIZE: usize = 136;

/// Payload of the identity record: which kernel wrote the dump and where it lived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// Kernel release string (`uname -r`), NUL-padded.
    pub release: [u8; RELEASE_MAX],
    /// GNU build id of vmlinux; the first `build_id_len` bytes are meaningful.
    pub build_id: [u8; BUILD_ID_MAX],
    /// Number of meaningful bytes in `build_id`.
    pub build_id_len: u8,
    /// KASLR offset of the kernel image.
    pub kaslr_offset: u64,
    /// Virtual address of `_text`.
    pub text_addr: u64,
    /// `PAGE_OFFSET`, the start of the linear map.
    pub page_offset: u64,
    /// Physical start of memory (`memstart_addr`).
    pub memstart: u64,
    /// `kimage_voffset`, kernel image virtual minus physical.
    pub kimage_voffset: u64,
    /// Physical address of the dump region.
    pub region_paddr: u64,
    /// Size of the dump region in bytes.
    pub region_size: u64,
}

impl Default for Identity {
    fn default() -> Self {
        Self {
            release: [0; RELEASE_MAX],
            build_id: [0; BUILD_ID_MAX],
            build_id_len: 0,
            kaslr_offset: 0,
            text_addr: 0,
            page_offset: 0,
            memstart: 0,
            kimage_voffset: 0,
            region_paddr: 0,
            region_size: 0,
        }
    }
}

impl Identity {
    /// Sets the release string; fails if it is longer than [`RELEASE_MAX`].
    pub fn set_release(&mut self, release: &[u8]) -> Result<(), FormatError> {
        let mut r = [0u8; RELEASE_MAX];
        put_padded(&mut r, 0, "release", release, RELEASE_MAX)?;
        self.release = r;
        Ok(())
    }

    /// Sets the build id; fails if it is longer than [`BUILD_ID_MAX`].
    pub fn set_build_id(&mut self, build_id: &[u8]) -> Result<(), FormatError> {
        let mut b = [0u8; BUILD_ID_MAX];
        put_padded(&mut b, 0, "build id", build_id, BUILD_ID_MAX)?;
        self.build_id = b;
        // CAST: at most BUILD_ID_MAX (20) after the check above.
        self.build_id_len = build_id.len() as u8;
        Ok(())
    }

    /// Returns the release string without its NUL padding.
    pub fn release_bytes(&self) -> &[u8] {
        trim_nul(&self.release)
    }

    /// Returns the meaningful bytes of the build id.
    pub fn build_id_bytes(&self) -> &[u8] {
        let n = usize::from(self.build_id_len).min(BUILD_ID_MAX);
        self.build_id.get(..n).unwrap_or(&[])
    }

    /// Encodes the payload into `out`; returns its length, [`IDENTITY_SIZE`].
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, FormatError> {
        out_need(out, IDENTITY_SIZE)?;
        if usize::from(self.build_id_len) > BUILD_ID_MAX {
            return Err(FormatError::FieldTooLong {
                field: "build id",
                length: usize::from(self.build_id_len),
                max: BUILD_ID_MAX,
            });
        }
        if let Some(o) = out.get_mut(..IDENTITY_SIZE) {
            o.fill(0);
        }
        put(out, ID_RELEASE, &self.release);
        put(out, ID_BUILD_ID, &self.build_id);
        put(out, ID_BUILD_ID_LEN, &[self.build_id_len]);
        put(out, ID_KASLR, &self.kaslr_offset.to_le_bytes());
        put(out, ID_TEXT, &self.text_addr.to_le_bytes());
        put(out, ID_PAGE_OFFSET, &self.page_offset.to_le_bytes());
        put(out, ID_MEMSTART, &self.memstart.to_le_bytes());
        put(out, ID_KIMAGE_VOFFSET, &self.kimage_voffset.to_le_bytes());
        put(out, ID_REGION_PADDR, &self.region_paddr.to_le_bytes());
        put(out, ID_REGION_SIZE, &self.region_size.to_le_bytes());
        Ok(IDENTITY_SIZE)
    }

    /// Decodes a payload (a record's `data[..length]`).
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        need(bytes, 0, IDENTITY_SIZE)?;
        let build_id_len = bytes.get(ID_BUILD_ID_LEN).copied().unwrap_or(0);
        if usize::from(build_id_len) > BUILD_ID_MAX {
            return Err(FormatError::FieldTooLong {
                field: "build id",
                length: usize::from(build_id_len),
                max: BUILD_ID_MAX,
            });
        }
        Ok(Self {
            release: get_array::<RELEASE_MAX>(bytes, ID_RELEASE).unwrap_or([0; RELEASE_MAX]),
            build_id: get_array::<BUILD_ID_MAX>(bytes, ID_BUILD_ID).unwrap_or([0; BUILD_ID_MAX]),
            build_id_len,
            kaslr_offset: get_u64(bytes, ID_KASLR),
            text_addr: get_u64(bytes, ID_TEXT),
            page_offset: get_u64(bytes, ID_PAGE_OFFSET),
            memstart: get_u64(bytes, ID_MEMSTART),
            kimage_voffset: get_u64(bytes, ID_KIMAGE_VOFFSET),
            region_paddr: get_u64(bytes, ID_REGION_PADDR),
            region_size: get_u64(bytes, ID_REGION_SIZE),
        })
    }
}
