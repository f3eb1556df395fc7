//! Generated codecs: types that write themselves into an [`Encoder`] and read themselves from a
//! [`Value`] without serde.
//!
//! `#[derive(Record)]` and `#[derive(Embed)]` (crate `tessera-derive`) implement [`Encode`] and
//! [`Decode`] for structs and enums; this module implements them for the standard scalars and
//! containers. The layout is serde's default one, as [`crate::to_vec`] writes it, so either side
//! reads what the other wrote: a struct is a dict of its fields in declaration order, `None` is
//! null, a unit variant is its name as a string, a variant with a payload is a one-entry dict
//! `{"Variant": payload}`, sequences are arrays and string-keyed maps are dicts.
//!
//! **Field ids.** A derived type lists its field names in a `'static` slice. [`FieldIds`]
//! resolves every such list reachable from a type to shared-key ids once (per collection), so
//! the generated encoder writes each field's key as an integer, and the decoder finds each field
//! by integer, with no string hashing or comparison. Without ids (an empty [`FieldIds`]) the
//! same code writes and finds keys by name.
//!
//! ```
//! use tessera_value::codec::{decode, encode, Decode, Encode, FieldIds};
//! use tessera_value::Doc;
//! let bytes = encode(&vec![Some(1u32), None], &FieldIds::default()).unwrap();
//! let doc = Doc::from_untrusted(&bytes).unwrap();
//! let back: Vec<Option<u32>> = decode(doc.root(), &FieldIds::default()).unwrap();
//! assert_eq!(back, vec![Some(1), None]);
//! ```

use crate::encoder::Encoder;
use crate::error::EncodeError;
use crate::reader::{Dict, Kind, Value};
use crate::shared_keys::SharedKeys;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// The field names of a derived struct (or the variant names of a derived enum), in
/// declaration order.
///
/// ```
/// use tessera_value::codec::{FieldIds, FieldNames};
/// use tessera_value::SharedKeys;
/// static POINT: FieldNames = &["x", "y"];
/// let mut keys = SharedKeys::new();
/// keys.add("x").unwrap();
/// keys.add("y").unwrap();
/// assert_eq!(FieldIds::resolve(&keys, [POINT]).get(POINT), Some(&[0, 1][..]));
/// ```
pub type FieldNames = &'static [&'static str];

