//! Shared keys: a table, kept outside documents, that maps frequent dict keys to small integers.
//!
//! A database keeps one table per collection, so that every record stores a 1-byte key id
//! instead of a key string. The table only grows: ids are never reused or renumbered, so a
//! document encoded against the first `n` keys reads correctly with any later table.

/// Most keys a table may hold.
///
/// ```
/// use tessera_value::{SharedKeys, SharedKeysError, SHARED_KEYS_COUNT_MAX};
/// let mut keys = SharedKeys::new();
/// for id in 0..SHARED_KEYS_COUNT_MAX {
///     keys.add(&id.to_string()).unwrap();
/// }
/// assert_eq!(keys.add("one more"), Err(SharedKeysError::Full));
/// assert_eq!(keys.add("7"), Ok(7)); // a key already there is still found
/// ```
pub const SHARED_KEYS_COUNT_MAX: usize = 1 << 20;
/// Longest key a table accepts.
///
/// ```
/// use tessera_value::{SharedKeys, SharedKeysError, SHARED_KEY_LEN_MAX};
/// let mut keys = SharedKeys::new();
/// assert_eq!(keys.add(&"k".repeat(SHARED_KEY_LEN_MAX)), Ok(0));
/// assert_eq!(keys.add(&"k".repeat(SHARED_KEY_LEN_MAX + 1)), Err(SharedKeysError::KeyTooLong));
/// ```
pub const SHARED_KEY_LEN_MAX: usize = 4096;

/// An append-only table of dict keys.
///
/// ```
/// use tessera_value::{SharedKeys, Encoder, Doc};
/// let mut keys = SharedKeys::new();
/// keys.add("name").unwrap();
/// let mut enc = Encoder::with_shared_keys(&keys);
/// enc.begin_dict().unwrap();
/// enc.key("name").unwrap();
/// enc.push_str("Ada").unwrap();
/// enc.end_dict().unwrap();
/// let bytes = enc.finish().unwrap();
/// let doc = Doc::from_untrusted_with_keys(&bytes, &keys).unwrap();
/// assert_eq!(doc.root().get("name").unwrap().as_str(), Some("Ada"));
/// ```
#[derive(Debug)]
pub struct SharedKeys {
    names: Vec<Box<str>>,
    ids: rustc_hash::FxHashMap<Box<str>, u32>,
    /// This table's [`SharedKeys::identity`].
    identity: u64,
}

/// The identity the next table gets.
static NEXT_IDENTITY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn fresh_identity() -> u64 {
    NEXT_IDENTITY.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Default for SharedKeys {
    fn default() -> Self {
        SharedKeys { names: Vec::new(), ids: Default::default(), identity: fresh_identity() }
    }
}

/// A clone is a new table: it may grow apart from the original, so it gets its own identity.
impl Clone for SharedKeys {
    fn clone(&self) -> Self {
        SharedKeys { names: self.names.clone(), ids: self.ids.clone(), identity: fresh_identity() }
    }
}

/// Tables are equal when they hold the same names under the same ids.
impl PartialEq for SharedKeys {
    fn eq(&self, other: &Self) -> bool {
        self.names == other.names
    }
}
impl Eq for SharedKeys {}

/// Why a key was not added to a [`SharedKeys`] table.
///
/// ```
/// use tessera_value::{SharedKeys, SharedKeysError};
/// assert_eq!(SharedKeys::from_bytes(&[5]), Err(SharedKeysError::Malformed)); // 5 keys promised, none there
/// assert_eq!(SharedKeysError::Malformed.to_string(), "malformed shared-key table bytes");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SharedKeysError {
    /// The table holds [`SHARED_KEYS_COUNT_MAX`] keys already.
    #[error("shared-key table is full ({SHARED_KEYS_COUNT_MAX} keys)")]
    Full,
    /// The key is longer than [`SHARED_KEY_LEN_MAX`].
    #[error("shared key longer than {SHARED_KEY_LEN_MAX} bytes")]
    KeyTooLong,
    /// Serialized table bytes are malformed.
    #[error("malformed shared-key table bytes")]
    Malformed,
}

impl SharedKeys {
    /// An empty table.
    ///
    /// ```
    /// let keys = tessera_value::SharedKeys::new();
    /// assert!(keys.is_empty());
    /// assert_eq!(keys.id("name"), None);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys.
    ///
    /// ```
    /// let mut keys = tessera_value::SharedKeys::new();
    /// keys.add("a").unwrap();
    /// keys.add("a").unwrap();
    /// assert_eq!(keys.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True if the table has no keys.
    ///
    /// ```
    /// let mut keys = tessera_value::SharedKeys::new();
    /// assert!(keys.is_empty());
    /// keys.add("a").unwrap();
    /// assert!(!keys.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Adds `name` if absent and returns its id.
    ///
    /// ```
    /// let mut keys = tessera_value::SharedKeys::new();
    /// assert_eq!(keys.add("name"), Ok(0));
    /// assert_eq!(keys.add("age"), Ok(1));
    /// assert_eq!(keys.add("name"), Ok(0)); // already there
    /// ```
    pub fn add(&mut self, name: &str) -> Result<u32, SharedKeysError> {
        if let Some(&id) = self.ids.get(name) {
            return Ok(id);
        }
        if name.len() > SHARED_KEY_LEN_MAX {
            return Err(SharedKeysError::KeyTooLong);
        }
        if self.names.len() >= SHARED_KEYS_COUNT_MAX {
            return Err(SharedKeysError::Full);
        }
        let id = self.names.len() as u32;
        self.names.push(name.into());
        self.ids.insert(name.into(), id);
        Ok(id)
    }

