//! Index entries: computing them for a record, keeping them current on every write, and
//! building a new index over existing records in the background.
//!
//! **Multi-entry indexes.** An index whose path ends in `[]` (`tags[]`) indexes the elements of
//! the array at the path before it: a record has one entry per distinct element value (NULL
//! elements and elements that are arrays or maps other than an enum variant's one-entry map
//! have none, and neither has a record whose field is NULL or not an array). It serves `tags
//! contains VALUE` on a field that is always an array (see `plan`), and never an order or a
//! comparison of the whole field. It cannot be unique.

use super::{CollectionState, IndexState, sort_key};
use crate::Db;
use crate::error::{Error, Result};
use crate::store::{Keyspace, WriteTxn};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tessera_value::SharedKeys;

/// Records indexed per transaction by a background build: small enough that writers wait at
/// most about a millisecond for the build's transaction.
const BUILD_BATCH_RECORDS: usize = 1024;

/// The index entry's key for a record whose field has the full sort key `component` (as
/// [`component`] computes it): the index id, the component and the primary key. Unique indexes
/// key non-null values by the value alone, so that a second record with it collides.
///
/// An entry that fits in a key ([`crate::store::KEY_LEN_MAX`], 511 bytes) is exactly that, as it
/// has always been. A longer one, which only a long string makes, takes the string's
/// truncated component ([`sort_key::truncated`]: 256 escaped bytes of prefix and a hash of the
/// whole string), always followed by the primary key, in unique indexes too (two strings that
/// share the prefix and the hash still have two entries; the writer compares their records'
/// values). What still does not fit (a long string beside a primary key over 243 bytes, or
/// any value beside a primary key that leaves no room for it) is [`Error::KeySize`].
pub(crate) fn entry_key(index: &IndexState, component: &[u8], primary_key: &[u8]) -> Result<Vec<u8>> {
    let max = crate::store::KEY_LEN_MAX;
    let with_primary = !index.unique || component.first() == Some(&sort_key::TAG_NULL);
    let len = 1 + component.len() + if with_primary { primary_key.len() } else { 0 };
    if len <= max {
        let mut out = Vec::with_capacity(len);
        out.push(index.id);
        out.extend_from_slice(component);
        if with_primary {
            out.extend_from_slice(primary_key);
        }
        return Ok(out);
    }
    let Some(truncated) = sort_key::truncated(component) else { return Err(Error::KeySize { len, max }) };
    let len = 1 + truncated.len() + primary_key.len();
    if len > max {
        return Err(Error::KeySize { len, max });
    }
    let mut out = Vec::with_capacity(len);
    out.push(index.id);
    out.extend_from_slice(&truncated);
    out.extend_from_slice(primary_key);
    Ok(out)
}

/// What ends the path of a multi-entry index on an array's elements (see the module doc).
pub(crate) const ELEMENTS_SUFFIX: &str = "[]";

/// Most entries one record may have in a multi-entry index: a write of a record whose array
/// has more distinct elements is refused with [`Error::LimitExceeded`], before any change.
///
/// ```
/// use tessera::collection::{Record, ELEMENT_ENTRIES_MAX};
/// #[derive(Record)]
/// struct Post { #[record(key)] id: u32, #[record(index_elements)] tags: Vec<u32> }
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let posts = db.collection::<Post>()?;
/// let too_many = Post { id: 1, tags: (0..=ELEMENT_ENTRIES_MAX as u32).collect() };
/// assert!(matches!(db.write(|tx| posts.insert(tx, &too_many)), Err(tessera::Error::LimitExceeded { .. })));
/// assert_eq!(posts.all().count(&db)?, 0, "nothing written");
/// # Ok::<(), tessera::Error>(())
/// ```
pub const ELEMENT_ENTRIES_MAX: usize = 4096;

/// The array's path of a multi-entry index path (`tags[]` → `tags`); `None` for a plain index.
pub(crate) fn elements_of(index_path: &str) -> Option<&str> {
    index_path.strip_suffix(ELEMENTS_SUFFIX)
}

