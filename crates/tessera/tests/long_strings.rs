//! Indexed strings of any length (issue 15 item 5). An index entry is an LMDB key, at most 511
//! bytes, and it used to hold the indexed value whole: writing a record whose indexed string
//! was over about 507 bytes failed with `Error::KeySize`, and an index added over existing
//! long values failed its background build for good. SQLite indexes strings of any length.
//!
//! Now an entry too long for a key holds a 256-byte prefix of the string and a hash of all of
//! it. These tests check that such strings are written, found by equality, ranges and
//! `starts_with`, ordered exactly (ascending and descending, with offset and limit, among long
//! strings that share a 600-byte prefix, against an in-memory oracle), kept unique, indexed by
//! background builds, and pass `Db::check`.

use proptest::prelude::*;
use std::time::Duration;
use tessera::collection::{Order, Record};
use tessera::query::{Expr, field};
use tessera::{Db, Error};

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "pages")]
struct Page {
    #[record(key)]
    id: u32,
    #[record(index)]
    url: Option<String>,
}

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    (dir, db)
}

fn page(id: u32, url: &str) -> Page {
    Page { id, url: Some(url.to_owned()) }
}

fn ids(pages: &[Page]) -> Vec<u32> {
    pages.iter().map(|page| page.id).collect()
}

/// `prefix` followed by `suffix`, as one string.
fn long(prefix: &str, suffix: &str) -> String {
    format!("{prefix}{suffix}")
}

fn assert_sound(db: &Db) {
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report}");
}

#[test]
fn a_10_kb_indexed_string_is_written_and_found_by_equality_ranges_and_prefix() {
    // This failed with KeySize before the fix (the entry was 10,000 bytes and more).
    let (_dir, db) = open();
    let pages = db.collection::<Page>().unwrap();
    let big = "k".repeat(10_000);
    let bigger = long(&big, "z");
    db.write(|tx| {
        pages.insert(tx, &page(1, &big))?;
        pages.insert(tx, &page(2, &bigger))?;
        pages.insert(tx, &page(3, "short"))?;
        pages.insert(tx, &page(4, &long(&"k".repeat(300), "a")))?;
        pages.insert(tx, &Page { id: 5, url: None })
    })
    .unwrap();

    let equal = pages.filter(field("url").eq(big.as_str()));
    assert!(equal.explain().unwrap().to_string().contains("index range on url"), "{}", equal.explain().unwrap());
    assert_eq!(ids(&equal.fetch(&db).unwrap()), [1]);
    assert_eq!(ids(&pages.filter(field("url").eq(bigger.as_str())).fetch(&db).unwrap()), [2]);
    assert_eq!(pages.filter(field("url").eq(long(&big, "y").as_str())).count(&db).unwrap(), 0);

    let ranges: [(Expr, &[u32]); 7] = [
        (field("url").gt(big.as_str()), &[2, 3]),
        (field("url").ge(big.as_str()), &[1, 2, 3]),
        (field("url").lt(big.as_str()), &[4]),
        (field("url").le(big.as_str()), &[1, 4]),
        (field("url").between(long(&"k".repeat(300), "a").as_str(), big.as_str()), &[1, 4]),
        (field("url").gt(long(&"k".repeat(300), "a").as_str()).and(field("url").lt(bigger.as_str())), &[1]),
        (field("url").is_in([big.clone(), "short".to_owned()]), &[1, 3]),
    ];
    for (predicate, expected) in ranges {
        let query = pages.filter(predicate.clone());
        assert!(query.explain().unwrap().to_string().contains("index range on url"), "{}", query.explain().unwrap());
        assert_eq!(ids(&query.fetch(&db).unwrap()), expected, "{}", query.explain().unwrap());
    }

    for (prefix, expected) in [(&big[..5_000], &[1, 2][..]), (&big[..], &[1, 2]), (&bigger[..], &[2]), ("kk", &[1, 2, 4]), ("short", &[3])]
    {
        let query = pages.filter(field("url").starts_with(prefix));
        assert!(query.explain().unwrap().to_string().contains("index range on url"), "{}", query.explain().unwrap());
        assert_eq!(ids(&query.fetch(&db).unwrap()), expected, "starts_with {} bytes", prefix.len());
    }
    assert_sound(&db);

    // Updates and deletes find the truncated entries they replace.
    db.write(|tx| pages.upsert(tx, &page(1, "now short")).map(drop)).unwrap();
    db.write(|tx| pages.upsert(tx, &page(3, &big)).map(drop)).unwrap();
    db.write(|tx| pages.delete(tx, &2u32).map(drop)).unwrap();
    assert_eq!(ids(&pages.filter(field("url").eq(big.as_str())).fetch(&db).unwrap()), [3]);
    assert_eq!(ids(&pages.filter(field("url").starts_with("kkk")).fetch(&db).unwrap()), [3, 4]);
    assert_sound(&db);
}

