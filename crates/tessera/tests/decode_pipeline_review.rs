//! Review of `Query::fetch`'s decode pipeline (`collection/decode_pipeline.rs`): a result of
//! more than 512 records is decoded on a helper thread (`tessera-decode`) in chunks of 128
//! while the calling thread goes on finding the rest, and decodes the last partial chunk
//! itself. The claim: the records, and the error if any, are exactly those of decoding every
//! match in order on one thread.
//!
//! Every fetch here is compared with an oracle: the same query's `iter` collected on one
//! thread (the same engine, decoded one record at a time, stopping at the first error), and a
//! model of the rows in a Vec.
//!
//! Records are made to fail or panic when decoded with a field type whose decoder is written
//! by hand, as `tessera::codec::Decode` is public and documented for that
//! (`FieldProblem::Invalid`, `decode_with_serde`): the stored value says what decoding it does.

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use tessera::codec::{Decode, Encode, FieldError, FieldIds, FieldProblem, View};
use tessera::collection::{Describe, IntType, Order, Record, TypeDesc};
use tessera::value::{EncodeError, Encoder, Value};
use tessera::{Collection, Db, DbOptions, Error, Query};

// ---- a field type with a hand-written decoder ---------------------------------------------

/// An integer whose decoding does what its stored value says: a value >= 0 decodes; a
/// negative one is `-(kind * KIND_STEP + tag)`, see the kinds below.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Probe(i64);

const KIND_STEP: i64 = 1_000_000;
/// Decoding fails: `FieldProblem::Invalid("refused {tag}")`.
const REFUSE: i64 = 1;
/// Decoding sleeps [`SLOW`], then fails as [`REFUSE`] does.
const SLOW_REFUSE: i64 = 2;
/// Decoding panics: "probe {tag} panicked".
const PANIC: i64 = 3;
/// Decoding sleeps [`SLOW`], then panics as [`PANIC`] does.
const SLOW_PANIC: i64 = 4;
/// Decoding uses 3 MiB of stack (a thread's default is 2 MiB), then decodes.
const DEEP_STACK: i64 = 5;
/// Long enough that the calling thread finds and decodes a few hundred records meanwhile.
const SLOW: Duration = Duration::from_millis(300);
/// Values from here up decode, and are noted with the name of the thread that decoded them.
const TRACED: i64 = 1 << 40;

static TRACE: Mutex<Vec<(i64, String)>> = Mutex::new(Vec::new());

impl Probe {
    fn bad(kind: i64, tag: u32) -> Probe {
        Probe(-(kind * KIND_STEP + i64::from(tag)))
    }
}

impl Encode for Probe {
    fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
        out.push_i64(self.0)
    }
}

impl<'a> Decode<'a> for Probe {
    fn decode(value: Value<'a>, ids: &FieldIds) -> Result<Self, FieldError> {
        let stored = i64::decode(value, ids)?;
        if stored >= TRACED {
            let thread = std::thread::current().name().unwrap_or("<unnamed>").to_owned();
            TRACE.lock().unwrap_or_else(|poison| poison.into_inner()).push((stored, thread));
        }
        if stored >= 0 {
            return Ok(Probe(stored));
        }
        let (kind, tag) = (-stored / KIND_STEP, -stored % KIND_STEP);
        if kind == SLOW_REFUSE || kind == SLOW_PANIC {
            std::thread::sleep(SLOW);
        }
        if kind == DEEP_STACK {
            return Ok(Probe(stored + deep_stack(tag as u8)));
        }
        match kind {
            REFUSE | SLOW_REFUSE => Err(FieldError { path: String::new(), problem: FieldProblem::Invalid(format!("refused {tag}")) }),
            PANIC | SLOW_PANIC => panic!("probe {tag} panicked"),
            _ => unreachable!("kind {kind}"),
        }
    }
}

/// 3 MiB of stack, in a frame of its own (only the decoders that call it need it): 0.
#[inline(never)]
fn deep_stack(fill: u8) -> i64 {
    let scratch = [fill; 3 << 20];
    i64::from(std::hint::black_box(&scratch)[1 << 20] != fill)
}

impl<'a> View<'a> for Probe {
    type Out = Probe;
    fn view(value: Value<'a>, ids: &FieldIds) -> Result<Probe, FieldError> {
        Probe::decode(value, ids)
    }
}

impl Describe for Probe {
    fn describe() -> TypeDesc {
        TypeDesc::Integer(IntType::I64)
    }
}

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "rows")]
struct Row {
    #[record(key)]
    id: u32,
    #[record(index)]
    score: i32,
    group: u32,
    name: String,
    probe: Probe,
}

/// Row `id`: scores repeat (ties broken by key), names are distinct and unordered by key.
fn row(id: u32) -> Row {
    Row {
        id,
        score: (id.wrapping_mul(7_919) % 1_000) as i32,
        group: id % 5,
        name: format!("n{:05}", id.wrapping_mul(104_729) % 100_000),
        probe: Probe(i64::from(id)),
    }
}

fn open(path: &Path, options: DbOptions) -> (Db, Collection<Row>) {
    let db = Db::open_with(path, options).unwrap();
    let rows = db.collection::<Row>().unwrap();
    assert!(rows.wait_for_indexes(Duration::from_secs(10)));
    (db, rows)
}

fn fresh(count: u32) -> (tempfile::TempDir, Db, Collection<Row>) {
    let dir = tempfile::tempdir().unwrap();
    let (db, rows) = open(&dir.path().join("rows.tessera"), DbOptions::default());
    fill(&db, &rows, (0..count).map(row));
    (dir, db, rows)
}

fn fill(db: &Db, rows: &Collection<Row>, records: impl IntoIterator<Item = Row>) {
    let records: Vec<Row> = records.into_iter().collect();
    db.write(|tx| records.iter().try_for_each(|record| rows.upsert(tx, record).map(drop))).unwrap();
}

// ---- query shapes and their model ---------------------------------------------------------

/// Queries of every plan: a full scan, a primary-key range, a scan with a predicate, an index
/// range and an index walk in either direction, an in-memory sort in either direction, a union.
#[derive(Debug, Clone, Copy)]
enum Shape {
    All,
    KeyBelow(u32),
    GroupNot(u32),
    ScoreAsc(i32, i32),
    ScoreDesc,
    NameDesc,
    NameAsc,
    Union,
}

