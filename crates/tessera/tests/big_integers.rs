//! Issue 13: an index entry of a number was its `f64` key, then its value as an `i64` key to
//! order the integers an `f64` cannot tell apart, saturated above `i64::MAX` (and for floats
//! beyond the `i64` range). `u64::MAX` and `u64::MAX - 1` were therefore one entry: a unique
//! index refused the second as a duplicate, and a secondary index and `order by` put integers
//! near the top of `u64` in primary-key order. Storage format 7 keeps the exact rest after the
//! `f64` part instead (see `collection::sort_key`), and migrates the index entries of older
//! files; `v6.tessera` (made by `tests/fixtures/make_v6.rs`, whose values are repeated here)
//! is such a file.

use proptest::prelude::*;
use std::cmp::Ordering;
use tessera::collection::Record;
use tessera::{Db, DbOptions, Error};

#[derive(Debug, Clone, PartialEq, Record)]
#[record(name = "serials", version = 1)]
struct Serial {
    #[record(key)]
    id: u32,
    #[record(unique)]
    serial: u64,
}

/// One value of each number kind, indexed.
#[derive(Debug, Clone, PartialEq, Record)]
#[record(name = "indexed", version = 1)]
struct Indexed {
    #[record(key)]
    id: u32,
    #[record(index)]
    int: i64,
    #[record(index)]
    uint: u64,
    #[record(index)]
    float: f64,
}

/// The same values without indexes: every query scans.
#[derive(Debug, Clone, PartialEq, Record)]
#[record(name = "plain", version = 1)]
struct Plain {
    #[record(key)]
    id: u32,
    int: i64,
    uint: u64,
    float: f64,
}

fn plain(record: &Indexed) -> Plain {
    Plain { id: record.id, int: record.int, uint: record.uint, float: record.float }
}

fn ids<T>(records: &[T], id: impl Fn(&T) -> u32) -> Vec<u32> {
    records.iter().map(id).collect()
}

#[test]
fn unique_index_holds_neighbouring_integers_above_i64_max() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let serials = db.collection::<Serial>().unwrap();
    let values = [u64::MAX, u64::MAX - 1, u64::MAX - 1024, 1 << 63, (1 << 63) + 1, i64::MAX as u64];
    db.write(|tx| {
        for (id, serial) in values.iter().enumerate() {
            serials.insert(tx, &Serial { id: id as u32, serial: *serial })?;
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(serials.all().count(&db).unwrap(), values.len());
    // A real duplicate is still refused.
    let duplicate = db.write(|tx| serials.insert(tx, &Serial { id: 99, serial: u64::MAX - 1 }));
    assert!(matches!(duplicate, Err(Error::UniqueViolation { .. })), "{duplicate:?}");
    assert!(db.check().unwrap().is_ok());
}

#[derive(Debug, Clone, PartialEq, Record)]
#[record(name = "by_big_key", version = 1)]
struct ByBigKey {
    #[record(key)]
    id: u64,
    label: String,
}

/// Primary keys have their own exact encoding (`store::key`), which issue 13 never touched.
#[test]
fn primary_keys_near_the_top_of_u64_are_distinct_and_ordered() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let records = db.collection::<ByBigKey>().unwrap();
    let ids = [u64::MAX, u64::MAX - 1, (1 << 63) + 1, 1 << 63, 0];
    db.write(|tx| {
        for id in ids {
            records.insert(tx, &ByBigKey { id, label: id.to_string() })?;
        }
        Ok(())
    })
    .unwrap();
    let stored: Vec<u64> = records.all().fetch(&db).unwrap().iter().map(|record| record.id).collect();
    assert_eq!(stored, [0, 1 << 63, (1 << 63) + 1, u64::MAX - 1, u64::MAX]);
    assert_eq!(records.get(&db, &(u64::MAX - 1)).unwrap().map(|record| record.label), Some((u64::MAX - 1).to_string()));
}

/// A `u64` field compared with `u64` arguments in the typed API (`ByBigKey::id().eq(u64)` did
/// not compile: `u64` was no `QueryArg`, so such a query had to be written with `field`).
#[test]
fn typed_queries_take_u64_arguments_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let records = db.collection::<ByBigKey>().unwrap();
    let ids = [0, 7, i64::MAX as u64, 1 << 63, u64::MAX - 1, u64::MAX];
    db.write(|tx| ids.iter().try_for_each(|&id| records.insert(tx, &ByBigKey { id, label: id.to_string() }).map(drop))).unwrap();
    let ids_of = |query: tessera::Query<ByBigKey>| -> Vec<u64> { query.fetch(&db).unwrap().iter().map(|record| record.id).collect() };
    for id in ids {
        assert_eq!(ids_of(records.filter(ByBigKey::id().eq(id))), [id], "id == {id}");
    }
    assert_eq!(ids_of(records.filter(ByBigKey::id().gt(1u64 << 63))), [u64::MAX - 1, u64::MAX]);
    assert_eq!(ids_of(records.filter(ByBigKey::id().between(7u64, i64::MAX as u64))), [7, i64::MAX as u64]);
    assert_eq!(ids_of(records.filter(ByBigKey::id().is_in([u64::MAX, 3, 1 << 63]))), [1 << 63, u64::MAX]);
    assert!(ids_of(records.filter(ByBigKey::id().eq(u64::MAX - 2))).is_empty());
}