/// A type that writes itself into an [`Encoder`].
///
/// ```
/// use tessera_value::codec::{encode, FieldIds};
/// let bytes = encode("text", &FieldIds::default()).unwrap();
/// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().as_str(), Some("text"));
/// ```
pub trait Encode {
    /// Pushes this value (one value: a scalar or a whole container) into `out`.
    ///
    /// ```
    /// use tessera_value::codec::{Encode, FieldIds};
    /// use tessera_value::{Doc, Encoder};
    /// let mut out = Encoder::new();
    /// (-7i32).encode(&mut out, &FieldIds::default()).unwrap();
    /// let bytes = out.finish().unwrap();
    /// assert_eq!(Doc::from_untrusted(&bytes).unwrap().root().as_i64(), Some(-7));
    /// ```
    fn encode(&self, out: &mut Encoder<'_>, ids: &FieldIds) -> Result<(), EncodeError>;

    /// Calls `visit` with every [`FieldNames`] list this type and the types inside it use.
    /// `visit` returns false for a list it has seen, and the type then stops there (so that
    /// recursive types end).
    ///
    /// ```
    /// # use tessera_value::codec::{write_field_key, Encode, FieldIds, FieldNames};
    /// # use tessera_value::{EncodeError, Encoder};
    /// # static POINT: FieldNames = &["x", "y"];
    /// struct Point { x: i64, y: i64 }
    /// impl Encode for Point {
    ///     // encode: a dict of `x` and `y` (see `FieldIds::lists_of`)
    /// #     fn encode(&self, out: &mut Encoder<'_>, ids: &FieldIds) -> Result<(), EncodeError> {
    /// #         out.begin_dict()?;
    /// #         write_field_key(out, ids.get(POINT), POINT, 0)?;
    /// #         out.push_i64(self.x)?;
    /// #         write_field_key(out, ids.get(POINT), POINT, 1)?;
    /// #         out.push_i64(self.y)?;
    /// #         out.end_dict()
    /// #     }
    ///     fn field_names(visit: &mut dyn FnMut(FieldNames) -> bool) {
    ///         visit(POINT);
    ///     }
    /// }
    /// let mut seen = Vec::new();
    /// <Vec<Option<Point>> as Encode>::field_names(&mut |list| {
    ///     seen.push(list);
    ///     true
    /// });
    /// assert_eq!(seen, [POINT]); // containers pass on their elements' lists
    /// ```
    fn field_names(visit: &mut dyn FnMut(FieldNames) -> bool) {
        let _ = visit;
    }

    /// True when this value is written as null: `None`, `()`, a unit struct, a newtype around
    /// one of them. An `Option` refuses to write `Some` of such a value, which would read back
    /// as `None` (the format has one null).
    ///
    /// ```
    /// use tessera_value::codec::{encode, Encode, FieldIds};
    /// assert!(None::<u8>.encodes_null() && !Some(1u8).encodes_null());
    /// assert!(encode(&Some(None::<u8>), &FieldIds::default()).is_err()); // would read as `None`
    /// assert!(encode(&Some(Some(1u8)), &FieldIds::default()).is_ok());
    /// ```
    #[inline]
    fn encodes_null(&self) -> bool {
        false
    }
}

/// A type that reads itself from a [`Value`], borrowing from the document where it can.
///
/// ```
/// use tessera_value::codec::{Decode, FieldIds};
/// let bytes = tessera_value::from_json(br#"{"a": 1, "b": 2}"#).unwrap();
/// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
/// let map = std::collections::BTreeMap::<String, u8>::decode(doc.root(), &FieldIds::default()).unwrap();
/// assert_eq!(map["b"], 2);
/// ```
pub trait Decode<'a>: Sized {
    /// Reads a value of this type.
    ///
    /// ```
    /// use tessera_value::codec::{Decode, FieldIds};
    /// let bytes = tessera_value::from_json(b"true").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// assert_eq!(bool::decode(doc.root(), &FieldIds::default()), Ok(true));
    /// ```
    fn decode(value: Value<'a>, ids: &FieldIds) -> Result<Self, FieldError>;

    /// The value of a missing field of this type: `Some(None)` for an `Option`, `None` (an
    /// error) for every other type.
    ///
    /// ```
    /// use tessera_value::codec::Decode;
    /// assert_eq!(<Option<u32> as Decode>::missing(), Some(None));
    /// assert_eq!(<u32 as Decode>::missing(), None);
    /// ```
    fn missing() -> Option<Self> {
        None
    }
}

/// Types that decode from any document without borrowing from it.
///
/// ```
/// use tessera_value::codec::{decode, DecodeOwned, FieldIds};
/// fn first<T: DecodeOwned>(bytes: &[u8]) -> T {
///     let doc = tessera_value::Doc::from_untrusted(bytes).unwrap();
///     decode(doc.root().index(0).unwrap(), &FieldIds::default()).unwrap()
/// }
/// let bytes = tessera_value::from_json(br#"["owned"]"#).unwrap();
/// assert_eq!(first::<String>(&bytes), "owned");
/// ```
pub trait DecodeOwned: for<'a> Decode<'a> {}
impl<T: for<'a> Decode<'a>> DecodeOwned for T {}

/// Encodes `value` as a document of its own.
///
/// ```
/// use tessera_value::codec::{encode, FieldIds};
/// let bytes = encode(&vec![Some("one"), None], &FieldIds::default()).unwrap();
/// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
/// assert_eq!(root.to_json(), r#"["one",null]"#);
/// ```
pub fn encode<T: Encode + ?Sized>(value: &T, ids: &FieldIds) -> Result<Vec<u8>, EncodeError> {
    let mut out = Encoder::new();
    value.encode(&mut out, ids)?;
    out.finish()
}

/// Encodes `value` into `out` (replacing its contents), with dict keys from `shared` where
/// `ids` resolved them. A per-thread encoder's buffers are reused, so encoding allocates
/// nothing once the buffers have grown.
///
/// ```
/// use tessera_value::codec::{encode_into, FieldIds};
/// let mut out = Vec::new();
/// encode_into(&vec![1u8, 2], None, &FieldIds::default(), &mut out).unwrap();
/// assert_eq!(tessera_value::Doc::from_untrusted(&out).unwrap().root().len(), 2);
/// ```
pub fn encode_into<T: Encode + ?Sized>(
    value: &T,
    shared: Option<&SharedKeys>,
    ids: &FieldIds,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    thread_local! {
        static BUFFERS: std::cell::Cell<Option<Box<crate::encoder::Buffers>>> = const { std::cell::Cell::new(None) };
    }
    // Taken out of the cell (a re-entrant call, from inside a hand-written `Encode`, finds it
    // empty and starts fresh buffers), and put back emptied: one pointer moves each way.
    // `try_with`: during the thread's teardown the slot is gone, and fresh buffers serve.
    let parked = BUFFERS.try_with(std::cell::Cell::take).ok().flatten();
    let mut encoder = match parked {
        Some(buffers) => Encoder::with_buffers(shared, buffers),
        None => Encoder::with_buffers(shared, Box::new(crate::encoder::Buffers::new())),
    };
    let result = value.encode(&mut encoder, ids).and_then(|()| encoder.finish_into(out));
    let buffers = encoder.into_buffers();
    let _ = BUFFERS.try_with(|cell| cell.set(Some(buffers)));
    result
}

/// Decodes a `T` from `value`.
///
/// ```
/// use tessera_value::codec::{decode, FieldIds};
/// let bytes = tessera_value::from_json(br#"["a", "b"]"#).unwrap();
/// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
/// let names: Vec<&str> = decode(doc.root(), &FieldIds::default()).unwrap();
/// assert_eq!(names, ["a", "b"]);
/// ```
pub fn decode<'a, T: Decode<'a>>(value: Value<'a>, ids: &FieldIds) -> Result<T, FieldError> {
    T::decode(value, ids)
}

/// Shared-key ids of the field names of derived types, resolved once.
///
/// ```
/// use tessera_value::codec::FieldIds;
/// use tessera_value::SharedKeys;
/// static NAMES: &[&str] = &["x", "y"];
/// let mut keys = SharedKeys::new();
/// keys.add("y").unwrap();
/// keys.add("x").unwrap();
/// let ids = FieldIds::resolve(&keys, [NAMES]);
/// assert_eq!(ids.get(NAMES), Some(&[1, 0][..]));
/// ```
#[derive(Debug, Default, Clone)]
pub struct FieldIds {
    /// By the address of a [`FieldNames`] list (identical lists share ids): the ids of its
    /// names, followed by each id's rank among them (its position in a dict that holds them
    /// all, since dict entries are sorted by id).
    by_list: rustc_hash::FxHashMap<usize, Box<[u32]>>,
}

/// The resolved ids of one [`FieldNames`] list, with each id's position in a dict that holds
/// every field (see [`FieldIds::fields`]).
///
/// ```
/// use tessera_value::codec::FieldIds;
/// use tessera_value::SharedKeys;
/// static NAMES: &[&str] = &["b", "a"];
/// let mut keys = SharedKeys::new();
/// keys.add("a").unwrap();
/// keys.add("b").unwrap();
/// let ids = FieldIds::resolve(&keys, [NAMES]);
/// let fields = ids.fields(NAMES).unwrap();
/// // "b" has id 1 and sits second in a dict of both (entries are sorted by id).
/// assert_eq!((fields.ids[0], fields.ranks[0]), (1, 1));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ResolvedFields<'i> {
    /// Shared-key id of each name.
    pub ids: &'i [u32],
    /// Rank of each id among `ids`: where the field sits in a dict of all of them.
    pub ranks: &'i [u32],
}

