//! The documents table's model, shared by the bench and `examples/docs_parts`: the profile
//! document, and raw heed doing the documents' work by hand — the same keys, the same
//! per-field encoding, the same prefix scan — with none of the library's machinery.

use heed::types::Bytes;
use heed::{EnvFlags, EnvOpenOptions};
use serde::{Deserialize, Serialize};
use tessera::DbOptions;
use tessera::store::key;
use tessera_value::{Doc, from_value, to_vec};

/// The document the table reads and writes: five fields, stored one key each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub id: i64,
    pub name: String,
    pub email: String,
    pub age: i32,
    pub active: bool,
}

/// The `i`th profile the bench writes.
pub fn profile(i: u64) -> Profile {
    Profile {
        id: i as i64,
        name: format!("Person {i}"),
        email: format!("person{i}@example.com"),
        age: 20 + (i % 50) as i32,
        active: i.is_multiple_of(2),
    }
}

/// Raw heed, by hand: same configuration as tessera's defaults with Buffered durability.
pub struct Raw {
    pub env: heed::Env,
    pub table: heed::Database<Bytes, Bytes>,
}

const FIELDS: [&str; 5] = ["id", "name", "email", "age", "active"];

impl Raw {
    pub fn open(path: &std::path::Path) -> Raw {
        let mut options = EnvOpenOptions::new();
        options.map_size(1 << 32).max_dbs(DbOptions::default().keyspaces_max);
        // SAFETY: a fresh file used by this process only.
        unsafe { options.flags(EnvFlags::NO_SUB_DIR | EnvFlags::NO_META_SYNC | EnvFlags::NO_SYNC | EnvFlags::WRITE_MAP) };
        // SAFETY: as above.
        let env = unsafe { options.open(path) }.unwrap();
        let mut txn = env.write_txn().unwrap();
        let table = env.create_database(&mut txn, Some("documents")).unwrap();
        txn.commit().unwrap();
        Raw { env, table }
    }

    pub fn field_key(prefix: &[u8], field: &str) -> Vec<u8> {
        let mut stored = prefix.to_vec();
        stored.extend_from_slice(field.as_bytes());
        stored
    }

    pub fn encode(value: &Profile) -> [(&'static str, Vec<u8>); 5] {
        [
            ("id", to_vec(&value.id).unwrap()),
            ("name", to_vec(&value.name).unwrap()),
            ("email", to_vec(&value.email).unwrap()),
            ("age", to_vec(&value.age).unwrap()),
            ("active", to_vec(&value.active).unwrap()),
        ]
    }

    pub fn write_fields(&self, txn: &mut heed::RwTxn, prefix: &[u8], value: &Profile) {
        let fields = Raw::encode(value);
        let stale: Vec<Vec<u8>> = self
            .table
            .prefix_iter(txn, prefix)
            .unwrap()
            .map(|e| e.unwrap().0.to_vec())
            .filter(|k| !FIELDS.iter().any(|f| k[prefix.len()..] == *f.as_bytes()))
            .collect();
        for stored in stale {
            self.table.delete(txn, &stored).unwrap();
        }
        for (field, bytes) in fields {
            self.table.put(txn, &Raw::field_key(prefix, field), &bytes).unwrap();
        }
    }

    pub fn set(&self, id: &str, value: &Profile) {
        let prefix = key::encode(id);
        let mut txn = self.env.write_txn().unwrap();
        self.write_fields(&mut txn, &prefix, value);
        txn.commit().unwrap();
    }

    pub fn read_fields(&self, txn: &heed::RoTxn, prefix: &[u8]) -> Option<Profile> {
        let (mut id, mut name, mut email, mut age, mut active) = (None, None, None, None, None);
        for entry in self.table.prefix_iter(txn, prefix).unwrap() {
            let (stored, bytes) = entry.unwrap();
            let root = Doc::from_untrusted(bytes).unwrap().root();
            match &stored[prefix.len()..] {
                b"id" => id = Some(from_value(root).unwrap()),
                b"name" => name = Some(from_value(root).unwrap()),
                b"email" => email = Some(from_value(root).unwrap()),
                b"age" => age = Some(from_value(root).unwrap()),
                b"active" => active = Some(from_value(root).unwrap()),
                _ => {}
            }
        }
        Some(Profile { id: id?, name: name?, email: email?, age: age?, active: active? })
    }

    pub fn get(&self, id: &str) -> Option<Profile> {
        let prefix = key::encode(id);
        let txn = self.env.read_txn().unwrap();
        self.read_fields(&txn, &prefix)
    }

    pub fn update(&self, id: &str, change: impl FnOnce(Profile) -> Profile) {
        let prefix = key::encode(id);
        let mut txn = self.env.write_txn().unwrap();
        let current = self.read_fields(&txn, &prefix).unwrap();
        self.write_fields(&mut txn, &prefix, &change(current));
        txn.commit().unwrap();
    }

    pub fn update_field<V: Serialize>(&self, id: &str, field: &str, value: &V) {
        let stored = Raw::field_key(&key::encode(id), field);
        let bytes = to_vec(value).unwrap();
        let mut txn = self.env.write_txn().unwrap();
        // Writing one field of a document that does not exist would leave a document that
        // does not decode: like tessera, look for the document first (one prefix seek).
        let exists = self.table.prefix_iter(&txn, &key::encode(id)).unwrap().next().is_some();
        assert!(exists, "the bench writes fields of existing documents");
        self.table.put(&mut txn, &stored, &bytes).unwrap();
        txn.commit().unwrap();
    }

    pub fn delete(&self, id: &str) {
        let prefix = key::encode(id);
        let mut txn = self.env.write_txn().unwrap();
        let keys: Vec<Vec<u8>> = self.table.prefix_iter(&txn, &prefix).unwrap().map(|e| e.unwrap().0.to_vec()).collect();
        for stored in keys {
            self.table.delete(&mut txn, &stored).unwrap();
        }
        txn.commit().unwrap();
    }
}
