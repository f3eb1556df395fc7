//! `dictionary`: Dflat's WorkspaceDictionary table (`../shared/seeds/002_*.txt`). Each step
//! runs as 100 concurrent tasks × 400 keys on all cores, as Dflat's `concurrentPerform`.
//! Side by side in the same run: tessera with its default 32 shards, with Dflat's 12 and with
//! a single lock; a UserDefaults-like store that rewrites its whole map to one file on each
//! flush; and a SQLite key-value table. The cold rows include reopening the store.

use crate::harness::{self, Goal, Table};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::Instant;
use tessera::{Db, DbOptions, Dictionary, DictionaryOptions, Durability};

pub struct Options {
    pub rounds: usize,
}

const TASKS: usize = 100;
const KEYS_PER_TASK: usize = 400;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Position {
    x: f32,
    y: f32,
    z: f32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Color {
    Red,
    Green,
    Blue,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Content {
    Text { text: String },
    Image { images: Vec<String> },
}

/// Dflat's BenchDoc, with the crud issue's data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct BenchDoc {
    pos: Position,
    color: Color,
    title: String,
    content: Option<Content>,
    tag: String,
    priority: i32,
}

fn bench_doc(i: usize) -> BenchDoc {
    let i32_i = i as i32;
    let (color, priority, content) = match i % 3 {
        0 => (Color::Blue, 5000 - i32_i, Some(Content::Image { images: vec![format!("image{i}")] })),
        1 => (Color::Red, i32_i - 5000, None),
        _ => (Color::Green, 0, Some(Content::Text { text: format!("text{i}") })),
    };
    BenchDoc { pos: Position { x: i as f32, y: 1.0, z: 2.0 }, color, title: format!("title{i}"), content, tag: format!("tag{i}"), priority }
}

/// Runs `task(task_index)` for 100 tasks on all cores; returns the elapsed milliseconds.
fn concurrent(task: impl Fn(usize) + Sync) -> f64 {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let next = AtomicUsize::new(0);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= TASKS {
                        return;
                    }
                    task(index);
                }
            });
        }
    });
    start.elapsed().as_secs_f64() * 1e3
}

/// The keys, made before any timing starts (formatting one costs as much as a cached read).
static KEYS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

fn key(task: usize, i: usize, offset: usize) -> &'static str {
    let keys = KEYS.get_or_init(|| (0..140_000).map(|n| format!("key-{n}")).collect());
    &keys[offset + task * KEYS_PER_TASK + i]
}

/// One store under test: opened on a path, reopened cold.
trait Store: Sync {
    fn set_int(&self, key: &str, value: i64);
    fn get_int(&self, key: &str) -> Option<i64>;
    fn set_doc(&self, key: &str, value: &BenchDoc);
    fn get_doc(&self, key: &str) -> Option<BenchDoc>;
    /// Makes everything written so far durable.
    fn flush(&self);
}

struct Tessera {
    _db: Db,
    dictionary: Dictionary,
}

impl Tessera {
    fn open(path: &Path, shards: usize) -> Tessera {
        let db = Db::open_with(path, DbOptions { durability: Durability::BUFFERED, ..DbOptions::default() }).unwrap();
        let dictionary = db.dictionary_with("bench", DictionaryOptions { shards, ..DictionaryOptions::default() }).unwrap();
        Tessera { _db: db, dictionary }
    }
}

impl Store for Tessera {
    fn set_int(&self, key: &str, value: i64) {
        self.dictionary.set(key, &value).unwrap();
    }
    fn get_int(&self, key: &str) -> Option<i64> {
        self.dictionary.get(key).unwrap()
    }
    fn set_doc(&self, key: &str, value: &BenchDoc) {
        self.dictionary.set(key, value).unwrap();
    }
    fn get_doc(&self, key: &str) -> Option<BenchDoc> {
        self.dictionary.get(key).unwrap()
    }
    fn flush(&self) {
        self.dictionary.flush().unwrap();
    }
}

