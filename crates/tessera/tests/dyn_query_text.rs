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
        assert_eq!(from_dynamic, from_typed, "{text}: {}", query.explain());
        assert_eq!(query.count(&db).unwrap(), from_typed.len(), "{text}");
    }
    let error = dynamic.filter_text("order by tags").unwrap_err().to_string();
    assert!(error.contains("cannot order by `tags`"), "{error}");
}