const SHAPES: [Shape; 8] = [
    Shape::All,
    Shape::KeyBelow(2_000),
    Shape::GroupNot(3),
    Shape::ScoreAsc(100, 900),
    Shape::ScoreDesc,
    Shape::NameDesc,
    Shape::NameAsc,
    Shape::Union,
];

fn query(rows: &Collection<Row>, shape: Shape) -> Query<Row> {
    match shape {
        Shape::All => rows.all(),
        Shape::KeyBelow(below) => rows.filter(Row::id().lt(below)),
        Shape::GroupNot(group) => rows.filter(Row::group().ne(group)),
        Shape::ScoreAsc(low, high) => rows.filter(Row::score().ge(low).and(Row::score().lt(high))).order_by(Row::score(), Order::Asc),
        Shape::ScoreDesc => rows.all().order_by(Row::score(), Order::Desc),
        Shape::NameDesc => rows.all().order_by(Row::name(), Order::Desc),
        Shape::NameAsc => rows.filter(Row::group().ne(0)).order_by(Row::name(), Order::Asc),
        Shape::Union => rows.filter(Row::score().lt(300).or(Row::id().ge(1_000))),
    }
}

/// The ids `shape` returns from `model` (every row, in key order), before offset and limit.
fn model(model: &[Row], shape: Shape) -> Vec<u32> {
    let mut found: Vec<&Row> = match shape {
        Shape::All | Shape::ScoreDesc | Shape::NameDesc => model.iter().collect(),
        Shape::KeyBelow(below) => model.iter().filter(|r| r.id < below).collect(),
        Shape::GroupNot(group) => model.iter().filter(|r| r.group != group).collect(),
        Shape::ScoreAsc(low, high) => model.iter().filter(|r| r.score >= low && r.score < high).collect(),
        Shape::NameAsc => model.iter().filter(|r| r.group != 0).collect(),
        Shape::Union => model.iter().filter(|r| r.score < 300 || r.id >= 1_000).collect(),
    };
    // Ties by primary key, ascending, whatever the direction.
    match shape {
        Shape::ScoreAsc(..) => found.sort_by_key(|r| (r.score, r.id)),
        Shape::ScoreDesc => found.sort_by_key(|r| (std::cmp::Reverse(r.score), r.id)),
        Shape::NameDesc => found.sort_by(|a, b| b.name.cmp(&a.name)),
        Shape::NameAsc => found.sort_by(|a, b| a.name.cmp(&b.name)),
        _ => {}
    }
    found.into_iter().map(|r| r.id).collect()
}

fn window(ids: &[u32], offset: usize, limit: Option<usize>) -> Vec<u32> {
    ids.iter().copied().skip(offset).take(limit.unwrap_or(usize::MAX)).collect()
}

fn windowed(query: Query<Row>, offset: usize, limit: Option<usize>) -> Query<Row> {
    let query = if offset > 0 { query.offset(offset) } else { query };
    match limit {
        Some(limit) => query.limit(limit),
        None => query,
    }
}

/// The oracle: the query's results decoded in order on this thread, up to the first error.
fn one_thread(query: &Query<Row>, db: &Db) -> tessera::Result<Vec<Row>> {
    let tx = db.read_txn()?;
    query.iter(&tx)?.collect()
}

/// `result` as text comparable with another's: the rows, or the error's message.
fn shown(result: &tessera::Result<Vec<Row>>) -> Result<Vec<Row>, String> {
    match result {
        Ok(found) => Ok(found.clone()),
        Err(error) => Err(error.to_string()),
    }
}

fn ids(found: &[Row]) -> Vec<u32> {
    found.iter().map(|r| r.id).collect()
}

/// The key a `RecordDecode` error names.
fn decode_error_key(result: &tessera::Result<Vec<Row>>) -> String {
    match result {
        Err(Error::RecordDecode { key, .. }) => key.clone(),
        other => panic!("expected RecordDecode, got {:?}", other.as_ref().map(|found| found.len())),
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload.downcast_ref::<String>().cloned().or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned())).unwrap_or_default()
}

/// Sets the probe of each of `ids` (rows as `row` made them) to `probe(id)`.
fn set_probes(db: &Db, rows: &Collection<Row>, ids: &[u32], probe: impl Fn(u32) -> Probe) {
    fill(db, rows, ids.iter().map(|&id| Row { probe: probe(id), ..row(id) }));
}

// ---- sizes, windows and plans ---------------------------------------------------------------

#[test]
fn every_size_around_the_threshold_and_the_chunks_is_what_one_thread_decodes_in_every_plan() {
    let (_dir, db, rows) = fresh(3_000);
    let all: Vec<Row> = (0..3_000).map(row).collect();
    let plans: BTreeSet<String> = SHAPES.iter().map(|&shape| query(&rows, shape).explain().unwrap().to_string()).collect();
    for plan in ["full scan", "primary key range", "index range on score [", "walked backwards", "sort in memory", "union("] {
        assert!(plans.iter().any(|p| p.contains(plan)), "no plan {plan:?} among {plans:#?}");
    }
    let limits = [0, 1, 127, 128, 129, 511, 512, 513, 514, 639, 640, 641, 642, 768, 769, 1_025];
    for shape in SHAPES {
        let expected = model(&all, shape);
        assert!(expected.len() > 1_025, "{shape:?} returns {} rows", expected.len());
        let mut windows: Vec<(usize, Option<usize>)> = limits.iter().map(|&limit| (0, Some(limit))).collect();
        windows.extend([(0, None), (1, None), (129, Some(513)), (511, Some(641)), (512, None), (513, Some(640))]);
        windows.push((expected.len() - 513, None));
        windows.push((expected.len() - 512, None));
        for (offset, limit) in windows {
            let query = windowed(query(&rows, shape), offset, limit);
            let fetched = query.fetch(&db).unwrap();
            let want = window(&expected, offset, limit);
            assert_eq!(ids(&fetched), want, "{shape:?}, offset {offset}, limit {limit:?}: ids against the model");
            assert!(fetched.iter().all(|r| *r == row(r.id)), "{shape:?}, offset {offset}, limit {limit:?}: a record decoded wrong");
            assert_eq!(query.count(&db).unwrap(), want.len(), "{shape:?}, offset {offset}, limit {limit:?}: count");
            if limit.is_none_or(|limit| limit >= 511) {
                assert_eq!(shown(&Ok(fetched)), shown(&one_thread(&query, &db)), "{shape:?}, offset {offset}, limit {limit:?}: iter");
            }
        }
    }
}

