//! The kernel's description of its trace records: `events/header_page` (the layout of a
//! ring-buffer page) and each event's `format` file (its id and field layout). Parsing
//! them, rather than assuming offsets, keeps the reader right across kernel versions.

use std::collections::HashMap;

/// One field of an event record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    /// `__data_loc`: the field holds (length << 16 | offset) of a string elsewhere.
    pub data_loc: bool,
}

/// An event's id and fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    /// "system:name", e.g. "sched:sched_switch".
    pub name: String,
    pub id: u16,
    pub fields: Vec<Field>,
}

impl EventFormat {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Parses a `format` file; `None` when it has no ID or no fields.
pub fn parse_event_format(name: &str, text: &str) -> Option<EventFormat> {
    let id = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("ID:"))?
        .trim()
        .parse()
        .ok()?;
    let fields: Vec<Field> = text.lines().filter_map(parse_field).collect();
    (!fields.is_empty()).then(|| EventFormat {
        name: name.to_string(),
        id,
        fields,
    })
}

/// `field:char prev_comm[16]; offset:8; size:16; signed:0;` (tab-separated)
fn parse_field(line: &str) -> Option<Field> {
    let line = line.trim();
    let rest = line.strip_prefix("field:")?;
    let mut parts = rest.split(';').map(str::trim);
    let decl = parts.next()?;
    let mut kv: HashMap<&str, &str> = HashMap::new();
    for p in parts {
        if let Some((k, v)) = p.split_once(':') {
            kv.insert(k.trim(), v.trim());
        }
    }
    let offset = kv.get("offset")?.parse().ok()?;
    let size = kv.get("size")?.parse().ok()?;
    let signed = kv.get("signed").is_some_and(|s| *s == "1");
    // The name is the declaration's last word, less any array suffix.
    let last = decl.split_whitespace().last()?;
    let name = last.split('[').next()?.to_string();
    Some(Field {
        name,
        offset,
        size,
        signed,
        data_loc: decl.contains("__data_loc"),
    })
}

/// Where a ring-buffer page keeps its timestamp, its commit count and its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    pub timestamp_offset: usize,
    pub commit_offset: usize,
    pub commit_size: usize,
    pub data_offset: usize,
}

impl PageLayout {
    /// The layout of 64-bit kernels, for when `header_page` cannot be read.
    pub const DEFAULT: PageLayout = PageLayout {
        timestamp_offset: 0,
        commit_offset: 8,
        commit_size: 8,
        data_offset: 16,
    };

    /// From `events/header_page`.
    pub fn parse(text: &str) -> Option<PageLayout> {
        let fields: Vec<Field> = text.lines().filter_map(parse_field).collect();
        let get = |n: &str| fields.iter().find(|f| f.name == n);
        let (ts, commit, data) = (get("timestamp")?, get("commit")?, get("data")?);
        Some(PageLayout {
            timestamp_offset: ts.offset,
            commit_offset: commit.offset,
            commit_size: commit.size,
            data_offset: data.offset,
        })
    }
}

/// Reads an unsigned little-endian field of up to 8 bytes.
pub fn read_u64(data: &[u8], offset: usize, size: usize) -> Option<u64> {
    // Offsets come from format files: a damaged one may point past the address space.
    let bytes = data.get(offset..offset.checked_add(size)?)?;
    // Each common width a load of its own: copied by a length known only at run time,
    // every field of every event was a call to memcpy (issue 34).
    Some(match size {
        8 => u64::from_le_bytes(bytes.try_into().ok()?),
        4 => u32::from_le_bytes(bytes.try_into().ok()?).into(),
        2 => u16::from_le_bytes(bytes.try_into().ok()?).into(),
        1 => bytes[0].into(),
        _ => {
            let mut buf = [0u8; 8];
            buf[..size.min(8)].copy_from_slice(&bytes[..size.min(8)]);
            u64::from_le_bytes(buf)
        }
    })
}

/// Reads a field as a signed value, extending its sign.
pub fn read_i64(data: &[u8], f: &Field) -> Option<i64> {
    let v = read_u64(data, f.offset, f.size)?;
    Some(match (f.signed, f.size) {
        (true, 1) => v as u8 as i8 as i64,
        (true, 2) => v as u16 as i16 as i64,
        (true, 4) => v as u32 as i32 as i64,
        _ => v as i64,
    })
}

/// A char array's or a `__data_loc` string's bytes, up to its first NUL (a task's name is
/// any bytes: `Names::intern_bytes` makes it text).
pub fn read_bytes<'a>(data: &'a [u8], f: &Field) -> Option<&'a [u8]> {
    let bytes = match f.data_loc {
        true => {
            let loc = read_u64(data, f.offset, 4)? as u32;
            let (off, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
            data.get(off..off + len)?
        }
        false => data.get(f.offset..f.offset.checked_add(f.size)?)?,
    };
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Some(&bytes[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = "name: sched_switch\nID: 372\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
        \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
        \tfield:__data_loc char[] name;\toffset:40;\tsize:4;\tsigned:0;\n\n\
        print fmt: \"prev_comm=%s\"\n";

    #[test]
    fn formats_give_ids_offsets_and_string_kinds() {
        let f = parse_event_format("sched:sched_switch", SWITCH).unwrap();
        assert_eq!(f.id, 372);
        let comm = f.field("prev_comm").unwrap();
        assert_eq!((comm.offset, comm.size, comm.data_loc), (8, 16, false));
        let pid = f.field("prev_pid").unwrap();
        assert!(pid.signed);
        assert!(f.field("name").unwrap().data_loc);
        assert!(parse_event_format("x", "no id here").is_none());
    }

    #[test]
    fn the_page_layout_comes_from_header_page() {
        let text = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
                    \tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
                    \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
                    \tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
        assert_eq!(PageLayout::parse(text), Some(PageLayout::DEFAULT));
    }

    #[test]
    fn strings_and_signed_values_read_back() {
        let mut rec = vec![0u8; 48];
        rec[8..13].copy_from_slice(b"ksoft");
        rec[24..28].copy_from_slice(&(-5i32).to_le_bytes());
        // A data_loc at offset 40: 3 bytes at offset 44.
        rec[40..44].copy_from_slice(&((3u32 << 16) | 44).to_le_bytes());
        rec[44..47].copy_from_slice(b"eth");
        let f = parse_event_format("sched:sched_switch", SWITCH).unwrap();
        let text = |name| read_bytes(&rec, f.field(name).unwrap());
        assert_eq!(text("prev_comm"), Some(&b"ksoft"[..]));
        assert_eq!(read_i64(&rec, f.field("prev_pid").unwrap()), Some(-5));
        assert_eq!(text("name"), Some(&b"eth"[..]));
    }

    /// Fields whose offset and size pass the address space, as a damaged format file
    /// can give (issue 22's fuzzing): no value, not a panic.
    #[test]
    fn issue22_fields_past_the_address_space_read_as_none() {
        let rec = [0u8; 16];
        assert_eq!(read_u64(&rec, usize::MAX, 8), None);
        assert_eq!(read_u64(&rec, 8, usize::MAX), None);
        let f = Field {
            name: "comm".into(),
            offset: usize::MAX - 1,
            size: 16,
            signed: false,
            data_loc: false,
        };
        assert_eq!(read_bytes(&rec, &f), None);
        assert_eq!(read_i64(&rec, &f), None);
    }
}