#[derive(Debug, Clone, PartialEq, Record)]
#[record(name = "pointer_width")]
struct PointerWidth {
    #[record(key)]
    id: usize,
    offset: isize,
    count: Option<usize>,
}

/// `usize` and `isize` fields, which the schema already described as `u64` and `i64`, could not
/// be a primary key nor be compared in the typed API (no `KeyPart`, no `QueryArg`): a record
/// with such a key did not compile, and such a field could be queried only by `field(..)`.
#[test]
fn usize_and_isize_fields_are_keys_and_take_typed_arguments_as_u64_and_i64_do() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let records = db.collection::<PointerWidth>().unwrap();
    let rows = [(0, isize::MIN, None), (3, -2, Some(5)), (usize::MAX, isize::MAX, Some(usize::MAX))];
    db.write(|tx| rows.iter().try_for_each(|&(id, offset, count)| records.insert(tx, &PointerWidth { id, offset, count }).map(drop)))
        .unwrap();
    // Keys are stored as a u64 would be, whatever the platform's pointer width.
    assert_eq!(tessera::store::key::encode(&3usize), tessera::store::key::encode(&3u64));
    assert_eq!(tessera::store::key::encode(&-2isize), tessera::store::key::encode(&-2i64));
    assert_eq!(records.get(&db, &usize::MAX).unwrap().map(|record| record.offset), Some(isize::MAX));
    let ids = |query: tessera::Query<PointerWidth>| -> Vec<usize> { query.fetch(&db).unwrap().iter().map(|record| record.id).collect() };
    assert_eq!(ids(records.filter(PointerWidth::id().eq(3usize))), [3]);
    assert_eq!(ids(records.filter(PointerWidth::id().eq(usize::MAX))), [usize::MAX]);
    assert_eq!(ids(records.filter(PointerWidth::id().gt(2))), [3, usize::MAX]);
    assert_eq!(ids(records.filter(PointerWidth::offset().lt(0isize))), [0, 3]);
    assert_eq!(ids(records.filter(PointerWidth::offset().eq(isize::MIN))), [0]);
    assert_eq!(ids(records.filter(PointerWidth::count().ge(5usize))), [3, usize::MAX]);
    assert_eq!(ids(records.filter(PointerWidth::count().is_null())), [0]);
    assert_eq!(
        records.filter(PointerWidth::id().eq(3usize)).explain().unwrap().to_string(),
        "primary key lookup 3",
        "one key lookup, shown as its value"
    );
}

/// Values at the edges where `f64` and the integers part.
fn edge_records() -> Vec<Indexed> {
    let uints =
        [u64::MAX, u64::MAX - 1, u64::MAX - 1024, u64::MAX - 1025, (1 << 63) + 1, 1 << 63, i64::MAX as u64, (1 << 53) + 1, 1 << 53, 5, 0];
    let ints = [i64::MIN, i64::MIN + 1, -(1 << 53) - 1, -(1 << 53), -1, 0, 3, (1 << 53) + 1, 1 << 53, i64::MAX - 1, i64::MAX];
    let floats =
        [-0.0, 3.0, 1.5, (1u64 << 63) as f64, u64::MAX as f64, -((1u64 << 63) as f64), 9007199254740992.0, f64::INFINITY, f64::NAN];
    (0..33u32)
        .map(|id| {
            let n = id as usize;
            Indexed { id, int: ints[n % ints.len()], uint: uints[(n * 7) % uints.len()], float: floats[(n * 5) % floats.len()] }
        })
        .collect()
}

