//! Error types: one enum per job (JSON input, binary validation, encoding, decoding).

use std::fmt;

/// What went wrong while reading JSON text.
///
/// ```
/// use tessera_value::{from_json, JsonErrorKind};
/// assert_eq!(from_json(b"[1,").unwrap_err().kind, JsonErrorKind::UnexpectedEnd);
/// assert_eq!(from_json(b"01").unwrap_err().kind, JsonErrorKind::InvalidNumber);
/// assert_eq!(JsonErrorKind::UnexpectedByte(b'x').to_string(), "unexpected character 'x'");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonErrorKind {
    /// The input ended inside a value.
    UnexpectedEnd,
    /// A byte that cannot start or continue the current token.
    UnexpectedByte(u8),
    /// A number that RFC 8259 does not allow (`01`, `1.`, `.5`, `1.e3`, `-`).
    InvalidNumber,
    /// A backslash escape that is not one of the nine RFC 8259 escapes.
    InvalidEscape,
    /// A `\u` escape of a UTF-16 surrogate without its partner.
    LoneSurrogate,
    /// A control character (below U+0020) inside a string.
    ControlCharacter,
    /// Bytes that are not UTF-8.
    InvalidUtf8,
    /// Something other than whitespace after the top-level value.
    TrailingCharacters,
    /// Nesting deeper than the configured limit.
    TooDeep,
    /// An object key that is not a string.
    KeyMustBeString,
    /// A value larger than the format can hold: a document past its size limits, or a number
    /// beyond the range of an `f64` (such as `1e400`).
    ///
    /// ```
    /// use tessera_value::{from_json, JsonErrorKind};
    /// assert_eq!(from_json(b"[1e400]").unwrap_err().kind, JsonErrorKind::TooLarge);
    /// assert!(from_json(b"[1e300]").is_ok());
    /// ```
    TooLarge,
}

impl fmt::Display for JsonErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnexpectedEnd => f.write_str("unexpected end of input"),
            Self::UnexpectedByte(b) if b.is_ascii_graphic() => write!(f, "unexpected character '{}'", *b as char),
            Self::UnexpectedByte(b) => write!(f, "unexpected byte 0x{b:02x}"),
            Self::InvalidNumber => f.write_str("invalid number"),
            Self::InvalidEscape => f.write_str("invalid escape sequence"),
            Self::LoneSurrogate => f.write_str("lone UTF-16 surrogate in \\u escape"),
            Self::ControlCharacter => f.write_str("unescaped control character in string"),
            Self::InvalidUtf8 => f.write_str("invalid UTF-8"),
            Self::TrailingCharacters => f.write_str("trailing characters after the JSON value"),
            Self::TooDeep => f.write_str("nesting too deep"),
            Self::KeyMustBeString => f.write_str("object key must be a string"),
            Self::TooLarge => f.write_str("value too large"),
        }
    }
}

/// Malformed JSON: what, and where (byte offset, 1-based line and column).
///
/// ```
/// use tessera_value::{from_json, JsonErrorKind};
/// let error = from_json(b"{\n  \"a\": tru\n}").unwrap_err();
/// assert_eq!(error.kind, JsonErrorKind::UnexpectedByte(b'\n'));
/// assert_eq!((error.line, error.column, error.offset), (2, 11, 12));
/// assert_eq!(error.to_string(), "unexpected byte 0x0a at line 2 column 11 (byte 12)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{kind} at line {line} column {column} (byte {offset})")]
pub struct JsonError {
    /// What went wrong.
    pub kind: JsonErrorKind,
    /// Byte offset of the offending byte.
    pub offset: usize,
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, counted in bytes.
    pub column: usize,
}

impl JsonError {
    /// Builds an error at `offset` of `input`, computing line and column (only on the error path).
    pub(crate) fn at(kind: JsonErrorKind, input: &[u8], offset: usize) -> Self {
        let offset = offset.min(input.len());
        let before = &input[..offset];
        let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
        let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
        JsonError { kind, offset, line, column: offset - line_start + 1 }
    }
}