/// UserDefaults-like: one map behind a lock, the whole map rewritten to one file per flush.
struct WholeFile {
    path: PathBuf,
    map: RwLock<HashMap<String, Vec<u8>>>,
}

impl WholeFile {
    fn open(path: &Path) -> WholeFile {
        let map = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice::<HashMap<String, Vec<u8>>>(&bytes).unwrap(),
            Err(_) => HashMap::new(),
        };
        WholeFile { path: path.to_owned(), map: RwLock::new(map) }
    }
}

impl Store for WholeFile {
    fn set_int(&self, key: &str, value: i64) {
        self.map.write().unwrap().insert(key.to_owned(), value.to_le_bytes().to_vec());
    }
    fn get_int(&self, key: &str) -> Option<i64> {
        self.map.read().unwrap().get(key).map(|v| i64::from_le_bytes(v[..8].try_into().unwrap()))
    }
    fn set_doc(&self, key: &str, value: &BenchDoc) {
        self.map.write().unwrap().insert(key.to_owned(), serde_json::to_vec(value).unwrap());
    }
    fn get_doc(&self, key: &str) -> Option<BenchDoc> {
        self.map.read().unwrap().get(key).map(|v| serde_json::from_slice(v).unwrap())
    }
    fn flush(&self) {
        let bytes = serde_json::to_vec(&*self.map.read().unwrap()).unwrap();
        let temporary = self.path.with_extension("tmp");
        let mut file = std::fs::File::create(&temporary).unwrap();
        std::io::Write::write_all(&mut file, &bytes).unwrap();
        file.sync_all().unwrap();
        std::fs::rename(&temporary, &self.path).unwrap();
    }
}

/// A SQLite key-value table; writes go into one open transaction until `flush` commits it.
struct Sqlite {
    connection: Mutex<rusqlite::Connection>,
}

impl Sqlite {
    fn open(path: &Path) -> Sqlite {
        let connection = rusqlite::Connection::open(path).unwrap();
        connection.pragma_update(None, "journal_mode", "WAL").unwrap();
        connection.pragma_update(None, "synchronous", "NORMAL").unwrap();
        connection.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v BLOB NOT NULL)", []).unwrap();
        connection.execute_batch("BEGIN").unwrap();
        Sqlite { connection: Mutex::new(connection) }
    }
}

impl Store for Sqlite {
    fn set_int(&self, key: &str, value: i64) {
        let connection = self.connection.lock().unwrap();
        connection.prepare_cached("INSERT OR REPLACE INTO kv VALUES (?1, ?2)").unwrap().execute(rusqlite::params![key, value]).unwrap();
    }
    fn get_int(&self, key: &str) -> Option<i64> {
        let connection = self.connection.lock().unwrap();
        let mut select = connection.prepare_cached("SELECT v FROM kv WHERE k = ?1").unwrap();
        select.query_row([key], |row| row.get(0)).ok()
    }
    fn set_doc(&self, key: &str, value: &BenchDoc) {
        let connection = self.connection.lock().unwrap();
        let bytes = serde_json::to_vec(value).unwrap();
        connection.prepare_cached("INSERT OR REPLACE INTO kv VALUES (?1, ?2)").unwrap().execute(rusqlite::params![key, bytes]).unwrap();
    }
    fn get_doc(&self, key: &str) -> Option<BenchDoc> {
        let connection = self.connection.lock().unwrap();
        let mut select = connection.prepare_cached("SELECT v FROM kv WHERE k = ?1").unwrap();
        let bytes: Option<Vec<u8>> = select.query_row([key], |row| row.get(0)).ok();
        bytes.map(|b| serde_json::from_slice(&b).unwrap())
    }
    fn flush(&self) {
        let connection = self.connection.lock().unwrap();
        connection.execute_batch("COMMIT; BEGIN").unwrap();
    }
}

