//! tessera: an embedded, typed, reactive data store.
//!
//! One database file holds typed collections, field-decomposed documents and a dictionary,
//! all stored in one zero-copy binary format ([`value`]) on one storage core ([`store`]: LMDB,
//! transactions, durability levels, the change feed). Collections, live queries, documents and
//! the dictionary build on these two.
//!
//! ```
//! use tessera::value::{from_json, Doc};
//! let bytes = from_json(br#"{"title": "hello"}"#).unwrap();
//! let doc = Doc::from_untrusted(&bytes).unwrap();
//! assert_eq!(doc.root().get("title").unwrap().as_str(), Some("hello"));
//! ```
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

extern crate self as tessera;

mod check;
pub mod collection;
pub mod dictionary;
pub mod documents;
mod error;
pub mod live;
pub mod query;
pub mod store;
mod stored_doc;

pub use check::{CHECK_PROBLEMS_MAX, CheckReport, PROBLEM_KEY_BYTES_MAX, Problem};
pub use collection::{Collection, CollectionOptions, Order, Query, Record, WriteOutcome};
pub use dictionary::{DictTxn, Dictionary, DictionaryOptions};
pub use documents::{Document, Documents, DocumentsOptions, FieldHandle, FieldTransform};
pub use error::{Error, Result};
pub use live::{ObjectChange, ObjectSubscription, Policy, QuerySubscription, ResultChange};
pub use store::{
    Change, ChangeBatch, ChangeKind, ChangeStream, Consumer, Db, DbOptions, Durability, FeedEvent, FeedExtent, FeedRetention, Keyspace,
    ReadSource, ReadTxn, Snapshot, WriteTxn,
};

/// The binary document format: encoder, zero-copy reader, validator, JSON and serde.
pub use tessera_value as value;
pub use tessera_value::codec;

/// The README's examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