#[test]
fn results_of_exactly_511_to_769_matches_without_a_limit_are_every_match_in_order() {
    let (_dir, db, rows) = fresh(1_000);
    for count in [511u32, 512, 513, 514, 639, 640, 641, 642, 767, 768, 769, 1_000] {
        let ascending = rows.filter(Row::id().lt(count)).fetch(&db).unwrap();
        assert_eq!(ids(&ascending), (0..count).collect::<Vec<_>>(), "{count} matches by key");
        assert!(ascending.iter().all(|r| *r == row(r.id)));
        // The same matches sorted in memory, in reverse key order.
        let descending = rows.filter(Row::id().lt(count)).order_by(Row::id(), Order::Desc).fetch(&db).unwrap();
        assert_eq!(ids(&descending), (0..count).rev().collect::<Vec<_>>(), "{count} matches, descending");
        // From the top of the key range: the last matches of the scan.
        let top = rows.filter(Row::id().ge(1_000 - count)).fetch(&db).unwrap();
        assert_eq!(ids(&top), (1_000 - count..1_000).collect::<Vec<_>>(), "the top {count}");
    }
}

#[test]
fn twenty_thousand_records_come_back_whole_and_in_order_through_every_plan() {
    let (_dir, db, rows) = fresh(20_000);
    let all: Vec<Row> = (0..20_000).map(row).collect();
    for shape in [Shape::All, Shape::GroupNot(1), Shape::ScoreDesc, Shape::NameDesc, Shape::Union] {
        let query = query(&rows, shape);
        let fetched = query.fetch(&db).unwrap();
        assert_eq!(ids(&fetched), model(&all, shape), "{shape:?}");
        assert!(fetched.iter().all(|r| *r == row(r.id)), "{shape:?}: a record decoded wrong");
    }
    // A text query with its own window.
    let text = rows.query_text("group != 2 order by score desc limit 9000 offset 1000").unwrap();
    let expected: Vec<u32> = {
        let mut found: Vec<&Row> = all.iter().filter(|r| r.group != 2).collect();
        found.sort_by_key(|r| (std::cmp::Reverse(r.score), r.id));
        found.iter().skip(1_000).take(9_000).map(|r| r.id).collect()
    };
    assert_eq!(ids(&text.fetch(&db).unwrap()), expected);
}

#[test]
fn a_typed_fetch_agrees_with_the_dynamic_handle_which_decodes_on_one_thread() {
    let (_dir, db, rows) = fresh(2_000);
    let dynamic = db.dyn_collection("rows").unwrap();
    for text in ["group != 1", "score < 700 order by name desc", "order by score asc limit 900 offset 100", ""] {
        let typed = rows.query_text(text).unwrap().fetch(&db).unwrap();
        let query = if text.is_empty() { dynamic.all() } else { dynamic.filter_text(text).unwrap() };
        let from_dynamic: Vec<Vec<u8>> = query.fetch(&db).unwrap().iter().map(|r| r.key_bytes().to_vec()).collect();
        let from_typed: Vec<Vec<u8>> = typed.iter().map(|r| tessera::store::key::encode(&r.id)).collect();
        assert!(typed.len() > 512, "{text:?}: {} rows", typed.len());
        assert_eq!(from_typed, from_dynamic, "{text:?}");
    }
}

// ---- which thread decodes -------------------------------------------------------------------

#[test]
fn only_a_result_of_more_than_512_records_is_decoded_off_the_calling_thread() {
    let dir = tempfile::tempdir().unwrap();
    let (db, rows) = open(&dir.path().join("traced.tessera"), DbOptions::default());
    fill(&db, &rows, (0..1_000).map(|id| Row { probe: Probe(TRACED + i64::from(id)), ..row(id) }));
    let me = std::thread::current().name().unwrap().to_owned();
    for count in [1u32, 511, 512, 513, 640, 641, 1_000] {
        TRACE.lock().unwrap().clear();
        let found = rows.filter(Row::id().lt(count)).fetch(&db).unwrap();
        assert_eq!(ids(&found), (0..count).collect::<Vec<_>>());
        let trace = std::mem::take(&mut *TRACE.lock().unwrap());
        let decoded: Vec<i64> = {
            let mut values: Vec<i64> = trace.iter().map(|(value, _)| value - TRACED).collect();
            values.sort_unstable();
            values
        };
        assert_eq!(decoded, (0..i64::from(count)).collect::<Vec<_>>(), "{count}: every record decoded once");
        let threads: BTreeSet<&str> = trace.iter().map(|(_, thread)| thread.as_str()).collect();
        if count <= 512 {
            assert_eq!(threads, BTreeSet::from([me.as_str()]), "{count}: decoded on the calling thread alone");
        } else {
            assert!(threads.contains("tessera-decode"), "{count}: the helper decoded none: {threads:?}");
            assert!(threads.iter().all(|thread| *thread == me || *thread == "tessera-decode"), "{threads:?}");
        }
    }
}

// ---- the first error by position ------------------------------------------------------------