/// Why an index on `index_path` cannot be declared on records of `shape`, if it cannot: its
/// field is not in the shape, or a multi-entry index (`path[]`) is unique or not on an array.
/// Typed collections and dynamic ones (an import's header) declare indexes through this.
pub(crate) fn index_path_problem(shape: &super::TypeDesc, index_path: &str, unique: bool) -> Option<String> {
    let Some(array) = elements_of(index_path) else {
        let Some(desc) = shape.resolve(index_path) else { return Some(format!("index field `{index_path}` is not a field")) };
        return unique.then(|| not_unique_comparable(desc).map(|kind| unique_needs_scalar(index_path, kind))).flatten();
    };
    if unique {
        return Some(format!("index `{index_path}` on an array's elements cannot be unique"));
    }
    match shape.resolve(array).map(super::schema::strip_option) {
        Some(super::TypeDesc::List(_) | super::TypeDesc::Tuple(_) | super::TypeDesc::Any) => None,
        Some(_) => Some(format!("index `{index_path}` is on an array's elements, but `{array}` is not an array")),
        None => Some(format!("index field `{array}` is not a field")),
    }
}

/// What kind of value `desc` declares when a unique index could not tell two of its values
/// apart: an index entry holds a scalar's value, but only the variant of an enum with a
/// payload and only the kind of a struct, map, list or byte string.
fn not_unique_comparable(desc: &super::TypeDesc) -> Option<&'static str> {
    use super::TypeDesc;
    match desc {
        TypeDesc::Option(inner) => not_unique_comparable(inner),
        TypeDesc::Bytes => Some("a byte string"),
        TypeDesc::List(_) => Some("a list"),
        TypeDesc::Tuple(_) => Some("a tuple"),
        TypeDesc::Map(_) => Some("a map"),
        TypeDesc::Struct(_) => Some("a struct"),
        TypeDesc::Enum(variants) if variants.iter().any(|(_, payload)| payload.is_some()) => Some("an enum with payloads"),
        _ => None,
    }
}

fn unique_needs_scalar(index_path: &str, kind: &str) -> String {
    format!(
        "unique index `{index_path}` is on {kind}: a unique index holds a boolean, a number, a string or an enum without \
         payloads (its entries could not tell two other values apart, and would refuse distinct ones)"
    )
}

/// Refuses a record whose value at unique index `index`'s path, of kind `kind`, is a dict, a
/// list or bytes (which a field of any type, as dynamic collections declare, may hold): see
/// [`index_path_problem`].
fn unique_value_problem(target: &IndexTarget<'_>, index: &IndexState, kind: tessera_value::Kind, primary_key: &[u8]) -> Result<()> {
    let kind = match kind {
        tessera_value::Kind::Dict => "a dict",
        tessera_value::Kind::Array => "a list",
        tessera_value::Kind::Binary => "a byte string",
        _ => return Ok(()),
    };
    Err(Error::SchemaViolation {
        collection: target.collection.to_owned(),
        key: target.show_key(primary_key),
        path: index.path.clone(),
        problem: unique_needs_scalar(&index.path, kind),
    })
}

/// Computes the full sort keys that index `index_path` has for a stored record into `out`,
/// sorted and distinct: the field's one value (NULL included) for a plain index, the distinct
/// element values for a multi-entry index. `false` (and `out` empty) when there is no record.
/// `verified`: the record was checked against its checksum (see [`super::open_stored`]).
pub(crate) fn components(
    record: Option<&[u8]>,
    keys: &SharedKeys,
    verified: bool,
    index_path: &str,
    out: &mut Vec<Vec<u8>>,
) -> Result<bool> {
    components_in(record, keys, verified, index_path, sort_key::NumberLayout::Residual, out)
}

/// [`components`] with numbers in `layout`: `Db::check` reads the entries of a file it did
/// not migrate (a read-only handle's) as the file's format wrote them.
pub(crate) fn components_in(
    record: Option<&[u8]>,
    keys: &SharedKeys,
    verified: bool,
    index_path: &str,
    layout: sort_key::NumberLayout,
    out: &mut Vec<Vec<u8>>,
) -> Result<bool> {
    Ok(components_and_kind(record, keys, verified, index_path, layout, out)?.is_some())
}