/// One round of Dflat's table for one store; returns (row → ms).
fn round(dir: &Path, name: &str, open: &dyn Fn(&Path) -> Box<dyn Store>) -> Vec<f64> {
    let path = dir.join(name);
    let mut rows = Vec::new();
    let store = open(&path);
    // insert 40,000 ints: in memory, then to disk
    let memory = concurrent(|t| (0..KEYS_PER_TASK).for_each(|i| store.set_int(key(t, i, 0), (t * KEYS_PER_TASK + i) as i64)));
    let start = Instant::now();
    store.flush();
    rows.extend([memory, memory + start.elapsed().as_secs_f64() * 1e3]);
    // insert another 40,000
    let memory = concurrent(|t| (0..KEYS_PER_TASK).for_each(|i| store.set_int(key(t, i, 40_000), i as i64)));
    let start = Instant::now();
    store.flush();
    rows.extend([memory, memory + start.elapsed().as_secs_f64() * 1e3]);
    // read 40,000 hot
    rows.push(concurrent(|t| (0..KEYS_PER_TASK).for_each(|i| assert!(black_box(store.get_int(key(t, i, 0))).is_some()))));
    // update 1 key 40,000 times
    let memory = concurrent(|t| (0..KEYS_PER_TASK).for_each(|i| store.set_int("hot key", (t * KEYS_PER_TASK + i) as i64)));
    let start = Instant::now();
    store.flush();
    rows.extend([memory, memory + start.elapsed().as_secs_f64() * 1e3]);
    // insert 40,000 structs
    let docs: Vec<BenchDoc> = (0..TASKS * KEYS_PER_TASK).map(bench_doc).collect();
    let memory = concurrent(|t| (0..KEYS_PER_TASK).for_each(|i| store.set_doc(key(t, i, 100_000), &docs[t * KEYS_PER_TASK + i])));
    let start = Instant::now();
    store.flush();
    rows.extend([memory, memory + start.elapsed().as_secs_f64() * 1e3]);
    drop(store);
    // The cold rows time the reopen too: a store that reads its whole file when it opens does
    // its cold work there, and one that loads lazily does it in the reads.
    let reopen = || {
        let start = Instant::now();
        let store = open(&path);
        (store, start.elapsed().as_secs_f64() * 1e3)
    };
    // read 40,000 cold: the database really reopened
    let mut reads_only = Vec::new();
    let (store, opening) = reopen();
    reads_only.push(concurrent(|t| (0..KEYS_PER_TASK).for_each(|i| assert!(black_box(store.get_int(key(t, i, 0))).is_some()))));
    rows.push(opening + reads_only[0]);
    drop(store);
    // 400 keys × 100 tasks, cold then hot: every task reads the same 400 keys
    let (store, opening) = reopen();
    reads_only.push(concurrent(|_| (0..KEYS_PER_TASK).for_each(|i| assert!(black_box(store.get_int(key(0, i, 40_000))).is_some()))));
    rows.push(opening + reads_only[1]);
    drop(store);
    // cold read of the structs
    let (store, opening) = reopen();
    reads_only.push(concurrent(|t| (0..KEYS_PER_TASK).for_each(|i| assert!(black_box(store.get_doc(key(t, i, 100_000))).is_some()))));
    rows.push(opening + reads_only[2]);
    // The same three rows without the reopen, for information (as they were measured before).
    rows.extend(reads_only);
    rows
}

/// The stores that are peers; the others are tessera in other configurations.
const PEERS: [&str; 2] = ["userdefaults-like", "sqlite"];
/// The row that also has a target against SQLite alone.
const STRUCTS_TO_DISK: &str = "insert 40,000 serde structs, to disk";

