//! Every example in `docs/query.md` runs here. The document's `jsonl` block marked `sample` is
//! the collection the examples run against; each line of a `query` block is `TEXT → IDS` (the
//! primary keys of the results, in order, or `(none)`), of an `explain` block `TEXT → PLAN`,
//! and of an `error` block `TEXT → MESSAGE`. Each query also prints and parses back to an
//! equal statement. The document's Rust blocks are doctests (see `query::QueryGuide`).

use serde::{Deserialize, Serialize};
use tessera::collection::{Embed, Record};
use tessera::query::Statement;

#[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
struct Origin {
    country: String,
    city: Option<String>,
}

#[derive(Serialize, Deserialize, Embed, Debug, Clone, PartialEq)]
enum Size {
    Small,
    Large { litres: u8 },
}

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
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

/// The fenced blocks of a Markdown text whose info string is `kind` (and, when given, whose
/// info string also has `mark`), as their lines.
fn blocks<'d>(doc: &'d str, kind: &str, mark: Option<&str>) -> Vec<Vec<&'d str>> {
    let mut found = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in doc.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(info)) => {
                let mut words = info.split_whitespace();
                if words.next() == Some(kind) && mark.is_none_or(|mark| words.any(|word| word == mark)) {
                    current = Some(Vec::new());
                }
            }
            (Some(_), Some(_)) => found.extend(current.take()),
            (Some(lines), None) => lines.push(line),
            (None, None) => {}
        }
    }
    assert!(current.is_none(), "an unclosed ```{kind} block");
    found
}

/// `TEXT → EXPECTED` lines of a block (blank lines skipped).
fn examples<'d>(lines: &[&'d str]) -> Vec<(&'d str, &'d str)> {
    lines
        .iter()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (text, expected) = line.rsplit_once('→').unwrap_or_else(|| panic!("no `→` in example {line:?}"));
            (text.trim(), expected.trim())
        })
        .collect()
}

fn setup() -> (tempfile::TempDir, tessera::Db, tessera::collection::Collection<Product>) {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/query.md")).unwrap();
    let samples = blocks(&doc, "jsonl", Some("sample"));
    assert_eq!(samples.len(), 1, "one sample block");
    let products: Vec<Product> =
        samples[0].iter().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"))).collect();
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let collection = db.collection::<Product>().unwrap();
    db.write(|tx| products.iter().try_for_each(|product| collection.insert(tx, product).map(drop))).unwrap();
    assert!(collection.wait_for_indexes(std::time::Duration::from_secs(10)));
    (dir, db, collection)
}

fn document() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/query.md")).unwrap()
}

#[test]
fn every_query_example_returns_its_documented_result() {
    let (_dir, db, products) = setup();
    let doc = document();
    let mut count = 0;
    for block in blocks(&doc, "query", None) {
        for (text, expected) in examples(&block) {
            let query = products.query_text(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let ids: Vec<String> = query.fetch(&db).unwrap().iter().map(|product| product.id.to_string()).collect();
            let ids = if ids.is_empty() { "(none)".to_owned() } else { ids.join(", ") };
            assert_eq!(ids, expected, "{text} ({})", query.explain().unwrap());
            // The statement prints in the syntax and parses back.
            let statement = Statement::parse(text).unwrap();
            assert_eq!(Statement::parse(&statement.to_string()).unwrap(), statement, "{text}");
            count += 1;
        }
    }
    assert!(count >= 30, "only {count} query examples");
}

#[test]
fn every_explain_example_shows_its_documented_plan() {
    let (_dir, _db, products) = setup();
    let doc = document();
    let mut count = 0;
    for block in blocks(&doc, "explain", None) {
        for (text, expected) in examples(&block) {
            let plan = products.query_text(text).unwrap().explain().unwrap();
            assert_eq!(plan.to_string(), expected, "{text}");
            count += 1;
        }
    }
    assert!(count >= 5, "only {count} explain examples");
}

#[test]
fn every_error_example_fails_with_its_documented_message() {
    let (_dir, _db, products) = setup();
    let doc = document();
    let mut count = 0;
    for block in blocks(&doc, "error", None) {
        for (text, expected) in examples(&block) {
            let error = products.query_text(text).and_then(|query| query.explain().map(drop)).expect_err(text);
            assert_eq!(error.to_string(), expected, "{text}");
            count += 1;
        }
    }
    assert!(count >= 5, "only {count} error examples");
}

#[test]
fn text_and_builder_forms_agree() {
    use tessera::collection::{Nulls, Order};
    use tessera::query::{OrderKey, field};
    let (_dir, db, products) = setup();
    let pairs = [
        (r#"tags contains "sweet" and price < 5"#, products.filter(Product::tags().contains("sweet").and(Product::price().lt(5)))),
        ("stock is null or stock > 5", products.filter(Product::stock().is_null().or(Product::stock().gt(5)))),
        (
            r#"origin.country = "France" order by name desc"#,
            products.filter(field("origin.country").eq("France")).order_by(Product::name(), Order::Desc),
        ),
        (
            "order by price desc nulls last, id limit 3 offset 1",
            products
                .all()
                .order_by_nulls(Product::price(), Order::Desc, Nulls::Last)
                .order_by_key(OrderKey::new("id", Order::Asc))
                .limit(3)
                .offset(1),
        ),
    ];
    for (text, built) in pairs {
        let parsed = products.query_text(text).unwrap();
        assert_eq!(parsed.predicate(), built.predicate(), "{text}");
        assert_eq!(parsed.orders(), built.orders(), "{text}");
        assert_eq!(parsed.window(), built.window(), "{text}");
        assert_eq!(parsed.fetch(&db).unwrap(), built.fetch(&db).unwrap(), "{text}");
    }
}