#[test]
fn the_error_is_the_first_failing_record_in_result_order_whichever_thread_decodes_it() {
    let (_dir, db, rows) = fresh(2_000);
    let all: Vec<Row> = (0..2_000).map(row).collect();
    for shape in [Shape::All, Shape::GroupNot(4), Shape::ScoreDesc, Shape::NameDesc, Shape::Union] {
        let order = model(&all, shape);
        let last = order.len() - 1;
        assert!(last > 1_000, "{shape:?}");
        let position_sets: [&[usize]; 14] = [
            &[0],
            &[127],
            &[128],
            &[511],
            &[512],
            &[513],
            &[640],
            &[last],
            &[700, 600],
            &[1_000, 512],
            &[512, 511],
            &[last, last - 1],
            &[last, 5],
            &[129, 900, 1_000],
        ];
        for positions in position_sets {
            let bad: Vec<u32> = positions.iter().map(|&p| order[p]).collect();
            set_probes(&db, &rows, &bad, |id| Probe::bad(REFUSE, id));
            let query = query(&rows, shape);
            let fetched = query.fetch(&db);
            let first = order[*positions.iter().min().unwrap()];
            assert_eq!(decode_error_key(&fetched), first.to_string(), "{shape:?}, failing positions {positions:?}");
            assert_eq!(shown(&fetched), shown(&one_thread(&query, &db)), "{shape:?}, failing positions {positions:?}");
            assert!(fetched.unwrap_err().to_string().contains(&format!("refused {first}")));
            set_probes(&db, &rows, &bad, |id| row(id).probe);
        }
    }
    assert_eq!(rows.all().fetch(&db).unwrap(), all, "restored");
}

#[test]
fn records_skipped_by_the_offset_or_beyond_the_limit_are_not_decoded() {
    let (_dir, db, rows) = fresh(2_000);
    let all: Vec<Row> = (0..2_000).map(row).collect();
    for shape in [Shape::All, Shape::ScoreDesc, Shape::NameDesc] {
        let order = model(&all, shape);
        // Failing records just before the window and just after it.
        let bad = [order[0], order[599], order[1_300], order[1_999]];
        set_probes(&db, &rows, &bad, |id| Probe::bad(REFUSE, id));
        let query = query(&rows, shape).offset(600).limit(700);
        let fetched = query.fetch(&db).unwrap();
        assert_eq!(ids(&fetched), order[600..1_300], "{shape:?}");
        assert_eq!(shown(&Ok(fetched)), shown(&one_thread(&query, &db)), "{shape:?}");
        // Then one at the window's first and last positions: the first one is the error.
        set_probes(&db, &rows, &[order[600], order[1_299]], |id| Probe::bad(REFUSE, id));
        let fetched = query.fetch(&db);
        assert_eq!(decode_error_key(&fetched), order[600].to_string(), "{shape:?}");
        assert_eq!(shown(&fetched), shown(&one_thread(&query, &db)), "{shape:?}");
        set_probes(&db, &rows, &[bad.as_slice(), &[order[600], order[1_299]]].concat(), |id| row(id).probe);
    }
}

/// Opens the file with raw LMDB and flips one bit of the value of each of `keys` in
/// `keyspace` (as `tests/checksums.rs` does), or replaces it with `replace`.
fn damage(path: &Path, keyspace: &str, keys: &[Vec<u8>], replace: Option<&[u8]>) {
    // SAFETY: no `Db` has the file open.
    let env = unsafe { heed::EnvOpenOptions::new().max_dbs(128).flags(heed::EnvFlags::NO_SUB_DIR).open(path) }.unwrap();
    let mut txn = env.write_txn().unwrap();
    let handle: heed::Database<heed::types::Bytes, heed::types::Bytes> = env.open_database(&txn, Some(keyspace)).unwrap().unwrap();
    for key in keys {
        let mut stored = handle.get(&txn, key).unwrap().expect("the value to damage").to_vec();
        match replace {
            Some(bytes) => stored = bytes.to_vec(),
            None => stored[0] ^= 0x04,
        }
        handle.put(&mut txn, key, &stored).unwrap();
    }
    txn.commit().unwrap();
    env.prepare_for_closing().wait();
}

fn key_of(id: u32) -> Vec<u8> {
    tessera::store::key::encode(&id)
}

#[test]
fn a_record_that_cannot_be_found_and_one_that_cannot_be_decoded_the_earlier_by_position_wins() {
    // Decoding fails at keys 600, 1300 and 2600; the stored values of 900, 1100 and 1900 fail
    // their checksums (an error of finding them: the scan verifies every value it reads).
    let refused = [600u32, 1_300, 2_600];
    let damaged = [900u32, 1_100, 1_900];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.tessera");
    {
        let (db, rows) = open(&path, DbOptions::default());
        fill(
            &db,
            &rows,
            (0..3_000).map(|id| if refused.contains(&id) { Row { probe: Probe::bad(REFUSE, id), ..row(id) } } else { row(id) }),
        );
    }
    damage(&path, "tessera.col.rows", &damaged.map(key_of), None);
    let (db, rows) = open(&path, DbOptions::default());
    enum Want {
        Decode(u32),
        Damaged(u32),
        Rows(usize),
        AnError,
    }
    let from = |from: u32| rows.filter(Row::id().ge(from));
    let key_range = |from: u32, below: u32| rows.filter(Row::id().ge(from).and(Row::id().lt(below)));
    let cases: Vec<(&str, Query<Row>, Want)> = vec![
        ("everything: decoding fails at position 600", rows.all(), Want::Decode(600)),
        ("up to the first failure", key_range(0, 600), Want::Rows(600)),
        ("a damaged value at position 299", from(601), Want::Damaged(900)),
        ("decode at 200, damage at 500", from(400), Want::Decode(600)),
        ("damage at 100, decode at 300", from(1_000), Want::Damaged(1_100)),
        ("decode at 199, damage at 799", from(1_101), Want::Decode(1_300)),
        ("damage at 599, after the helper started", from(1_301), Want::Damaged(1_900)),
        ("damage at 513", from(1_387), Want::Damaged(1_900)),
        ("damage at 512", from(1_388), Want::Damaged(1_900)),
        ("damage at 511", from(1_389), Want::Damaged(1_900)),
        ("damage at 128", from(1_772), Want::Damaged(1_900)),
        ("damage at 50, decode at 750", from(1_850), Want::Damaged(1_900)),
        ("decode at 699", from(1_901), Want::Decode(2_600)),
        ("decode at 650", from(1_950), Want::Decode(2_600)),
        ("decode at 513", from(2_087), Want::Decode(2_600)),
        ("decode at 512", from(2_088), Want::Decode(2_600)),
        ("decode at 511", from(2_089), Want::Decode(2_600)),
        ("decode at 499", from(2_101), Want::Decode(2_600)),
        ("nothing wrong, 598 rows", key_range(1_301, 1_899), Want::Rows(598)),
        ("nothing wrong, 699 rows", key_range(1_901, 2_600), Want::Rows(699)),
        ("descending through the index", rows.all().order_by(Row::score(), Order::Desc), Want::AnError),
        ("sorted in memory", rows.all().order_by(Row::name(), Order::Desc).offset(10), Want::AnError),
        ("an index range", rows.filter(Row::score().ge(0).and(Row::score().lt(1_000))), Want::AnError),
        ("a scan with a predicate", rows.filter(Row::group().ne(7)), Want::AnError),
    ];
    for (label, query, want) in cases {
        let fetched = query.fetch(&db);
        let oracle = one_thread(&query, &db);
        assert_eq!(shown(&fetched), shown(&oracle), "{label}: against one-thread decoding");
        match (want, &fetched) {
            (Want::Decode(id), _) => {
                assert!(matches!(&fetched, Err(Error::RecordDecode { .. })), "{label}: {:?}", fetched.as_ref().map(|found| found.len()));
                assert_eq!(decode_error_key(&fetched), id.to_string(), "{label}")
            }
            (Want::Damaged(id), Err(Error::Corrupted(message))) => {
                let hex: String = key_of(id).iter().map(|b| format!("{b:02x}")).collect();
                assert!(message.contains(&hex) && message.contains("checksum"), "{label}: {message}")
            }
            (Want::AnError, _) => assert!(fetched.is_err(), "{label}: the damage is in the result"),
            (Want::Rows(count), Ok(found)) => assert_eq!(found.len(), count, "{label}"),
            (_, other) => panic!("{label}: got {:?}", other.as_ref().map(|found| found.len())),
        }
    }
}