/// [`components_in`], and what it read: `None` when there is no record, else the kind of a
/// plain index's value (`None` for a missing field or a multi-entry index), which a unique
/// index checks ([`unique_value_problem`]) without opening the record again.
fn components_and_kind(
    record: Option<&[u8]>,
    keys: &SharedKeys,
    verified: bool,
    index_path: &str,
    layout: sort_key::NumberLayout,
    out: &mut Vec<Vec<u8>>,
) -> Result<Option<Option<tessera_value::Kind>>> {
    out.clear();
    let Some(bytes) = record else { return Ok(None) };
    let doc = super::open_stored(bytes, keys, verified)?;
    Ok(Some(components_of(doc.root(), index_path, layout, out)))
}

/// [`components`] of an opened record; the kind of a plain index's value, if present.
fn components_of(
    root: tessera_value::Value<'_>,
    index_path: &str,
    layout: sort_key::NumberLayout,
    out: &mut Vec<Vec<u8>>,
) -> Option<tessera_value::Kind> {
    let Some(array_path) = elements_of(index_path) else {
        let value = crate::query::lookup(root, index_path);
        let mut component = Vec::new();
        sort_key::encode_value_in(value, layout, &mut component);
        out.push(component);
        return value.map(|value| value.kind());
    };
    let array = crate::query::lookup(root, array_path).and_then(|value| value.as_array())?;
    for element in array.iter() {
        let mut component = Vec::new();
        sort_key::encode_value_in(Some(element), layout, &mut component);
        // `contains` is never TRUE for a NULL element, nor for one that is not a scalar.
        if !matches!(component.first(), Some(&sort_key::TAG_NULL | &sort_key::TAG_OTHER)) {
            out.push(component);
        }
    }
    out.sort_unstable();
    out.dedup();
    None
}

/// The entry keys of a record's `components` in `index`, sorted and distinct (two long strings
/// may share a truncated entry); a component no entry can hold is [`Error::KeySize`].
pub(crate) fn entry_keys(index: &IndexState, components: &[Vec<u8>], primary_key: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut entries = components.iter().map(|component| entry_key(index, component, primary_key)).collect::<Result<Vec<_>>>()?;
    entries.sort_unstable();
    entries.dedup();
    Ok(entries)
}

/// Where a collection's index entries go: its name (for errors), its index keyspace, its
/// records (read to tell a unique value from another with the same truncated entry), and the
/// shared keys its records are read with.
pub(crate) struct IndexTarget<'a> {
    pub(crate) collection: &'a str,
    pub(crate) keyspace: &'a Keyspace,
    pub(crate) records: &'a Keyspace,
    pub(crate) keys: &'a SharedKeys,
    /// Shows primary keys in errors ([`super::Record::display_key`]).
    pub(crate) key_text: fn(&[u8]) -> Option<String>,
    /// The key fields' encodings, where a dynamic collection knows them and `key_text`
    /// (the record type's) is not there: keys are then shown as JSON values.
    pub(crate) key_kinds: &'a [super::KeyKind],
    /// Whether records were checked against their checksums as they were read.
    pub(crate) verified: bool,
}

impl CollectionState {
    pub(crate) fn index_target(&self) -> IndexTarget<'_> {
        IndexTarget {
            collection: &self.name,
            keyspace: &self.index_keyspace,
            records: &self.records,
            keys: &self.keys.shared,
            key_text: self.key_text,
            key_kinds: self.key_kinds.get().map_or(&[], Vec::as_slice),
            verified: self.checksums_verified,
        }
    }
}

impl IndexTarget<'_> {
    /// A primary key as text for an error.
    fn show_key(&self, key: &[u8]) -> String {
        super::show_key_with(self.key_text, self.key_kinds, key)
    }
}