/// Bytes that are not a valid document, found by [`crate::Doc::from_untrusted`].
///
/// ```
/// use tessera_value::{Doc, FormatError};
/// let bytes = tessera_value::from_json(br#"{"name": "Ada"}"#).unwrap();
/// assert!(matches!(Doc::from_untrusted(&[]), Err(FormatError::BadFooter { reason: "empty input" })));
/// // Every strict prefix of a document is refused, never read out of bounds.
/// assert!((0..bytes.len()).all(|len| Doc::from_untrusted(&bytes[..len]).is_err()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The input is shorter than its structure says.
    #[error("truncated document: needed byte {offset}")]
    Truncated {
        /// First offset that was needed.
        offset: usize,
    },
    /// The footer is not one this library writes.
    #[error("bad document footer: {reason}")]
    BadFooter {
        /// Which check failed.
        reason: &'static str,
    },
    /// The document was written by a newer format version.
    #[error("unsupported format version {found} (this library reads version {supported})")]
    UnsupportedVersion {
        /// Version in the document.
        found: u8,
        /// Version this library reads.
        supported: u8,
    },
    /// An item starts with a byte that is not a tag.
    #[error("unknown item tag 0x{tag:02x} at byte {offset}")]
    BadTag {
        /// Offset of the item.
        offset: usize,
        /// The byte found.
        tag: u8,
    },
    /// A slot that is neither a valid inline value nor a pointer to an earlier item.
    #[error("bad slot at byte {offset}: {reason}")]
    BadSlot {
        /// Offset of the slot.
        offset: usize,
        /// Which check failed.
        reason: &'static str,
    },
    /// A string or key that is not UTF-8.
    #[error("invalid UTF-8 in string at byte {offset}")]
    BadUtf8 {
        /// Offset of the string item.
        offset: usize,
    },
    /// Dict keys out of order or repeated.
    #[error("dict keys not strictly ascending at byte {offset}")]
    UnsortedKeys {
        /// Offset of the dict.
        offset: usize,
    },
    /// The key table is not sorted, or repeats a key.
    #[error("key table not strictly ordered at entry {index}")]
    BadKeyTable {
        /// Index of the offending entry.
        index: usize,
    },
    /// A stored container height is inconsistent, or nesting is deeper than allowed.
    #[error("nesting depth {height} at byte {offset} exceeds the limit {limit} or is inconsistent")]
    TooDeep {
        /// Offset of the container.
        offset: usize,
        /// Its stored height.
        height: u8,
        /// The limit in force.
        limit: u8,
    },
    /// The document refers to shared keys, but no table (or too small a table) was given.
    #[error("document needs {needed} shared keys, the table given has {available}")]
    MissingSharedKeys {
        /// Shared keys the document refers to.
        needed: u64,
        /// Keys in the table given.
        available: u64,
    },
    /// A local key that is also in the shared-key table, which would make lookups ambiguous.
    #[error("local key at byte {offset} is also a shared key")]
    AmbiguousKey {
        /// Offset of the key string.
        offset: usize,
    },
    /// Shared containers make the tree under this container larger than the validator allows,
    /// as a small document standing for an exponentially large tree would.
    #[error("container at byte {offset} expands to too large a tree through shared subtrees")]
    SharedContainer {
        /// Offset of the shared container.
        offset: usize,
    },
    /// A count or length larger than the document.
    #[error("length at byte {offset} runs past the end of the document")]
    BadLength {
        /// Offset of the item whose length is wrong.
        offset: usize,
    },
}

/// Misuse of the [`crate::Encoder`] or a value the format cannot hold.
///
/// ```
/// use tessera_value::{EncodeError, Encoder};
/// let mut out = Encoder::new();
/// assert!(matches!(out.end_array(), Err(EncodeError::Unbalanced(_))));
/// let out = Encoder::new();
/// assert!(matches!(out.finish(), Err(EncodeError::Incomplete(_))));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// `end_array`/`end_dict` without a matching `begin`, or the wrong kind.
    #[error("unbalanced container: {0}")]
    Unbalanced(&'static str),
    /// A dict value was pushed without a key, or a key outside a dict.
    #[error("key/value order: {0}")]
    KeyOrder(&'static str),
    /// `finish` was called with no value or with open containers.
    #[error("incomplete document: {0}")]
    Incomplete(&'static str),
    /// Nesting deeper than the format's limit of 255.
    #[error("nesting deeper than {0}")]
    TooDeep(u8),
    /// A serde map or struct gave the key twice (a flattened map repeating a field, or a
    /// hand-written `Serialize`): one of its values would be lost. [`crate::Encoder::end_dict`]
    /// itself keeps the last, as JSON input does.
    #[error("the key {0:?} is given twice in one map: one value would be lost")]
    RepeatedKey(String),
    /// A serde message (from a `Serialize` impl or an unsupported shape).
    #[error("{0}")]
    Message(String),
}

impl serde::ser::Error for EncodeError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        EncodeError::Message(message.to_string())
    }
}

/// A document that does not fit the Rust type it is decoded into.
///
/// ```
/// let bytes = tessera_value::from_json(br#""text""#).unwrap();
/// let error = tessera_value::from_slice::<u32>(&bytes).unwrap_err();
/// assert!(error.message.contains("invalid type"), "{error}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DecodeError {
    /// Human-readable description, from serde or from this crate.
    pub message: String,
}

impl serde::de::Error for DecodeError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        DecodeError { message: message.to_string() }
    }
}

/// A key path (`friends[0].name`) that does not parse.
///
/// ```
/// let bytes = tessera_value::from_json(br#"{"a": [1]}"#).unwrap();
/// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
/// let error = root.path("a[x]").unwrap_err();
/// assert_eq!(error.column, 3);
/// assert!(error.to_string().starts_with("bad key path at column 3"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad key path at column {column}: {reason}")]
pub struct PathError {
    /// 1-based column of the problem.
    pub column: usize,
    /// What is wrong.
    pub reason: &'static str,
}