#[test]
fn unreadable_stored_records_with_checksums_off_are_the_first_error_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.tessera");
    {
        let (db, rows) = open(&path, DbOptions::default());
        fill(&db, &rows, (0..1_500).map(row));
    }
    // Not a document at all (with room for the checksum, which is not verified).
    let garbage = [0xFFu8, 0xFE, 0xFD, 0xFC, 0xFB, 0xFA, 0, 0, 0, 0, 1, 2, 3, 4];
    damage(&path, "tessera.col.rows", &[key_of(700), key_of(1_400), key_of(100)], Some(&garbage));
    let (db, rows) = open(&path, DbOptions { verify_checksums: false, ..Default::default() });
    for (from, first) in [(0u32, 100u32), (101, 700), (150, 700), (187, 700), (188, 700), (189, 700), (701, 1_400)] {
        let query = rows.filter(Row::id().ge(from));
        let fetched = query.fetch(&db);
        assert_eq!(shown(&fetched), shown(&one_thread(&query, &db)), "from {from}");
        match &fetched {
            Err(error) => assert!(error.to_string().contains(&first.to_string()), "from {from}: {error}"),
            Ok(found) => panic!("from {from}: {} rows", found.len()),
        }
    }
    assert_eq!(rows.filter(Row::id().ge(101).and(Row::id().lt(700))).fetch(&db).unwrap().len(), 599);
}

// ---- panics in decoding ---------------------------------------------------------------------

/// Runs `fetch` and returns its result or its panic's message.
fn fetch_or_panic(query: &Query<Row>, db: &Db) -> Result<Result<Vec<Row>, String>, String> {
    catch_unwind(AssertUnwindSafe(|| shown(&query.fetch(db)))).map_err(|payload| panic_text(&*payload))
}

fn iter_or_panic(query: &Query<Row>, db: &Db) -> Result<Result<Vec<Row>, String>, String> {
    catch_unwind(AssertUnwindSafe(|| shown(&one_thread(query, db)))).map_err(|payload| panic_text(&*payload))
}

#[test]
fn a_decoder_that_panics_panics_on_the_calling_thread_with_its_message() {
    let (_dir, db, rows) = fresh(1_000);
    // In the helper's first chunk, in a later full chunk, in the caller's tail, in a result too
    // small for the helper.
    for (bad, query) in [
        (10u32, rows.all()),
        (700, rows.all()),
        (999, rows.all()),
        (300, rows.filter(Row::id().lt(400))),
        (511, rows.filter(Row::id().lt(512))),
        (512, rows.filter(Row::id().lt(513))),
    ] {
        set_probes(&db, &rows, &[bad], |id| Probe::bad(PANIC, id));
        let expected = Err(format!("probe {bad} panicked"));
        assert_eq!(iter_or_panic(&query, &db), expected, "the oracle, record {bad}");
        assert_eq!(fetch_or_panic(&query, &db), expected, "record {bad}");
        // Inside a write transaction the panic is caught and returned as `Panicked`.
        match db.write(|tx| query.fetch(&*tx).map(drop)) {
            Err(Error::Panicked(message)) => assert!(message.contains(&format!("probe {bad} panicked")), "{message}"),
            other => panic!("record {bad}: expected Panicked, got {other:?}"),
        }
        set_probes(&db, &rows, &[bad], |id| row(id).probe);
        // The database is sound after it: reads and writes work.
        assert_eq!(rows.all().fetch(&db).unwrap().len(), 1_000);
    }
}

#[test]
fn a_record_after_the_first_failing_one_is_never_decoded_so_its_panic_cannot_replace_the_error() {
    // Record 5 fails to decode (slowly, in the helper's first chunk); record 650, in the
    // caller's last partial chunk, panics. One thread decoding in order stops at 5 and returns
    // its error; it never reaches 650.
    let (_dir, db, rows) = fresh(700);
    set_probes(&db, &rows, &[5], |id| Probe::bad(SLOW_REFUSE, id));
    set_probes(&db, &rows, &[650], |id| Probe::bad(PANIC, id));
    let query = rows.all();
    let oracle = iter_or_panic(&query, &db);
    assert!(matches!(&oracle, Ok(Err(message)) if message.contains("refused 5")), "{oracle:?}");
    assert_eq!(fetch_or_panic(&query, &db), oracle, "fetch against one-thread decoding");
}

