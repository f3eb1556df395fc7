//! Copy-on-write editing of a document, re-encoded as a new document or amended in place.
//!
//! A [`Mutable`] starts as a reference to an original value. Reaching into a container to
//! change it materializes that one container (its children stay references), so the cost of
//! an edit is proportional to the path edited, not the document.
//!
//! [`MutableDoc::amend`] encodes the result as the original bytes followed by only what
//! changed: unchanged subtrees are pointed at where they already are.

use crate::encoder::Encoder;
use crate::error::{EncodeError, PathError};
use crate::reader::{Doc, Kind, Value};

/// A value being edited: an untouched original, a new scalar, or a materialized container.
///
/// ```
/// use tessera_value::{from_json, Doc, MutableDoc};
/// let bytes = from_json(br#"{"n": 1}"#)?;
/// let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes)?);
/// let root = edit.root_mut();
/// root.set("n", tessera_value::Mutable::Null)?;
/// root.set("list", tessera_value::Mutable::Array(vec![2i64.into(), "x".into()]))?;
/// let edited = edit.encode()?;
/// assert_eq!(Doc::from_untrusted(&edited)?.root().to_json(), r#"{"n":null,"list":[2,"x"]}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub enum Mutable<'a> {
    /// A value of the original document, unchanged.
    Original(Value<'a>),
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A double.
    Float(f64),
    /// A string.
    String(String),
    /// Binary data.
    Binary(Vec<u8>),
    /// An array being edited.
    Array(Vec<Mutable<'a>>),
    /// A dict being edited, in entry order.
    Dict(Vec<(String, Mutable<'a>)>),
}

/// Why an edit could not be made.
///
/// ```
/// use tessera_value::{from_json, Doc, MutableDoc, MutateError};
/// let bytes = from_json(br#"{"tags": ["a"]}"#).unwrap();
/// let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes).unwrap());
/// let root = edit.root_mut();
/// assert_eq!(root.push(1i64), Err(MutateError::NotAnArray));
/// assert_eq!(root.path_mut("tags")?.set_index(3, "b"), Err(MutateError::IndexOutOfRange { index: 3, len: 1 }));
/// assert_eq!(root.path_mut("tags[0].x").unwrap_err(), MutateError::NotADict);
/// assert_eq!(root.path_mut("missing").unwrap_err(), MutateError::MissingStep { step: 0 });
/// # Ok::<(), MutateError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MutateError {
    /// A dict operation on something that is not a dict.
    #[error("not a dict")]
    NotADict,
    /// An array operation on something that is not an array.
    #[error("not an array")]
    NotAnArray,
    /// An array index at or past the end.
    #[error("index {index} out of range for length {len}")]
    IndexOutOfRange {
        /// The index given.
        index: usize,
        /// The array's length.
        len: usize,
    },
    /// The path does not parse.
    #[error(transparent)]
    Path(#[from] PathError),
    /// A step of the path does not exist.
    #[error("path step {step} does not exist")]
    MissingStep {
        /// 0-based step number.
        step: usize,
    },
}

macro_rules! from_scalar {
    ($($type:ty => $variant:ident $(as $cast:ty)?),*) => {$(
        impl From<$type> for Mutable<'_> {
            fn from(value: $type) -> Self {
                Mutable::$variant(value $(as $cast)?)
            }
        }
    )*};
}

from_scalar!(bool => Bool, i64 => Int, i32 => Int as i64, u32 => Int as i64, u64 => UInt, f64 => Float, String => String, Vec<u8> => Binary);

impl From<&str> for Mutable<'_> {
    fn from(value: &str) -> Self {
        Mutable::String(value.to_owned())
    }
}

impl<'a> From<Value<'a>> for Mutable<'a> {
    fn from(value: Value<'a>) -> Self {
        Mutable::Original(value)
    }
}

impl<'a> Mutable<'a> {
    /// Turns an original container into an editable one whose children are originals.
    fn materialize(&mut self) {
        if let Mutable::Original(value) = *self {
            match value.kind() {
                Kind::Array => {
                    let array = value.as_array().expect("kind is array");
                    *self = Mutable::Array(array.iter().map(Mutable::Original).collect());
                }
                Kind::Dict => {
                    let dict = value.as_dict().expect("kind is dict");
                    *self = Mutable::Dict(dict.iter().map(|(k, v)| (k.to_owned(), Mutable::Original(v))).collect());
                }
                _ => {}
            }
        }
    }

