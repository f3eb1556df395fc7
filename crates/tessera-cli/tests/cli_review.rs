//! Adversarial review of the `tessera` command: round trips, queries, hostile files and
//! documents, pipes and exit statuses, run on the built binary.

use assert_cmd::Command;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tessera::collection::{Embed, Record};

const TIMEOUT: Duration = Duration::from_secs(60);

fn tessera() -> Command {
    let mut command = Command::cargo_bin("tessera").unwrap();
    command.timeout(TIMEOUT);
    command
}

/// Runs `tessera ARGS`; returns (exit status, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let output = tessera().args(args).output().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(output.stdout), text(output.stderr))
}

fn run_stdin(args: &[&str], stdin: &[u8]) -> (i32, Vec<u8>, String) {
    let output = tessera().args(args).write_stdin(stdin.to_vec()).output().unwrap();
    (output.status.code().unwrap_or(-1), output.stdout, String::from_utf8_lossy(&output.stderr).into_owned())
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Embed)]
struct Origin {
    country: String,
    city: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Embed)]
enum Size {
    Small,
    Large { litres: u8 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
#[record(name = "products")]
struct Product {
    #[record(key)]
    id: u32,
    #[record(index)]
    name: String,
    #[record(index)]
    price: Option<f64>,
    stock: Option<i64>,
    #[record(index_elements)]
    tags: Vec<String>,
    origin: Option<Origin>,
    size: Size,
}

const PRODUCTS: &str = r#"{"id": 1, "name": "tea", "price": 2.5, "stock": 10, "tags": ["drink", "hot"], "origin": {"country": "India", "city": "Darjeeling"}, "size": "Small"}
{"id": 2, "name": "coffee", "price": 4.0, "stock": 0, "tags": ["drink", "hot"], "origin": {"country": "Ethiopia", "city": null}, "size": "Small"}
{"id": 3, "name": "water", "price": 1.0, "stock": null, "tags": ["drink", "cold"], "origin": null, "size": {"Large": {"litres": 2}}}
{"id": 4, "name": "cake", "price": 4.0, "stock": 3, "tags": ["food", "sweet"], "origin": {"country": "France", "city": "Paris"}, "size": {"Large": {"litres": 1}}}
{"id": 5, "name": "jam", "price": null, "stock": 7, "tags": ["food", "sweet"], "origin": {"country": "France", "city": "Dijon"}, "size": "Small"}
{"id": 6, "name": "honey", "price": 6.5, "stock": null, "tags": [], "origin": null, "size": "Small"}
{"id": 7, "name": "Tea bags", "price": null, "stock": 12, "tags": ["drink"], "origin": {"country": "India", "city": null}, "size": {"Large": {"litres": 1}}}"#;

/// The seven products of docs/query.md, in a closed database.
fn products(dir: &Path) -> PathBuf {
    let path = dir.join("products.tessera");
    let db = tessera::Db::open(&path).unwrap();
    let c = db.collection::<Product>().unwrap();
    let items: Vec<Product> = PRODUCTS.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    db.write(|tx| items.iter().try_for_each(|p| c.insert(tx, p).map(drop))).unwrap();
    drop(c);
    db.close().unwrap();
    path
}

fn ids(out: &str) -> Vec<i64> {
    out.lines().map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["id"].as_i64().unwrap()).collect()
}

/// Bytes stored as a binary value (`serialize_bytes`), described as `TypeDesc::Bytes`.
#[derive(Debug, Clone, PartialEq)]
struct Blob(Vec<u8>);

impl Serialize for Blob {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Blob;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Blob, E> {
                Ok(Blob(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Blob, E> {
                Ok(Blob(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Blob, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element()? {
                    out.push(b);
                }
                Ok(Blob(out))
            }
        }
        deserializer.deserialize_bytes(Visitor)
    }
}

impl tessera_value::codec::Encode for Blob {
    fn encode(&self, out: &mut tessera_value::Encoder<'_>, _: &tessera_value::codec::FieldIds) -> Result<(), tessera_value::EncodeError> {
        tessera_value::codec::encode_with_serde(self, out)
    }
}

impl<'a> tessera_value::codec::Decode<'a> for Blob {
    fn decode(value: tessera_value::Value<'a>, _: &tessera_value::codec::FieldIds) -> Result<Self, tessera_value::codec::FieldError> {
        tessera_value::codec::decode_with_serde(value)
    }
}

impl<'a> tessera_value::codec::View<'a> for Blob {
    type Out = Blob;
    fn view(value: tessera_value::Value<'a>, _: &tessera_value::codec::FieldIds) -> Result<Blob, tessera_value::codec::FieldError> {
        tessera_value::codec::decode_with_serde(value)
    }
}

impl tessera::collection::Describe for Blob {
    fn describe() -> tessera::collection::TypeDesc {
        tessera::collection::TypeDesc::Bytes
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Embed)]
enum Tree {
    Leaf(i64),
    Node(Vec<Tree>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
#[record(name = "edges")]
struct Edge {
    #[record(key)]
    day: i64,
    #[record(key)]
    name: String,
    big: u64,
    small: i64,
    float: f64,
    single: f32,
    text: String,
    map: std::collections::BTreeMap<String, i64>,
    tree: Tree,
    maybe: Option<f64>,
}

fn deep(depth: usize) -> Tree {
    let mut tree = Tree::Leaf(-1);
    for _ in 0..depth {
        tree = Tree::Node(vec![tree]);
    }
    tree
}

fn edges() -> Vec<Edge> {
    let floats = [-0.0, 0.1 + 0.2, 5e-324, f64::MAX, f64::MIN, 1e21, 1e-7, 123456789012345680.0, 2f64.powi(63), 0.0];
    let singles = [-0.0f32, 0.1, f32::MAX, f32::MIN_POSITIVE, 1e-45, 16777217.0, 3.4028235e38, 0.3, 1.0, -2.5];
    let texts = ["", "\u{0}", "a\u{0}b", "\u{7f}\u{1f}\u{2028}\u{2029}", "\\\"/", "😀\u{10ffff}", "\u{feff}bom", "\r\n\t", "ß", "é"];
    (0..10)
        .map(|i| Edge {
            day: if i % 2 == 0 { i64::MIN + i as i64 } else { i64::MAX - i as i64 },
            name: texts[i].to_owned(),
            big: u64::MAX - i as u64,
            small: i64::MIN + i as i64,
            float: floats[i],
            single: singles[i],
            text: texts[(i + 3) % 10].to_owned(),
            map: [("".to_owned(), 1), ("ключ".to_owned(), -2), ("\u{0}".to_owned(), i64::MIN), ("😀".to_owned(), i64::MAX)]
                .into_iter()
                .collect(),
            tree: deep(if i == 9 { 100 } else { i }),
            maybe: if i % 3 == 0 { None } else { Some(-0.0) },
        })
        .collect()
}

fn edges_database(path: &Path) {
    let db = tessera::Db::open(path).unwrap();
    let c = db.collection::<Edge>().unwrap();
    db.write(|tx| edges().iter().try_for_each(|e| c.insert(tx, e).map(drop))).unwrap();
    drop(c);
    db.close().unwrap();
}

fn read_edges(path: &Path) -> Vec<Edge> {
    let db = tessera::Db::open(path).unwrap();
    let c = db.collection::<Edge>().unwrap();
    let mut all = c.all().fetch(&db).unwrap();
    all.sort_by(|a, b| (a.day, &a.name).cmp(&(b.day, &b.name)));
    all
}

/// Export, import into a new file, export again: byte-identical, and every value (bytes,
/// -0.0, u64::MAX, i64::MIN, NUL, unicode map keys, 17-digit floats, deep nesting) as stored.
#[test]
fn edge_values_round_trip_through_export_and_import() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("edges.tessera");
    edges_database(&src);
    let (status, first, err) = run(&["export", s(&src)]);
    assert_eq!(status, 0, "{err}");
    let file = dir.path().join("e.jsonl");
    std::fs::write(&file, &first).unwrap();
    let copy = dir.path().join("copy.tessera");
    let (status, out, err) = run(&["import", s(&copy), "edges", s(&file)]);
    assert_eq!(status, 0, "{out}{err}");
    assert!(out.contains("imported 10, rejected 0"), "{out}");
    let (status, second, err) = run(&["export", s(&copy)]);
    assert_eq!(status, 0, "{err}");
    assert_eq!(first, second);
    // Each record by its composite key (i64 extremes, NUL, empty and unicode names).
    for edge in edges() {
        let key = serde_json::json!([edge.day, edge.name]).to_string();
        let (status, out, err) = run(&["get", "--json", s(&copy), "edges", &key]);
        assert_eq!(status, 0, "{key}: {err}");
        assert!(out.starts_with(&format!("{{\"day\":{},", edge.day)), "{key}: {out}");
        assert!(second.lines().any(|line| line == out.trim_end()), "{key}: {out}");
    }
    let mut expected = edges();
    expected.sort_by(|a, b| (a.day, &a.name).cmp(&(b.day, &b.name)));
    let got = read_edges(&copy);
    assert_eq!(got.len(), expected.len());
    for (got, want) in got.iter().zip(&expected) {
        assert_eq!(got, want);
        assert_eq!(got.float.to_bits(), want.float.to_bits(), "{want:?}");
        assert_eq!(got.single.to_bits(), want.single.to_bits(), "{want:?}");
        assert_eq!(got.maybe.map(f64::to_bits), want.maybe.map(f64::to_bits), "{want:?}");
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
#[record(name = "blobs")]
struct Blobbed {
    #[record(key)]
    id: u32,
    blob: Blob,
}

/// A bytes field is exported as a base64 string (exit 0), and that export could not be
/// imported: every line was refused ("expected binary data, found a string"). Import reads JSON,
/// so a base64 string where the schema has bytes is now read as those bytes.
#[test]
fn a_bytes_field_round_trips_through_export_and_import() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("blobs.tessera");
    let db = tessera::Db::open(&src).unwrap();
    let c = db.collection::<Blobbed>().unwrap();
    let rows: Vec<Blobbed> = (0..3u8).map(|i| Blobbed { id: i.into(), blob: Blob(vec![0, i, 255]) }).collect();
    db.write(|tx| rows.iter().try_for_each(|r| c.insert(tx, r).map(drop))).unwrap();
    drop(c);
    db.close().unwrap();
    let (status, first, err) = run(&["export", s(&src)]);
    assert_eq!(status, 0, "{err}");
    let file = dir.path().join("b.jsonl");
    std::fs::write(&file, &first).unwrap();
    let copy = dir.path().join("copy.tessera");
    let (status, out, err) = run(&["import", s(&copy), "blobs", s(&file)]);
    assert_eq!((status, out.trim()), (0, "imported 3, rejected 0"), "{err}");
    assert_eq!(run(&["export", s(&copy)]).1, first);
}

/// `--limit` replaced the query text's own `limit`: `limit 2` with `--limit 5` printed five
/// records, exit 0. Both bound the result: the smaller wins.
#[test]
fn the_limit_option_never_widens_the_query_texts_limit() {
    let dir = tempfile::tempdir().unwrap();
    let db = products(dir.path());
    let query = |text: &str, limit: &str| {
        let (status, out, err) = run(&["query", "--json", s(&db), "products", text, "--limit", limit]);
        assert_eq!(status, 0, "{err}");
        ids(&out)
    };
    assert_eq!(query("limit 2", "5"), [1, 2]);
    assert_eq!(query("limit 5", "2"), [1, 2]);
    assert_eq!(query("order by id desc limit 1 offset 1", "3"), [6]);
    assert_eq!(query("offset 5", "1"), [6]);
    assert_eq!(query("price > 3", "0"), Vec::<i64>::new());
    let (status, out, _) = run(&["query", s(&db), "products", "limit 1", "--limit", "7"]);
    assert_eq!(status, 0);
    assert!(out.ends_with("(1 record)\n"), "{out}");
}

/// Three-valued logic, offsets past the end, syntax and type errors through the command.
#[test]
fn query_text_null_logic_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = products(dir.path());
    let query = |text: &str| {
        let (status, out, err) = run(&["query", "--json", s(&db), "products", text]);
        assert_eq!(status, 0, "{text}: {err}");
        ids(&out)
    };
    assert_eq!(query("not (price > 3)"), [1, 3]);
    assert_eq!(query("not (stock > 5)"), [2, 4]);
    assert_eq!(query("not (origin.city = \"Paris\")"), [1, 5]);
    assert_eq!(query("not (stock % 0 = 0)"), Vec::<i64>::new());
    assert_eq!(query("offset 100"), Vec::<i64>::new());
    assert_eq!(query("limit 0"), Vec::<i64>::new());
    assert_eq!(query("order by price desc nulls last"), [6, 2, 4, 1, 3, 5, 7]);
    for (text, needle) in [
        ("limit -1", "column 7"),
        ("price > 3 and", "column 14"),
        ("nosuch > 1", "nosuch"),
        ("price > \"x\"", "price"),
        ("price >", "column"),
    ] {
        let (status, out, err) = run(&["query", s(&db), "products", text]);
        assert_eq!(status, 2, "{text}: {out}{err}");
        assert!(out.is_empty(), "{text}: {out}");
        assert!(err.contains(needle), "{text}: {err}");
    }
}

/// Runs `tessera ARGS` with standard output on /dev/full (every write fails: ENOSPC).
fn run_to_full(args: &[&str]) -> (i32, String) {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin("tessera"))
        .args(args)
        .stdout(full)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// Standard output that cannot be written (a full disk, a closed pipe): `get`, `info`, `ls`,
/// `schema`, `dict`, `validate`, `--explain`, `backup`... printed with `println!`, which
/// panicked with a backtrace (exit 101). Each now fails with exit status 3 naming standard
/// output.
#[test]
fn unwritable_standard_output_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let db = products(dir.path());
    let doc = dir.path().join("doc.bin");
    let (status, _, err) = run_stdin(&["json2bin", "-", s(&doc)], br#"{"a": [1, 2]}"#);
    assert_eq!(status, 0, "{err}");
    let backup = dir.path().join("backup.tessera");
    let db = s(&db);
    assert_eq!(run(&["dict", "set", db, "default", "theme", "dark"]).0, 0);
    let cases: Vec<Vec<&str>> = vec![
        vec!["get", db, "products", "1"],
        vec!["get", "--json", db, "products", "1"],
        vec!["info", db],
        vec!["info", s(&doc)],
        vec!["ls", db],
        vec!["schema", db, "products"],
        vec!["query", db, "products", "price > 1"],
        vec!["query", db, "products", "price > 1", "--explain"],
        vec!["export", db],
        vec!["dict", "ls", db, "default"],
        vec!["dict", "get", db, "default", "theme"],
        vec!["validate", s(&doc)],
        vec!["bin2json", s(&doc)],
        vec!["check", db],
        vec!["backup", db, s(&backup)],
    ];
    for args in cases {
        let (status, err) = run_to_full(&args);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(status, 3, "{args:?}: {err}");
    }
}

/// A document holding NaN or an infinity was printed by `bin2json` with `null` in its place,
/// exit 0 (`export` refuses such records). It is now refused, naming the field's path.
#[test]
fn bin2json_refuses_nan_and_infinities_instead_of_printing_null() {
    let dir = tempfile::tempdir().unwrap();
    for (value, what) in [(f64::NAN, "NaN"), (f64::INFINITY, "infinity"), (f64::NEG_INFINITY, "-infinity")] {
        let doc = std::collections::BTreeMap::from([("ok", vec![1.5]), ("bad", vec![0.5, value])]);
        let bytes = tessera_value::to_vec(&doc).unwrap();
        let path = dir.path().join("nan.bin");
        std::fs::write(&path, &bytes).unwrap();
        for style in [None, Some("--pretty"), Some("--canonical")] {
            let mut args = vec!["bin2json", s(&path)];
            args.extend(style);
            let (status, out, err) = run(&args);
            assert_eq!(status, 1, "{args:?}: {out}{err}");
            assert!(out.is_empty(), "{out}");
            assert!(err.contains(&format!("`bad[1]` is {what}")), "{err}");
        }
        // Standard input too.
        let (status, out, err) = run_stdin(&["bin2json", "-"], &bytes);
        assert_eq!(status, 1, "{}{err}", String::from_utf8_lossy(&out));
    }
    // A finite document converts as before, -0.0 and 17 digits included.
    let bytes = tessera_value::to_vec(&vec![-0.0, 0.1 + 0.2, 5e-324]).unwrap();
    let (status, out, err) = run_stdin(&["bin2json", "-"], &bytes);
    assert_eq!(status, 0, "{err}");
    assert_eq!(String::from_utf8(out).unwrap(), "[-0.0,0.30000000000000004,5e-324]\n");
}

/// `get` and `query` printed a record holding NaN or an infinity with `null` in its place,
/// exit 0, so `price is null` seemed to match a record whose price is not null.
#[test]
fn get_and_query_do_not_print_nan_as_null() {
    let dir = tempfile::tempdir().unwrap();
    let path = products(dir.path());
    {
        let db = tessera::Db::open(&path).unwrap();
        let c = db.collection::<Product>().unwrap();
        let mut odd: Product = serde_json::from_str(PRODUCTS.lines().next().unwrap()).unwrap();
        odd.id = 8;
        odd.price = Some(f64::NAN);
        let mut inf = odd.clone();
        inf.id = 9;
        inf.price = Some(f64::INFINITY);
        db.write(|tx| {
            c.insert(tx, &odd)?;
            c.insert(tx, &inf).map(drop)
        })
        .unwrap();
        drop(c);
        db.close().unwrap();
    }
    let db = s(&path);
    for (key, what) in [("8", "NaN"), ("9", "infinity")] {
        for json in [false, true] {
            let mut args = vec!["get", db, "products", key];
            if json {
                args.insert(1, "--json");
            }
            let (status, out, err) = run(&args);
            assert!(!out.contains("null") || status != 0, "{args:?}: exit {status}: {out}");
            if status != 0 {
                assert!(err.contains(what), "{args:?}: {err}");
            }
        }
    }
    for json in [false, true] {
        let mut args = vec!["query", db, "products", "id >= 8"];
        if json {
            args.insert(1, "--json");
        }
        let (status, out, err) = run(&args);
        assert_eq!(status, 1, "{args:?}: {out}{err}");
        assert!(!out.contains("\"price\":null") && !out.contains("null"), "{args:?}: {out}");
        assert!(err.contains("record 8: field `price` is NaN"), "{args:?}: {err}");
    }
    // Records before the first such one are printed as usual.
    let (status, out, _) = run(&["query", "--json", db, "products", "id >= 7"]);
    assert_eq!((status, ids(&out)), (1, vec![7]));
}

/// `compact` through a symbolic link renamed the compacted copy over the link: exit 0,
/// "compacted", while the database the link named was left uncompacted and the link became a
/// detached copy (writes through it no longer reach the file).
#[test]
fn compact_through_a_symbolic_link_compacts_the_file_and_keeps_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let real = products(dir.path());
    let link = dir.path().join("link.tessera");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let (_, before, _) = run(&["export", s(&real)]);
    let size = std::fs::metadata(&real).unwrap().len();
    let (status, out, err) = run(&["compact", s(&link)]);
    assert_eq!(status, 0, "{out}{err}");
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
    assert!(std::fs::metadata(&real).unwrap().len() < size, "the file was not compacted");
    assert_eq!(run(&["export", s(&real)]).1, before);
    assert_eq!(run(&["export", s(&link)]).1, before);
}

/// `export DB -o DB` (or `-o` a link to it) replaced the database with its own export and
/// said `exported products (7) to DB`, exit 0: a reading command destroyed its input. It is now
/// refused, and the file is left as it was.
#[test]
fn an_export_never_writes_over_its_own_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = products(dir.path());
    let link = dir.path().join("link.tessera");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let original = std::fs::read(&db).unwrap();
    for salvage in [false, true] {
        for target in [s(&db), s(&link)] {
            let mut args = vec!["export", s(&db), "-o", target];
            if salvage {
                args.push("--salvage");
            }
            let (status, out, err) = run(&args);
            assert_ne!(status, 0, "{args:?}: {out}{err}");
            assert!(err.contains(target), "{args:?}: {err}");
            assert!(std::fs::read(&db).unwrap() == original, "{args:?}: the database was changed");
        }
    }
    assert_eq!(run(&["ls", s(&db)]).0, 0);
}

/// An export cut short at a line boundary (a copy that stopped, a full disk) was imported
/// with `imported 4, rejected 0`, exit 0, though its header says 7 records follow: the lost
/// records went unnoticed. The section's header line is now refused, naming both counts;
/// with --atomic nothing is written.
#[test]
fn an_export_cut_short_is_not_imported_as_complete() {
    let dir = tempfile::tempdir().unwrap();
    let db = products(dir.path());
    let (status, export, _) = run(&["export", s(&db)]);
    assert_eq!(status, 0);
    let cut: String = export.lines().take(5).map(|line| format!("{line}\n")).collect();
    let file = dir.path().join("cut.jsonl");
    std::fs::write(&file, &cut).unwrap();
    let copy = dir.path().join("copy.tessera");
    let (status, out, err) = run(&["import", s(&copy), "products", s(&file)]);
    assert_eq!(status, 1, "{out}{err}");
    assert!(err.contains("line 1: the export header says 7 records follow, and its section has 4 lines"), "{err}");
    let atomic = dir.path().join("atomic.tessera");
    let (status, out, err) = run(&["import", s(&atomic), "products", s(&file), "--atomic"]);
    assert_eq!(status, 1, "{out}{err}");
    assert!(!atomic.exists() || run(&["export", s(&atomic), "products"]).0 != 0, "--atomic wrote something");
    // The whole export, and a section of another collection before it, import as before.
    let other = r#"{"tessera_export": 1, "collection": "others", "records": 3, "schema": {}}"#;
    std::fs::write(&file, format!("{other}\n{{}}\n{export}")).unwrap();
    let whole = dir.path().join("whole.tessera");
    let (status, out, err) = run(&["import", s(&whole), "products", s(&file)]);
    assert_eq!(status, 0, "{out}{err}");
    assert!(out.contains("imported 7, rejected 0"), "{out}");
}

/// `dict get` and `dict ls` printed a value holding NaN or an infinity as `null` (values are
/// read as serde_json values, which have no NaN), exit 0.
#[test]
fn dict_get_and_ls_do_not_print_nan_as_null() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dict.tessera");
    {
        let db = tessera::Db::open(&path).unwrap();
        let dict = db.dictionary().unwrap();
        dict.set("plain", &vec![1.5]).unwrap();
        dict.set("odd", &vec![0.5, f64::NAN]).unwrap();
        dict.flush().unwrap();
        drop(dict);
        db.close().unwrap();
    }
    let db = s(&path);
    let (status, out, err) = run(&["dict", "get", db, "default", "plain"]);
    assert_eq!((status, out.trim()), (0, "[1.5]"), "{err}");
    for args in [vec!["dict", "get", db, "default", "odd"], vec!["dict", "ls", db, "default"], vec!["--json", "dict", "ls", db, "default"]]
    {
        let (status, out, err) = run(&args);
        assert_eq!(status, 1, "{args:?}: {out}{err}");
        assert!(!out.contains("null"), "{args:?}: {out}");
        assert!(err.contains("odd") && err.contains("NaN"), "{args:?}: {err}");
    }
}

/// `doc get` opened documents through a plain handle: a document written by a deep handle (one
/// key per leaf) printed without its nested fields, and now a plain handle refuses it. The
/// command reads through a deep handle, which reads documents written either way.
#[test]
fn doc_get_reads_a_document_written_as_nested_fields() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("docs.tessera");
    let db = tessera::Db::open(&file).unwrap();
    let deep = tessera::DocumentsOptions { deep: true, ..Default::default() };
    let people = db.documents_with("people", deep).unwrap();
    let grace = serde_json::json!({"name": "Grace", "address": {"city": "Arlington", "zip": "22201"}});
    people.document::<serde_json::Value>("grace").set(&grace).unwrap();
    db.documents("people").unwrap().document::<serde_json::Value>("ada").set(&serde_json::json!({"name": "Ada"})).unwrap();
    drop(people);
    db.close().unwrap();
    let (status, out, err) = run(&["doc", "get", "--json", s(&file), "grace"]);
    assert_eq!(status, 0, "{err}");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&out).unwrap(), grace);
    let (status, out, err) = run(&["doc", "get", "--json", s(&file), "grace", "address.city"]);
    assert_eq!((status, out.trim()), (0, "\"Arlington\""), "{err}");
    let (status, out, err) = run(&["doc", "get", "--json", s(&file), "ada"]);
    assert_eq!((status, out.trim()), (0, r#"{"name":"Ada"}"#), "{err}");
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
#[record(name = "labels")]
struct Labelled {
    #[record(key)]
    id: u32,
    label: String,
    note: Option<String>,
}

/// A table showed strings bare: the string `"null"` and a null, `"42"` and the number 42, an
/// empty string and a missing field looked the same. A string that would read as another value
/// (or hide its edges or lines) is now shown quoted, as JSON.
#[test]
fn a_table_cell_never_shows_a_string_as_another_value() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("labels.tessera");
    let db = tessera::Db::open(&file).unwrap();
    let labels = db.collection::<Labelled>().unwrap();
    let texts = ["null", "42", "", " padded", "two\nlines", "plain words", "true"];
    db.write(|tx| {
        texts.iter().enumerate().try_for_each(|(id, text)| {
            labels.insert(tx, &Labelled { id: id as u32, label: (*text).into(), note: (id == 0).then(|| "null".into()) }).map(drop)
        })
    })
    .unwrap();
    drop(labels);
    db.close().unwrap();
    let (status, out, err) = run(&["query", s(&file), "labels", "order by id"]);
    assert_eq!(status, 0, "{err}");
    let rows: Vec<Vec<&str>> =
        out.lines().skip(1).take(texts.len()).map(|line| line.split("  ").filter(|cell| !cell.is_empty()).collect()).collect();
    let label = |id: usize| rows[id][1].trim();
    assert_eq!(label(0), r#""null""#, "{out}");
    assert_eq!(rows[0][2].trim(), r#""null""#, "{out}");
    assert_eq!(label(1), r#""42""#, "{out}");
    assert_eq!(label(2), r#""""#, "{out}");
    assert_eq!(label(3), r#"" padded""#, "{out}");
    assert_eq!(label(4), r#""two\nlines""#, "{out}");
    assert_eq!(label(5), "plain words", "{out}");
    assert_eq!(label(6), r#""true""#, "{out}");
    // A missing (null) note is the JSON null, not a quoted string.
    assert_eq!(rows[1].get(2).map(|cell| cell.trim()), Some("null"), "{out}");
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Record)]
#[record(name = "readings")]
struct Reading {
    #[record(key)]
    at: i32,
    value: u32,
}

/// `tessera get DB readings -5` was refused as an unknown option `-5` (exit 2): a negative key
/// needed `--` before it. A negative number is now the key.
#[test]
fn a_negative_key_is_a_key_not_an_option() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("readings.tessera");
    let db = tessera::Db::open(&file).unwrap();
    let readings = db.collection::<Reading>().unwrap();
    db.write(|tx| [-5, 5].into_iter().try_for_each(|at| readings.insert(tx, &Reading { at, value: at.unsigned_abs() * 10 }).map(drop)))
        .unwrap();
    drop(readings);
    db.close().unwrap();
    let (status, out, err) = run(&["get", "--json", s(&file), "readings", "-5"]);
    assert_eq!((status, out.trim()), (0, r#"{"at":-5,"value":50}"#), "{err}");
    let (status, out, err) = run(&["get", s(&file), "readings", "-5", "--json"]);
    assert_eq!((status, out.trim()), (0, r#"{"at":-5,"value":50}"#), "{err}");
    assert_eq!(run(&["get", s(&file), "readings", "-6"]).0, 1);
}