#[test]
fn of_two_records_that_panic_the_first_in_order_is_the_panic() {
    // Record 5 panics (slowly, in the helper's first chunk); record 650, in the caller's tail,
    // panics too. One thread decoding in order panics at 5.
    let (_dir, db, rows) = fresh(700);
    set_probes(&db, &rows, &[5], |id| Probe::bad(SLOW_PANIC, id));
    set_probes(&db, &rows, &[650], |id| Probe::bad(PANIC, id));
    let query = rows.all();
    assert_eq!(iter_or_panic(&query, &db), Err("probe 5 panicked".to_owned()), "the oracle");
    assert_eq!(fetch_or_panic(&query, &db), Err("probe 5 panicked".to_owned()), "fetch");
    // The same through a write transaction, where the panic becomes an error.
    match db.write(|tx| query.fetch(&*tx).map(drop)) {
        Err(Error::Panicked(message)) => assert!(message.contains("probe 5 panicked"), "{message}"),
        other => panic!("expected Panicked, got {other:?}"),
    }
}

#[test]
fn a_failing_record_in_the_tail_after_a_slow_panic_in_the_helper_is_the_panic() {
    // The reverse roles: the helper's record 5 panics slowly, the caller's record 650 fails
    // (an error, not a panic). One thread decoding in order panics at 5.
    let (_dir, db, rows) = fresh(700);
    set_probes(&db, &rows, &[5], |id| Probe::bad(SLOW_PANIC, id));
    set_probes(&db, &rows, &[650], |id| Probe::bad(REFUSE, id));
    let query = rows.all();
    assert_eq!(iter_or_panic(&query, &db), Err("probe 5 panicked".to_owned()), "the oracle");
    assert_eq!(fetch_or_panic(&query, &db), Err("probe 5 panicked".to_owned()), "fetch");
}

// ---- transactions and threads ---------------------------------------------------------------

#[test]
fn fetch_in_a_write_transaction_sees_its_own_uncommitted_writes() {
    let (_dir, db, rows) = fresh(3_000);
    let mut all: Vec<Row> = (0..3_000).map(row).collect();
    // Changed in the transaction: 1,000 rows rewritten (new scores and names), 100 deleted,
    // 400 inserted.
    let changed: Vec<Row> = (0..1_000).map(|i| Row { score: 999 - (i % 1_000) as i32, name: format!("m{i:05}"), ..row(i * 3) }).collect();
    let deleted: Vec<u32> = (0..100).map(|i| i * 7 + 1).collect();
    let inserted: Vec<Row> = (3_000..3_400).map(row).collect();
    for r in &changed {
        all[r.id as usize] = r.clone();
    }
    all.retain(|r| !deleted.contains(&r.id));
    all.extend(inserted.iter().cloned());
    db.write(|tx| {
        for r in &changed {
            rows.upsert(tx, r)?;
        }
        for id in &deleted {
            rows.delete(tx, id)?;
        }
        for r in &inserted {
            rows.insert(tx, r)?;
        }
        for shape in [Shape::All, Shape::GroupNot(0), Shape::ScoreDesc, Shape::NameAsc, Shape::Union] {
            let query = query(&rows, shape);
            let fetched = query.fetch(&*tx)?;
            let expected = model(&all, shape);
            assert_eq!(ids(&fetched), expected, "{shape:?} in the write transaction");
            let by_id: std::collections::HashMap<u32, &Row> = all.iter().map(|r| (r.id, r)).collect();
            assert!(fetched.iter().all(|r| by_id[&r.id] == r), "{shape:?}: a record as written");
            let oracle: Vec<Row> = query.iter(&*tx)?.collect::<tessera::Result<_>>()?;
            assert_eq!(fetched, oracle, "{shape:?}: against iter in the transaction");
        }
        // A record made unreadable in this transaction, at position 700 of the key order.
        let seven_hundredth = all[700].clone();
        rows.upsert(tx, &Row { probe: Probe::bad(REFUSE, seven_hundredth.id), ..seven_hundredth.clone() })?;
        let fetched = rows.all().fetch(&*tx);
        assert_eq!(decode_error_key(&fetched), seven_hundredth.id.to_string());
        rows.upsert(tx, &seven_hundredth)?;
        Ok(())
    })
    .unwrap();
    assert_eq!(rows.all().fetch(&db).unwrap(), all, "committed");
}

#[test]
fn records_on_overflow_pages_decode_whole_from_a_read_and_a_write_transaction() {
    // Records of ~5 KB each sit on LMDB overflow pages of their own; in a write transaction the
    // rewritten ones are dirty pages in the writer's memory, which the helper reads.
    let long = |id: u32, round: u32| Row { name: format!("{round}:{id}:").repeat(700), ..row(id) };
    let (_dir, db, rows) = fresh(0);
    fill(&db, &rows, (0..800).map(|id| long(id, 0)));
    let expected: Vec<Row> = (0..800).map(|id| long(id, 0)).collect();
    assert_eq!(rows.all().fetch(&db).unwrap(), expected);
    db.write(|tx| {
        let mut expected = expected.clone();
        for id in (0..800).step_by(2) {
            rows.upsert(tx, &long(id, 1))?;
            expected[id as usize] = long(id, 1);
        }
        assert_eq!(rows.all().fetch(&*tx)?, expected, "in the write transaction");
        let oracle: Vec<Row> = rows.all().order_by(Row::score(), Order::Desc).iter(&*tx)?.collect::<tessera::Result<_>>()?;
        assert_eq!(rows.all().order_by(Row::score(), Order::Desc).fetch(&*tx)?, oracle, "through the index");
        Ok(())
    })
    .unwrap();
    let after: Vec<Row> = (0..800).map(|id| long(id, if id % 2 == 0 { 1 } else { 0 })).collect();
    assert_eq!(rows.all().fetch(&db).unwrap(), after, "committed");
}