/// The two collections of `records`, written.
fn both(records: &[Indexed]) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let indexed = db.collection::<Indexed>().unwrap();
    let scanned = db.collection::<Plain>().unwrap();
    db.write(|tx| {
        for record in records {
            indexed.insert(tx, record)?;
            scanned.insert(tx, &plain(record))?;
        }
        Ok(())
    })
    .unwrap();
    (dir, db)
}

/// Orders two records' `field` exactly (NaN last).
fn exact_cmp(a: &Indexed, b: &Indexed, field: &str) -> Ordering {
    let value = |record: &Indexed| -> Exact {
        match field {
            "int" => Exact::Int(i128::from(record.int)),
            "uint" => Exact::Int(i128::from(record.uint)),
            _ => Exact::Float(record.float),
        }
    };
    value(a).cmp_exact(&value(b))
}

/// A number's exact value.
enum Exact {
    Int(i128),
    Float(f64),
}

impl Exact {
    fn cmp_exact(&self, other: &Exact) -> Ordering {
        match (self, other) {
            (Exact::Int(a), Exact::Int(b)) => a.cmp(b),
            (Exact::Float(a), Exact::Float(b)) => match (a.is_nan(), b.is_nan()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                // -0.0 and 0.0 are equal.
                (false, false) => a.partial_cmp(b).unwrap(),
            },
            (Exact::Int(_), Exact::Float(_)) => other.cmp_exact(self).reverse(),
            (Exact::Float(a), Exact::Int(b)) => {
                if a.is_nan() || *a >= 2f64.powi(100) {
                    return Ordering::Greater;
                }
                if *a <= -(2f64.powi(100)) {
                    return Ordering::Less;
                }
                let floor = a.floor();
                match (floor as i128).cmp(b) {
                    Ordering::Equal if floor == *a => Ordering::Equal,
                    Ordering::Equal => Ordering::Greater,
                    other => other,
                }
            }
        }
    }
}

/// `order by field` through its index gives the exact order of the values, ascending and
/// descending (ties by id), and every comparison with `constants` through the index returns
/// what a scan of the same records does.
fn check_against_scan(db: &Db, records: &[Indexed], constants: &[String]) {
    let indexed = db.collection::<Indexed>().unwrap();
    let scanned = db.collection::<Plain>().unwrap();
    for field in ["int", "uint", "float"] {
        let mut expected = records.to_vec();
        expected.sort_by(|a, b| exact_cmp(a, b, field).then(a.id.cmp(&b.id)));
        let query = indexed.query_text(&format!("order by {field}")).unwrap();
        assert!(query.explain().unwrap().to_string().contains("index"), "{}", query.explain().unwrap());
        assert_eq!(ids(&query.fetch(db).unwrap(), |r| r.id), ids(&expected, |r| r.id), "order by {field}");
        // Descending: values reversed, ties (NaN, or equal values) still by ascending id.
        let mut descending = records.to_vec();
        descending.sort_by(|a, b| exact_cmp(b, a, field).then(a.id.cmp(&b.id)));
        let query = indexed.query_text(&format!("order by {field} desc")).unwrap();
        assert_eq!(ids(&query.fetch(db).unwrap(), |r| r.id), ids(&descending, |r| r.id), "order by {field} desc");
        for constant in constants {
            for op in ["==", "<", "<=", ">", ">=", "!="] {
                let text = format!("{field} {op} {constant} order by id");
                let through_index = indexed.query_text(&text).unwrap();
                let by_scan = scanned.query_text(&text).unwrap();
                assert_eq!(
                    ids(&through_index.fetch(db).unwrap(), |r| r.id),
                    ids(&by_scan.fetch(db).unwrap(), |r| r.id),
                    "{text}: {}",
                    through_index.explain().unwrap()
                );
                // And both are what exact arithmetic says (NaN compares as SQL's: only `!=`).
                let constant_value = exact_constant(constant);
                let mut by_oracle: Vec<u32> = records
                    .iter()
                    .filter(|record| {
                        let value = match field {
                            "int" => Exact::Int(i128::from(record.int)),
                            "uint" => Exact::Int(i128::from(record.uint)),
                            _ => Exact::Float(record.float),
                        };
                        if matches!(value, Exact::Float(x) if x.is_nan()) {
                            return op == "!=";
                        }
                        let order = value.cmp_exact(&constant_value);
                        match op {
                            "==" => order == Ordering::Equal,
                            "!=" => order != Ordering::Equal,
                            "<" => order == Ordering::Less,
                            "<=" => order != Ordering::Greater,
                            ">" => order == Ordering::Greater,
                            _ => order != Ordering::Less,
                        }
                    })
                    .map(|record| record.id)
                    .collect();
                by_oracle.sort_unstable();
                assert_eq!(ids(&by_scan.fetch(db).unwrap(), |r| r.id), by_oracle, "{text}: exactly");
            }
        }
    }
}

