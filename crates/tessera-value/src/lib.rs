//! tessera's binary document format: zero-copy values, validated once, JSON in and out.
//!
//! A document is a byte string that is read in place: [`Doc::from_untrusted`] checks it once in
//! linear time, [`Doc::from_trusted`] opens it in O(1), and [`Value`] reads from the bytes with
//! no parse and no copy. Documents are built with the [`Encoder`], from any `Serialize` type
//! with [`to_vec`], or from JSON text with [`from_json`]. The byte layout is specified in
//! `docs/format.md`.
//!
//! ```
//! use tessera_value::{from_json, Doc, DictKey};
//! let bytes = from_json(br#"[{"name": "Ada", "age": 36}, {"name": "Alan", "age": 41}]"#).unwrap();
//! let root = Doc::from_untrusted(&bytes).unwrap().root();
//! assert_eq!(root.path("[1].name").unwrap().unwrap().as_str(), Some("Alan"));
//! let age = DictKey::new("age");
//! let total: i64 = root.as_array().unwrap().iter()
//!     .map(|person| person.as_dict().unwrap().get_key(&age).unwrap().as_i64().unwrap())
//!     .sum();
//! assert_eq!(total, 77);
//! ```
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod codec;
mod copy;
mod de;
mod encoder;
mod eq;
mod error;
mod footer;
mod json_in;
mod json_out;
pub mod layout;
mod mutate;
mod packed;
mod packing;
mod path;
mod reader;
mod repr;
mod ser;
mod shared_keys;
mod validate;

pub use de::{from_slice, from_value};
pub use encoder::Encoder;
pub use error::{DecodeError, EncodeError, FormatError, JsonError, JsonErrorKind, PathError};
pub use json_in::{JsonOptions, from_json, from_json_with};
pub use json_out::JsonStyle;
pub use mutate::{Mutable, MutableDoc, MutateError};
pub use packed::{MATRIX_ROWS_MAX, Numbers};
pub use reader::{Array, Dict, DictKey, Doc, Kind, Value};
pub use ser::{Compound, to_shared, to_vec, to_vec_with_keys};
pub use shared_keys::{SHARED_KEY_LEN_MAX, SHARED_KEYS_COUNT_MAX, SharedKeys, SharedKeysError};
pub use validate::ValidateOptions;