#[test]
fn fetches_while_another_thread_commits_each_see_one_snapshot() {
    // The writer moves amounts between rows, rescoring them (so index order changes), and
    // replaces a row by another of a new key, in each transaction: every snapshot has 1,500
    // rows whose amounts sum to the same total.
    const ROWS: u32 = 1_500;
    let (_dir, db, rows) = fresh(ROWS);
    let total: i64 = (0..ROWS).map(i64::from).sum();
    let done = AtomicBool::new(false);
    // Reader rounds that ended while the writer was still committing.
    let rounds_during_writes = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut rng = fastrand::Rng::with_seed(7);
            // At least 120 commits, and on until the readers have done six rounds among them.
            for next_id in ROWS..ROWS + 5_000 {
                if next_id >= ROWS + 120 && rounds_during_writes.load(Ordering::SeqCst) >= 6 {
                    break;
                }
                db.write(|tx| {
                    let (a, b) = (rng.u32(0..next_id), rng.u32(0..next_id));
                    let (Some(mut from), Some(mut to)) = (rows.get(&*tx, &a)?, rows.get(&*tx, &b)?) else { return Ok(()) };
                    if a == b {
                        return Ok(());
                    }
                    let amount = rng.i64(0..=from.probe.0);
                    from.probe.0 -= amount;
                    to.probe.0 += amount;
                    from.score = rng.i32(0..1_000);
                    to.score = rng.i32(0..1_000);
                    rows.upsert(tx, &from)?;
                    rows.upsert(tx, &to)?;
                    // Replace the row a (already written) by a new key with its amount.
                    rows.delete(tx, &a)?;
                    rows.insert(tx, &Row { id: next_id, ..from })?;
                    Ok(())
                })
                .unwrap();
            }
            done.store(true, Ordering::SeqCst);
        });
        for reader in 0..2 {
            let (db, rows, done, rounds_during_writes) = (&db, &rows, &done, &rounds_during_writes);
            scope.spawn(move || {
                let mut rounds = 0;
                while !done.load(Ordering::SeqCst) || rounds < 3 {
                    rounds += 1;
                    let check = |label: &str, found: &[Row]| {
                        assert_eq!(found.len(), ROWS as usize, "reader {reader}, {label}: rows");
                        assert_eq!(found.iter().map(|r| r.probe.0).sum::<i64>(), total, "reader {reader}, {label}: total");
                        assert_eq!(found.iter().map(|r| r.id).collect::<BTreeSet<_>>().len(), ROWS as usize, "{label}: distinct");
                    };
                    let by_key = rows.all().fetch(db).unwrap();
                    check("by key", &by_key);
                    assert!(by_key.windows(2).all(|w| w[0].id < w[1].id));
                    let by_score = rows.all().order_by(Row::score(), Order::Desc).fetch(db).unwrap();
                    check("by score", &by_score);
                    assert!(
                        by_score.windows(2).all(|w| (std::cmp::Reverse(w[0].score), w[0].id) < (std::cmp::Reverse(w[1].score), w[1].id))
                    );
                    // One read transaction: fetch, let commits land, then the one-thread oracle.
                    let tx = db.read_txn().unwrap();
                    let query = rows.filter(Row::score().ge(100)).order_by(Row::name(), Order::Asc);
                    let fetched = query.fetch(&tx).unwrap();
                    std::thread::sleep(Duration::from_millis(5));
                    let oracle: Vec<Row> = query.iter(&tx).unwrap().collect::<tessera::Result<_>>().unwrap();
                    assert_eq!(fetched, oracle, "reader {reader}: one snapshot");
                    assert_eq!(query.fetch(&tx).unwrap(), oracle, "reader {reader}: fetched again");
                    if !done.load(Ordering::SeqCst) {
                        rounds_during_writes.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    let end = rows.all().fetch(&db).unwrap();
    assert_eq!(end.iter().map(|r| r.probe.0).sum::<i64>(), total);
}

#[test]
fn many_threads_fetching_at_once_each_get_the_whole_result() {
    let (_dir, db, rows) = fresh(2_000);
    let all: Vec<Row> = (0..2_000).map(row).collect();
    let shapes = [Shape::All, Shape::GroupNot(2), Shape::ScoreDesc, Shape::NameDesc];
    let expected: Vec<Vec<u32>> = shapes.iter().map(|&shape| model(&all, shape)).collect();
    std::thread::scope(|scope| {
        for thread in 0..6 {
            let (db, rows, expected) = (&db, &rows, &expected);
            scope.spawn(move || {
                for round in 0..3 {
                    let index = (thread + round) % shapes.len();
                    let query = query(rows, shapes[index]);
                    let fetched = query.fetch(db).unwrap();
                    assert_eq!(ids(&fetched), expected[index], "thread {thread}, {:?}", shapes[index]);
                    assert!(fetched.iter().all(|r| *r == row(r.id)));
                    // A read transaction of this thread's own.
                    let tx = db.read_txn().unwrap();
                    assert_eq!(ids(&query.fetch(&tx).unwrap()), expected[index], "thread {thread}, own transaction");
                }
            });
        }
    });
    // A read transaction moved to another thread and fetched from there.
    let moved = db.read_txn().unwrap();
    let found = std::thread::scope(|scope| {
        let fetch = || {
            let moved = moved;
            rows.all().fetch(&moved).map(|found| ids(&found))
        };
        scope.spawn(fetch).join().unwrap().unwrap()
    });
    assert_eq!(found, (0..2_000).collect::<Vec<_>>());
}

#[test]
fn fetch_inside_a_subscription_callback_returns_the_whole_result() {
    let (_dir, db, rows) = fresh(1_500);
    let (sender, results) = std::sync::mpsc::channel();
    let (db2, rows2) = (db.clone(), rows.clone());
    let handle = rows
        .subscribe_object(&0u32)
        .unwrap()
        .for_each(move |_event| {
            let found = rows2
                .all()
                .order_by(Row::score(), Order::Desc)
                .fetch(&db2)
                .map(|found| found.iter().map(|r| (r.id, r.score)).collect::<Vec<_>>());
            let _ = sender.send(found);
        })
        .unwrap();
    let mut all: Vec<Row> = (0..1_500).map(row).collect();
    let expect = |all: &[Row]| {
        let mut found: Vec<(u32, i32)> = all.iter().map(|r| (r.id, r.score)).collect();
        found.sort_by_key(|&(id, score)| (std::cmp::Reverse(score), id));
        found
    };
    let wait = Duration::from_secs(10);
    assert_eq!(results.recv_timeout(wait).unwrap().unwrap(), expect(&all), "initial");
    for step in 0..3 {
        all[0].score = 1_000 + step;
        all[700].score = -step;
        fill(&db, &rows, [all[0].clone(), all[700].clone()]);
        assert_eq!(results.recv_timeout(wait).unwrap().unwrap(), expect(&all), "after commit {step}");
    }
    drop(handle);
}

// ---- threads left behind, and no thread to be had ---------------------------------------------

const CHILD: &str = "TESSERA_DECODE_PIPELINE_REVIEW_CHILD";

fn run_child(test: &str) {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env_remove("RUST_MIN_STACK")
        // One malloc arena, grown 64 MiB at a time and never trimmed, big blocks in it: what
        // the heap needs while the address space is limited is already mapped. No cache of the
        // stacks of finished threads: a new thread needs a new mapping.
        .env("GLIBC_TUNABLES", "glibc.pthread.stack_cache_size=0:glibc.malloc.arena_max=1:glibc.malloc.top_pad=67108864:glibc.malloc.trim_threshold=4294967295:glibc.malloc.mmap_threshold=33554432")
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{test} failed ({:?}):\n{stdout}\n{stderr}", output.status);
    assert!(stdout.contains("1 passed"), "{test} did not run:\n{stdout}");
}

/// Names of this process's threads.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

#[test]
#[ignore = "run by no_decode_thread_outlives_its_fetch as a child process, alone in it"]
fn leak_child() {
    assert!(std::env::var(CHILD).is_ok(), "run by no_decode_thread_outlives_its_fetch");
    let (_dir, db, rows) = fresh(1_200);
    assert_eq!(rows.all().fetch(&db).unwrap().len(), 1_200);
    set_probes(&db, &rows, &[100], |id| Probe::bad(REFUSE, id));
    assert!(rows.all().fetch(&db).is_err());
    set_probes(&db, &rows, &[100], |id| Probe::bad(PANIC, id));
    assert!(catch_unwind(AssertUnwindSafe(|| rows.all().fetch(&db))).is_err());
    set_probes(&db, &rows, &[1_150], |id| Probe::bad(PANIC, id));
    set_probes(&db, &rows, &[100], |id| row(id).probe);
    assert!(catch_unwind(AssertUnwindSafe(|| rows.all().fetch(&db))).is_err());
    let names = thread_names();
    assert!(!names.iter().any(|name| name == "tessera-decode"), "a decode thread outlived its fetch: {names:?}");
}

#[test]
fn no_decode_thread_outlives_its_fetch() {
    run_child("leak_child");
}

#[test]
#[ignore = "run by without_a_thread_to_be_had_fetch_decodes_alone_and_the_same as a child process"]
fn no_thread_child() {
    assert!(std::env::var(CHILD).is_ok(), "run by without_a_thread_to_be_had_fetch_decodes_alone_and_the_same");
    let dir = tempfile::tempdir().unwrap();
    let (db, rows) = open(&dir.path().join("alone.tessera"), DbOptions::default());
    fill(&db, &rows, (0..1_000).map(|id| Row { probe: Probe(TRACED + i64::from(id)), ..row(id) }));
    let query = rows.all().order_by(Row::name(), Order::Asc);
    let oracle = one_thread(&query, &db).unwrap();
    set_probes(&db, &rows, &[oracle[800].id], |id| Probe::bad(REFUSE, id));
    let oracle_error = shown(&one_thread(&query, &db));
    set_probes(&db, &rows, &[oracle[800].id], |id| Probe(TRACED + i64::from(id)));
    // Address space for the heap's next steps, not for a thread's stack (2 MiB).
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let vm_kib: u64 = status.lines().find_map(|l| l.strip_prefix("VmSize:")).unwrap().trim().trim_end_matches("kB").trim().parse().unwrap();
    let mut old = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut old) }, 0);
    let limited = libc::rlimit { rlim_cur: (vm_kib + 1_024) * 1024, rlim_max: old.rlim_max };
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limited) }, 0);
    let spawned = std::thread::Builder::new().spawn(|| ()).map(|h| h.join());
    TRACE.lock().unwrap().clear();
    let fetched = query.fetch(&db).map(|found| ids(&found));
    let trace = std::mem::take(&mut *TRACE.lock().unwrap());
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &old) }, 0);
    assert!(spawned.is_err(), "the limit left room for a thread");
    assert_eq!(fetched.unwrap(), ids(&oracle), "decoded alone");
    let me = std::thread::current().name().unwrap().to_owned();
    assert!(trace.iter().all(|(_, thread)| *thread == me), "decoded on the calling thread alone");
    // Without the limit, the same fetch has its helper.
    TRACE.lock().unwrap().clear();
    assert_eq!(ids(&query.fetch(&db).unwrap()), ids(&oracle));
    assert!(TRACE.lock().unwrap().iter().any(|(_, thread)| thread == "tessera-decode"), "no helper without the limit");
    // And the error, decoding alone.
    set_probes(&db, &rows, &[oracle[800].id], |id| Probe::bad(REFUSE, id));
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limited) }, 0);
    let fetched = shown(&query.fetch(&db));
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &old) }, 0);
    assert_eq!(fetched, oracle_error);
}

