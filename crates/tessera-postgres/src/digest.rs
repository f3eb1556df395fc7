//! Comparing a replica with its source: a table's and a collection's row count and a hash of
//! every (stored key, canonical record JSON) in key order, computed the same way on both
//! sides (PostgreSQL's `jsonb` text is read back through tessera's JSON reader, so key order
//! and spacing do not matter).

use crate::columns::{KEY_COLUMN, RECORD_COLUMN};
use crate::error::{ReplicateError, Result};
use crate::ident;
use std::hash::{DefaultHasher, Hasher};
use tessera::Db;
use tessera_value::Doc;

/// A count and a hash of a table's or a collection's records.
///
/// ```
/// let empty = tessera_postgres::Digest::default();
/// assert_eq!(empty.count, 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest {
    /// Records.
    pub count: u64,
    /// SipHash (fixed keys) of every stored key and canonical record JSON, in key order.
    pub hash: u64,
}

impl Default for Digest {
    fn default() -> Self {
        Builder::new().finish()
    }
}

struct Builder {
    count: u64,
    hasher: DefaultHasher,
}

impl Builder {
    fn new() -> Builder {
        Builder { count: 0, hasher: DefaultHasher::new() }
    }

    fn add(&mut self, key: &[u8], canonical_json: &str) {
        self.count += 1;
        self.hasher.write_usize(key.len());
        self.hasher.write(key);
        self.hasher.write_usize(canonical_json.len());
        self.hasher.write(canonical_json.as_bytes());
    }

    fn finish(self) -> Digest {
        Digest { count: self.count, hash: self.hasher.finish() }
    }
}

/// The digest of collection `collection`'s records in `db`.
///
/// ```
/// # use tessera::collection::Record;
/// # #[derive(serde::Serialize, serde::Deserialize, Record)]
/// # #[record(name = "tags")]
/// # struct Tag { #[record(key)] name: String }
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let tags = db.collection::<Tag>()?;
/// db.write(|tx| tags.insert(tx, &Tag { name: "rust".into() }))?;
/// assert_eq!(tessera_postgres::tessera_digest(&db, "tags")?.count, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn tessera_digest(db: &Db, collection: &str) -> Result<Digest> {
    let collection = db.dyn_collection(collection)?;
    let mut builder = Builder::new();
    collection.all().for_each(db, |record| {
        builder.add(record.key_bytes(), &record.value().to_json_canonical());
        Ok(true)
    })?;
    Ok(builder.finish())
}

/// The digest of PostgreSQL table `table` (a replica's: `tessera_key` and `record`).
///
/// ```no_run
/// let mut client = postgres::Client::connect("host=127.0.0.1 user=postgres", postgres::NoTls)?;
/// let digest = tessera_postgres::postgres_digest(&mut client, "tags")?;
/// println!("{} rows", digest.count);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn postgres_digest(client: &mut postgres::Client, table: &str) -> Result<Digest> {
    let sql = format!("SELECT {KEY_COLUMN}, {RECORD_COLUMN}::text FROM {} ORDER BY {KEY_COLUMN}", ident::quoted("table", table)?);
    let mut builder = Builder::new();
    for row in client.query(&sql, &[])? {
        let key: Vec<u8> = row.get(0);
        let text: String = row.get(1);
        let bytes = tessera_value::from_json(text.as_bytes()).map_err(|error| ReplicateError::Value {
            collection: table.to_owned(),
            key: format!("{key:02x?}"),
            field: RECORD_COLUMN.into(),
            problem: format!("jsonb text does not read back: {error}"),
        })?;
        let root = Doc::from_untrusted(&bytes).map_err(tessera::Error::from)?.root();
        builder.add(&key, &root.to_json_canonical());
    }
    Ok(builder.finish())
}
