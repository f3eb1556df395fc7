//! Typed nested fields: `#[derive(Embed)]` on a struct generates `NameFields`, so that
//! `Person::address().city()` is the typed field `address.city`, through a plain or optional
//! struct field and several levels deep, in predicates and orders alike.

use tessera::collection::{Embed, Order, Record};
use tessera::query::{Field, field};

#[derive(Embed, Debug, Clone, PartialEq)]
struct Geo {
    lat: f64,
    lon: f64,
}

#[derive(Embed, Debug, Clone, PartialEq)]
struct Address {
    city: String,
    zip: Option<u32>,
    geo: Geo,
    tags: Vec<String>,
}

#[derive(Record, Debug, Clone, PartialEq)]
#[record(name = "people")]
struct Person {
    #[record(key)]
    name: String,
    address: Address,
    previous: Option<Address>,
}

fn person(name: &str, city: &str, lat: f64, previous: Option<&str>) -> Person {
    let address = |city: &str| Address { city: city.into(), zip: None, geo: Geo { lat, lon: 0.0 }, tags: vec![city.to_lowercase()] };
    Person { name: name.into(), address: address(city), previous: previous.map(address) }
}

#[test]
fn nested_typed_fields_build_the_dotted_paths() {
    let city: Field<String> = Person::address().city();
    assert_eq!(city.path(), "address.city");
    assert_eq!(Person::address().city().eq("Paris"), field("address.city").eq("Paris"));
    assert_eq!(Person::address().geo().lat().gt(1.5), field("address.geo.lat").gt(1.5));
    assert_eq!(Person::previous().city().starts_with("P"), field("previous.city").starts_with("P"));
    assert_eq!(Person::address().zip().is_null(), field("address.zip").is_null());
    assert_eq!(Person::address().tags().contains("paris"), field("address.tags").contains("paris"));
    // Person::address().city().gt(3) does not compile: 3 is not an argument for a String.
}

#[test]
fn nested_typed_fields_query_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let people = db.collection::<Person>().unwrap();
    db.write(|tx| {
        for person in
            [person("ada", "Paris", 48.8, Some("London")), person("bo", "Oslo", 59.9, None), person("cy", "Lyon", 45.7, Some("Paris"))]
        {
            people.insert(tx, &person)?;
        }
        Ok(())
    })
    .unwrap();
    let names =
        |query: tessera::collection::Query<Person>| -> Vec<String> { query.fetch(&db).unwrap().into_iter().map(|p| p.name).collect() };
    assert_eq!(names(people.filter(Person::address().geo().lat().lt(50.0))), ["ada", "cy"]);
    assert_eq!(names(people.filter(Person::previous().city().eq("Paris"))), ["cy"]);
    assert_eq!(names(people.all().order_by(Person::address().city(), Order::Asc)), ["cy", "bo", "ada"]);
    assert_eq!(names(people.all().order_by(Person::previous().city(), Order::Asc)), ["ada", "cy", "bo"], "NULL last");
    assert_eq!(
        names(people.filter(Person::address().tags().contains("oslo"))),
        names(people.query_text(r#"address.tags contains "oslo""#).unwrap())
    );
}
