//! A collection's shared-key table: the names of its record type's fields and variants, each a
//! small integer that records store instead of the name.
//!
//! The table lives in keyspace `tessera.keys`, under the collection's name, serialized as
//! `tessera_value::SharedKeys::to_bytes` writes it (a varint count, then each name as a varint
//! length and UTF-8 bytes). It only grows: a name keeps its id forever, so a record encoded
//! against the first `S` names (it records `S` in its footer) reads with any later table.
//!
//! Names are added in the transaction that opens the collection, before any record that uses
//! them is written, from the table as that transaction sees it (never from a copy in memory),
//! so two processes that open one collection with different types cannot give two names one
//! id. A handle then reads with the table it loaded: records written through it use only ids
//! it knows. Dynamic map keys (`HashMap<String, _>` fields) are not shared: they stay in each
//! record's own key table.

use super::Record;
use crate::error::{Error, Result};
use crate::store::{Keyspace, Snapshot, WriteTxn};
use tessera_value::SharedKeys;
use tessera_value::codec::FieldIds;

/// Keyspace of every collection's shared-key table.
pub(crate) const KEYS_KEYSPACE: &str = "tessera.keys";

/// A collection's shared keys and the field-name lists of its record type resolved to them.
/// The table is shared with the records read through it that keep their stored bytes (a
/// dynamic collection's [`crate::collection::DynRecord`]).
#[derive(Debug, Default)]
pub(crate) struct RecordKeys {
    pub(crate) shared: std::sync::Arc<SharedKeys>,
    pub(crate) ids: FieldIds,
}

/// The stored table of `collection` (empty if none).
pub(crate) fn load(snapshot: &dyn Snapshot, keyspace: &Keyspace, collection: &str) -> Result<SharedKeys> {
    match snapshot.get_value(keyspace, collection.as_bytes())? {
        None => Ok(SharedKeys::new()),
        Some(bytes) => SharedKeys::from_bytes(bytes).map_err(|error| {
            Error::Corrupted(format!("shared-key table of collection {collection:?} in keyspace {KEYS_KEYSPACE}: {error}"))
        }),
    }
}

