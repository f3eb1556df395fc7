//! Hand-built malformed documents: each is refused with the right typed error, in linear time.

use std::time::{Duration, Instant};
use tessera_value::{Doc, FormatError, SharedKeys, ValidateOptions, from_json, layout};

/// Appends a tail with 1-byte widths to `values`: tag, total length, `fields`, root slot,
/// tail offset and the last byte.
fn with_tail(values: &[u8], flags: u8, fields: &[u8], root_slot: u8) -> Vec<u8> {
    let tail_start = values.len();
    assert!(tail_start < 256);
    let mut out = values.to_vec();
    let total = 2 + fields.len() + 3;
    out.extend_from_slice(&[layout::TAG_TAIL | flags, total as u8]);
    out.extend_from_slice(fields);
    out.extend_from_slice(&[root_slot, tail_start as u8, layout::FORMAT_VERSION << 4]);
    out
}

/// A pointer slot (1 byte) from a container at `from` to an item at `to`.
fn pointer(from: usize, to: usize) -> u8 {
    u8::try_from((from - to) << 1).expect("fits a 1-byte slot")
}

const STRING_X: [u8; 2] = [layout::TAG_STRING + 1, b'x'];

/// `levels` arrays, each holding two pointers to the one below; a string at the bottom.
fn shared_chain(levels: usize) -> Vec<u8> {
    let mut values = STRING_X.to_vec();
    let mut below = 0;
    for level in 1..=levels {
        let pos = values.len();
        values.extend_from_slice(&[layout::TAG_ARRAY, level as u8, 2, pointer(pos, below), pointer(pos, below)]);
        below = pos;
    }
    let tail_start = values.len();
    with_tail(&values, 0, &[], pointer(tail_start, below))
}

#[test]
fn shared_subtree_chain_is_refused_in_linear_time() {
    let options = ValidateOptions { depth_max: 255 };
    for levels in [40, 50] {
        let bytes = shared_chain(levels);
        let start = Instant::now();
        let result = Doc::validate(&bytes, None, &options);
        let elapsed = start.elapsed();
        assert!(matches!(result, Err(FormatError::SharedContainer { .. })), "{result:?}");
        // 2^40 steps would take hours; a linear pass over ~250 bytes takes microseconds.
        assert!(elapsed < Duration::from_millis(50), "{levels} levels took {elapsed:?}");
    }
}

#[test]
fn modest_sharing_is_accepted_and_readable() {
    // Two levels expand to 7 items from a 23-byte document: within the bound.
    let bytes = shared_chain(2);
    let doc = Doc::from_untrusted(&bytes).unwrap();
    assert_eq!(doc.root().to_json(), r#"[["x","x"],["x","x"]]"#);
}

#[test]
fn every_prefix_and_foreign_input_is_refused_without_panic() {
    let bytes = from_json(br#"{"a":[1,"two",3.5,{"b":null}],"c":"a longer string value"}"#).unwrap();
    assert!(Doc::from_untrusted(&bytes).is_ok());
    for cut in 0..bytes.len() {
        assert!(Doc::from_untrusted(&bytes[..cut]).is_err(), "prefix of {cut} bytes accepted");
        let _ = Doc::from_trusted(&bytes[..cut]).map(|doc| doc.root().kind());
    }
    for foreign in [&b""[..], b"\x89PNG\r\n\x1a\n", b"{\"json\": true}", b"SQLite format 3\0", &[0u8; 64], &[0xFF; 64]] {
        assert!(Doc::from_untrusted(foreign).is_err(), "{foreign:?}");
    }
}

#[test]
fn newer_format_version_is_a_version_error() {
    for version in [0u8, layout::FORMAT_VERSION + 1, 15] {
        let mut bytes = from_json(b"[1]").unwrap();
        *bytes.last_mut().unwrap() = (bytes.last().unwrap() & 0x0F) | (version << 4);
        let supported = layout::FORMAT_VERSION;
        assert_eq!(Doc::from_untrusted(&bytes).unwrap_err(), FormatError::UnsupportedVersion { found: version, supported });
        assert!(matches!(Doc::from_trusted(&bytes), Err(FormatError::UnsupportedVersion { .. })));
    }
}

#[test]
fn packed_arrays_are_refused_in_documents_of_versions_before_3() {
    let mut bytes = from_json(b"[1, 2]").unwrap();
    assert_eq!(bytes[0], 0x30, "a packed vector of bytes");
    for version in [1u8, 2] {
        *bytes.last_mut().unwrap() = (bytes.last().unwrap() & 0x0F) | (version << 4);
        assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::BadTag { offset: 0, tag: 0x30 })), "version {version}");
    }
}