impl FieldIds {
    /// Resolves each list whose names are all in `shared`; other lists are written and read
    /// by name.
    ///
    /// ```
    /// use tessera_value::codec::FieldIds;
    /// use tessera_value::SharedKeys;
    /// static RESOLVED: &[&str] = &["id"];
    /// static BY_NAME: &[&str] = &["id", "note"]; // "note" is not a shared key
    /// let mut keys = SharedKeys::new();
    /// keys.add("id").unwrap();
    /// let ids = FieldIds::resolve(&keys, [RESOLVED, BY_NAME]);
    /// assert_eq!((ids.get(RESOLVED), ids.get(BY_NAME)), (Some(&[0][..]), None));
    /// ```
    pub fn resolve(shared: &SharedKeys, lists: impl IntoIterator<Item = FieldNames>) -> Self {
        let mut ids = FieldIds::default();
        for list in lists {
            let resolved: Option<Vec<u32>> = list.iter().map(|name| shared.id(name)).collect();
            if let Some(mut resolved) = resolved {
                let ranks: Vec<u32> = resolved.iter().map(|id| resolved.iter().filter(|other| *other < id).count() as u32).collect();
                resolved.extend(ranks);
                ids.by_list.insert(list.as_ptr() as usize, resolved.into_boxed_slice());
            }
        }
        ids
    }

    /// Every [`FieldNames`] list reachable from `T`, each once.
    ///
    /// ```
    /// use tessera_value::codec::{write_field_key, Encode, FieldIds, FieldNames};
    /// use tessera_value::{EncodeError, Encoder};
    /// static POINT: FieldNames = &["x", "y"];
    /// struct Point { x: i64, y: i64 }
    /// impl Encode for Point {
    ///     fn encode(&self, out: &mut Encoder<'_>, ids: &FieldIds) -> Result<(), EncodeError> {
    ///         out.begin_dict()?;
    ///         write_field_key(out, ids.get(POINT), POINT, 0)?;
    ///         out.push_i64(self.x)?;
    ///         write_field_key(out, ids.get(POINT), POINT, 1)?;
    ///         out.push_i64(self.y)?;
    ///         out.end_dict()
    ///     }
    ///     fn field_names(visit: &mut dyn FnMut(FieldNames) -> bool) {
    ///         visit(POINT);
    ///     }
    /// }
    /// assert_eq!(FieldIds::lists_of::<Vec<Point>>(), [POINT]);
    /// assert!(FieldIds::lists_of::<Vec<Option<u64>>>().is_empty()); // scalars have none
    /// let bytes = tessera_value::codec::encode(&Point { x: 1, y: 2 }, &FieldIds::default())?;
    /// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"{"x":1,"y":2}"#);
    /// # Ok::<(), EncodeError>(())
    /// ```
    pub fn lists_of<T: Encode + ?Sized>() -> Vec<FieldNames> {
        let mut lists: Vec<FieldNames> = Vec::new();
        T::field_names(&mut |list| {
            if lists.iter().any(|seen| std::ptr::eq(*seen, list)) {
                return false;
            }
            lists.push(list);
            true
        });
        lists
    }

    /// The ids of `list`, if it was resolved.
    ///
    /// ```
    /// use tessera_value::codec::FieldIds;
    /// use tessera_value::SharedKeys;
    /// static NAMES: &[&str] = &["name"];
    /// let mut keys = SharedKeys::new();
    /// keys.add("name").unwrap();
    /// assert_eq!(FieldIds::resolve(&keys, [NAMES]).get(NAMES), Some(&[0][..]));
    /// assert_eq!(FieldIds::default().get(NAMES), None);
    /// ```
    #[inline]
    pub fn get(&self, list: FieldNames) -> Option<&[u32]> {
        if self.by_list.is_empty() {
            return None;
        }
        self.by_list.get(&(list.as_ptr() as usize)).map(|both| &both[..both.len() / 2])
    }

    /// The ids of `list` and where each sits in a dict of all of them, if it was resolved.
    ///
    /// ```
    /// use tessera_value::codec::FieldIds;
    /// use tessera_value::SharedKeys;
    /// static NAMES: &[&str] = &["x", "y"];
    /// let mut keys = SharedKeys::new();
    /// keys.add("y").unwrap();
    /// keys.add("x").unwrap();
    /// let ids = FieldIds::resolve(&keys, [NAMES]);
    /// let fields = ids.fields(NAMES).unwrap();
    /// assert_eq!((fields.ids, fields.ranks), (&[1, 0][..], &[1, 0][..]));
    /// ```
    #[inline]
    pub fn fields(&self, list: FieldNames) -> Option<ResolvedFields<'_>> {
        if self.by_list.is_empty() {
            return None;
        }
        let both = self.by_list.get(&(list.as_ptr() as usize))?;
        let (ids, ranks) = both.split_at(both.len() / 2);
        Some(ResolvedFields { ids, ranks })
    }
}

/// A stored value that does not fit the type it is decoded into: where, and what is wrong.
///
/// ```
/// use tessera_value::codec::{decode, FieldIds};
/// let bytes = tessera_value::from_json(br#"[1, "two"]"#).unwrap();
/// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
/// let error = decode::<Vec<u8>>(doc.root(), &FieldIds::default()).unwrap_err();
/// assert_eq!(error.path, "[1]");
/// assert_eq!(error.to_string(), "at `[1]`: expected an integer, found a string");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at `{}`: {problem}", if path.is_empty() { "." } else { path.as_str() })]
pub struct FieldError {
    /// The field path from the decoded value's root: dotted field names and `[index]`.
    pub path: String,
    /// What is wrong there.
    pub problem: FieldProblem,
}

/// What is wrong with a stored value, in a [`FieldError`].
///
/// ```
/// use tessera_value::codec::{decode, FieldIds, FieldProblem};
/// let bytes = tessera_value::from_json(b"300").unwrap();
/// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
/// let error = decode::<u8>(doc.root(), &FieldIds::default()).unwrap_err();
/// assert_eq!(error.problem, FieldProblem::OutOfRange { expected: "u8" });
/// assert_eq!(error.problem.to_string(), "number out of range for u8");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldProblem {
    /// A required field is absent.
    Missing,
    /// The value has another type.
    WrongType {
        /// What the Rust type needs.
        expected: &'static str,
        /// What is stored.
        found: Kind,
    },
    /// A number that does not fit the Rust type.
    OutOfRange {
        /// The Rust type.
        expected: &'static str,
    },
    /// An enum variant the Rust type does not have.
    UnknownVariant(String),
    /// A hand-written decoder's own message (for example serde's, through
    /// [`decode_with_serde`]).
    Invalid(String),
}