/// Adds every field and variant name of `T` to the table of `collection` (in `tx`), and
/// resolves `T`'s field lists to ids.
pub(crate) fn register<T: Record>(tx: &mut WriteTxn<'_>, keyspace: &Keyspace, collection: &str) -> Result<RecordKeys> {
    let mut shared = load(&*tx, keyspace, collection)?;
    let before = shared.len();
    let lists = FieldIds::lists_of::<T>();
    for name in lists.iter().flat_map(|list| list.iter()) {
        shared.add(name).map_err(|error| Error::SchemaMismatch {
            collection: collection.to_owned(),
            reason: format!("field name {name:?} cannot be a shared key: {error}"),
        })?;
    }
    if shared.len() != before {
        tx.put(keyspace, collection.as_bytes(), &shared.to_bytes())?;
    }
    let ids = FieldIds::resolve(&shared, lists);
    Ok(RecordKeys { shared: std::sync::Arc::new(shared), ids })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collection::{Embed, Record};
    use tessera_value::Doc;

    #[derive(Record, Debug, PartialEq)]
    #[record(name = "keyed")]
    struct Keyed {
        #[record(key)]
        id: u32,
        name: String,
        place: Place,
    }

    #[derive(Embed, Debug, PartialEq)]
    enum Place {
        Nowhere,
        At { x: i32, y: i32 },
    }

    #[test]
    fn records_store_field_names_as_shared_ids_and_the_table_persists() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        {
            let db = crate::Db::open(&path).unwrap();
            let keyed = db.collection::<Keyed>().unwrap();
            let record = Keyed { id: 1, name: "a".into(), place: Place::At { x: 1, y: 2 } };
            db.write(|tx| keyed.insert(tx, &record)).unwrap();
            let records = db.internal_keyspace("tessera.col.keyed").unwrap();
            let stored = db.read(|tx| Ok(tx.get(&records, &crate::store::key::encode(&1u32))?.unwrap().to_vec())).unwrap();
            let keys = db.read(|tx| load(tx, &db.internal_keyspace(KEYS_KEYSPACE)?, "keyed")).unwrap();
            let names: Vec<&str> = (0..keys.len() as u32).map(|id| keys.name(id).unwrap()).collect();
            assert_eq!(names, ["id", "name", "place", "Nowhere", "At", "x", "y"]);
            let doc = Doc::from_untrusted_with_keys(&stored, &keys).unwrap();
            assert_eq!(doc.key_index_kind(), None, "no key strings in the record");
            assert_eq!(doc.root().path("place.At.y").unwrap().unwrap().as_i64(), Some(2));
        }
        // Reopened, the table is read back, not rebuilt: the same ids.
        let db = crate::Db::open(&path).unwrap();
        let keyed = db.collection::<Keyed>().unwrap();
        assert_eq!(keyed.state.keys.shared.id("y"), Some(6));
        assert_eq!(keyed.get(&db, &1u32).unwrap().unwrap().place, Place::At { x: 1, y: 2 });
    }

    #[test]
    fn damaged_records_read_with_checksums_off_are_errors_never_panics() {
        // With checksum verification off, the store hands over stored bytes unchecked; the
        // trusted reader assumes encoder output and indexed past damaged tables (the record
        // fuzz target, helper-2). Every single-byte damage of a real record is read here the
        // way a get, a scan's filter and an index update read it.
        let dir = tempfile::tempdir().unwrap();
        let options = crate::DbOptions { verify_checksums: false, ..Default::default() };
        let db = crate::Db::open_with(dir.path().join("db"), options).unwrap();
        let keyed = db.collection::<Keyed>().unwrap();
        let state = &keyed.state;
        assert!(!state.checksums_verified);
        let record = Keyed { id: 7, name: "a name long enough to be an atom, or not".into(), place: Place::At { x: -3, y: 70_000 } };
        let mut bytes = Vec::new();
        state.encode(&record, &mut bytes).unwrap();
        let key = crate::store::key::encode(&7u32);
        let mut component = Vec::new();
        for position in 0..bytes.len() {
            for mask in [0x01u8, 0x80, 0xFF, 0x3C] {
                let mut damaged = bytes.clone();
                damaged[position] ^= mask;
                let _ = crate::collection::decode::<Keyed>(state, &key, &damaged);
                let _ = super::super::build::components(Some(&damaged), &state.keys.shared, false, "place.At.y", &mut component);
                if let Ok(doc) = state.open_stored(&damaged) {
                    let _ = crate::query::lookup(doc.root(), "name");
                }
            }
        }
        assert_eq!(crate::collection::decode::<Keyed>(state, &key, &bytes).unwrap(), record);
    }

    #[test]
    fn threads_opening_one_collection_at_once_share_one_state() {
        // The registry was read, then written, without a lock: each racing thread could open
        // its own state (its own indexes' build state, its own live hook).
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open(dir.path().join("db")).unwrap();
        let barrier = std::sync::Barrier::new(8);
        let states: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        db.collection::<Keyed>().unwrap().state
                    })
                })
                .collect();
            handles.into_iter().map(|handle| handle.join().unwrap()).collect()
        });
        assert!(states.iter().all(|state| std::sync::Arc::ptr_eq(state, &states[0])));
    }

    #[test]
    fn a_damaged_table_is_corruption_naming_its_keyspace() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open(dir.path().join("db")).unwrap();
        drop(db.collection::<Keyed>().unwrap());
        let keyspace = db.internal_keyspace(KEYS_KEYSPACE).unwrap();
        db.write(|tx| tx.put(&keyspace, b"keyed", &[200, 1])).unwrap();
        let error = db.read(|tx| load(tx, &keyspace, "keyed")).unwrap_err();
        assert!(matches!(&error, Error::Corrupted(message) if message.contains(KEYS_KEYSPACE)), "{error}");
    }
}
