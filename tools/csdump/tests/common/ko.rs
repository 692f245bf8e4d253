//! Kernel module files (`.ko`: ELF64 relocatable objects for aarch64) written from the ELF
//! specification, as the kernel's build leaves them: code sections with a section symbol each,
//! function symbols whose values are offsets in their section, a mapping symbol, a data object,
//! and the GNU build ID note.

#![allow(dead_code)]

/// Section index of `.init.text` in the files [`ko_bytes`] writes.
pub const KO_INIT: u32 = 2;
/// Section index of `.text` in the files [`ko_bytes`] writes.
pub const KO_TEXT: u32 = 3;

/// What goes into a `.ko`.
pub struct KoSpec<'a> {
    /// `.text`'s bytes.
    pub text: &'a [u8],
    /// `.init.text`'s bytes.
    pub init: &'a [u8],
    /// Functions: name, section ([`KO_TEXT`] or [`KO_INIT`]), offset in it, size.
    pub funcs: Vec<(String, u32, u64, u64)>,
    /// The GNU build ID, if the file has a note for it.
    pub build_id: Option<&'a [u8]>,
}

/// A `.ko` whose `.text` holds `text`, with a function `<prefix><n>` every 4 KiB of it (size
/// 4 KiB) and `<prefix>init` at the start of a 64-byte `.init.text`.
pub fn ko_with_functions(text: &[u8], prefix: &str, build_id: Option<&[u8]>) -> Vec<u8> {
    let mut funcs: Vec<(String, u32, u64, u64)> = (0..text.len() as u64)
        .step_by(0x1000)
        .enumerate()
        .map(|(i, off)| (format!("{prefix}{i}"), KO_TEXT, off, 0x1000))
        .collect();
    funcs.push((format!("{prefix}init"), KO_INIT, 0, 0x40));
    ko_bytes(&KoSpec {
        text,
        init: &[0u8; 0x40],
        funcs,
        build_id,
    })
}