#[test]
fn entries_that_fit_keep_their_bytes_and_only_an_overlong_primary_key_is_refused() {
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "named")]
    struct Named {
        #[record(key)]
        name: String,
        #[record(index)]
        text: String,
    }
    let (_dir, db) = open();
    let named = db.collection::<Named>().unwrap();
    // A 240-byte primary key leaves room for a truncated entry (1 + 267 + 242 bytes);
    // 250 bytes does not, and no entry can hold the value.
    let fits = Named { name: "n".repeat(240), text: "t".repeat(1_000) };
    db.write(|tx| named.insert(tx, &fits).map(drop)).unwrap();
    let too_long = Named { name: "n".repeat(250), text: "t".repeat(1_000) };
    match db.write(|tx| named.insert(tx, &too_long)) {
        Err(Error::KeySize { len, max: 511 }) => assert!(len > 511, "{len}"),
        other => panic!("expected KeySize, got {other:?}"),
    }
    // A short value with the same long key still fits whole.
    db.write(|tx| named.insert(tx, &Named { name: "n".repeat(250), text: "short".into() }).map(drop)).unwrap();
    assert_eq!(named.filter(field("text").eq("t".repeat(1_000).as_str())).fetch(&db).unwrap(), [fits]);
    assert_sound(&db);
}

#[test]
fn a_unique_index_over_long_strings_with_one_prefix() {
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "slugs")]
    struct Slug {
        #[record(key)]
        id: u32,
        #[record(unique)]
        slug: String,
    }
    let (_dir, db) = open();
    let slugs = db.collection::<Slug>().unwrap();
    let prefix = "s".repeat(600);
    db.write(|tx| (0..50).try_for_each(|id| slugs.insert(tx, &Slug { id, slug: long(&prefix, &id.to_string()) }).map(drop))).unwrap();
    // The same long value again is refused, naming the record that holds it.
    match db.write(|tx| slugs.insert(tx, &Slug { id: 100, slug: long(&prefix, "7") })) {
        Err(Error::UniqueViolation { index, key, holder, .. }) => {
            assert_eq!((index.as_str(), key.as_str(), holder.as_str()), ("slug", "100", "7"))
        }
        other => panic!("expected a unique violation, got {other:?}"),
    }
    // Rewriting a record with its own value, and moving a value between records, work.
    db.write(|tx| slugs.upsert(tx, &Slug { id: 7, slug: long(&prefix, "7") }).map(drop)).unwrap();
    db.write(|tx| {
        slugs.upsert(tx, &Slug { id: 7, slug: long(&prefix, "seven") })?;
        slugs.insert(tx, &Slug { id: 100, slug: long(&prefix, "7") })
    })
    .unwrap();
    let found = slugs.filter(field("slug").eq(long(&prefix, "7").as_str())).fetch(&db).unwrap();
    assert_eq!(found, [Slug { id: 100, slug: long(&prefix, "7") }]);
    let ordered = slugs.all().order_by("slug", Order::Desc).limit(3).fetch(&db).unwrap();
    assert_eq!(ordered.iter().map(|slug| &slug.slug[600..]).collect::<Vec<_>>(), ["seven", "9", "8"]);
    assert_sound(&db);

    // A unique index added over existing long values is built in the schema change.
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "slugs")]
    struct SlugTwice {
        #[record(key)]
        id: u32,
        #[record(unique)]
        slug: String,
        #[record(unique)]
        copy: Option<String>,
    }
    drop(slugs);
    let twice = db.collection::<SlugTwice>().unwrap();
    assert!(twice.wait_for_indexes(Duration::from_secs(30)));
    db.write(|tx| twice.insert(tx, &SlugTwice { id: 200, slug: long(&prefix, "x"), copy: Some(long(&prefix, "c")) }).map(drop)).unwrap();
    let again = db.write(|tx| twice.insert(tx, &SlugTwice { id: 201, slug: long(&prefix, "y"), copy: Some(long(&prefix, "c")) }));
    assert!(matches!(again, Err(Error::UniqueViolation { .. })), "{again:?}");
    assert_sound(&db);
}