impl fmt::Display for FieldProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldProblem::Missing => f.write_str("missing required field"),
            FieldProblem::WrongType { expected, found } => write!(f, "expected {expected}, found {}", found.described()),
            FieldProblem::OutOfRange { expected } => write!(f, "number out of range for {expected}"),
            FieldProblem::UnknownVariant(name) => write!(f, "unknown variant {name:?}"),
            FieldProblem::Invalid(message) => f.write_str(message),
        }
    }
}

impl FieldError {
    /// A value of the wrong type.
    ///
    /// ```
    /// use tessera_value::codec::{FieldError, FieldProblem};
    /// use tessera_value::Kind;
    /// let bytes = tessera_value::from_json(b"null").unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let error = FieldError::wrong_type("a string", doc.root());
    /// assert_eq!(error.problem, FieldProblem::WrongType { expected: "a string", found: Kind::Null });
    /// ```
    #[cold]
    pub fn wrong_type(expected: &'static str, found: Value<'_>) -> Self {
        FieldError { path: String::new(), problem: FieldProblem::WrongType { expected, found: found.kind() } }
    }

    /// A required field that is absent.
    ///
    /// ```
    /// use tessera_value::codec::FieldError;
    /// assert_eq!(FieldError::missing().in_field("age").to_string(), "at `age`: missing required field");
    /// ```
    #[cold]
    pub fn missing() -> Self {
        FieldError { path: String::new(), problem: FieldProblem::Missing }
    }

    /// An enum variant the type does not have.
    ///
    /// ```
    /// use tessera_value::codec::FieldError;
    /// let error = FieldError::unknown_variant("Purple").in_field("colour");
    /// assert_eq!(error.to_string(), r#"at `colour`: unknown variant "Purple""#);
    /// ```
    #[cold]
    pub fn unknown_variant(name: &str) -> Self {
        FieldError { path: String::new(), problem: FieldProblem::UnknownVariant(name.to_owned()) }
    }

    /// The same error, seen from the struct that holds field `name`.
    ///
    /// ```
    /// use tessera_value::codec::FieldError;
    /// let error = FieldError::missing().in_field("city").in_element(2).in_field("addresses");
    /// assert_eq!(error.path, "addresses[2].city");
    /// ```
    #[cold]
    pub fn in_field(mut self, name: &str) -> Self {
        self.path = match self.path.as_str() {
            "" => name.to_owned(),
            rest if rest.starts_with('[') => format!("{name}{rest}"),
            rest => format!("{name}.{rest}"),
        };
        self
    }

    /// The same error, seen from the array that holds element `index`.
    ///
    /// ```
    /// use tessera_value::codec::FieldError;
    /// assert_eq!(FieldError::missing().in_element(0).in_element(3).path, "[3][0]");
    /// ```
    #[cold]
    pub fn in_element(mut self, index: usize) -> Self {
        self.path = match self.path.as_str() {
            "" => format!("[{index}]"),
            rest if rest.starts_with('[') => format!("[{index}]{rest}"),
            rest => format!("[{index}].{rest}"),
        };
        self
    }
}

// ------------------------------------------------------------------ helpers for derived code

/// Writes the key of field `index` of `names`: its shared id when `ids` resolved the list,
/// else its name. Called by derived code between `begin_dict` and the field's value.
///
/// ```
/// use tessera_value::codec::write_field_key;
/// use tessera_value::{Doc, Encoder};
/// static NAMES: &[&str] = &["x", "y"];
/// let mut out = Encoder::new();
/// out.begin_dict()?;
/// write_field_key(&mut out, None, NAMES, 1)?; // no ids: the key is written by name
/// out.push_i64(5)?;
/// out.end_dict()?;
/// let bytes = out.finish()?;
/// assert_eq!(Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"{"y":5}"#);
/// # Ok::<(), tessera_value::EncodeError>(())
/// ```
#[inline]
pub fn write_field_key(out: &mut Encoder<'_>, ids: Option<&[u32]>, names: FieldNames, index: usize) -> Result<(), EncodeError> {
    match ids {
        Some(ids) => out.shared_key(ids[index]),
        None => out.key(names[index]),
    }
}

/// The value of field `index` of `names` in `dict`, if present.
///
/// ```
/// use tessera_value::codec::field_value;
/// static NAMES: &[&str] = &["x", "y"];
/// let bytes = tessera_value::from_json(br#"{"y": 2}"#).unwrap();
/// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
/// let dict = doc.root().as_dict().unwrap();
/// assert_eq!(field_value(&dict, None, NAMES, 1).and_then(|v| v.as_i64()), Some(2));
/// assert!(field_value(&dict, None, NAMES, 0).is_none());
/// ```
#[inline(always)]
pub fn field_value<'a>(dict: &Dict<'a>, fields: Option<ResolvedFields<'_>>, names: FieldNames, index: usize) -> Option<Value<'a>> {
    field_entry(dict, fields, names, index).map(|entry| dict.value_at(entry))
}

/// Where field `index` of `names` sits in `dict`: at its rank when the list was resolved and
/// the dict has the layout the codec writes, else found by id or by name (out of line).
#[inline(always)]
fn field_entry(dict: &Dict<'_>, fields: Option<ResolvedFields<'_>>, names: FieldNames, index: usize) -> Option<usize> {
    match fields {
        Some(fields) => dict.field_index(fields.ids[index], names[index], fields.ranks[index] as usize),
        None => dict.index_of_name(names[index]),
    }
}