/// Replaces the index entries of the record at `primary_key` (`old` → `new`; `None` is no
/// record). A unique index that already holds the new value for another key refuses the
/// write with [`Error::UniqueViolation`], and an entry too long for a key with
/// [`Error::KeySize`] — both before the first change, so that a refused call leaves the
/// transaction as it was (LMDB offers no nested transactions with `MDB_WRITEMAP`).
pub(crate) fn update_entries<'i>(
    tx: &mut WriteTxn<'_>,
    target: &IndexTarget<'_>,
    indexes: impl IntoIterator<Item = &'i IndexState>,
    primary_key: &[u8],
    old: Option<&[u8]>,
    new: Option<&[u8]>,
) -> Result<()> {
    let IndexTarget { collection, keyspace, keys, verified, .. } = *target;
    let (mut old_components, mut new_components) = (Vec::new(), Vec::new());
    let (mut removes, mut adds): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());
    for index in indexes {
        let had = components(old, keys, verified, &index.path, &mut old_components)?;
        let new_kind = components_and_kind(new, keys, verified, &index.path, sort_key::NumberLayout::Residual, &mut new_components)?;
        let has = new_kind.is_some();
        if new_components.len() > ELEMENT_ENTRIES_MAX {
            return Err(Error::LimitExceeded {
                what: "distinct elements of one record's array in a multi-entry index",
                limit: ELEMENT_ENTRIES_MAX as u64,
            });
        }
        debug_assert!(elements_of(&index.path).is_none() || !index.unique, "a multi-entry index is never unique");
        if had && has && old_components == new_components {
            continue;
        }
        // An old value no entry can hold (an index whose build failed on it) has none to remove.
        for component in old_components.iter().filter(|component| !new_components.contains(component)) {
            removes.extend(entry_key(index, component, primary_key).ok());
        }
        if index.unique
            && let Some(Some(kind)) = new_kind
        {
            unique_value_problem(target, index, kind, primary_key)?;
        }
        for component in new_components.iter().filter(|component| !old_components.contains(component)) {
            let entry = entry_key(index, component, primary_key)?;
            if index.unique
                && let Some(holder) = unique_holder(tx, target, index, &entry, component, primary_key)?
            {
                return Err(Error::UniqueViolation {
                    collection: collection.to_owned(),
                    index: index.path.clone(),
                    key: target.show_key(primary_key),
                    holder: target.show_key(&holder),
                });
            }
            adds.push(entry);
        }
    }
    // Every removal before any addition: two values may share an entry (a truncated one).
    for entry in removes {
        tx.delete(keyspace, &entry)?;
    }
    for entry in adds {
        tx.put(keyspace, &entry, primary_key)?;
    }
    Ok(())
}

/// The primary key of another record that holds the value whose full component is
/// `component` in unique index `index`, if any; `entry` is the new record's entry. A NULL has no
/// holder (NULLs may repeat). A full entry is keyed by the value alone: whoever it names holds
/// the value. A truncated entry is keyed by the prefix, the hash and the primary key, so every
/// entry with the same prefix and hash is looked at, and its record's value compared: two
/// different strings whose hashes collide are both stored, never refused.
fn unique_holder(
    tx: &WriteTxn<'_>,
    target: &IndexTarget<'_>,
    index: &IndexState,
    entry: &[u8],
    component: &[u8],
    primary_key: &[u8],
) -> Result<Option<Vec<u8>>> {
    if component.first() == Some(&sort_key::TAG_NULL) {
        return Ok(None);
    }
    if !sort_key::is_truncated(&entry[1..]) {
        return Ok(tx.get(target.keyspace, entry)?.filter(|holder| *holder != primary_key).map(<[u8]>::to_vec));
    }
    let same_hash = &entry[..entry.len() - primary_key.len()];
    let holders: Vec<Vec<u8>> = tx
        .prefix(target.keyspace, same_hash)?
        .filter_map(|found| match found {
            Ok((_, holder)) => (holder != primary_key).then(|| Ok(holder.to_vec())),
            Err(error) => Some(Err(error)),
        })
        .collect::<Result<_>>()?;
    let mut theirs = Vec::new();
    for holder in holders {
        let Some(record) = tx.get(target.records, &holder)? else {
            return Err(Error::Corrupted(format!(
                "collection {:?}: index `{}` entry {} names key {}, which has no record",
                target.collection,
                index.path,
                crate::store::key::hex(same_hash),
                target.show_key(&holder)
            )));
        };
        component_of(record, target, &holder, &index.path, &mut theirs)?;
        if theirs == component {
            return Ok(Some(holder));
        }
    }
    Ok(None)
}

