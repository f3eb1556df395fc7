//! `tessera._native`: the Rust side of the `tessera` Python package.
//!
//! The package's public API is Python (`python/tessera/`): dataclasses become schemas and
//! records there, and this module does the work on encoded values, with the GIL released
//! for commits, queries and waits. One job per module:
//!
//! - [`convert`]: Python objects to the binary format and back;
//! - [`errors`]: `tessera::Error` to the Python exception hierarchy;
//! - [`database`]: the open file, its handles and the write path;
//! - [`block`]: a `with db.write()` block's queue, overlay and reads;
//! - [`query`]: queries, snapshots and live subscriptions;
//! - [`dictionary`]: the dictionary;
//! - [`documents`]: field-decomposed documents;
//! - [`plan`]: records built as dataclasses straight from stored values;
//! - [`encode`]: records encoded straight from dataclass instances;
//! - [`format`](mod@format): `dumps`, `loads`, JSON and the `Value` view;
//! - [`keys`]: Python keys encoded once as stored keys.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod block;
pub mod convert;
pub mod database;
pub mod dictionary;
pub mod documents;
pub mod encode;
pub mod errors;
pub mod format;
pub mod keys;
pub mod plan;
pub mod query;
pub mod reads;

use pyo3::prelude::*;

/// The extension module.
#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<database::Database>()?;
    module.add_class::<query::QueryResult>()?;
    module.add_class::<query::Subscription>()?;
    module.add_class::<query::ObjectSubscription>()?;
    module.add_class::<query::Rows>()?;
    module.add_class::<query::Snapshot>()?;
    module.add_class::<dictionary::NativeDictionary>()?;
    module.add_class::<documents::NativeDocuments>()?;
    module.add_class::<documents::DocumentSubscription>()?;
    module.add_class::<format::ValueView>()?;
    module.add_class::<plan::Plan>()?;
    module.add_class::<encode::RecordEncoder>()?;
    module.add_class::<encode::EncodedRecord>()?;
    module.add_class::<reads::ReadSet>()?;
    module.add_class::<block::WriteBlock>()?;
    module.add_function(wrap_pyfunction!(format::dumps, module)?)?;
    module.add_function(wrap_pyfunction!(format::loads, module)?)?;
    module.add_function(wrap_pyfunction!(format::from_json, module)?)?;
    module.add_function(wrap_pyfunction!(format::to_json, module)?)?;
    module.add("NESTING_DEPTH_MAX", convert::NESTING_DEPTH_MAX)?;
    module.add("TRANSACTION_OPERATIONS_MAX", database::TRANSACTION_OPERATIONS_MAX)?;
    Ok(())
}