/// Decodes field `index` of `names` from `dict`: a missing field takes [`Decode::missing`],
/// and errors carry the field's name.
///
/// ```
/// use tessera_value::codec::{decode_field, FieldIds};
/// static NAMES: &[&str] = &["name", "age"];
/// let bytes = tessera_value::from_json(br#"{"name": "Ada"}"#).unwrap();
/// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
/// let dict = doc.root().as_dict().unwrap();
/// let none = FieldIds::default();
/// assert_eq!(decode_field::<String>(&dict, None, NAMES, 0, &none).unwrap(), "Ada");
/// assert_eq!(decode_field::<Option<u8>>(&dict, None, NAMES, 1, &none).unwrap(), None);
/// assert_eq!(decode_field::<u8>(&dict, None, NAMES, 1, &none).unwrap_err().path, "age");
/// ```
#[inline(always)]
pub fn decode_field<'a, T: Decode<'a>>(
    dict: &Dict<'a>,
    fields: Option<ResolvedFields<'_>>,
    names: FieldNames,
    index: usize,
    all: &FieldIds,
) -> Result<T, FieldError> {
    // The value is built here, after the paths that find its entry meet (see
    // `Dict::field_index`), so that an inlined `T::decode` reads it from registers.
    match field_entry(dict, fields, names, index) {
        Some(entry) => T::decode(dict.value_at(entry), all).map_err(|error| error.in_field(names[index])),
        None => T::missing().ok_or_else(|| FieldError::missing().in_field(names[index])),
    }
}

/// An enum's value split into its variant name and payload: a string is a unit variant, a
/// one-entry dict a variant with a payload.
///
/// ```
/// use tessera_value::codec::variant_of;
/// let bytes = tessera_value::from_json(br#"["Empty", {"Circle": 2.5}]"#).unwrap();
/// let root = tessera_value::Doc::from_untrusted(&bytes).unwrap().root();
/// let (name, payload) = variant_of(root.index(0).unwrap()).unwrap();
/// assert_eq!((name, payload.is_none()), ("Empty", true));
/// let (name, payload) = variant_of(root.index(1).unwrap()).unwrap();
/// assert_eq!((name, payload.unwrap().as_f64()), ("Circle", Some(2.5)));
/// ```
pub fn variant_of<'a>(value: Value<'a>) -> Result<(&'a str, Option<Value<'a>>), FieldError> {
    if let Some(name) = value.as_str() {
        return Ok((name, None));
    }
    match value.as_dict() {
        Some(dict) if dict.len() == 1 => {
            let (name, payload) = dict.entry(0).expect("one entry");
            Ok((name, Some(payload)))
        }
        _ => Err(FieldError::wrong_type("an enum variant (a string or a one-entry dict)", value)),
    }
}

/// Writes `value` through serde: for a hand-written [`Encode`] of a type that only implements
/// `Serialize`.
///
/// ```
/// use tessera_value::codec::encode_with_serde;
/// let mut out = tessera_value::Encoder::new();
/// encode_with_serde(&("a", 1), &mut out)?;
/// let bytes = out.finish()?;
/// assert_eq!(tessera_value::Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"["a",1]"#);
/// # Ok::<(), tessera_value::EncodeError>(())
/// ```
pub fn encode_with_serde<T: serde::Serialize + ?Sized>(value: &T, out: &mut Encoder<'_>) -> Result<(), EncodeError> {
    value.serialize(&mut *out)
}

/// Reads a `T` through serde: for a hand-written [`Decode`] of a type that only implements
/// `Deserialize`.
///
/// ```
/// use tessera_value::codec::decode_with_serde;
/// let bytes = tessera_value::from_json(b"[1, 2]").unwrap();
/// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
/// let pair: (u8, u8) = decode_with_serde(doc.root()).unwrap();
/// assert_eq!(pair, (1, 2));
/// ```
pub fn decode_with_serde<'a, T: serde::Deserialize<'a>>(value: Value<'a>) -> Result<T, FieldError> {
    crate::from_value(value).map_err(|error| FieldError { path: String::new(), problem: FieldProblem::Invalid(error.message) })
}

/// Collects `len` decoded items into a vector allocated once: collecting into a `Result`
/// directly grows the vector by doubling (its size hint's lower bound is 0), copying every item
/// decoded so far at each step.
#[inline]
fn collect_sized<T>(len: usize, items: impl Iterator<Item = Result<T, FieldError>>) -> Result<Vec<T>, FieldError> {
    let mut collected = Vec::with_capacity(len);
    for item in items {
        collected.push(item?);
    }
    Ok(collected)
}

// ------------------------------------------------------------------ scalars

/// `Encode`/`Decode` for integer types: written as `$push` of `$wide`, read through `$read`
/// (the other reader tells a number out of range from a value of another type).
macro_rules! integers {
    ($push:ident, $wide:ty, $read:ident, $other:ident: $($type:ty),*) => {$(
        impl Encode for $type {
            #[inline]
            fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
                out.$push(*self as $wide)
            }
        }
        impl Decode<'_> for $type {
            #[inline(always)]
            fn decode(value: Value<'_>, _: &FieldIds) -> Result<Self, FieldError> {
                match value.$read() {
                    Some(int) => <$type>::try_from(int).map_err(|_| out_of_range(stringify!($type))),
                    None if value.$other().is_some() => Err(out_of_range(stringify!($type))),
                    None => Err(FieldError::wrong_type("an integer", value)),
                }
            }
        }
    )*};
}
integers!(push_i64, i64, as_i64, as_u64: i8, i16, i32, i64, isize);
integers!(push_u64, u64, as_u64, as_i64: u8, u16, u32, u64, usize);

#[cold]
fn out_of_range(expected: &'static str) -> FieldError {
    FieldError { path: String::new(), problem: FieldProblem::OutOfRange { expected } }
}

impl Encode for f64 {
    #[inline]
    fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
        out.push_f64(*self)
    }
}
impl Decode<'_> for f64 {
    #[inline(always)]
    fn decode(value: Value<'_>, _: &FieldIds) -> Result<Self, FieldError> {
        match value.as_stored_float() {
            Some(float) => Ok(float),
            None => integer_as_float(value, "f64"),
        }
    }
}