/// [`component`] of a stored record that must open: a record that does not is
/// [`Error::RecordDecode`] naming it.
fn component_of(record: &[u8], target: &IndexTarget<'_>, key: &[u8], path: &str, out: &mut Vec<u8>) -> Result<()> {
    out.clear();
    let doc = super::open_stored(record, target.keys, target.verified)
        .map_err(|error| super::decode_error(target.collection, target.key_text, key, error))?;
    sort_key::encode_value(crate::query::lookup(doc.root(), path), out);
    Ok(())
}

/// Removes every entry of index `id`.
pub(crate) fn clear_index(tx: &mut WriteTxn<'_>, keyspace: &Keyspace, id: u8) -> Result<()> {
    let keys: Vec<Vec<u8>> = tx.prefix(keyspace, &[id])?.map(|entry| entry.map(|(key, _)| key.to_vec())).collect::<Result<_>>()?;
    for key in keys {
        tx.delete(keyspace, &key)?;
    }
    Ok(())
}

/// Builds the collection's unready indexes on a thread of its own, one index after another, in
/// batches. Writers keep every index current meanwhile, so records written during the build
/// are indexed by their writers and records not yet reached by the build are indexed when it
/// gets there; putting an entry twice is harmless. Queries do not use an index until it is
/// marked ready. An index whose build fails records its own failure; the others still build.
pub(crate) fn start(db: &Db, state: &Arc<CollectionState>) -> Result<()> {
    let building: Vec<u8> = state.indexes.iter().filter(|index| !index.ready.load(Ordering::Acquire)).map(|index| index.id).collect();
    let db = db.downgrade();
    let state = Arc::downgrade(state);
    std::thread::Builder::new().name("tessera-index-build".into()).spawn(move || {
        for id in building {
            let mut after: Option<Vec<u8>> = None;
            loop {
                let (Some(db), Some(state)) = (db.upgrade(), state.upgrade()) else { return };
                match build_batch(&db, &state, id, after.as_deref()) {
                    Ok(Batch::Indexed(last)) => after = Some(last),
                    Ok(Batch::Finished) => {
                        if let Err(error) = mark_ready(&db, &state, id) {
                            fail(&db, &state, id, error);
                        }
                        break;
                    }
                    // Another open owns the schema now: it builds what it declares.
                    Ok(Batch::Superseded) => return superseded(&state, id),
                    Err(error) => {
                        fail(&db, &state, id, error);
                        break;
                    }
                }
            }
        }
    })?;
    Ok(())
}

/// Why a build of a superseded state stopped, as [`crate::Collection::index_failure`] says it.
const SUPERSEDED: &str = "the collection's schema was changed by another open before the index was built: open the collection again";

/// Records in memory only (the stored schema is no longer this state's) that index `id`'s
/// build stopped because the state was superseded, so that waiting for it ends.
fn superseded(state: &CollectionState, id: u8) {
    for index in state.indexes.iter().filter(|index| index.id == id) {
        *index.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(SUPERSEDED.to_owned());
    }
}

/// Records why index `id`'s build stopped: in memory for this process
/// ([`crate::Collection::index_failure`]), and in the stored schema for any other
/// ([`crate::collection::DynIndex::failure`], `tessera info`). Storing it is best effort: the
/// build has failed either way, and this process still knows why.
fn fail(db: &Db, state: &CollectionState, id: u8, error: Error) {
    let reason = error.to_string();
    // Stored first, so that once this process reports the failure, the file says it too.
    let _ = update_stored_index(db, state, id, |index| index.failure = Some(reason.clone()));
    for index in state.indexes.iter().filter(|index| index.id == id) {
        *index.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason.clone());
    }
}

