use tessera::collection::Record;
#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "events")]
struct Event {
    #[record(key)]
    day: u16,
    #[record(key)]
    name: String,
    #[record(index)]
    size: Option<i64>,
    #[record(index)]
    label: String,
}
#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "items")]
struct Item {
    #[record(key)]
    id: u32,
    #[record(index)]
    size: Option<f64>,
    #[record(index)]
    label: String,
    #[record(index)]
    flag: bool,
}
#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "named")]
struct Named {
    #[record(key)]
    name: String,
    n: u32,
}
#[test]
fn scratch() {
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let events = db.collection::<Event>().unwrap();
    let items = db.collection::<Item>().unwrap();
    let named = db.collection::<Named>().unwrap();
    for text in [
        "day = 2",
        "day = 2 and name > \"a\"",
        "day = 2 and name <= \"a\"",
        "day < 3",
        "day <= 3",
        "day > 3",
        "day = 65535",
        "day = 2 and name = \"x\"",
        "size < 5",
        "size <= 5",
        "size > 5",
        "size >= 5.5",
        "size between -1 and 2",
        "label < \"b\"",
        "label > \"b\"",
        "label <= \"b\"",
        "label >= \"b\" and label < \"c\"",
        "label starts with \"\"",
        "size = 18446744073709551615",
        "size > -9223372036854775808",
    ] {
        println!("events {text:40} {}", events.query_text(text).unwrap().explain().unwrap());
    }
    for text in [
        "id < 5",
        "id <= 5",
        "id > 5",
        "id >= 5",
        "id between 2 and 4",
        "id in (3, 1, 3)",
        "id = 4294967295",
        "id > 4294967295",
        "id < 0",
        "id >= 0",
        "flag = true",
        "flag > false",
        "flag < true",
        "size > 1.5",
        "size < 1e300",
        "label >= \"é\"",
        "id = 1 or id = 2",
        "id = 1.0",
        "id >= 2.5",
        "size = 1 and size = 2",
        "label = \"a\\\"b\"",
        "order by size desc nulls last limit 2",
        "order by id desc",
        "id < 3 order by id desc",
        "label > \"b\" order by label desc",
        "id < 3 and size > 2 order by id",
    ] {
        println!("items  {text:40} {}", items.query_text(text).unwrap().explain().unwrap());
    }
    for text in ["name = \"a\\\"b\"", "name < \"a\"", "name starts with \"ab\"", "name starts with \"a\\\"\"", "name > \"ÿ\""] {
        println!("named  {text:40} {}", named.query_text(text).unwrap().explain().unwrap());
    }
}