/// A query constant's exact value: an integer when written without a fraction or exponent.
fn exact_constant(text: &str) -> Exact {
    match text.parse::<i128>() {
        Ok(int) => Exact::Int(int),
        Err(_) => Exact::Float(text.parse().unwrap()),
    }
}

/// Constants at the edges, as the query language writes them (an integer up to `u64::MAX` is
/// exact).
fn edge_constants() -> Vec<String> {
    [
        "0",
        "-0.0",
        "3",
        "3.0",
        "1.5",
        "9007199254740992",
        "9007199254740993",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808.0",
        "18446744073709551615",
        "18446744073709551614",
        "9223372036854775809",
        "18446744073709551616.0",
        "-1e300",
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn index_order_and_lookups_agree_with_a_scan_at_the_edges() {
    let records = edge_records();
    let (_dir, db) = both(&records);
    check_against_scan(&db, &records, &edge_constants());
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn order_by_an_index_tells_the_top_of_u64_apart() {
    let records: Vec<Indexed> = [u64::MAX, u64::MAX - 2, u64::MAX - 1, (1 << 63) + 1, 1 << 63]
        .iter()
        .enumerate()
        .map(|(id, uint)| Indexed { id: id as u32, int: 0, uint: *uint, float: 0.0 })
        .collect();
    let (_dir, db) = both(&records);
    let indexed = db.collection::<Indexed>().unwrap();
    let ascending = indexed.query_text("order by uint").unwrap().fetch(&db).unwrap();
    assert_eq!(ascending.iter().map(|r| r.uint).collect::<Vec<_>>(), [1 << 63, (1 << 63) + 1, u64::MAX - 2, u64::MAX - 1, u64::MAX]);
    let descending = indexed.query_text("order by uint desc limit 2").unwrap().fetch(&db).unwrap();
    assert_eq!(descending.iter().map(|r| r.uint).collect::<Vec<_>>(), [u64::MAX, u64::MAX - 1]);
}

/// Numbers biased toward the edges, with small steps off them.
fn int_value() -> impl Strategy<Value = i64> {
    let edges = prop::sample::select(vec![i64::MIN, -(1 << 53), -1, 0, 1 << 53, i64::MAX]);
    prop_oneof![(edges, -2i64..=2).prop_map(|(edge, step)| edge.saturating_add(step)), any::<i64>(), -5i64..5]
}

fn uint_value() -> impl Strategy<Value = u64> {
    let edges = prop::sample::select(vec![0, 1 << 53, i64::MAX as u64, 1 << 63, u64::MAX - 1024, u64::MAX]);
    prop_oneof![(edges, -2i64..=2).prop_map(|(edge, step)| edge.saturating_add_signed(step)), any::<u64>(), 0u64..5]
}

fn float_value() -> impl Strategy<Value = f64> {
    let edges = prop::sample::select(vec![-0.0, 0.0, 3.0, (1u64 << 63) as f64, u64::MAX as f64, f64::INFINITY, f64::NAN]);
    prop_oneof![edges, any::<f64>(), (-8i32..8).prop_map(|n| f64::from(n) / 2.0)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Random values of each kind: an index orders them exactly, and every comparison through
    /// it agrees with a scan.
    #[test]
    fn index_agrees_with_a_scan(values in prop::collection::vec((int_value(), uint_value(), float_value()), 1..24), picks in prop::collection::vec(0usize..64, 3)) {
        let records: Vec<Indexed> =
            values.iter().enumerate().map(|(id, (int, uint, float))| Indexed { id: id as u32, int: *int, uint: *uint, float: *float }).collect();
        let (_dir, db) = both(&records);
        // Constants: some of the values themselves (as the query language writes them), and the edges.
        let mut constants: Vec<String> = picks
            .iter()
            .map(|pick| {
                let (int, uint, float) = values[pick % values.len()];
                match pick % 3 {
                    0 => int.to_string(),
                    1 => uint.to_string(),
                    _ if float.is_finite() => format!("{float:?}"),
                    _ => "0.5".to_owned(),
                }
            })
            .collect();
        constants.extend(["9223372036854775808.0", "18446744073709551615"].map(String::from));
        check_against_scan(&db, &records, &constants);
    }
}

// ---- A file of storage format 6 (`tests/fixtures/make_v6.rs`) ----

#[derive(Debug, Clone, PartialEq, Record)]
#[record(name = "big", version = 1)]
pub struct Big {
    #[record(key)]
    pub id: u32,
    #[record(index)]
    pub count: u64,
    #[record(unique)]
    pub serial: u64,
    #[record(index)]
    pub delta: i64,
    #[record(index)]
    pub ratio: f64,
}

pub const COUNTS: [u64; 12] =
    [u64::MAX, u64::MAX - 1, u64::MAX - 1024, (1 << 63) + 1, 1 << 63, i64::MAX as u64, (1 << 53) + 1, 1 << 53, 1000, 7, 1, 0];
pub const DELTAS: [i64; 8] = [i64::MIN, i64::MIN + 1, -(1 << 53) - 1, -5, 0, 3, (1 << 53) + 1, i64::MAX];
pub const RATIOS: [f64; 6] = [-2.5, -0.0, 0.5, 1.5, 3.0, (1u64 << 63) as f64];
pub const RECORDS: u32 = 60;

pub fn big(id: u32) -> Big {
    let n = id as usize;
    Big {
        id,
        count: COUNTS[n % COUNTS.len()],
        serial: if id == 0 { u64::MAX } else { id as u64 * 1000 },
        delta: DELTAS[n % DELTAS.len()],
        ratio: RATIOS[n % RATIOS.len()],
    }
}

/// A copy of `v6.tessera` in a temporary directory.
fn v6_copy() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v6.tessera");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v6.tessera"), &path).unwrap();
    (dir, path)
}

/// The fixture's records whose value of a field satisfies `keep`, by id.
fn expected(keep: impl Fn(&Big) -> bool) -> Vec<u32> {
    (0..RECORDS).map(big).filter(|record| keep(record)).map(|record| record.id).collect()
}

/// Queries every index of the fixture's collection (`==` and ranges, and an ordered walk)
/// and compares with the values `make_v6.rs` wrote.
fn check_fixture_queries(db: &Db) {
    let bigs = db.collection::<Big>().unwrap();
    let fetch = |text: &str| -> Vec<u32> {
        let query = bigs.query_text(text).unwrap();
        assert!(query.explain().unwrap().to_string().contains("index"), "{text}: {}", query.explain().unwrap());
        ids(&query.fetch(db).unwrap(), |record| record.id)
    };
    let by_id = |text: &str| fetch(&format!("{text} order by id"));
    assert_eq!(by_id("delta == 3"), expected(|r| r.delta == 3));
    assert_eq!(by_id("delta == -5"), expected(|r| r.delta == -5));
    assert_eq!(by_id("delta < 0"), expected(|r| r.delta < 0));
    assert_eq!(by_id("delta >= 9007199254740993"), expected(|r| r.delta > (1 << 53)));
    // Integer constants are exact, up to i64::MIN and u64::MAX.
    assert_eq!(by_id("delta == -9223372036854775808"), expected(|r| r.delta == i64::MIN));
    assert_eq!(by_id("delta < -9223372036854775807"), expected(|r| r.delta < -i64::MAX));
    assert_eq!(by_id("count == 7"), expected(|r| r.count == 7));
    assert_eq!(by_id("count > 1000"), expected(|r| r.count > 1000));
    assert_eq!(by_id("count <= 1000"), expected(|r| r.count <= 1000));
    assert_eq!(by_id("count == 9223372036854775807"), expected(|r| r.count == i64::MAX as u64));
    assert_eq!(by_id("count == 18446744073709551614"), expected(|r| r.count == u64::MAX - 1));
    assert_eq!(by_id("serial == 5000"), vec![5]);
    assert_eq!(by_id("serial > 58000"), vec![0, 59]);
    assert_eq!(by_id("ratio == 1.5"), expected(|r| r.ratio == 1.5));
    assert_eq!(by_id("ratio == 0"), expected(|r| r.ratio == 0.0));
    assert_eq!(by_id("ratio > 0.5"), expected(|r| r.ratio > 0.5));
    // Ordered walks: the exact order of the values, ties by id.
    let mut by_count: Vec<Big> = (0..RECORDS).map(big).collect();
    by_count.sort_by_key(|record| (record.count, record.id));
    assert_eq!(fetch("order by count"), ids(&by_count, |record| record.id));
    by_count.sort_by_key(|record| (std::cmp::Reverse(record.count), record.id));
    assert_eq!(fetch("order by count desc"), ids(&by_count, |record| record.id));
    let mut by_delta: Vec<Big> = (0..RECORDS).map(big).collect();
    by_delta.sort_by_key(|record| (record.delta, record.id));
    assert_eq!(fetch("order by delta"), ids(&by_delta, |record| record.id));
    let mut by_serial: Vec<Big> = (0..RECORDS).map(big).collect();
    by_serial.sort_by_key(|record| record.serial);
    assert_eq!(fetch("order by serial"), ids(&by_serial, |record| record.id));
    assert_eq!(bigs.all().fetch(db).unwrap(), (0..RECORDS).map(big).collect::<Vec<_>>());
}

#[test]
fn a_format_6_file_migrates_its_index_entries() {
    let (_dir, path) = v6_copy();
    let db = Db::open(&path).unwrap();
    assert_eq!(db.file_info().unwrap().format_version, 8);
    assert_eq!(tessera::store::STORAGE_FORMAT_VERSION, 8);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
    check_fixture_queries(&db);
    // The unique index tells u64::MAX - 1 from the fixture's u64::MAX.
    let bigs = db.collection::<Big>().unwrap();
    let neighbour = Big { id: 100, count: u64::MAX - 1, serial: u64::MAX - 1, delta: 0, ratio: 0.0 };
    db.write(|tx| bigs.insert(tx, &neighbour)).unwrap();
    let duplicate = db.write(|tx| bigs.insert(tx, &Big { id: 101, serial: u64::MAX, ..neighbour.clone() }));
    assert!(matches!(duplicate, Err(Error::UniqueViolation { .. })), "{duplicate:?}");
    let top: Vec<u64> = bigs.query_text("order by serial desc limit 2").unwrap().fetch(&db).unwrap().iter().map(|r| r.serial).collect();
    assert_eq!(top, [u64::MAX, u64::MAX - 1]);
    drop(bigs);
    db.close().unwrap();
    // Opened again: already of the current format, nothing to migrate.
    let db = Db::open(&path).unwrap();
    assert_eq!(db.file_info().unwrap().format_version, 8);
    assert!(db.check().unwrap().is_ok());
    assert_eq!(db.collection::<Big>().unwrap().all().count(&db).unwrap(), RECORDS as usize + 1);
}

#[test]
fn a_format_6_file_reads_as_it_is_read_only() {
    let (_dir, path) = v6_copy();
    let db = Db::open_with(&path, DbOptions { read_only: true, ..DbOptions::default() }).unwrap();
    assert_eq!(db.file_info().unwrap().format_version, 6);
    // Its index entries are checked as format 6 wrote them.
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
    // A read-only handle queries through a dynamic collection, which scans: the format-6
    // index entries order numbers above 2^63 as format 6 did.
    let bigs = db.dyn_collection("big").unwrap();
    let fetch = |text: &str| -> Vec<u32> {
        let records = bigs.filter_text(text).unwrap().fetch(&db).unwrap();
        records.iter().map(|record| record.value().get("id").and_then(|id| id.as_u64()).unwrap() as u32).collect()
    };
    assert_eq!(fetch("delta == 3"), expected(|r| r.delta == 3));
    assert_eq!(fetch("count == 7"), expected(|r| r.count == 7));
    assert_eq!(fetch("count > 1000"), expected(|r| r.count > 1000));
    assert_eq!(fetch("serial > 58000"), vec![0, 59]);
    assert_eq!(fetch("ratio == 1.5"), expected(|r| r.ratio == 1.5));
    let ordered = bigs.all().order_by_key(tessera::query::OrderKey::new("count", tessera::query::Order::Desc)).unwrap();
    let top: Vec<u64> =
        ordered.limit(6).fetch(&db).unwrap().iter().map(|record| record.value().get("count").unwrap().as_u64().unwrap()).collect();
    assert_eq!(top, [u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX, u64::MAX - 1]);
    assert!(bigs.filter_text("count > 1000").unwrap().explain().unwrap().to_string().starts_with("full scan"));
    drop((bigs, db));
    // The copy was not migrated.
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes, std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/v6.tessera")).unwrap());
}

/// Opens `path` with LMDB alone and runs `visit` in a write transaction.
fn with_raw<T>(path: &std::path::Path, visit: impl FnOnce(&heed::Env, &mut heed::RwTxn<'_>) -> T) -> T {
    // SAFETY: the test opens the file this way only while no `Db` has it open.
    let env = unsafe { heed::EnvOpenOptions::new().max_dbs(128).flags(heed::EnvFlags::NO_SUB_DIR).open(path) }.unwrap();
    let mut txn = env.write_txn().unwrap();
    let result = visit(&env, &mut txn);
    txn.commit().unwrap();
    env.prepare_for_closing().wait();
    result
}

fn raw_keyspace(env: &heed::Env, txn: &heed::RwTxn<'_>, name: &str) -> heed::Database<heed::types::Bytes, heed::types::Bytes> {
    env.open_database(txn, Some(name)).unwrap().unwrap()
}

/// A file of format 6 with its durable feed on keeps its hash key and its feed through the
/// migration, which rebuilds its index entries (here: all removed beforehand).
#[test]
fn a_format_6_file_keeps_its_hash_key_and_feed_and_gets_its_indexes_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let options = || DbOptions { durable_feed: true, ..DbOptions::default() };
    let values = [u64::MAX, u64::MAX - 1, 5];
    {
        let db = Db::open_with(&path, options()).unwrap();
        let serials = db.collection::<Serial>().unwrap();
        db.write(|tx| {
            for (id, serial) in values.iter().enumerate() {
                serials.insert(tx, &Serial { id: id as u32, serial: *serial })?;
            }
            Ok(())
        })
        .unwrap();
        drop(serials);
        db.close().unwrap();
    }
    let meta = |key: &[u8]| with_raw(&path, |env, txn| raw_keyspace(env, txn, "tessera.meta").get(txn, key).unwrap().map(<[u8]>::to_vec));
    let hash_key = meta(b"hash_key").unwrap();
    with_raw(&path, |env, txn| {
        raw_keyspace(env, txn, "tessera.meta").put(txn, b"format_version", &6u32.to_be_bytes()).unwrap();
        raw_keyspace(env, txn, "tessera.idx.serials").clear(txn).unwrap();
    });
    let feed_before = Db::open_with(&path, DbOptions { read_only: true, ..options() }).unwrap().changes_since(0, 100).unwrap();
    assert!(!feed_before.is_empty());
    let db = Db::open_with(&path, options()).unwrap();
    assert_eq!(db.file_info().unwrap().format_version, 8);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(db.changes_since(0, 100).unwrap().len(), feed_before.len(), "the feed is kept");
    let serials = db.collection::<Serial>().unwrap();
    let ordered: Vec<u64> = serials.query_text("order by serial desc").unwrap().fetch(&db).unwrap().iter().map(|s| s.serial).collect();
    assert_eq!(ordered, [u64::MAX, u64::MAX - 1, 5]);
    let duplicate = db.write(|tx| serials.insert(tx, &Serial { id: 9, serial: u64::MAX - 1 }));
    assert!(matches!(duplicate, Err(Error::UniqueViolation { .. })), "{duplicate:?}");
    drop(serials);
    db.close().unwrap();
    assert_eq!(meta(b"hash_key").unwrap(), hash_key, "the hash key is kept");
}