    fn dict_entries(&mut self) -> Result<&mut Vec<(String, Mutable<'a>)>, MutateError> {
        self.materialize();
        match self {
            Mutable::Dict(entries) => Ok(entries),
            _ => Err(MutateError::NotADict),
        }
    }

    fn array_items(&mut self) -> Result<&mut Vec<Mutable<'a>>, MutateError> {
        self.materialize();
        match self {
            Mutable::Array(items) => Ok(items),
            _ => Err(MutateError::NotAnArray),
        }
    }

    /// The dict entry `key`, editable.
    ///
    /// ```
    /// use tessera_value::{from_json, Doc, MutableDoc};
    /// let bytes = from_json(br#"{"a": {"b": 1}}"#)?;
    /// let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes)?);
    /// let inner = edit.root_mut().get_mut("a")?.expect("a exists");
    /// inner.set("b", 2i64)?;
    /// assert!(edit.root_mut().get_mut("z")?.is_none());
    /// let edited = edit.encode()?;
    /// assert_eq!(Doc::from_untrusted(&edited)?.root().to_json(), r#"{"a":{"b":2}}"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_mut(&mut self, key: &str) -> Result<Option<&mut Mutable<'a>>, MutateError> {
        Ok(self.dict_entries()?.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v))
    }

    /// The array element `index`, editable.
    ///
    /// ```
    /// use tessera_value::{from_json, Doc, MutableDoc};
    /// let bytes = from_json(br#"[[1], [2]]"#)?;
    /// let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes)?);
    /// edit.root_mut().index_mut(1)?.expect("element 1").push(3i64)?;
    /// assert!(edit.root_mut().index_mut(2)?.is_none());
    /// let edited = edit.encode()?;
    /// assert_eq!(Doc::from_untrusted(&edited)?.root().to_json(), r#"[[1],[2,3]]"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn index_mut(&mut self, index: usize) -> Result<Option<&mut Mutable<'a>>, MutateError> {
        Ok(self.array_items()?.get_mut(index))
    }

    /// Sets dict entry `key`, replacing any value it had.
    ///
    /// ```
    /// use tessera_value::{from_json, Doc, MutableDoc};
    /// let bytes = from_json(br#"{"a": 1}"#)?;
    /// let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes)?);
    /// edit.root_mut().set("a", "replaced")?;
    /// edit.root_mut().set("b", true)?;
    /// let edited = edit.encode()?;
    /// assert_eq!(Doc::from_untrusted(&edited)?.root().to_json(), r#"{"a":"replaced","b":true}"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set(&mut self, key: &str, value: impl Into<Mutable<'a>>) -> Result<(), MutateError> {
        let value = value.into();
        let entries = self.dict_entries()?;
        match entries.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value,
            None => entries.push((key.to_owned(), value)),
        }
        Ok(())
    }

    /// Removes dict entry `key`, returning its value.
    ///
    /// ```
    /// use tessera_value::{from_json, Doc, MutableDoc};
    /// let bytes = from_json(br#"{"a": 1, "b": 2}"#)?;
    /// let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes)?);
    /// let removed = edit.root_mut().remove("a")?;
    /// assert!(matches!(removed, Some(tessera_value::Mutable::Original(value)) if value.as_i64() == Some(1)));
    /// let edited = edit.encode()?;
    /// assert_eq!(Doc::from_untrusted(&edited)?.root().to_json(), r#"{"b":2}"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remove(&mut self, key: &str) -> Result<Option<Mutable<'a>>, MutateError> {
        let entries = self.dict_entries()?;
        Ok(entries.iter().position(|(k, _)| k == key).map(|index| entries.remove(index).1))
    }

    /// Appends to an array.
    ///
    /// ```
    /// use tessera_value::{from_json, Doc, MutableDoc};
    /// let bytes = from_json(br#"["a"]"#)?;
    /// let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes)?);
    /// edit.root_mut().push("b")?;
    /// edit.root_mut().push(3i64)?;
    /// let edited = edit.encode()?;
    /// assert_eq!(Doc::from_untrusted(&edited)?.root().to_json(), r#"["a","b",3]"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn push(&mut self, value: impl Into<Mutable<'a>>) -> Result<(), MutateError> {
        self.array_items()?.push(value.into());
        Ok(())
    }

    /// Replaces array element `index`.
    ///
    /// ```
    /// use tessera_value::{from_json, Doc, MutableDoc};
    /// let bytes = from_json(br#"[1, 2]"#)?;
    /// let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes)?);
    /// edit.root_mut().set_index(0, 10.5)?;
    /// let edited = edit.encode()?;
    /// assert_eq!(Doc::from_untrusted(&edited)?.root().to_json(), r#"[10.5,2]"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_index(&mut self, index: usize, value: impl Into<Mutable<'a>>) -> Result<(), MutateError> {
        let items = self.array_items()?;
        let len = items.len();
        let slot = items.get_mut(index).ok_or(MutateError::IndexOutOfRange { index, len })?;
        *slot = value.into();
        Ok(())
    }

    /// Removes array element `index`, shifting the rest down.
    ///
    /// ```
    /// use tessera_value::{from_json, Doc, MutableDoc};
    /// let bytes = from_json(br#"["a", "b", "c"]"#)?;
    /// let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes)?);
    /// let removed = edit.root_mut().remove_index(1)?;
    /// assert!(matches!(removed, tessera_value::Mutable::Original(value) if value.as_str() == Some("b")));
    /// let edited = edit.encode()?;
    /// assert_eq!(Doc::from_untrusted(&edited)?.root().to_json(), r#"["a","c"]"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remove_index(&mut self, index: usize) -> Result<Mutable<'a>, MutateError> {
        let items = self.array_items()?;
        let len = items.len();
        if index >= len {
            return Err(MutateError::IndexOutOfRange { index, len });
        }
        Ok(items.remove(index))
    }

    /// Follows a key path (see [`Value::path`]) to an editable value.
    ///
    /// ```
    /// use tessera_value::{from_json, Doc, MutableDoc};
    /// let bytes = from_json(br#"{"people": [{"name": "Ada"}]}"#)?;
    /// let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes)?);
    /// edit.root_mut().path_mut("people[0]")?.set("age", 36i64)?;
    /// let edited = edit.encode()?;
    /// assert_eq!(Doc::from_untrusted(&edited)?.root().to_json(), r#"{"people":[{"name":"Ada","age":36}]}"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn path_mut(&mut self, path: &str) -> Result<&mut Mutable<'a>, MutateError> {
        let mut current = self;
        for (number, step) in crate::path::parse(path)?.into_iter().enumerate() {
            let next = match step {
                crate::path::Step::Key(key) => current.get_mut(key)?,
                crate::path::Step::Index(index) => current.index_mut(index)?,
            };
            current = next.ok_or(MutateError::MissingStep { step: number })?;
        }
        Ok(current)
    }

    fn encode_into(&self, encoder: &mut Encoder<'_>, depth: usize) -> Result<(), EncodeError> {
        if depth > crate::layout::HEIGHT_MAX as usize {
            return Err(EncodeError::TooDeep(crate::layout::HEIGHT_MAX));
        }
        match self {
            Mutable::Original(value) => encoder.push_value(*value),
            Mutable::Null => encoder.push_null(),
            Mutable::Bool(v) => encoder.push_bool(*v),
            Mutable::Int(v) => encoder.push_i64(*v),
            Mutable::UInt(v) => encoder.push_u64(*v),
            Mutable::Float(v) => encoder.push_f64(*v),
            Mutable::String(v) => encoder.push_str(v),
            Mutable::Binary(v) => encoder.push_bytes(v),
            Mutable::Array(items) => {
                encoder.begin_array()?;
                for item in items {
                    item.encode_into(encoder, depth + 1)?;
                }
                encoder.end_array()
            }
            Mutable::Dict(entries) => {
                encoder.begin_dict()?;
                for (key, value) in entries {
                    encoder.key(key)?;
                    value.encode_into(encoder, depth + 1)?;
                }
                encoder.end_dict()
            }
        }
    }
}

