//! Dflat's BenchDoc, as tessera, native_db and SQLite store it, and its data.

use native_db::{ToKey, native_db};
use native_model::{Model, native_model};
use serde::{Deserialize, Serialize};
use tessera::collection::{Embed, Record};

#[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
pub struct Vec3 {
    pub x: f32,
    pub y: f32,
    pub z: f32,
}

#[derive(Serialize, Deserialize, Embed, Debug, Clone, Copy, PartialEq)]
pub enum Color {
    Red,
    Green,
    Blue,
}

#[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
pub enum Content {
    Text { text: String },
    Image { images: Vec<String> },
}

/// The fields of a BenchDoc, shared by every system's record type.
pub struct Parts {
    pub pos: Vec3,
    pub color: Color,
    pub title: String,
    pub content: Option<Content>,
    pub tag: String,
    pub priority: i32,
}

/// Dflat's data: by `i % 3`, Blue with one image, Red with no content, Green with text.
pub fn parts(i: i32) -> Parts {
    let (color, priority, content) = match i % 3 {
        0 => (Color::Blue, 5000 - i, Some(Content::Image { images: vec![format!("image{i}")] })),
        1 => (Color::Red, i - 5000, None),
        _ => (Color::Green, 0, Some(Content::Text { text: format!("text{i}") })),
    };
    Parts {
        pos: Vec3 { x: i as f32, y: (i * 2) as f32, z: (i * 3) as f32 },
        color,
        title: format!("title{i}"),
        content,
        tag: format!("tag{i}"),
        priority,
    }
}

/// The primary keys of `records` as the collection stores them (`Record::encode_key`).
pub fn stored_keys(records: &[BenchDoc]) -> Vec<Vec<u8>> {
    use tessera::collection::Record;
    records
        .iter()
        .map(|record| {
            let mut key = Vec::new();
            record.encode_key(&mut key);
            key
        })
        .collect()
}

/// Builds each system's BenchDoc type from the shared fields.
macro_rules! from_parts {
    ($($type:ident),*) => {$(
        impl From<Parts> for $type {
            fn from(p: Parts) -> Self {
                $type { pos: p.pos, color: p.color, title: p.title, content: p.content, tag: p.tag, priority: p.priority }
            }
        }
    )*};
}

/// Declares a tessera record type and a native_db model type with BenchDoc's fields.
macro_rules! bench_doc {
    ($tessera:ident, $name:literal, $native:ident, $id:literal) => {
        #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
        #[record(name = $name)]
        pub struct $tessera {
            pub pos: Vec3,
            pub color: Color,
            #[record(key)]
            pub title: String,
            pub content: Option<Content>,
            pub tag: String,
            pub priority: i32,
        }

        from_parts!($tessera, $native);

        #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
        #[native_model(id = $id, version = 1)]
        #[native_db]
        pub struct $native {
            pub pos: Vec3,
            pub color: Color,
            #[primary_key]
            pub title: String,
            pub content: Option<Content>,
            pub tag: String,
            pub priority: i32,
        }
    };
}

bench_doc!(BenchDoc, "bench_doc", NativeDoc, 1);
bench_doc!(BenchDoc1, "bench_doc_1", NativeDoc1, 2);
bench_doc!(BenchDoc2, "bench_doc_2", NativeDoc2, 3);
bench_doc!(BenchDoc3, "bench_doc_3", NativeDoc3, 4);

/// A BenchDoc as an SQLite user stores it: scalars as columns, the enum's kind as a column, the
/// nested parts as JSON blobs.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlDoc {
    pub pos: Vec3,
    pub color: Color,
    pub title: String,
    pub content: Option<Content>,
    pub tag: String,
    pub priority: i32,
}

from_parts!(SqlDoc);

pub const SQL_COLUMNS: &str = "title, color, priority, tag, pos, content_kind, content";

pub fn sql_create(table: &str) -> String {
    format!(
        "CREATE TABLE {table} (title TEXT PRIMARY KEY NOT NULL, color INTEGER NOT NULL, priority INTEGER NOT NULL, tag TEXT NOT NULL, \
         pos BLOB NOT NULL, content_kind INTEGER, content BLOB) WITHOUT ROWID"
    )
}

/// Inserts `records` into `table` in one transaction, through one prepared statement.
pub fn sql_insert_all(connection: &mut rusqlite::Connection, table: &str, records: &[SqlDoc]) {
    let tx = connection.transaction().unwrap();
    {
        let mut insert = tx.prepare_cached(&format!("INSERT INTO {table} ({SQL_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")).unwrap();
        for doc in records {
            doc.insert(&mut insert).unwrap();
        }
    }
    tx.commit().unwrap();
}

/// Deletes `records` from `table` by title in one transaction, one statement each.
pub fn sql_delete_all(connection: &mut rusqlite::Connection, table: &str, records: &[SqlDoc]) {
    let tx = connection.transaction().unwrap();
    {
        let mut delete = tx.prepare_cached(&format!("DELETE FROM {table} WHERE title = ?1")).unwrap();
        for doc in records {
            delete.execute([&doc.title]).unwrap();
        }
    }
    tx.commit().unwrap();
}

/// The `bench_doc` rows matching `condition` (SQL), decoded into `SqlDoc`s.
pub fn sql_fetch(connection: &rusqlite::Connection, condition: &str) -> Vec<SqlDoc> {
    let mut query = connection.prepare_cached(&format!("SELECT {SQL_COLUMNS} FROM bench_doc WHERE {condition}")).unwrap();
    let rows = query.query_map([], SqlDoc::from_row).unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

impl SqlDoc {
    pub fn insert(&self, statement: &mut rusqlite::CachedStatement<'_>) -> rusqlite::Result<usize> {
        let pos = serde_json::to_vec(&self.pos).unwrap_or_default();
        let kind = self.content.as_ref().map(|c| match c {
            Content::Text { .. } => 0,
            Content::Image { .. } => 1,
        });
        let content = self.content.as_ref().map(|c| serde_json::to_vec(c).unwrap_or_default());
        statement.execute(rusqlite::params![self.title, self.color as i32, self.priority, self.tag, pos, kind, content])
    }

    pub fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SqlDoc> {
        let color = match row.get::<_, i32>(1)? {
            0 => Color::Red,
            1 => Color::Green,
            _ => Color::Blue,
        };
        let pos: Vec<u8> = row.get(4)?;
        let content: Option<Vec<u8>> = row.get(6)?;
        Ok(SqlDoc {
            title: row.get(0)?,
            color,
            priority: row.get(2)?,
            tag: row.get(3)?,
            pos: serde_json::from_slice(&pos).unwrap_or(Vec3 { x: 0.0, y: 0.0, z: 0.0 }),
            content: content.and_then(|c| serde_json::from_slice(&c).ok()),
        })
    }
}
