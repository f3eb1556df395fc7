//! Deep documents (one key per leaf): a field is its key and every key under it, on every path
//! that writes, reads or watches one field. Before, `update_field` of a whole nested struct
//! wrote one key beside the old leaves and `get` went on reading the old value; a field handle
//! and a field subscription on a nested struct read only the one key, so saw `None` (found by
//! review).

use serde::{Deserialize, Serialize};
use std::time::Duration;
use tessera::live::Event;
use tessera::{Db, DocumentsOptions, Error};

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("docs.tessera")).unwrap();
    (dir, db)
}

fn deep() -> DocumentsOptions {
    DocumentsOptions { deep: true, ..DocumentsOptions::default() }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Address {
    city: String,
    zip: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Person {
    name: String,
    address: Address,
    #[serde(default)]
    previous: Option<Address>,
}

fn ada() -> Person {
    Person { name: "Ada".into(), address: Address { city: "London".into(), zip: "N1".into() }, previous: None }
}

fn paris() -> Address {
    Address { city: "Paris".into(), zip: "75001".into() }
}

#[test]
fn update_field_of_a_whole_nested_struct_replaces_its_leaves() {
    let (_dir, db) = open();
    let doc = db.documents_with("people", deep()).unwrap().document::<Person>("ada");
    doc.set(&ada()).unwrap();
    doc.update_field("address", &paris()).unwrap();
    assert_eq!(doc.get().unwrap(), Some(Person { address: paris(), ..ada() }));
    // Stored as `set` stores it: one key per leaf, the old leaves overwritten.
    assert_eq!(doc.field::<String>("address.city").get().unwrap().as_deref(), Some("Paris"));
    assert_eq!(doc.field::<String>("address.zip").get().unwrap().as_deref(), Some("75001"));
    // And a leaf written afterwards lands in the new value.
    doc.update_field("address.zip", "75002").unwrap();
    assert_eq!(doc.get().unwrap().unwrap().address, Address { zip: "75002".into(), ..paris() });
}

#[test]
fn update_field_of_an_option_moves_between_a_null_leaf_and_leaves() {
    let (_dir, db) = open();
    let doc = db.documents_with("people", deep()).unwrap().document::<Person>("ada");
    doc.set(&ada()).unwrap(); // previous: None, one null leaf
    doc.update_field("previous", &Some(paris())).unwrap();
    assert_eq!(doc.get().unwrap().unwrap().previous, Some(paris()));
    assert_eq!(doc.field::<String>("previous.city").get().unwrap().as_deref(), Some("Paris"));
    doc.update_field("previous", &None::<Address>).unwrap(); // the leaves go
    assert_eq!(doc.get().unwrap(), Some(ada()));
    assert_eq!(doc.field::<String>("previous.city").get().unwrap(), None);
    assert_eq!(doc.field::<Option<Address>>("previous").get().unwrap(), Some(None));
}

#[test]
fn a_leaf_under_an_option_that_is_none_is_refused_when_the_struct_would_be_incomplete() {
    let (_dir, db) = open();
    let doc = db.documents_with("people", deep()).unwrap().document::<Person>("ada");
    doc.set(&ada()).unwrap();
    // `previous` would be `{ city }`, without the `zip` an Address needs.
    match doc.update_field("previous.city", "Bath") {
        Err(Error::DocumentField { id, field, message, .. }) => {
            assert_eq!((id.as_str(), field.as_str()), ("ada", "previous.city"));
            assert!(message.contains("zip"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(doc.get().unwrap(), Some(ada()), "nothing written");
}

#[test]
fn a_leaf_under_an_option_that_is_none_creates_it_when_the_rest_has_defaults() {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Prefs {
        theme: String,
        #[serde(default)]
        font: Option<Font>,
    }
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
    struct Font {
        #[serde(default)]
        size: u32,
        #[serde(default)]
        family: String,
    }
    let (_dir, db) = open();
    let doc = db.documents_with("prefs", deep()).unwrap().document::<Prefs>("p");
    doc.set(&Prefs { theme: "dark".into(), font: None }).unwrap();
    doc.update_field("font.size", &14u32).unwrap();
    assert_eq!(doc.get().unwrap(), Some(Prefs { theme: "dark".into(), font: Some(Font { size: 14, family: String::new() }) }));
}

#[test]
fn a_field_handle_on_a_nested_struct_reads_its_leaves() {
    let (_dir, db) = open();
    let doc = db.documents_with("people", deep()).unwrap().document::<Person>("ada");
    let address = doc.field::<Address>("address");
    assert_eq!(address.get().unwrap(), None, "no document");
    doc.set(&ada()).unwrap();
    assert_eq!(address.get().unwrap(), Some(ada().address));
    address.set(&paris()).unwrap();
    assert_eq!(address.get().unwrap(), Some(paris()));
    assert_eq!(doc.get().unwrap().unwrap().address, paris());
    // A name that only begins the field's (`address` and `addressee`) is another field.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Letter {
        address: Address,
        addressee: String,
    }
    let letter = db.documents_with("letters", deep()).unwrap().document::<Letter>("l");
    letter.set(&Letter { address: paris(), addressee: "Ada".into() }).unwrap();
    assert_eq!(letter.field::<Address>("address").get().unwrap(), Some(paris()));
}

#[test]
fn observe_field_on_a_nested_struct_sees_its_leaves_change() {
    let (_dir, db) = open();
    let doc = db.documents_with("people", deep()).unwrap().document::<Person>("ada");
    doc.set(&ada()).unwrap();
    let events = doc.observe_field::<Address>("address").unwrap();
    let timeout = Duration::from_secs(5);
    assert_eq!(events.recv_timeout(timeout).and_then(Event::initial), Some(Some(ada().address)));
    doc.update_field("name", "Augusta").unwrap(); // another field: no event
    doc.update_field("address.city", "London").unwrap(); // the same bytes: no event
    doc.update_field("address.city", "Bath").unwrap();
    doc.update_field("address", &paris()).unwrap(); // two leaves, one commit: one event
    doc.delete().unwrap();
    let bath = Address { city: "Bath".into(), ..ada().address };
    assert_eq!(events.recv_timeout(timeout).and_then(Event::changed), Some(Some(bath)));
    assert_eq!(events.recv_timeout(timeout).and_then(Event::changed), Some(Some(paris())));
    assert_eq!(events.recv_timeout(timeout).and_then(Event::changed), Some(None));
    assert!(events.recv_timeout(Duration::from_millis(100)).is_none());
}