#[test]
fn unknown_tag_is_refused() {
    let bytes = with_tail(&[0x00, 0x81, b'x'], 0, &[], pointer(3, 1));
    assert_eq!(Doc::from_untrusted(&bytes).unwrap_err(), FormatError::BadTag { offset: 0, tag: 0 });
}

#[test]
fn pointer_into_the_middle_of_an_item_is_refused() {
    // A 3-byte string at 0, an array at 3 pointing at byte 1 (inside the string).
    let values = [layout::TAG_STRING + 2, b'a', b'b', layout::TAG_ARRAY, 1, 1, pointer(3, 1)];
    let bytes = with_tail(&values, 0, &[], pointer(7, 3));
    assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::BadSlot { offset: 6, .. })));
}

#[test]
fn zero_and_out_of_range_pointers_are_refused() {
    for slot in [0u8, 0xFE] {
        let values = [layout::TAG_ARRAY, 1, 1, slot];
        let bytes = with_tail(&values, 0, &[], pointer(4, 0));
        assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::BadSlot { offset: 3, .. })), "slot {slot}");
    }
}

#[test]
fn undefined_inline_slots_are_refused() {
    // 0b111 is no slot kind; special 7 is no special value; atom 0 with no atom table.
    for slot in [0b0000_0111u8, (7 << 3) | 0b011, 0b101] {
        let values = [layout::TAG_ARRAY, 1, 1, slot];
        let bytes = with_tail(&values, 0, &[], pointer(4, 0));
        assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::BadSlot { offset: 3, .. })), "slot {slot:#b}");
    }
}

#[test]
fn invalid_utf8_string_is_refused() {
    let values = [layout::TAG_STRING + 2, 0xC3, 0x28];
    let bytes = with_tail(&values, 0, &[], pointer(3, 0));
    assert_eq!(Doc::from_untrusted(&bytes).unwrap_err(), FormatError::BadUtf8 { offset: 0 });
    // A trusted open does not check, and reads the string as empty rather than misbehave.
    assert_eq!(Doc::from_trusted(&bytes).unwrap().root().as_str(), Some(""));
}

#[test]
fn lengths_past_the_end_are_refused() {
    let values = [layout::TAG_STRING + 62 + 1, 0x7F, b'a'];
    let bytes = with_tail(&values, 0, &[], pointer(3, 0));
    assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::BadLength { offset: 0 })));
    let values = [layout::TAG_ARRAY, 1, 100, 0x03];
    let bytes = with_tail(&values, 0, &[], pointer(4, 0));
    assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::BadLength { offset: 0 })));
}

#[test]
fn inconsistent_heights_are_refused() {
    // An inner array claiming height 1 inside an outer array also claiming height 1.
    let values = [layout::TAG_ARRAY, 1, 0, layout::TAG_ARRAY, 1, 1, pointer(3, 0)];
    let bytes = with_tail(&values, 0, &[], pointer(7, 3));
    assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::TooDeep { .. })));
    // Height 0 is never valid for a container.
    let bytes = with_tail(&[layout::TAG_ARRAY, 0, 0], 0, &[], pointer(3, 0));
    assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::TooDeep { .. })));
}

#[test]
fn depth_limit_is_enforced_at_the_boundary() {
    let nested = |depth: usize| from_json_depth(depth);
    let options = ValidateOptions { depth_max: 5 };
    assert!(Doc::validate(&nested(5), None, &options).is_ok());
    assert!(matches!(Doc::validate(&nested(6), None, &options), Err(FormatError::TooDeep { .. })));
}

fn from_json_depth(depth: usize) -> Vec<u8> {
    from_json(format!("{}{}", "[".repeat(depth), "]".repeat(depth)).as_bytes()).unwrap()
}

