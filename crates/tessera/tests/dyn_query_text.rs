//! Dynamic collections take the whole query text too (`order by … nulls …`, `limit`,
//! `offset`), and return what the typed collection returns for it, in the same order: the
//! same sort keys, NULL placement and ties by primary key.

use serde::{Deserialize, Serialize};
use tessera::collection::Record;

#[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
#[record(name = "stock")]
struct Stock {
    #[record(key)]
    id: u32,
    #[record(index)]
    price: Option<f64>,
    name: String,
    tags: Vec<String>,
    count: Option<i64>,
}

#[test]
fn dynamic_and_typed_collections_answer_a_query_text_alike() {
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let typed = db.collection::<Stock>().unwrap();
    db.write(|tx| {
        for id in 0..40u32 {
            let price = (id % 5 != 0).then_some(f64::from(id % 7) * 1.5);
            let count = (id % 3 != 0).then_some(i64::from(id % 4));
            let tags = (0..id % 3).map(|tag| format!("t{tag}")).collect();
            typed.insert(tx, &Stock { id, price, name: format!("n{}", id % 6), tags, count })?;
        }
        Ok(())
    })
    .unwrap();
    let dynamic = db.dyn_collection("stock").unwrap();
    for text in [
        "order by price",
        "order by price desc",
        "order by price desc nulls last, name asc limit 7 offset 3",
        "ORDER BY count NULLS FIRST, price DESC",
        r#"tags contains "t1" order by name desc, count limit 5"#,
        "price > 3 or count is null order by count desc nulls last, id desc",
        "limit 4 offset 38",
        "count exists offset 20",
    ] {
        let from_typed: Vec<serde_json::Value> =
            typed.query_text(text).unwrap().fetch(&db).unwrap().iter().map(|row| serde_json::to_value(row).unwrap()).collect();
        let query = dynamic.filter_text(text).unwrap();
        let from_dynamic: Vec<serde_json::Value> =
            query.fetch(&db).unwrap().iter().map(|row| serde_json::from_str(&row.to_json()).unwrap()).collect();
        assert_eq!(from_dynamic, from_typed, "{text}: {}", query.explain().unwrap());
        assert_eq!(query.count(&db).unwrap(), from_typed.len(), "{text}");
    }
    let error = dynamic.filter_text("order by tags").unwrap_err().to_string();
    assert!(error.contains("cannot order by `tags`"), "{error}");
}

#[test]
fn a_multi_entry_index_survives_a_dynamic_copy_of_its_schema() {
    // `tessera import` creates a collection from an export's header: a schema with an index
    // on `tags[]` was refused ("index field `tags[]` is not a field").
    #[derive(Serialize, Deserialize, Record, Debug, Clone, PartialEq)]
    #[record(name = "tagged")]
    struct Tagged {
        #[record(key)]
        id: u32,
        #[record(index_elements)]
        tags: Vec<String>,
    }
    let dir = tempfile::tempdir().unwrap();
    let source = tessera::Db::open(dir.path().join("source")).unwrap();
    source.collection::<Tagged>().unwrap();
    let mut schema = source.dyn_collection("tagged").unwrap().schema().clone();
    // An empty collection has not taught its key's width; an export's header says it.
    schema.key_kinds = vec![tessera::collection::KeyKind::U32];
    assert_eq!(schema.indexes[0].path, "tags[]");
    let copy = tessera::Db::open(dir.path().join("copy")).unwrap();
    let tagged = copy.create_dyn_collection("tagged", &schema).unwrap();
    copy.write(|tx| {
        tagged.insert_json(tx, br#"{"id": 1, "tags": ["a", "b", "a"]}"#)?;
        tagged.insert_json(tx, br#"{"id": 2, "tags": ["b"]}"#)
    })
    .unwrap();
    assert!(copy.check().unwrap().is_ok(), "the dynamic writes keep the element index");
    let typed = copy.collection::<Tagged>().unwrap();
    let query = typed.query_text(r#"tags contains "a""#).unwrap();
    assert!(query.explain().unwrap().to_string().starts_with("index range on tags[]"), "{}", query.explain().unwrap());
    assert_eq!(query.fetch(&copy).unwrap(), [Tagged { id: 1, tags: vec!["a".into(), "b".into(), "a".into()] }]);
    let mut bad = schema.clone();
    bad.indexes[0].unique = true;
    let error = copy.create_dyn_collection("bad", &bad).unwrap_err().to_string();
    assert!(error.contains("cannot be unique"), "{error}");
}