#[test]
fn without_a_thread_to_be_had_fetch_decodes_alone_and_the_same() {
    run_child("no_thread_child");
}

#[test]
#[ignore = "run by a_decoder_that_needs_a_deep_stack_fetches_as_it_decodes_on_the_calling_thread as a child process"]
fn deep_stack_child() {
    assert!(std::env::var(CHILD).is_ok(), "run by a_decoder_that_needs_a_deep_stack_fetches_as_it_decodes_on_the_calling_thread");
    let (_dir, db, rows) = fresh(600);
    set_probes(&db, &rows, &[3], |id| Probe::bad(DEEP_STACK, id));
    // The application's thread has a stack for its decoders: 16 MiB.
    let fetched = std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(move || {
            let oracle = one_thread(&rows.all(), &db).unwrap();
            assert_eq!(oracle.len(), 600, "decoded in order on this thread");
            assert_eq!(rows.filter(Row::id().lt(500)).fetch(&db).unwrap()[..], oracle[..500], "a small result, on this thread");
            println!("decoding more than 512 records");
            assert_eq!(rows.all().fetch(&db).unwrap(), oracle, "a large result");
        })
        .unwrap()
        .join();
    assert!(fetched.is_ok());
}

#[test]
fn a_decoder_that_needs_a_deep_stack_fetches_as_it_decodes_on_the_calling_thread() {
    run_child("deep_stack_child");
}