#[test]
fn an_index_added_over_existing_long_values_builds() {
    // Before the fix the build failed on the first long value, for good.
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "docs")]
    struct Plain {
        #[record(key)]
        id: u32,
        body: String,
    }
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "docs")]
    struct Indexed {
        #[record(key)]
        id: u32,
        #[record(index)]
        body: String,
    }
    let (_dir, db) = open();
    let plain = db.collection::<Plain>().unwrap();
    let prefix = "b".repeat(600);
    let body = |id: u32| if id.is_multiple_of(3) { format!("short {id}") } else { long(&prefix, &format!("{}", 3000 - id)) };
    db.write(|tx| (0..3000).try_for_each(|id| plain.insert(tx, &Plain { id, body: body(id) }).map(drop))).unwrap();
    drop(plain);
    let indexed = db.collection::<Indexed>().unwrap();
    assert!(indexed.wait_for_indexes(Duration::from_secs(60)), "{:?}", indexed.index_failure("body"));
    assert_eq!(indexed.index_failure("body"), None);
    let query = indexed.filter(field("body").eq(body(1).as_str()));
    assert!(query.explain().unwrap().to_string().starts_with("union(index range on body"), "{}", query.explain().unwrap());
    assert_eq!(ids_of(&query.fetch(&db).unwrap()), [1]);
    let first = indexed.all().order_by("body", Order::Asc).limit(2).fetch(&db).unwrap();
    assert_eq!(first.iter().map(|doc| doc.body.clone()).collect::<Vec<_>>(), [long(&prefix, "1"), long(&prefix, "10")]);
    let last = indexed.all().order_by("body", Order::Desc).limit(2).fetch(&db).unwrap();
    assert_eq!(last.iter().map(|doc| doc.body.clone()).collect::<Vec<_>>(), ["short 999", "short 996"]);
    assert_sound(&db);

    fn ids_of(docs: &[Indexed]) -> Vec<u32> {
        docs.iter().map(|doc| doc.id).collect()
    }
}

/// Values for the oracle: NULLs, short strings, strings around the lengths where entries
/// stop fitting (250 to 260, 500 to 520 bytes) and long strings that share a 600-byte prefix,
/// with NULs and a few letters after it, so that many truncated entries share their prefix.
fn value() -> impl Strategy<Value = Option<String>> {
    let tail = prop::collection::vec(prop_oneof![Just('\0'), Just('a'), Just('b'), Just('é')], 0..6).prop_map(String::from_iter);
    let shared = "p".repeat(600);
    prop_oneof![
        1 => Just(None),
        2 => "[a-q]{0,3}".prop_map(Some),
        2 => (250usize..262, tail.clone()).prop_map(|(len, tail)| Some(format!("{}{tail}", "p".repeat(len)))),
        2 => (500usize..522, tail.clone()).prop_map(|(len, tail)| Some(format!("{}{tail}", "p".repeat(len)))),
        6 => tail.prop_map(move |tail| Some(format!("{shared}{tail}"))),
    ]
}

/// The oracle's predicate, beside the query's.
type Matches<'p> = Box<dyn Fn(&Page) -> bool + 'p>;