impl Encode for f32 {
    #[inline]
    fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
        out.push_f32(*self)
    }
}
impl Decode<'_> for f32 {
    #[inline(always)]
    fn decode(value: Value<'_>, _: &FieldIds) -> Result<Self, FieldError> {
        // A stored double narrows to the nearest f32; one beyond f32's range is an error, not
        // an infinity (infinities and NaN stored as such stay what they are).
        match value.as_stored_float() {
            Some(float) => narrow_to_f32(float).ok_or_else(|| out_of_range("f32")),
            None => integer_as_float(value, "f32").map(|float| float as f32),
        }
    }
}

/// A stored integer read as a float of `type_name` (`"f64"` or `"f32"`), only if that float
/// holds it exactly: 2^53 + 1 is not an `f64`, 16777217 not an `f32`; anything else is the
/// wrong type. Apart from the float path, which it would slow.
#[cold]
fn integer_as_float(value: Value<'_>, type_name: &'static str) -> Result<f64, FieldError> {
    let float = value.as_f64().ok_or_else(|| FieldError::wrong_type("a number", value))?;
    let float = if type_name == "f32" { f64::from(narrow_to_f32(float).ok_or_else(|| out_of_range(type_name))?) } else { float };
    if integer_is_exactly(value, float) { Ok(float) } else { Err(out_of_range(type_name)) }
}

/// True if `value` is an integer equal to `float` (a float that reading it produced): false
/// when the float rounded it, and for a value that is not an integer.
pub(crate) fn integer_is_exactly(value: Value<'_>, float: f64) -> bool {
    let integer = match value.as_i64() {
        Some(signed) => i128::from(signed),
        None => match value.as_u64() {
            Some(unsigned) => i128::from(unsigned),
            None => return false,
        },
    };
    // Every finite double of an integer's magnitude (below 2^65) fits an i128 exactly.
    float.is_finite() && float as i128 == integer
}

/// `value` as the nearest `f32`, or `None` when a finite `value` lies beyond `f32`'s range (the
/// cast would make it an infinity).
///
/// ```
/// use tessera_value::codec::narrow_to_f32;
/// assert_eq!(narrow_to_f32(0.1), Some(0.1f32));
/// assert_eq!(narrow_to_f32(1e300), None);
/// assert_eq!(narrow_to_f32(f64::INFINITY), Some(f32::INFINITY));
/// ```
pub fn narrow_to_f32(value: f64) -> Option<f32> {
    let narrowed = value as f32;
    (narrowed.is_finite() || !value.is_finite()).then_some(narrowed)
}

impl Encode for bool {
    #[inline]
    fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
        out.push_bool(*self)
    }
}
impl Decode<'_> for bool {
    #[inline(always)]
    fn decode(value: Value<'_>, _: &FieldIds) -> Result<Self, FieldError> {
        value.as_bool().ok_or_else(|| FieldError::wrong_type("a boolean", value))
    }
}

impl Encode for str {
    #[inline]
    fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
        out.push_str(self)
    }
}
impl Encode for String {
    #[inline]
    fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
        out.push_str(self)
    }
}
impl<'a> Decode<'a> for &'a str {
    #[inline(always)]
    fn decode(value: Value<'a>, _: &FieldIds) -> Result<Self, FieldError> {
        value.as_str().ok_or_else(|| FieldError::wrong_type("a string", value))
    }
}
impl Decode<'_> for String {
    #[inline(always)]
    fn decode(value: Value<'_>, _: &FieldIds) -> Result<Self, FieldError> {
        value.as_str().map(str::to_owned).ok_or_else(|| FieldError::wrong_type("a string", value))
    }
}
impl Decode<'_> for Box<str> {
    #[inline(always)]
    fn decode(value: Value<'_>, _: &FieldIds) -> Result<Self, FieldError> {
        value.as_str().map(Box::from).ok_or_else(|| FieldError::wrong_type("a string", value))
    }
}

impl Encode for char {
    #[inline]
    fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
        out.push_str(self.encode_utf8(&mut [0; 4]))
    }
}
impl Decode<'_> for char {
    #[inline(always)]
    fn decode(value: Value<'_>, _: &FieldIds) -> Result<Self, FieldError> {
        let text = value.as_str().ok_or_else(|| FieldError::wrong_type("a one-character string", value))?;
        let mut chars = text.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => Ok(c),
            _ => Err(FieldError::wrong_type("a one-character string", value)),
        }
    }
}

// ------------------------------------------------------------------ containers

impl<T: Encode + ?Sized> Encode for &T {
    #[inline]
    fn encode(&self, out: &mut Encoder<'_>, ids: &FieldIds) -> Result<(), EncodeError> {
        (**self).encode(out, ids)
    }
    fn field_names(visit: &mut dyn FnMut(FieldNames) -> bool) {
        T::field_names(visit)
    }
    #[inline]
    fn encodes_null(&self) -> bool {
        (**self).encodes_null()
    }
}

impl<T: Encode + ?Sized> Encode for Box<T> {
    #[inline]
    fn encode(&self, out: &mut Encoder<'_>, ids: &FieldIds) -> Result<(), EncodeError> {
        (**self).encode(out, ids)
    }
    fn field_names(visit: &mut dyn FnMut(FieldNames) -> bool) {
        T::field_names(visit)
    }
    #[inline]
    fn encodes_null(&self) -> bool {
        (**self).encodes_null()
    }
}
impl<'a, T: Decode<'a>> Decode<'a> for Box<T> {
    #[inline]
    fn decode(value: Value<'a>, ids: &FieldIds) -> Result<Self, FieldError> {
        T::decode(value, ids).map(Box::new)
    }
    fn missing() -> Option<Self> {
        T::missing().map(Box::new)
    }
}

impl<T: Encode> Encode for Option<T> {
    #[inline]
    fn encode(&self, out: &mut Encoder<'_>, ids: &FieldIds) -> Result<(), EncodeError> {
        match self {
            Some(value) if value.encodes_null() => Err(some_null()),
            Some(value) => value.encode(out, ids),
            None => out.push_null(),
        }
    }
    fn field_names(visit: &mut dyn FnMut(FieldNames) -> bool) {
        T::field_names(visit)
    }
    #[inline]
    fn encodes_null(&self) -> bool {
        self.is_none()
    }
}