/// What one transaction of a background build did.
enum Batch {
    /// Indexed the records up to this key.
    Indexed(Vec<u8>),
    /// No records were left.
    Finished,
    /// The state no longer describes the collection (see [`stored_schema_for`]): nothing
    /// written, and the build ends.
    Superseded,
}

/// Indexes the next batch of records after `after` into index `id`.
fn build_batch(db: &Db, state: &CollectionState, id: u8, after: Option<&[u8]>) -> Result<Batch> {
    let building = || state.indexes.iter().filter(|index| index.id == id);
    let schemas = db.internal_keyspace(super::SCHEMA_KEYSPACE)?;
    db.write(|tx| {
        if stored_schema_for(tx, &schemas, state, id)?.is_none() {
            return Ok(Batch::Superseded);
        }
        let start = after.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let batch: Vec<(Vec<u8>, Vec<u8>)> = tx
            .range(&state.records, (start, std::ops::Bound::Unbounded))?
            .take(BUILD_BATCH_RECORDS)
            .map(|entry| entry.map(|(key, value)| (key.to_vec(), value.to_vec())))
            .collect::<Result<_>>()?;
        for (key, value) in &batch {
            update_entries(tx, &state.index_target(), building(), key, None, Some(value))?;
        }
        Ok(batch.last().map_or(Batch::Finished, |(key, _)| Batch::Indexed(key.clone())))
    })
}

/// The collection's stored schema in `tx` if index `id` is still `state`'s there: no other
/// open in this process has superseded the state, and the stored schema gives `id` to the same
/// path and uniqueness. `None` otherwise: a build of a superseded state must write nothing, as
/// its id may now name another index (whose queries would take its entries as their own) or
/// none, or another open may have emptied the index behind the build's cursor. (Another
/// process's change that keeps the index leaves the build going: its entries are still right,
/// and that process may not build it.)
fn stored_schema_for(tx: &WriteTxn<'_>, schemas: &Keyspace, state: &CollectionState, id: u8) -> Result<Option<super::StoredSchema>> {
    if state.current().is_err() {
        return Ok(None);
    }
    let Some(bytes) = tx.get(schemas, state.name.as_bytes())? else { return Ok(None) };
    let schema: super::StoredSchema =
        tessera_value::from_slice(bytes).map_err(|error| Error::Corrupted(format!("schema of collection {:?}: {error}", state.name)))?;
    let same =
        |stored: &super::StoredIndex| state.indexes.iter().any(|index| index.identity() == (stored.path.as_str(), stored.unique, id));
    Ok(schema.indexes.iter().any(|stored| stored.id == id && same(stored)).then_some(schema))
}

/// Applies `change` to index `id` in the collection's stored schema, in a transaction of its
/// own; returns whether it did (not when the index is no longer `state`'s: see
/// [`stored_schema_for`]).
fn update_stored_index(db: &Db, state: &CollectionState, id: u8, change: impl Fn(&mut super::StoredIndex)) -> Result<bool> {
    let schema_keyspace = db.internal_keyspace(super::SCHEMA_KEYSPACE)?;
    db.write(|tx| {
        let Some(mut schema) = stored_schema_for(tx, &schema_keyspace, state, id)? else { return Ok(false) };
        schema.indexes.iter_mut().filter(|index| index.id == id).for_each(&change);
        let bytes = tessera_value::to_vec(&schema)?;
        tx.put(&schema_keyspace, state.name.as_bytes(), &bytes)?;
        Ok(true)
    })
}