pub fn run(options: &Options) -> std::io::Result<()> {
    let names = [
        "insert 40,000 ints, in memory",
        "insert 40,000 ints, to disk",
        "insert another 40,000, in memory",
        "insert another 40,000, to disk",
        "read 40,000, hot",
        "update 1 key 40,000 times, in memory",
        "update 1 key 40,000 times, to disk",
        "insert 40,000 serde structs, in memory",
        STRUCTS_TO_DISK,
        "read 40,000, cold (database reopened)",
        "read 400 keys x 100, cold then hot",
        "cold read of the 40,000 structs",
        "read 40,000, cold: reads only (reopen not timed)",
        "read 400 keys x 100, cold then hot: reads only (reopen not timed)",
        "cold read of the 40,000 structs: reads only (reopen not timed)",
    ];
    let targets = [20.0, 30.0, 20.0, 30.0, 4.0, 15.0, 20.0, 40.0, 60.0, 20.0, 4.0, 40.0];
    let default_shards = DictionaryOptions::default().shards;
    type Opener = Box<dyn Fn(&Path) -> Box<dyn Store>>;
    let stores: Vec<(&str, Opener)> = vec![
        ("tessera", Box::new(move |p: &Path| Box::new(Tessera::open(p, default_shards)) as Box<dyn Store>)),
        ("tessera, 12 shards", Box::new(|p: &Path| Box::new(Tessera::open(p, 12)) as Box<dyn Store>)),
        ("tessera, single lock", Box::new(|p: &Path| Box::new(Tessera::open(p, 1)) as Box<dyn Store>)),
        ("userdefaults-like", Box::new(|p: &Path| Box::new(WholeFile::open(p)) as Box<dyn Store>)),
        ("sqlite", Box::new(|p: &Path| Box::new(Sqlite::open(p)) as Box<dyn Store>)),
    ];
    let _ = key(0, 0, 0); // make the keys now
    let mut results: Vec<Vec<Vec<f64>>> = vec![Vec::new(); stores.len()];
    for round_index in 0..options.rounds {
        let dir = tempfile::tempdir()?;
        // Rotate the order each round, so that no store always runs first (or last).
        for offset in 0..stores.len() {
            let index = (offset + round_index) % stores.len();
            let (name, open) = &stores[index];
            results[index].push(round(dir.path(), &format!("{name}-{round_index}").replace([' ', ','], "-"), open.as_ref()));
        }
    }
    let median = |store: usize, row: usize| harness::median(results[store].iter().map(|round| round[row]));
    let mut table = Table::new("dictionary");
    for (row, name) in names.iter().enumerate() {
        let peers: Vec<(&str, f64)> = stores.iter().enumerate().skip(1).map(|(index, (store, _))| (*store, median(index, row))).collect();
        // Targets are ratios to the real peers of this run (the typed-records issue): every row
        // at most 1.0x the better of the two; the other tessera configurations are shown only.
        if name.ends_with("(reopen not timed)") {
            table.row(name, "ms", median(0, row), &peers, Goal::None);
            continue;
        }
        let best = peers.iter().filter(|(store, _)| PEERS.contains(store)).min_by(|a, b| a.1.total_cmp(&b.1)).expect("the peers ran").0;
        table.row(name, "ms", median(0, row), &peers, Goal::AtMostTimesPeer { peer: best, factor: 1.0 });
        if *name == STRUCTS_TO_DISK {
            let sqlite = peers.iter().filter(|(store, _)| *store == "sqlite").copied().collect::<Vec<_>>();
            table.row(
                &format!("{name}, against sqlite"),
                "ms",
                median(0, row),
                &sqlite,
                Goal::AtMostTimesPeer { peer: "sqlite", factor: 0.8 },
            );
        }
        table.row(&format!("{name}, absolute (Dflat's table)"), "ms", median(0, row), &[], Goal::AtMost(targets[row]));
    }
    println!(
        "default shards: {default_shards}; {} worker threads; medians of {} rounds",
        std::thread::available_parallelism().map_or(2, |n| n.get()),
        options.rounds
    );
    table.finish()
}