/// `Some` of a value written as null (see [`Encode::encodes_null`]).
#[cold]
fn some_null() -> EncodeError {
    EncodeError::Message(
        "`Some` of a value written as null (a nested `Option`'s `Some(None)`, a unit struct or `()`) would read back as `None`".into(),
    )
}
impl<'a, T: Decode<'a>> Decode<'a> for Option<T> {
    #[inline]
    fn decode(value: Value<'a>, ids: &FieldIds) -> Result<Self, FieldError> {
        if value.is_null() {
            return Ok(None);
        }
        T::decode(value, ids).map(Some)
    }
    fn missing() -> Option<Self> {
        Some(None)
    }
}

impl<T: Encode> Encode for [T] {
    fn encode(&self, out: &mut Encoder<'_>, ids: &FieldIds) -> Result<(), EncodeError> {
        out.begin_array()?;
        for item in self {
            item.encode(out, ids)?;
        }
        out.end_array()
    }
    fn field_names(visit: &mut dyn FnMut(FieldNames) -> bool) {
        T::field_names(visit)
    }
}
impl<T: Encode> Encode for Vec<T> {
    #[inline]
    fn encode(&self, out: &mut Encoder<'_>, ids: &FieldIds) -> Result<(), EncodeError> {
        self.as_slice().encode(out, ids)
    }
    fn field_names(visit: &mut dyn FnMut(FieldNames) -> bool) {
        T::field_names(visit)
    }
}
impl<'a, T: Decode<'a>> Decode<'a> for Vec<T> {
    fn decode(value: Value<'a>, ids: &FieldIds) -> Result<Self, FieldError> {
        let array = value.as_array().ok_or_else(|| FieldError::wrong_type("an array", value))?;
        collect_sized(
            array.len(),
            array.iter().enumerate().map(|(index, item)| T::decode(item, ids).map_err(|error| error.in_element(index))),
        )
    }
}

impl<T: Encode, S> Encode for HashMap<String, T, S> {
    /// Entries in key order, as a `BTreeMap` writes them: a key a shared-key table lacks gets
    /// its id in the order keys are met, so iteration order (another for each equal map) would
    /// give equal maps other bytes, and an upsert of the stored record would be `Updated`.
    fn encode(&self, out: &mut Encoder<'_>, ids: &FieldIds) -> Result<(), EncodeError> {
        let mut entries: Vec<(&String, &T)> = self.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        out.begin_dict()?;
        for (key, value) in entries {
            out.key(key)?;
            value.encode(out, ids)?;
        }
        out.end_dict()
    }
    fn field_names(visit: &mut dyn FnMut(FieldNames) -> bool) {
        T::field_names(visit)
    }
}
impl<'a, T: Decode<'a>, S: std::hash::BuildHasher + Default> Decode<'a> for HashMap<String, T, S> {
    fn decode(value: Value<'a>, ids: &FieldIds) -> Result<Self, FieldError> {
        let dict = value.as_dict().ok_or_else(|| FieldError::wrong_type("a map", value))?;
        let mut map = HashMap::with_capacity_and_hasher(dict.len(), S::default());
        for (key, item) in dict.iter() {
            map.insert(key.to_owned(), T::decode(item, ids).map_err(|error| error.in_field(key))?);
        }
        Ok(map)
    }
}

impl<T: Encode> Encode for BTreeMap<String, T> {
    fn encode(&self, out: &mut Encoder<'_>, ids: &FieldIds) -> Result<(), EncodeError> {
        out.begin_dict()?;
        for (key, value) in self {
            out.key(key)?;
            value.encode(out, ids)?;
        }
        out.end_dict()
    }
    fn field_names(visit: &mut dyn FnMut(FieldNames) -> bool) {
        T::field_names(visit)
    }
}
impl<'a, T: Decode<'a>> Decode<'a> for BTreeMap<String, T> {
    fn decode(value: Value<'a>, ids: &FieldIds) -> Result<Self, FieldError> {
        let dict = value.as_dict().ok_or_else(|| FieldError::wrong_type("a map", value))?;
        dict.iter().map(|(key, item)| Ok((key.to_owned(), T::decode(item, ids).map_err(|error| error.in_field(key))?))).collect()
    }
}

impl Encode for () {
    #[inline]
    fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
        out.push_null()
    }
    #[inline]
    fn encodes_null(&self) -> bool {
        true
    }
}

impl Decode<'_> for () {
    #[inline(always)]
    fn decode(value: Value<'_>, _: &FieldIds) -> Result<Self, FieldError> {
        if value.is_null() { Ok(()) } else { Err(FieldError::wrong_type("null", value)) }
    }
}

/// A value read from any document is written as a copy of itself (see
/// [`Encoder::push_value`]), with its dict keys by name: so [`encode_into`] turns a value of a
/// document that uses shared keys into a standalone one, reusing the thread's encoder buffers.
///
/// ```
/// use tessera_value::codec::{encode_into, FieldIds};
/// use tessera_value::{Doc, Encoder, SharedKeys};
/// let mut keys = SharedKeys::new();
/// keys.add("name").unwrap();
/// let mut with_keys = Encoder::with_shared_keys(&keys);
/// with_keys.begin_dict()?;
/// with_keys.key("name")?;
/// with_keys.push_str("Ada")?;
/// with_keys.end_dict()?;
/// let with_keys = with_keys.finish()?;
/// assert!(Doc::from_untrusted(&with_keys).is_err(), "needs its shared keys");
/// let root = Doc::from_untrusted_with_keys(&with_keys, &keys).unwrap().root();
/// let mut standalone = Vec::new();
/// encode_into(&root, None, &FieldIds::default(), &mut standalone)?;
/// assert_eq!(Doc::from_untrusted(&standalone).unwrap().root().to_json(), r#"{"name":"Ada"}"#);
/// # Ok::<(), tessera_value::EncodeError>(())
/// ```
impl Encode for Value<'_> {
    #[inline]
    fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
        out.push_value(*self)
    }
}

// ------------------------------------------------------------------ views

