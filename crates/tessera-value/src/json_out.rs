//! A value to JSON text: compact, pretty (serde_json's layout) or canonical (sorted keys).
//!
//! The writer walks with an explicit stack, so deep documents cannot overflow the call stack.
//! Values JSON cannot carry are written as follows, and documented in `docs/format.md`:
//! NaN and ±infinity become `null` (as in JavaScript and serde_json); binary data becomes a
//! base64 string (standard alphabet, padded).

use crate::reader::{Array, Dict, Kind, Value};
use base64::Engine as _;

/// How [`Value::write_json`] lays out its output.
///
/// ```
/// use tessera_value::JsonStyle;
/// let bytes = tessera_value::from_json(br#"{"b": 1, "a": 2}"#).unwrap();
/// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
/// let mut out = Vec::new();
/// root.write_json(&mut out, JsonStyle::Canonical);
/// assert_eq!(out, br#"{"a":2,"b":1}"#);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonStyle {
    /// No whitespace; dict entries in storage order.
    Compact,
    /// Two-space indentation, as `serde_json::to_string_pretty`.
    Pretty,
    /// No whitespace, dict keys sorted by their UTF-8 bytes, `-0.0` written `0.0`: equal
    /// values give equal text.
    Canonical,
}

enum Frame<'a> {
    Array { array: Array<'a>, next: usize },
    Dict { dict: Dict<'a>, order: Vec<usize>, next: usize },
}

impl<'a> Value<'a> {
    /// Compact JSON.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"{"b": 1, "a": [true, null]}"#).unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.to_json(), r#"{"b":1,"a":[true,null]}"#);
    /// assert_eq!(root.to_json_canonical(), r#"{"a":[true,null],"b":1}"#);
    /// ```
    pub fn to_json(&self) -> String {
        self.json_string(JsonStyle::Compact)
    }

    /// Pretty JSON, laid out as `serde_json::to_string_pretty` does.
    ///
    /// ```
    /// let bytes = tessera_value::from_json(br#"{"a": [1]}"#).unwrap();
    /// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
    /// assert_eq!(root.to_json_pretty(), "{\n  \"a\": [\n    1\n  ]\n}");
    /// ```
    pub fn to_json_pretty(&self) -> String {
        self.json_string(JsonStyle::Pretty)
    }

    /// Canonical JSON: compact, with dict keys sorted by their UTF-8 bytes and `-0.0` written
    /// `0.0` (the two are equal values).
    ///
    /// ```
    /// let one = tessera_value::from_json(br#"{"y": 1, "x": 2}"#).unwrap();
    /// let two = tessera_value::from_json(br#"{"x": 2, "y": 1}"#).unwrap();
    /// let canonical = |bytes: &[u8]| tessera_value::Doc::from_untrusted(bytes).unwrap().root().to_json_canonical();
    /// assert_eq!(canonical(&one), canonical(&two));
    /// assert_eq!(canonical(&one), r#"{"x":2,"y":1}"#);
    /// ```
    pub fn to_json_canonical(&self) -> String {
        self.json_string(JsonStyle::Canonical)
    }

    fn json_string(&self, style: JsonStyle) -> String {
        let mut out = Vec::with_capacity(128);
        self.write_json(&mut out, style);
        // Everything written is ASCII punctuation, numbers, or UTF-8 copied from valid strings.
        String::from_utf8(out).expect("JSON output is UTF-8")
    }

    /// Appends this value as JSON text to `out`.
    ///
    /// ```
    /// use tessera_value::JsonStyle;
    /// let bytes = tessera_value::from_json(b"[1.5, null]").unwrap();
    /// let mut out = b"value: ".to_vec();
    /// tessera_value::Doc::from_untrusted(&bytes).unwrap().root().write_json(&mut out, JsonStyle::Compact);
    /// assert_eq!(out, b"value: [1.5,null]");
    /// ```
    pub fn write_json(&self, out: &mut Vec<u8>, style: JsonStyle) {
        let mut stack: Vec<Frame<'a>> = Vec::new();
        let mut current = Some(*self);
        loop {
            if let Some(value) = current.take() {
                match value.kind() {
                    Kind::Array => {
                        let array = value.as_array().expect("kind is array");
                        out.push(b'[');
                        if array.is_empty() {
                            out.push(b']');
                        } else {
                            stack.push(Frame::Array { array, next: 0 });
                        }
                    }
                    Kind::Dict => {
                        let dict = value.as_dict().expect("kind is dict");
                        out.push(b'{');
                        if dict.is_empty() {
                            out.push(b'}');
                        } else {
                            let mut order: Vec<usize> = (0..dict.len()).collect();
                            if style == JsonStyle::Canonical {
                                order.sort_by_key(|&i| dict.entry(i).expect("index below len").0.as_bytes());
                            }
                            stack.push(Frame::Dict { dict, order, next: 0 });
                        }
                    }
                    // Equal values give equal text: `-0.0 == 0.0`, so both are `0.0`.
                    Kind::Float if style == JsonStyle::Canonical && value.as_f64() == Some(0.0) => out.extend_from_slice(b"0.0"),
                    _ => write_scalar(out, value),
                }
            }
            let depth = stack.len();
            let Some(frame) = stack.last_mut() else { return };
            match frame {
                Frame::Array { array, next } => {
                    if *next == array.len() {
                        stack.pop();
                        newline(out, style, depth - 1);
                        out.push(b']');
                        continue;
                    }
                    if *next > 0 {
                        out.push(b',');
                    }
                    newline(out, style, depth);
                    current = array.get(*next);
                    *next += 1;
                }
                Frame::Dict { dict, order, next } => {
                    if *next == dict.len() {
                        stack.pop();
                        newline(out, style, depth - 1);
                        out.push(b'}');
                        continue;
                    }
                    if *next > 0 {
                        out.push(b',');
                    }
                    newline(out, style, depth);
                    let (key, value) = dict.entry(order[*next]).expect("index below len");
                    write_string(out, key);
                    out.extend_from_slice(if style == JsonStyle::Pretty { b": " } else { b":" });
                    current = Some(value);
                    *next += 1;
                }
            }
        }
    }
}

fn newline(out: &mut Vec<u8>, style: JsonStyle, depth: usize) {
    if style == JsonStyle::Pretty {
        out.push(b'\n');
        out.resize(out.len() + 2 * depth, b' ');
    }
}

fn write_scalar(out: &mut Vec<u8>, value: Value<'_>) {
    match value.kind() {
        Kind::Null => out.extend_from_slice(b"null"),
        Kind::Bool => out.extend_from_slice(if value.as_bool() == Some(true) { b"true" } else { b"false" }),
        Kind::Int => out.extend_from_slice(itoa::Buffer::new().format(value.as_i64().unwrap_or(0)).as_bytes()),
        Kind::UInt => out.extend_from_slice(itoa::Buffer::new().format(value.as_u64().unwrap_or(0)).as_bytes()),
        Kind::Float => write_float(out, value.as_f64().unwrap_or(f64::NAN)),
        Kind::String => write_string(out, value.as_str().unwrap_or("")),
        Kind::Binary => {
            out.push(b'"');
            let encoded = base64::engine::general_purpose::STANDARD.encode(value.as_bytes().unwrap_or(&[]));
            out.extend_from_slice(encoded.as_bytes());
            out.push(b'"');
        }
        Kind::Array | Kind::Dict => unreachable!("containers are written by write_json"),
    }
}

/// Writes a double as serde_json does (shortest round-trip form); non-finite as `null`.
pub(crate) fn write_float(out: &mut Vec<u8>, value: f64) {
    if value.is_finite() {
        out.extend_from_slice(ryu::Buffer::new().format_finite(value).as_bytes());
    } else {
        out.extend_from_slice(b"null");
    }
}

/// Bytes that must be escaped in a JSON string: 0 means "copy as is".
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = b'u';
        byte += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0A] = b'n';
    table[0x0C] = b'f';
    table[0x0D] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// Writes a JSON string literal, escaping as serde_json does.
pub(crate) fn write_string(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut run_start = 0;
    for (index, &byte) in bytes.iter().enumerate() {
        let escape = ESCAPE[byte as usize];
        if escape == 0 {
            continue;
        }
        out.extend_from_slice(&bytes[run_start..index]);
        run_start = index + 1;
        out.push(b'\\');
        out.push(escape);
        if escape == b'u' {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[b'0', b'0', HEX[(byte >> 4) as usize], HEX[(byte & 15) as usize]]);
        }
    }
    out.extend_from_slice(&bytes[run_start..]);
    out.push(b'"');
}