/// A document opened for editing.
///
/// ```
/// use tessera_value::{from_json, Doc, MutableDoc};
/// let bytes = from_json(br#"{"name": "Ada", "tags": ["a"]}"#).unwrap();
/// let doc = Doc::from_untrusted(&bytes).unwrap();
/// let mut edit = MutableDoc::new(doc);
/// edit.root_mut().set("age", 36i64).unwrap();
/// edit.root_mut().path_mut("tags").unwrap().push("b").unwrap();
/// let fresh = edit.encode().unwrap();
/// let amended = edit.amend().unwrap();
/// assert!(amended.starts_with(&bytes));
/// for out in [&fresh, &amended] {
///     let root = Doc::from_untrusted(out).unwrap().root();
///     assert_eq!(root.to_json(), r#"{"name":"Ada","tags":["a","b"],"age":36}"#);
/// }
/// ```
pub struct MutableDoc<'a> {
    doc: Doc<'a>,
    root: Mutable<'a>,
}

impl<'a> MutableDoc<'a> {
    /// Starts editing `doc`; nothing is copied until a container is changed.
    ///
    /// ```
    /// use tessera_value::{from_json, Doc, MutableDoc};
    /// let bytes = from_json(br#"{"a": 1}"#)?;
    /// let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes)?);
    /// // Nothing changed: the encoding holds the same value.
    /// let edited = edit.encode()?;
    /// assert_eq!(Doc::from_untrusted(&edited)?.root().to_json(), r#"{"a":1}"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(doc: Doc<'a>) -> Self {
        MutableDoc { doc, root: Mutable::Original(doc.root()) }
    }

    /// The root, editable.
    ///
    /// ```
    /// use tessera_value::{from_json, Doc, MutableDoc};
    /// let bytes = from_json(br#""old""#)?;
    /// let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes)?);
    /// *edit.root_mut() = "new".into();
    /// let edited = edit.encode()?;
    /// assert_eq!(Doc::from_untrusted(&edited)?.root().to_json(), r#""new""#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn root_mut(&mut self) -> &mut Mutable<'a> {
        &mut self.root
    }

    /// Encodes the edited document as a new, self-contained document.
    ///
    /// ```
    /// use tessera_value::{from_json, Doc, MutableDoc};
    /// let bytes = from_json(br#"{"a": [1, 2]}"#)?;
    /// let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes)?);
    /// edit.root_mut().remove("a")?;
    /// assert!(edit.encode()?.len() < bytes.len());
    /// let edited = edit.encode()?;
    /// assert_eq!(Doc::from_untrusted(&edited)?.root().to_json(), r#"{}"#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut encoder = match self.doc.shared_keys() {
            Some(shared) => Encoder::with_shared_keys(shared),
            None => Encoder::new(),
        };
        self.root.encode_into(&mut encoder, 0)?;
        encoder.finish()
    }

    /// Encodes the edited document as the original bytes followed by an appended part that
    /// points back at every unchanged subtree. The result starts with the original bytes.
    ///
    /// A subtree placed in more than one place is pointed at while the tree the document
    /// stands for stays within the format's bound (rule 9 of docs/format.md: 4 items per
    /// byte), and copied beyond it. Known limit: a value and one of its own descendants, each
    /// placed once, are both pointed at uncounted; a long chain of amends each doing so can
    /// make a document that validation refuses as too shared.
    ///
    /// ```
    /// use tessera_value::{from_json, Doc, MutableDoc};
    /// let bytes = from_json(br#"{"big": "a string long enough to be worth keeping", "n": 1}"#)?;
    /// let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes)?);
    /// edit.root_mut().set("n", 2i64)?;
    /// let amended = edit.amend()?;
    /// assert_eq!(&amended[..bytes.len()], &bytes[..]); // the original bytes, then the changes
    /// assert_eq!(Doc::from_untrusted(&amended)?.root().get("n").unwrap().as_i64(), Some(2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn amend(&self) -> Result<Vec<u8>, EncodeError> {
        let mut encoder = Encoder::amend(self.doc);
        self.root.encode_into(&mut encoder, 0)?;
        encoder.finish()
    }
}
