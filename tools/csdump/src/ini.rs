//! A small reader for the INI files of an OpenCSD / CoreSight Access Library snapshot.
//!
//! Sections keep their order and may repeat (`[dump1]`, `[dump2]`, …); keys keep their order
//! and their case. As in OpenCSD's snapshot parser, a comment starts at the first `;` or `#`
//! of a line, wherever it is, and a section header is the text between the first `[` and the
//! next `]`.

/// One `[section]` with its `key=value` lines, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Section {
    /// Section name, without the brackets.
    pub name: String,
    /// `(key, value)` pairs, trimmed.
    pub entries: Vec<(String, String)>,
}

impl Section {
    /// Returns the value of the first `key` (compared without case).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed INI file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ini {
    /// Sections in file order; lines before the first section go to a section named `""`.
    pub sections: Vec<Section>,
}

impl Ini {
    /// Parses `text`; lines that are neither a section, a key nor a comment are ignored.
    pub fn parse(text: &str) -> Self {
        let mut ini = Ini::default();
        for raw in text.lines() {
            let line = raw.split([';', '#', '\r']).next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            if let Some((_, rest)) = line.split_once('[') {
                if let Some((name, _)) = rest.split_once(']') {
                    ini.sections.push(Section {
                        name: name.trim().to_string(),
                        entries: Vec::new(),
                    });
                    continue;
                }
            }
            if let Some((k, v)) = line.split_once('=') {
                if ini.sections.is_empty() {
                    ini.sections.push(Section::default());
                }
                if let Some(s) = ini.sections.last_mut() {
                    s.entries.push((k.trim().to_string(), v.trim().to_string()));
                }
            }
        }
        ini
    }

    /// Returns the first section called `name` (compared without case).
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(name))
    }

    /// Returns `key` of the first section called `section`.
    pub fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.section(section)?.get(key)
    }
}

/// Parses a number written in decimal or as `0x…` hex.
pub fn parse_number(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_keys_and_repeats() {
        let ini = Ini::parse("; c\n [device] ; the device\nname=ETM_0 # its name\r\n\n[regs]\nTRCCONFIGR(0x004)=0x10C1\n[dump1]\nfile=a\n[dump1]\nfile=b\n");
        assert_eq!(ini.get("device", "NAME"), Some("ETM_0"));
        assert_eq!(ini.sections.len(), 4);
        assert_eq!(ini.get("regs", "TRCCONFIGR(0x004)"), Some("0x10C1"));
        assert_eq!(ini.sections.iter().filter(|s| s.name == "dump1").count(), 2);
        assert_eq!(parse_number("0x10C1"), Some(0x10c1));
        assert_eq!(parse_number("42"), Some(42));
        assert_eq!(parse_number("zz"), None);
    }
}