/// The oracle's order: SQL's NULL placement (last ascending, first descending), then the
/// value, then the key ascending.
fn oracle(pages: &[Page], predicate: impl Fn(&Page) -> bool, descending: bool, offset: usize, limit: usize) -> Vec<u32> {
    let mut matching: Vec<&Page> = pages.iter().filter(|page| predicate(page)).collect();
    matching.sort_by(|a, b| {
        let by_value = match (&a.url, &b.url) {
            (None, None) => std::cmp::Ordering::Equal,
            (None, Some(_)) if !descending => std::cmp::Ordering::Greater,
            (Some(_), None) if !descending => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Less,
            (Some(_), None) => std::cmp::Ordering::Greater,
            (Some(x), Some(y)) if descending => y.cmp(x),
            (Some(x), Some(y)) => x.cmp(y),
        };
        by_value.then(a.id.cmp(&b.id))
    });
    matching.into_iter().skip(offset).take(limit).map(|page| page.id).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn order_and_lookups_match_an_in_memory_oracle(
        values in prop::collection::vec(value(), 1..60),
        probe in value(),
        offset in 0usize..4,
        limit in 1usize..30,
    ) {
        let (_dir, db) = open();
        let pages = db.collection::<Page>().unwrap();
        let all: Vec<Page> = values.into_iter().enumerate().map(|(id, url)| Page { id: id as u32, url }).collect();
        db.write(|tx| all.iter().try_for_each(|page| pages.insert(tx, page).map(drop))).unwrap();
        for descending in [false, true] {
            let order = if descending { Order::Desc } else { Order::Asc };
            // The order comes from walking the index, forwards or backwards.
            let query = pages.all().order_by("url", order).offset(offset).limit(limit);
            prop_assert!(query.explain().unwrap().to_string().starts_with("index range on url"), "{}", query.explain().unwrap());
            prop_assert_eq!(ids(&query.fetch(&db).unwrap()), oracle(&all, |_| true, descending, offset, limit));
            let Some(probe) = probe.clone() else { continue };
            let bounded: [(Expr, Matches); 6] = [
                (field("url").eq(probe.as_str()), Box::new(|page: &Page| page.url.as_deref() == Some(probe.as_str()))),
                (field("url").ge(probe.as_str()), Box::new(|page: &Page| page.url.as_deref().is_some_and(|url| url >= probe.as_str()))),
                (field("url").gt(probe.as_str()), Box::new(|page: &Page| page.url.as_deref().is_some_and(|url| url > probe.as_str()))),
                (field("url").lt(probe.as_str()), Box::new(|page: &Page| page.url.as_deref().is_some_and(|url| url < probe.as_str()))),
                (field("url").le(probe.as_str()), Box::new(|page: &Page| page.url.as_deref().is_some_and(|url| url <= probe.as_str()))),
                (
                    field("url").starts_with(&probe),
                    Box::new(|page: &Page| page.url.as_deref().is_some_and(|url| url.starts_with(probe.as_str()))),
                ),
            ];
            for (predicate, matches) in bounded {
                let query = pages.filter(predicate.clone()).order_by("url", order).offset(offset).limit(limit);
                prop_assert!(query.explain().unwrap().to_string().contains("index range on url"), "{}", query.explain().unwrap());
                prop_assert_eq!(ids(&query.fetch(&db).unwrap()), oracle(&all, &matches, descending, offset, limit), "{}", predicate);
                let unordered = pages.filter(predicate.clone());
                prop_assert_eq!(unordered.count(&db).unwrap(), all.iter().filter(|page| matches(page)).count(), "{}", predicate);
            }
        }
        let report = db.check().unwrap();
        prop_assert!(report.is_ok(), "{}", report);
    }
}

#[test]
fn explain_shows_a_long_equality_as_its_two_entry_ranges() {
    let (_dir, db) = open();
    let pages = db.collection::<Page>().unwrap();
    let text = long(&"e".repeat(300), "!");
    let plan = pages.filter(field("url").eq(text.as_str())).explain().unwrap().to_string();
    assert!(plan.starts_with(r#"union(index range on url = "eee"#), "{plan}");
    assert!(plan.contains("… (hash "), "the truncated entries' range shows its prefix and hash: {plan}");
    let plan = pages.filter(field("url").ge(text.as_str())).explain().unwrap().to_string();
    assert!(plan.starts_with(r#"index range on url ["eee"#) && plan.contains("…"), "a lower bound cut to 255 bytes: {plan}");
}

#[test]
fn a_record_that_no_index_entry_can_hold_can_still_be_deleted() {
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "wide")]
    struct Plain {
        #[record(key)]
        name: String,
        text: String,
    }
    #[derive(Record, Debug, Clone, PartialEq)]
    #[record(name = "wide")]
    struct Indexed {
        #[record(key)]
        name: String,
        #[record(index)]
        text: String,
    }
    let (_dir, db) = open();
    let plain = db.collection::<Plain>().unwrap();
    let name = "n".repeat(300);
    db.write(|tx| plain.insert(tx, &Plain { name: name.clone(), text: "t".repeat(600) }).map(drop)).unwrap();
    drop(plain);
    // A 300-byte key leaves no room even for the truncated entry: the build fails.
    let indexed = db.collection::<Indexed>().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while indexed.index_failure("text").is_none() {
        assert!(std::time::Instant::now() < deadline, "the build never failed");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(indexed.index_failure("text").unwrap().contains("key"), "{:?}", indexed.index_failure("text"));
    // The record has no entry to remove; deleting it used to fail with KeySize.
    db.write(|tx| indexed.delete(tx, name.as_str()).map(drop)).unwrap();
    assert_eq!(indexed.all().count(&db).unwrap(), 0);
}