#[test]
fn unsorted_or_unknown_dict_keys_are_refused() {
    let mut shared = SharedKeys::new();
    shared.add("a").unwrap();
    shared.add("b").unwrap();
    // widths byte absent (no keys or atoms), shared count 2.
    for keys in [[1u8, 0], [0, 0], [0, 2]] {
        let values = [layout::TAG_DICT, 1, 2, keys[0], keys[1], 0b011, 0b011];
        let bytes = with_tail(&values, layout::TAIL_HAS_SHARED, &[2], pointer(7, 0));
        let result = Doc::from_untrusted_with_keys(&bytes, &shared);
        assert_eq!(result.unwrap_err(), FormatError::UnsortedKeys { offset: 0 }, "{keys:?}");
    }
    let values = [layout::TAG_DICT, 1, 2, 0, 1, 0b011, 0b011];
    let bytes = with_tail(&values, layout::TAIL_HAS_SHARED, &[2], pointer(7, 0));
    let doc = Doc::from_untrusted_with_keys(&bytes, &shared).unwrap();
    assert_eq!(doc.root().to_json(), r#"{"a":null,"b":null}"#);
    assert_eq!(Doc::from_untrusted(&bytes).unwrap_err(), FormatError::MissingSharedKeys { needed: 2, available: 0 });
}

#[test]
fn local_key_that_is_also_shared_is_refused() {
    let local = from_json(br#"{"name": 1}"#).unwrap();
    let mut shared = SharedKeys::new();
    shared.add("name").unwrap();
    // The document has no shared count, so the table is not consulted: valid.
    assert!(Doc::from_untrusted_with_keys(&local, &shared).is_ok());
}

#[test]
fn bit_flips_in_a_real_document_never_panic() {
    let bytes = from_json(br#"{"people":[{"name":"Ada","tags":["x","y","x"]},{"name":"Alan","tags":[]}],"n":-12345678901}"#).unwrap();
    for index in 0..bytes.len() {
        for bit in 0..8 {
            let mut corrupt = bytes.clone();
            corrupt[index] ^= 1 << bit;
            if let Ok(doc) = Doc::from_untrusted(&corrupt) {
                let _ = doc.root().to_json();
            }
            if let Ok(doc) = Doc::from_trusted(&corrupt) {
                // Trusted reads of corrupt bytes may panic; they must not be undefined behaviour.
                let _ = std::panic::catch_unwind(|| doc.root().to_json());
            }
        }
    }
}

/// A document of nine keys that share one home slot at every index size, so the encoder stores
/// a sorted key index; with the position of that index (1-byte widths: the document is small).
fn sorted_index_document() -> (Vec<u8>, usize) {
    let mask = (layout::key_index_slots(9, layout::KEY_INDEX_GROWTH_MAX) - 1) as u64;
    let keys: Vec<String> = (0u64..).map(|n| format!("k{n}")).filter(|k| layout::key_hash(k.as_bytes()) & mask == 0).take(9).collect();
    let json = format!("{{{}}}", keys.iter().map(|k| format!("{k:?}:1")).collect::<Vec<_>>().join(","));
    let bytes = from_json(json.as_bytes()).unwrap();
    let doc = Doc::from_untrusted(&bytes).unwrap();
    assert_eq!(doc.key_index_kind(), Some(layout::KeyIndexKind::Sorted));
    assert_eq!(bytes[bytes.len() - 1] & 0x0F, 0, "1-byte widths");
    let tail_start = bytes[bytes.len() - 2] as usize;
    assert!(bytes.len() - tail_start < 128, "a 1-byte tail length");
    (bytes, tail_start + 2 + 9)
}

#[test]
fn a_sorted_key_index_out_of_order_is_refused() {
    let (mut bytes, index) = sorted_index_document();
    bytes.swap(index, index + 1);
    assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::BadKeyTable { .. })));
    // A local id listed twice (and another missing).
    let (mut bytes, index) = sorted_index_document();
    bytes[index + 1] = bytes[index];
    assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::BadKeyTable { .. })));
    // A zero entry, which a hashed index would read as empty.
    let (mut bytes, index) = sorted_index_document();
    bytes[index + 4] = 0;
    assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::BadKeyTable { .. })));
}

