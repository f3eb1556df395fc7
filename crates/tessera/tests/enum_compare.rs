//! An enum field compared with a variant's name as a string: a unit variant is stored as its
//! name and compares as one, but a variant with a payload is stored as `{"Variant": payload}`
//! and never equals a string. `shape == "Line"` type-checked and then matched nothing, not
//! even the records `shape is Line` finds: it is now a typed error that points at `is Line`.

use tessera::collection::{Embed, Record};
use tessera::query::QueryError;

#[derive(Embed, Debug, Clone, PartialEq)]
enum Shape {
    Dot,
    Line { length: i32 },
}

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "drawings")]
struct Drawing {
    #[record(key)]
    id: u32,
    #[record(index)]
    shape: Shape,
    history: Vec<Shape>,
}

#[test]
fn a_payload_variant_compared_as_a_string_is_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let drawings = db.collection::<Drawing>().unwrap();
    db.write(|tx| {
        drawings.insert(tx, &Drawing { id: 1, shape: Shape::Dot, history: vec![Shape::Line { length: 2 }] })?;
        drawings.insert(tx, &Drawing { id: 2, shape: Shape::Line { length: 3 }, history: vec![Shape::Dot] })
    })
    .unwrap();
    for text in
        [r#"shape == "Line""#, r#"shape != "Line""#, r#""Line" = shape"#, r#"shape in ("Dot", "Line")"#, r#"history contains "Line""#]
    {
        match drawings.query_text(text) {
            Err(tessera::Error::Query(QueryError::TypeMismatch { expected, .. })) => {
                assert!(expected.contains("is Line"), "{text}: {expected}")
            }
            other => panic!("{text}: expected a type mismatch, got {other:?}"),
        }
    }
    // A unit variant compares as its name; `is` reaches every variant.
    let ids = |text: &str| drawings.query_text(text).unwrap().fetch(&db).unwrap().into_iter().map(|d| d.id).collect::<Vec<_>>();
    assert_eq!(ids(r#"shape == "Dot""#), [1]);
    assert_eq!(ids(r#"history contains "Dot""#), [2]);
    assert_eq!(ids("shape is Line"), [2]);
}
