//! tessera: an embedded, typed, reactive data store.
//!
//! One database file holds typed collections, field-decomposed documents and a dictionary,
//! all stored in one zero-copy binary format. The format is available now as [`value`]; the
//! storage engine, collections, live queries, documents and the dictionary are being built on
//! top of it (see the README's roadmap).
//!
//! ```
//! use tessera::value::{from_json, Doc};
//! let bytes = from_json(br#"{"title": "hello"}"#).unwrap();
//! let doc = Doc::from_untrusted(&bytes).unwrap();
//! assert_eq!(doc.root().get("title").unwrap().as_str(), Some("hello"));
//! ```
#![deny(missing_docs)]

/// The binary document format: encoder, zero-copy reader, validator, JSON and serde.
pub use tessera_value as value;

/// The README's examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