/// How a field is read in place from a stored record: strings as `&str` borrowed from the
/// document, scalars as values, anything else decoded (see [`Decode`]).
///
/// ```
/// use tessera_value::codec::{FieldIds, View};
/// let bytes = tessera_value::from_json(br#""in place""#).unwrap();
/// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
/// let text: &str = <String as View>::view(doc.root(), &FieldIds::default()).unwrap();
/// assert_eq!(text, "in place");
/// ```
pub trait View<'a> {
    /// What a view of this type gives.
    ///
    /// ```
    /// use tessera_value::codec::View;
    /// let text: <String as View<'_>>::Out = "borrowed"; // a view of a String is a &str
    /// assert_eq!(text.len(), 8);
    /// ```
    type Out;
    /// Reads the value in place.
    ///
    /// ```
    /// use tessera_value::codec::{FieldIds, View};
    /// let bytes = tessera_value::from_json(br#"["a", null]"#).unwrap();
    /// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
    /// let items = <Vec<Option<String>> as View>::view(doc.root(), &FieldIds::default()).unwrap();
    /// assert_eq!(items, [Some("a"), None]);
    /// ```
    fn view(value: Value<'a>, ids: &FieldIds) -> Result<Self::Out, FieldError>;
    /// The view of a missing field: `Some(None)` for an `Option`, `None` (an error) otherwise.
    ///
    /// ```
    /// use tessera_value::codec::View;
    /// assert_eq!(<Option<String> as View>::view_missing(), Some(None));
    /// assert!(<String as View>::view_missing().is_none());
    /// ```
    fn view_missing() -> Option<Self::Out> {
        None
    }
}

/// Implements [`View`] as a full decode, for types with nothing to borrow.
#[macro_export]
#[doc(hidden)]
macro_rules! view_by_decode {
    ($($type:ty),* $(,)?) => {$(
        impl<'a> $crate::codec::View<'a> for $type {
            type Out = $type;
            #[inline]
            fn view(value: $crate::Value<'a>, ids: &$crate::codec::FieldIds) -> Result<$type, $crate::codec::FieldError> {
                <$type as $crate::codec::Decode<'a>>::decode(value, ids)
            }
        }
    )*};
}
view_by_decode!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize, f32, f64, bool, char, ());

impl<'a> View<'a> for String {
    type Out = &'a str;
    #[inline]
    fn view(value: Value<'a>, ids: &FieldIds) -> Result<&'a str, FieldError> {
        <&'a str>::decode(value, ids)
    }
}

impl<'a> View<'a> for Box<str> {
    type Out = &'a str;
    #[inline]
    fn view(value: Value<'a>, ids: &FieldIds) -> Result<&'a str, FieldError> {
        <&'a str>::decode(value, ids)
    }
}

impl<'a, T: View<'a>> View<'a> for Option<T> {
    type Out = Option<T::Out>;
    #[inline]
    fn view(value: Value<'a>, ids: &FieldIds) -> Result<Self::Out, FieldError> {
        if value.is_null() {
            return Ok(None);
        }
        T::view(value, ids).map(Some)
    }
    fn view_missing() -> Option<Self::Out> {
        Some(None)
    }
}

impl<'a, T: View<'a>> View<'a> for Box<T> {
    type Out = T::Out;
    #[inline]
    fn view(value: Value<'a>, ids: &FieldIds) -> Result<Self::Out, FieldError> {
        T::view(value, ids)
    }
    fn view_missing() -> Option<Self::Out> {
        T::view_missing()
    }
}

impl<'a, T: View<'a>> View<'a> for Vec<T> {
    type Out = Vec<T::Out>;
    fn view(value: Value<'a>, ids: &FieldIds) -> Result<Self::Out, FieldError> {
        let array = value.as_array().ok_or_else(|| FieldError::wrong_type("an array", value))?;
        collect_sized(
            array.len(),
            array.iter().enumerate().map(|(index, item)| T::view(item, ids).map_err(|error| error.in_element(index))),
        )
    }
}

impl<'a, T: View<'a>, S> View<'a> for HashMap<String, T, S> {
    type Out = Vec<(&'a str, T::Out)>;
    fn view(value: Value<'a>, ids: &FieldIds) -> Result<Self::Out, FieldError> {
        let dict = value.as_dict().ok_or_else(|| FieldError::wrong_type("a map", value))?;
        collect_sized(dict.len(), dict.iter().map(|(key, item)| Ok((key, T::view(item, ids).map_err(|error| error.in_field(key))?))))
    }
}

impl<'a, T: View<'a>> View<'a> for BTreeMap<String, T> {
    type Out = Vec<(&'a str, T::Out)>;
    fn view(value: Value<'a>, ids: &FieldIds) -> Result<Self::Out, FieldError> {
        let dict = value.as_dict().ok_or_else(|| FieldError::wrong_type("a map", value))?;
        collect_sized(dict.len(), dict.iter().map(|(key, item)| Ok((key, T::view(item, ids).map_err(|error| error.in_field(key))?))))
    }
}

/// Views field `index` of `names` in `dict` (see [`decode_field`]).
///
/// ```
/// use tessera_value::codec::{view_field, FieldIds};
/// static NAMES: &[&str] = &["name"];
/// let bytes = tessera_value::from_json(br#"{"name": "Ada"}"#).unwrap();
/// let doc = tessera_value::Doc::from_untrusted(&bytes).unwrap();
/// let dict = doc.root().as_dict().unwrap();
/// let name: &str = view_field::<String>(&dict, None, NAMES, 0, &FieldIds::default()).unwrap();
/// assert_eq!(name, "Ada");
/// ```
#[inline]
pub fn view_field<'a, T: View<'a>>(
    dict: &Dict<'a>,
    fields: Option<ResolvedFields<'_>>,
    names: FieldNames,
    index: usize,
    all: &FieldIds,
) -> Result<T::Out, FieldError> {
    match field_value(dict, fields, names, index) {
        Some(value) => T::view(value, all).map_err(|error| error.in_field(names[index])),
        None => T::view_missing().ok_or_else(|| FieldError::missing().in_field(names[index])),
    }
}