#[test]
fn a_sorted_key_index_is_refused_in_a_version_1_document() {
    let (mut bytes, _) = sorted_index_document();
    *bytes.last_mut().unwrap() = (bytes.last().unwrap() & 0x0F) | 0x10;
    assert!(matches!(Doc::from_untrusted(&bytes), Err(FormatError::BadFooter { .. })));
    assert!(matches!(Doc::from_trusted(&bytes), Err(FormatError::BadFooter { .. })));
}

#[test]
fn the_worked_examples_of_docs_format_md_are_byte_exact() {
    let example = [
        0x81, 0x61, 0x82, 0x78, 0x79, 0x50, 0x01, 0x02, 0x09, 0x06, 0x60, 0x02, 0x01, 0x00, 0x0a, 0x71, 0x0a, 0x00, 0x00, 0x01, 0x01, 0x00,
        0x0a, 0x0f, 0x30,
    ];
    assert_eq!(from_json(br#"{"a":[1,"xy"]}"#).unwrap(), example);
    assert_eq!(from_json(b"null").unwrap(), [0x70, 0x05, 0x03, 0x00, 0x30]);
    let matrix = [
        0x3c, 0x02, 0x02, 0x00, 0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x20, 0x40, 0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x40, 0x40, 0x70, 0x05,
        0x28, 0x14, 0x30,
    ];
    assert_eq!(from_json(b"[[1.5,2.5],[0.5,3.0]]").unwrap(), matrix);
    let vector = [0x31, 0x03, 0x01, 0x00, 0x2c, 0x01, 0xfe, 0xff, 0x70, 0x05, 0x10, 0x08, 0x30];
    assert_eq!(from_json(b"[1,300,-2]").unwrap(), vector);
}

/// The validator keeps its bitmaps on the stack for value regions up to 512 bytes and on the
/// heap past that: documents of every size across the boundary validate, and one whose last
/// pointer lands inside a string is refused on either side of it.
#[test]
fn documents_on_both_sides_of_the_inline_bitmap_validate() {
    for len in (0..1100).step_by(if cfg!(miri) { 97 } else { 1 }) {
        let json = format!(r#"["{}", [1, 2]]"#, "s".repeat(len));
        let bytes = from_json(json.as_bytes()).unwrap();
        let doc = Doc::from_untrusted(&bytes).unwrap_or_else(|error| panic!("{len}: {error}"));
        assert_eq!(doc.root().index(0).unwrap().as_str().map(str::len), Some(len));
    }
    for len in [100, 400, 600, 1000] {
        // A long string (tag BF, varint length), then an array with one 2-byte slot pointing
        // at the string's second byte.
        let mut values = vec![0xBF];
        let mut rest = len;
        while rest >= 0x80 {
            values.push((rest & 0x7F) as u8 | 0x80);
            rest >>= 7;
        }
        values.push(rest as u8);
        values.extend(std::iter::repeat_n(b'a', len));
        let array = values.len();
        values.extend_from_slice(&[layout::TAG_ARRAY | 1, 1, 1]);
        values.extend_from_slice(&(((array - 1) << 1) as u16).to_le_bytes());
        let bytes = values_with_wide_tail(&values, array);
        let accepted = Doc::from_untrusted(&bytes).map(|_| ());
        assert!(matches!(accepted, Err(FormatError::BadSlot { .. })), "{len}: {accepted:?}");
        // The same array pointing at the string itself is sound.
        let sound_at = values.len() - 2;
        values[sound_at..].copy_from_slice(&((array << 1) as u16).to_le_bytes());
        let bytes = values_with_wide_tail(&values, array);
        let doc = Doc::from_untrusted(&bytes).unwrap_or_else(|error| panic!("{len}: {error}"));
        assert_eq!(doc.root().index(0).unwrap().as_str().map(str::len), Some(len));
    }
}

/// A tail with 2-byte offsets and a 2-byte root slot pointing at `root`.
fn values_with_wide_tail(values: &[u8], root: usize) -> Vec<u8> {
    let tail_start = values.len();
    let mut out = values.to_vec();
    out.extend_from_slice(&[layout::TAG_TAIL, 7]);
    out.extend_from_slice(&(((tail_start - root) << 1) as u16).to_le_bytes());
    out.extend_from_slice(&(tail_start as u16).to_le_bytes());
    out.push(layout::FORMAT_VERSION << 4 | 1 << 2 | 1);
    out
}