/// Records in the schema that index `id` is complete, then lets queries use it.
fn mark_ready(db: &Db, state: &CollectionState, id: u8) -> Result<()> {
    let marked = update_stored_index(db, state, id, |index| {
        index.ready = true;
        index.failure = None;
    })?;
    if !marked {
        superseded(state, id);
        return Ok(());
    }
    for index in state.indexes.iter().filter(|index| index.id == id) {
        index.ready.store(true, Ordering::Release);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::collection::{Record, sort_key};
    use crate::store::key::encode;

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "slugs")]
    struct Slug {
        #[record(key)]
        id: u32,
        #[record(unique)]
        slug: String,
    }

    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "tagged")]
    struct Tagged {
        #[record(key)]
        id: u32,
        #[record(index_elements)]
        tags: Vec<String>,
    }

    #[test]
    fn the_check_finds_a_missing_or_a_stray_element_entry() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open(dir.path().join("db")).unwrap();
        let tagged = db.collection::<Tagged>().unwrap();
        let tags = vec!["a".to_owned(), "b".to_owned(), "a".to_owned()];
        db.write(|tx| tagged.insert(tx, &Tagged { id: 1, tags: tags.clone() }).map(drop)).unwrap();
        assert!(db.check().unwrap().is_ok(), "one entry per distinct element");
        let entry = |tag: &str| {
            let mut component = Vec::new();
            sort_key::encode_literal(&crate::query::Literal::Str(tag.to_owned()), &mut component);
            [&[tagged.state.indexes[0].id][..], &component, &encode(&1u32)].concat()
        };
        let keyspace = tagged.state.index_keyspace.clone();
        db.write(|tx| tx.delete(&keyspace, &entry("b")).map(drop)).unwrap();
        let report = db.check().unwrap();
        assert!(report.problems.iter().any(|problem| problem.what.contains("has no entry for record")), "{report}");
        db.write(|tx| {
            tx.put(&keyspace, &entry("b"), &encode(&1u32))?;
            tx.put(&keyspace, &entry("c"), &encode(&1u32))
        })
        .unwrap();
        let report = db.check().unwrap();
        assert!(report.problems.iter().any(|problem| problem.what.contains("does not match its record's value")), "{report}");
        // An update drops the entries of the elements it removes and adds the new ones.
        db.write(|tx| tx.delete(&keyspace, &entry("c")).map(drop)).unwrap();
        db.write(|tx| tagged.update(tx, &1u32, |record| record.tags = vec!["b".into(), "d".into()]).map(drop)).unwrap();
        assert!(db.check().unwrap().is_ok());
        let found = tagged.filter(crate::query::field("tags").contains("d")).count(&db).unwrap();
        assert_eq!((found, tagged.filter(crate::query::field("tags").contains("a")).count(&db).unwrap()), (1, 0));
    }

    #[test]
    fn a_hash_collision_in_a_unique_index_compares_the_records_values() {
        // No XXH3 collision is known to put in a test: forge the entry a colliding record
        // would have. Record 1 holds `a`; an entry with `b`'s prefix and hash names record 1,
        // as if `a` and `b` had one hash.
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open(dir.path().join("db")).unwrap();
        let slugs = db.collection::<Slug>().unwrap();
        let prefix = "s".repeat(600);
        let (a, b) = (format!("{prefix}a"), format!("{prefix}b"));
        db.write(|tx| slugs.insert(tx, &Slug { id: 1, slug: a.clone() }).map(drop)).unwrap();
        let mut component = Vec::new();
        sort_key::encode_literal(&crate::query::Literal::Str(b.clone()), &mut component);
        let truncated = sort_key::truncated(&component).unwrap();
        let forged = [&[slugs.state.indexes[0].id][..], &truncated, &encode(&1u32)].concat();
        let keyspace = slugs.state.index_keyspace.clone();
        db.write(|tx| tx.put(&keyspace, &forged, &encode(&1u32))).unwrap();

        // `b` is not `a`: stored, not refused as a violation.
        db.write(|tx| slugs.insert(tx, &Slug { id: 2, slug: b.clone() }).map(drop)).unwrap();
        // A second `b` is refused, naming the record that really holds it.
        match db.write(|tx| slugs.insert(tx, &Slug { id: 3, slug: b.clone() })) {
            Err(crate::Error::UniqueViolation { holder, .. }) => assert_eq!(holder, "2"),
            other => panic!("expected a unique violation, got {other:?}"),
        }
        let found = slugs.filter(crate::query::field("slug").eq(b.as_str())).fetch(&db).unwrap();
        assert_eq!(found, [Slug { id: 2, slug: b }]);
        // The forged entry does not match its record: the check says so.
        let report = db.check().unwrap();
        assert!(report.problems.iter().any(|problem| problem.what.contains("does not match its record's value")), "{report}");
    }
}