    /// The id of `name`, if present.
    ///
    /// ```
    /// let mut keys = tessera_value::SharedKeys::new();
    /// keys.add("name").unwrap();
    /// assert_eq!(keys.id("name"), Some(0));
    /// assert_eq!(keys.id("age"), None);
    /// ```
    #[inline]
    pub fn id(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    /// The id of `name` if it is among the first `limit` keys.
    #[inline]
    pub(crate) fn id_below(&self, name: &str, limit: u64) -> Option<u32> {
        self.id(name).filter(|&id| (id as u64) < limit)
    }

    /// A number that no other table in this process has, clones included. A table only
    /// grows, and an id never changes its name, so an id resolved from a table stays right for
    /// every document opened with a table of the same identity: a caller may cache ids by it.
    ///
    /// ```
    /// use tessera_value::SharedKeys;
    /// let mut keys = SharedKeys::new();
    /// let id = keys.add("name").unwrap();
    /// let identity = keys.identity();
    /// keys.add("age").unwrap();
    /// assert_eq!((keys.identity(), keys.id("name")), (identity, Some(id)), "growing keeps both");
    /// assert_ne!(keys.clone().identity(), identity, "a clone may grow apart");
    /// ```
    #[inline]
    pub fn identity(&self) -> u64 {
        self.identity
    }

    /// The key with this id.
    ///
    /// ```
    /// let mut keys = tessera_value::SharedKeys::new();
    /// let id = keys.add("name").unwrap();
    /// assert_eq!(keys.name(id), Some("name"));
    /// assert_eq!(keys.name(id + 1), None);
    /// ```
    #[inline]
    pub fn name(&self, id: u32) -> Option<&str> {
        self.names.get(id as usize).map(|s| &**s)
    }

    /// Serializes the table: a varint count, then each key as a varint length and UTF-8 bytes.
    ///
    /// ```
    /// let mut keys = tessera_value::SharedKeys::new();
    /// keys.add("ab").unwrap();
    /// assert_eq!(keys.to_bytes(), [1, 2, b'a', b'b']);
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        crate::layout::write_varint(&mut out, self.names.len() as u64);
        for name in &self.names {
            crate::layout::write_varint(&mut out, name.len() as u64);
            out.extend_from_slice(name.as_bytes());
        }
        out
    }

    /// Reads a table written by [`SharedKeys::to_bytes`].
    ///
    /// ```
    /// use tessera_value::SharedKeys;
    /// let mut keys = SharedKeys::new();
    /// keys.add("name").unwrap();
    /// keys.add("age").unwrap();
    /// let back = SharedKeys::from_bytes(&keys.to_bytes()).unwrap();
    /// assert_eq!(back, keys);
    /// assert_eq!(back.id("age"), Some(1));
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SharedKeysError> {
        use crate::layout::read_varint;
        let (count, mut pos) = read_varint(bytes, 0, bytes.len()).ok_or(SharedKeysError::Malformed)?;
        if count > SHARED_KEYS_COUNT_MAX as u64 {
            return Err(SharedKeysError::Malformed);
        }
        let mut table = SharedKeys::new();
        for _ in 0..count {
            let (len, used) = read_varint(bytes, pos, bytes.len()).ok_or(SharedKeysError::Malformed)?;
            pos += used;
            let end = pos.checked_add(len as usize).filter(|&e| e <= bytes.len()).ok_or(SharedKeysError::Malformed)?;
            let name = std::str::from_utf8(&bytes[pos..end]).map_err(|_| SharedKeysError::Malformed)?;
            if table.id(name).is_some() {
                return Err(SharedKeysError::Malformed);
            }
            table.add(name)?;
            pos = end;
        }
        if pos != bytes.len() {
            return Err(SharedKeysError::Malformed);
        }
        Ok(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_bytes_round_trip() {
        let mut keys = SharedKeys::new();
        assert_eq!(keys.add("a").unwrap(), 0);
        assert_eq!(keys.add("b").unwrap(), 1);
        assert_eq!(keys.add("a").unwrap(), 0);
        let again = SharedKeys::from_bytes(&keys.to_bytes()).unwrap();
        assert_eq!(again, keys);
        assert_eq!(again.name(1), Some("b"));
    }

    #[test]
    fn malformed_bytes_are_rejected() {
        assert_eq!(SharedKeys::from_bytes(&[]), Err(SharedKeysError::Malformed));
        assert_eq!(SharedKeys::from_bytes(&[1, 5, b'a']), Err(SharedKeysError::Malformed));
        assert_eq!(SharedKeys::from_bytes(&[2, 1, b'a', 1, b'a']), Err(SharedKeysError::Malformed));
        assert_eq!(SharedKeys::from_bytes(&[1, 1, 0xFF]), Err(SharedKeysError::Malformed));
        assert_eq!(SharedKeys::from_bytes(&[0, 0]), Err(SharedKeysError::Malformed));
    }

    #[test]
    fn long_keys_are_refused() {
        let mut keys = SharedKeys::new();
        assert_eq!(keys.add(&"x".repeat(SHARED_KEY_LEN_MAX + 1)), Err(SharedKeysError::KeyTooLong));
        assert!(keys.add(&"x".repeat(SHARED_KEY_LEN_MAX)).is_ok());
    }
}
