//! The one rule for names given to tessera (keyspaces, collections, document collections,
//! dictionaries): 1 to a named maximum of bytes, without NUL.
//!
//! LMDB takes a named database's name as a C string, so a NUL byte would cut it short (heed
//! panics with `NulError`); an empty name would be LMDB's unnamed main database; and a name
//! longer than [`super::KEYSPACE_NAME_LEN_MAX`], with its prefix (`tessera.documents.`, …),
//! is refused here rather than by LMDB. Each kind of name is checked as the caller gave it,
//! so that the error names what the caller wrote.

use crate::error::{Error, Result};

/// Checks `name`, a name of a `what` (`"keyspace"`, `"collection"`, `"documents"`,
/// `"dictionary"`): 1 to `len_max` bytes, no NUL byte.
pub(crate) fn check(what: &'static str, name: &str, len_max: usize) -> Result<()> {
    if name.is_empty() || name.len() > len_max || name.contains('\0') {
        return Err(Error::InvalidName { what, name: name.to_owned(), rule: format!("1..={len_max} bytes, no NUL byte") });
    }
    Ok(())
}

/// The longest name of a kind whose keyspace is `prefix` followed by the name.
pub(crate) const fn len_max_after(prefix: &str) -> usize {
    super::KEYSPACE_NAME_LEN_MAX - prefix.len()
}