/// Writes the bytes of a `.ko`: sections null, `.note.gnu.build-id` (alloc), `.init.text`,
/// `.text`, `.data`, `.symtab`, `.strtab`, `.shstrtab`.
pub fn ko_bytes(spec: &KoSpec<'_>) -> Vec<u8> {
    let shstr = b"\0.note.gnu.build-id\0.init.text\0.text\0.data\0.symtab\0.strtab\0.shstrtab\0";
    let name_at = |n: &str| -> u32 {
        let pat = format!("\0{n}\0");
        shstr
            .windows(pat.len())
            .position(|w| w == pat.as_bytes())
            .unwrap() as u32
            + 1
    };
    let mut body = vec![0u8; 64];
    let align = |body: &mut Vec<u8>, a: usize| {
        while body.len() % a != 0 {
            body.push(0);
        }
    };
    // The note.
    align(&mut body, 8);
    let note_off = body.len();
    if let Some(id) = spec.build_id {
        body.extend_from_slice(&4u32.to_le_bytes());
        body.extend_from_slice(&(id.len() as u32).to_le_bytes());
        body.extend_from_slice(&3u32.to_le_bytes()); // NT_GNU_BUILD_ID
        body.extend_from_slice(b"GNU\0");
        body.extend_from_slice(id);
        align(&mut body, 4);
    }
    let note_len = body.len() - note_off;
    align(&mut body, 8);
    let init_off = body.len();
    body.extend_from_slice(spec.init);
    align(&mut body, 8);
    let text_off = body.len();
    body.extend_from_slice(spec.text);
    align(&mut body, 8);
    let data_off = body.len();
    body.extend_from_slice(&[0x11; 16]);
    // Symbols: null, the two section symbols, a mapping symbol and a data object (locals),
    // then the functions (globals).
    let mut strtab = b"\0$x\0a_variable\0".to_vec();
    let mut syms = vec![0u8; 24];
    let sym = |syms: &mut Vec<u8>, name: u32, info: u8, shndx: u16, value: u64, size: u64| {
        syms.extend_from_slice(&name.to_le_bytes());
        syms.push(info);
        syms.push(0);
        syms.extend_from_slice(&shndx.to_le_bytes());
        syms.extend_from_slice(&value.to_le_bytes());
        syms.extend_from_slice(&size.to_le_bytes());
    };
    sym(&mut syms, 0, 0x03, KO_INIT as u16, 0, 0); // STB_LOCAL, STT_SECTION
    sym(&mut syms, 0, 0x03, KO_TEXT as u16, 0, 0);
    sym(&mut syms, 1, 0x00, KO_TEXT as u16, 0, 0); // $x: STT_NOTYPE
    sym(&mut syms, 4, 0x01, 4, 0, 8); // a_variable: STT_OBJECT in .data
    let first_global = 5u32;
    for (name, section, value, size) in &spec.funcs {
        let n = strtab.len() as u32;
        strtab.extend_from_slice(name.as_bytes());
        strtab.push(0);
        sym(&mut syms, n, 0x12, *section as u16, *value, *size); // STB_GLOBAL, STT_FUNC
    }
    align(&mut body, 8);
    let sym_off = body.len();
    body.extend_from_slice(&syms);
    let str_off = body.len();
    body.extend_from_slice(&strtab);
    let shs_off = body.len();
    body.extend_from_slice(shstr);
    align(&mut body, 8);
    let sh_off = body.len();
    let sh = |body: &mut Vec<u8>,
              name: u32,
              ty: u32,
              flags: u64,
              off: usize,
              size: usize,
              link: u32,
              info: u32,
              ent: u64| {
        body.extend_from_slice(&name.to_le_bytes());
        body.extend_from_slice(&ty.to_le_bytes());
        body.extend_from_slice(&flags.to_le_bytes());
        body.extend_from_slice(&0u64.to_le_bytes()); // sh_addr: 0 in a relocatable file
        body.extend_from_slice(&(off as u64).to_le_bytes());
        body.extend_from_slice(&(size as u64).to_le_bytes());
        body.extend_from_slice(&link.to_le_bytes());
        body.extend_from_slice(&info.to_le_bytes());
        body.extend_from_slice(&8u64.to_le_bytes());
        body.extend_from_slice(&ent.to_le_bytes());
    };
    sh(&mut body, 0, 0, 0, 0, 0, 0, 0, 0);
    sh(
        &mut body,
        name_at(".note.gnu.build-id"),
        7,
        2,
        note_off,
        note_len,
        0,
        0,
        0,
    );
    sh(
        &mut body,
        name_at(".init.text"),
        1,
        6,
        init_off,
        spec.init.len(),
        0,
        0,
        0,
    );
    sh(
        &mut body,
        name_at(".text"),
        1,
        6,
        text_off,
        spec.text.len(),
        0,
        0,
        0,
    );
    sh(&mut body, name_at(".data"), 1, 3, data_off, 16, 0, 0, 0);
    sh(
        &mut body,
        name_at(".symtab"),
        2,
        0,
        sym_off,
        syms.len(),
        6,
        first_global,
        24,
    );
    sh(
        &mut body,
        name_at(".strtab"),
        3,
        0,
        str_off,
        strtab.len(),
        0,
        0,
        0,
    );
    sh(
        &mut body,
        name_at(".shstrtab"),
        3,
        0,
        shs_off,
        shstr.len(),
        0,
        0,
        0,
    );
    let mut eh = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0];
    eh.resize(16, 0);
    eh.extend_from_slice(&1u16.to_le_bytes()); // ET_REL
    eh.extend_from_slice(&183u16.to_le_bytes()); // EM_AARCH64
    eh.extend_from_slice(&1u32.to_le_bytes());
    eh.extend_from_slice(&0u64.to_le_bytes()); // entry
    eh.extend_from_slice(&0u64.to_le_bytes()); // phoff
    eh.extend_from_slice(&(sh_off as u64).to_le_bytes());
    eh.extend_from_slice(&0u32.to_le_bytes());
    for v in [64u16, 0, 0, 64, 8, 7] {
        eh.extend_from_slice(&v.to_le_bytes());
    }
    body[..64].copy_from_slice(&eh);
    body
}
