//! Field-decomposed documents: every operation, the key layout, decoding rules, observation,
//! transforms, deep decomposition and transactions.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tessera::live::{Event, SubscriptionEnd};
use tessera::{Db, DocumentsOptions, Error, FieldTransform};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Profile {
    id: i64,
    name: String,
    #[serde(rename = "e-mail")]
    email: String,
    age: i32,
    active: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    nickname: Option<String>,
}

fn ada() -> Profile {
    Profile { id: 1, name: "Ada".into(), email: "ada@example.com".into(), age: 36, active: true, nickname: Some("Countess".into()) }
}

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("docs.tessera")).unwrap();
    (dir, db)
}

#[test]
fn set_get_exists_delete() {
    let (_dir, db) = open();
    let profiles = db.documents("profiles").unwrap();
    let doc = profiles.document::<Profile>("ada");
    assert_eq!(doc.get().unwrap(), None);
    assert!(!doc.exists().unwrap());
    doc.set(&ada()).unwrap();
    assert_eq!(doc.get().unwrap(), Some(ada()));
    assert!(doc.exists().unwrap());
    assert!(doc.delete().unwrap());
    assert!(!doc.delete().unwrap());
    assert_eq!(doc.get().unwrap(), None);
}

#[test]
fn set_replaces_every_field_atomically() {
    let (_dir, db) = open();
    let doc = db.documents("profiles").unwrap().document::<Profile>("ada");
    doc.set(&ada()).unwrap();
    let plain = Profile { nickname: None, ..ada() };
    doc.set(&plain).unwrap(); // `nickname` is not serialized: its stored key must go
    assert_eq!(doc.get().unwrap(), Some(plain));
    assert_eq!(doc.field::<String>("nickname").get().unwrap(), None);
}

#[test]
fn update_is_a_read_modify_write_and_skips_missing_documents() {
    let (_dir, db) = open();
    let doc = db.documents("profiles").unwrap().document::<Profile>("ada");
    assert_eq!(doc.update(|p| p).unwrap(), None);
    assert_eq!(doc.get().unwrap(), None, "nothing written for a missing document");
    doc.set(&ada()).unwrap();
    let updated = doc.update(|mut p| {
        p.age += 1;
        p
    });
    assert_eq!(updated.unwrap().unwrap().age, 37);
    assert_eq!(doc.get().unwrap().unwrap().age, 37);
}

#[test]
fn single_fields_by_name_and_by_handle_use_serde_names() {
    let (_dir, db) = open();
    let doc = db.documents("profiles").unwrap().document::<Profile>("ada");
    doc.set(&ada()).unwrap();
    doc.update_field("e-mail", "ada@lovelace.org").unwrap(); // the renamed name, on every path
    assert_eq!(doc.get().unwrap().unwrap().email, "ada@lovelace.org");
    let age = doc.field::<i32>("age");
    age.set(&40).unwrap();
    assert_eq!(age.get().unwrap(), Some(40));
    assert_eq!(doc.get().unwrap().unwrap().age, 40);
    assert!(matches!(doc.update_field("", &1), Err(Error::InvalidName { .. })));
    assert!(matches!(doc.update_field("a\0b", &1), Err(Error::InvalidName { .. })));
}

#[test]
fn ids_never_collide_and_list_in_order() {
    let (_dir, db) = open();
    let profiles = db.documents("profiles").unwrap();
    for id in ["a", "a:", "a\0", "ab", "b", ""] {
        profiles.document::<Profile>(id).set(&Profile { name: id.into(), ..ada() }).unwrap();
    }
    for id in ["a", "a:", "a\0", "ab", "b", ""] {
        assert_eq!(profiles.document::<Profile>(id).get().unwrap().unwrap().name, id, "{id:?}");
    }
    assert!(profiles.document::<Profile>("a").delete().unwrap());
    assert_eq!(profiles.document::<Profile>("a:").get().unwrap().unwrap().name, "a:");
    assert_eq!(profiles.ids_with_prefix("a").unwrap(), vec!["a\0", "a:", "ab"]);
    assert_eq!(profiles.ids_in_range("a", "b").unwrap(), vec!["a\0", "a:", "ab"]);
    assert_eq!(profiles.ids_with_prefix("").unwrap(), vec!["", "a\0", "a:", "ab", "b"]);
    // Another collection has its own keyspace.
    assert_eq!(db.documents("others").unwrap().ids_with_prefix("").unwrap(), Vec::<String>::new());
}

#[test]
fn missing_fields_default_unknown_fields_are_ignored_and_bad_fields_are_named() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Narrow {
        name: String,
        #[serde(default)]
        score: u32,
    }
    let (_dir, db) = open();
    let profiles = db.documents("profiles").unwrap();
    profiles.document::<Profile>("ada").set(&ada()).unwrap();
    let narrow = profiles.document::<Narrow>("ada").get().unwrap().unwrap();
    assert_eq!(narrow, Narrow { name: "Ada".into(), score: 0 });

    // A wrong type is refused by the document's own type, with nothing written...
    match profiles.document::<Profile>("ada").update_field("age", "not a number") {
        Err(Error::DocumentField { field, message, .. }) => {
            assert_eq!(field, "age");
            assert!(message.contains("invalid type"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(profiles.document::<Profile>("ada").get().unwrap().unwrap(), ada());
    // ...and a field another type wrote is named when it does not decode.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Loose {
        age: String,
    }
    profiles.document::<Loose>("ada").update_field("age", "not a number").unwrap();
    match profiles.document::<Profile>("ada").get() {
        Err(Error::DocumentField { collection, id, field, message }) => {
            assert_eq!((collection.as_str(), id.as_str(), field.as_str()), ("profiles", "ada", "age"));
            assert!(message.contains("invalid type"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn observe_reports_one_event_per_commit_that_touches_the_document() {
    let (_dir, db) = open();
    let profiles = db.documents("profiles").unwrap();
    let doc = profiles.document::<Profile>("ada");
    let other = profiles.document::<Profile>("alan");
    let stream = doc.observe().unwrap();
    let timeout = Duration::from_secs(5);
    assert_eq!(stream.recv_timeout(timeout).and_then(Event::initial), Some(None), "absent at first");
    doc.set(&ada()).unwrap(); // five fields, one commit, one event
    other.set(&ada()).unwrap(); // another document: no event
    doc.update_field("age", &50).unwrap();
    doc.delete().unwrap();
    assert_eq!(stream.recv_timeout(timeout).and_then(Event::changed), Some(Some(ada())));
    assert_eq!(stream.recv_timeout(timeout).and_then(Event::changed).unwrap().unwrap().age, 50);
    assert_eq!(stream.recv_timeout(timeout).and_then(Event::changed), Some(None));
    assert!(stream.recv_timeout(Duration::from_millis(100)).is_none());
    // Ends when the database closes: Closed, then nothing.
    drop((doc, other, profiles, db));
    assert!(matches!(stream.recv_timeout(timeout), Some(Event::Closed(SubscriptionEnd::DatabaseClosed))));
    assert!(stream.recv_timeout(timeout).is_none());
}

#[test]
fn observe_field_reports_distinct_changes_of_that_field_only() {
    let (_dir, db) = open();
    let doc = db.documents("profiles").unwrap().document::<Profile>("ada");
    doc.set(&ada()).unwrap();
    let ages = doc.observe_field::<i32>("age").unwrap();
    let timeout = Duration::from_secs(5);
    assert_eq!(ages.recv_timeout(timeout).and_then(Event::initial), Some(Some(36)));
    doc.update_field("name", "Augusta").unwrap(); // another field
    doc.update_field("age", &36).unwrap(); // same value: not reported
    doc.update_field("age", &37).unwrap();
    doc.set(&Profile { age: 37, name: "Ada".into(), ..ada() }).unwrap(); // age unchanged
    doc.set(&Profile { age: 38, ..ada() }).unwrap();
    doc.delete().unwrap();
    assert_eq!(ages.recv_timeout(timeout).and_then(Event::changed), Some(Some(37)));
    assert_eq!(ages.recv_timeout(timeout).and_then(Event::changed), Some(Some(38)));
    assert_eq!(ages.recv_timeout(timeout).and_then(Event::changed), Some(None));
    assert!(ages.recv_timeout(Duration::from_millis(100)).is_none());
    drop((doc, db));
    assert!(matches!(ages.recv_timeout(timeout), Some(Event::Closed(SubscriptionEnd::DatabaseClosed))));
    assert!(ages.recv_timeout(timeout).is_none());
}

#[test]
fn two_handles_see_each_others_writes() {
    let (_dir, db) = open();
    let first = db.documents("profiles").unwrap().document::<Profile>("ada");
    let second = db.documents("profiles").unwrap().document::<Profile>("ada");
    let stream = second.observe().unwrap();
    assert_eq!(stream.recv_timeout(Duration::from_secs(5)).and_then(Event::initial), Some(None));
    first.set(&ada()).unwrap();
    assert_eq!(second.get().unwrap(), Some(ada()));
    assert_eq!(stream.recv_timeout(Duration::from_secs(5)).and_then(Event::changed), Some(Some(ada())));
    // Concurrent read-modify-writes through two handles exclude each other: no lost update.
    std::thread::scope(|scope| {
        for handle in [&first, &second] {
            scope.spawn(move || {
                for _ in 0..100 {
                    handle
                        .update(|mut p| {
                            p.age += 1;
                            p
                        })
                        .unwrap();
                }
            });
        }
    });
    assert_eq!(first.get().unwrap().unwrap().age, 36 + 200);
}

struct Xor;

impl FieldTransform for Xor {
    fn encode(&self, _field: &str, bytes: Vec<u8>) -> Vec<u8> {
        let mut out: Vec<u8> = bytes.into_iter().map(|b| b ^ 0x5A).collect();
        out.push(0x42); // a marker byte, checked on the way back
        out
    }
    fn decode(&self, field: &str, bytes: &[u8]) -> Result<Vec<u8>, String> {
        match bytes.split_last() {
            Some((0x42, body)) => Ok(body.iter().map(|b| b ^ 0x5A).collect()),
            _ => Err(format!("{field}: not written through this transform")),
        }
    }
}

#[test]
fn transforms_apply_on_every_path() {
    let (_dir, db) = open();
    let options = DocumentsOptions { transform: Some(Arc::new(Xor)), ..DocumentsOptions::default() };
    let secret = db.documents_with("secret", options).unwrap();
    let doc = secret.document::<Profile>("ada");
    doc.set(&ada()).unwrap();
    doc.update_field("age", &41).unwrap();
    assert_eq!(doc.field::<i32>("age").get().unwrap(), Some(41));
    assert_eq!(doc.get().unwrap(), Some(Profile { age: 41, ..ada() }));
    // The same keyspace read without the transform: the stored bytes are not plain documents.
    let plain = db.documents("secret").unwrap().document::<Profile>("ada");
    assert!(matches!(plain.get(), Err(Error::DocumentField { .. })));
    // And bytes written without it fail the transform's check, naming the field.
    plain.update_field("age", &1).unwrap();
    match doc.get() {
        Err(Error::DocumentField { field, message, .. }) => {
            assert!(field == "age" && message.contains("not written through"), "{field}: {message}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn deep_decomposition_stores_one_key_per_leaf() {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Address {
        city: String,
        zip: String,
    }
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Person {
        name: String,
        address: Address,
        tags: Vec<String>,
    }
    let (_dir, db) = open();
    let deep = db.documents_with("people", DocumentsOptions { deep: true, ..DocumentsOptions::default() }).unwrap();
    let doc = deep.document::<Person>("ada");
    let person = Person { name: "Ada".into(), address: Address { city: "London".into(), zip: "N1".into() }, tags: vec!["math".into()] };
    doc.set(&person).unwrap();
    assert_eq!(doc.get().unwrap(), Some(person.clone()));
    doc.update_field("address.city", "Cambridge").unwrap();
    assert_eq!(doc.field::<String>("address.city").get().unwrap().as_deref(), Some("Cambridge"));
    let city_changes = doc.observe_field::<String>("address.city").unwrap();
    assert_eq!(city_changes.recv_timeout(Duration::from_secs(5)).and_then(Event::initial).flatten().as_deref(), Some("Cambridge"));
    doc.update_field("address.zip", "CB1").unwrap(); // a sibling leaf: not reported
    doc.update_field("address.city", "Oxford").unwrap();
    assert_eq!(city_changes.recv_timeout(Duration::from_secs(5)).and_then(Event::changed).flatten().as_deref(), Some("Oxford"));
    let read = doc.get().unwrap().unwrap();
    assert_eq!(read.address, Address { city: "Oxford".into(), zip: "CB1".into() });
}

#[test]
fn documents_join_a_database_transaction() {
    let (_dir, db) = open();
    let doc = db.documents("profiles").unwrap().document::<Profile>("ada");
    let audit = db.keyspace("audit").unwrap();
    let _ = db.write(|tx| -> tessera::Result<()> {
        doc.set_in(tx, &ada())?;
        tx.put(&audit, b"ada", b"created")?;
        Err(Error::other("abort"))
    });
    assert_eq!(doc.get().unwrap(), None);
    db.write(|tx| {
        doc.set_in(tx, &ada())?;
        doc.update_field_in(tx, "age", &99)?;
        assert_eq!(doc.get_in_write(tx)?.unwrap().age, 99);
        tx.put(&audit, b"ada", b"created")
    })
    .unwrap();
    assert_eq!(doc.get().unwrap().unwrap().age, 99);
    let was_there = db.write(|tx| doc.delete_in(tx)).unwrap();
    assert!(was_there);
}

#[test]
fn values_that_are_not_records_are_refused() {
    let (_dir, db) = open();
    let docs = db.documents("misc").unwrap();
    assert!(matches!(docs.document::<Vec<u32>>("list").set(&vec![1, 2]), Err(Error::DocumentField { .. })));
    assert!(matches!(docs.document::<u32>("number").set(&7), Err(Error::DocumentField { .. })));
    // Maps with string keys are records.
    let map = docs.document::<std::collections::BTreeMap<String, u32>>("map");
    map.set(&[("x".to_string(), 1)].into_iter().collect()).unwrap();
    assert_eq!(map.get().unwrap().unwrap()["x"], 1);
}

#[test]
fn a_set_that_cannot_be_stored_leaves_the_document_as_it_was() {
    let (_dir, db) = open();
    let profiles = db.documents("profiles").unwrap();
    // An id long enough that one field name more fits no key.
    let id = "i".repeat(480);
    let maps = profiles.document::<std::collections::BTreeMap<String, u32>>(&id);
    maps.set(&[("a".to_owned(), 1), ("b".to_owned(), 2)].into()).unwrap();
    let too_long: std::collections::BTreeMap<String, u32> = [("a".to_owned(), 10), ("n".repeat(40), 3)].into();
    // The closure catches the error and commits: before, the stale field `b` had been deleted
    // (and `a` rewritten) when the long key failed, and that half-change was committed.
    db.write(|tx| {
        let refused = maps.set_in(tx, &too_long);
        assert!(matches!(&refused, Err(Error::DocumentField { message, .. }) if message.contains("bytes")), "{refused:?}");
        Ok(())
    })
    .unwrap();
    assert_eq!(maps.get().unwrap().unwrap(), [("a".to_owned(), 1), ("b".to_owned(), 2)].into());
}

#[test]
fn update_field_checks_the_name_the_type_and_that_the_document_exists() {
    let (_dir, db) = open();
    let profiles = db.documents("profiles").unwrap();
    let doc = profiles.document::<Profile>("ada");
    // A field of a missing document would leave a document that does not decode.
    assert!(matches!(doc.update_field("age", &36), Err(Error::NotFound { .. })));
    assert_eq!(doc.get().unwrap(), None, "nothing was written");
    doc.set(&ada()).unwrap();
    match doc.update_field("agee", &37) {
        Err(Error::UnknownField { path, .. }) => assert_eq!(path, "agee"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(doc.update_field("nickname", &5), Err(Error::DocumentField { .. })));
    // An id that begins another's is its own document: "ad" does not exist beside "ada".
    let shorter = profiles.document::<Profile>("ad");
    assert!(matches!(shorter.update_field("age", &1), Err(Error::NotFound { .. })));
    assert_eq!(shorter.get().unwrap(), None);
    doc.update_field("nickname", &None::<String>).unwrap();
    doc.update_field("age", &37).unwrap();
    assert_eq!(doc.get().unwrap().unwrap(), Profile { age: 37, nickname: None, ..ada() });
    // Inside a caller's transaction the same checks apply.
    let refused = db.write(|tx| doc.update_field_in(tx, "age", "old"));
    assert!(matches!(refused, Err(Error::DocumentField { .. })));
}

/// Field names reach serde as its own string deserializer hands them: an identifier as text,
/// an enum key through `visit_enum`. A change that handed identifiers over as bytes, and enum
/// keys as a plain string, failed all three of these types (found by review).
mod field_names {
    use super::open;
    use serde::de::{self, Deserializer, MapAccess, Visitor};
    use serde::{Deserialize, Serialize};
    use std::collections::BTreeMap;

    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Color {
        Red,
        Blue,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct WithExtra {
        id: u32,
        #[serde(flatten)]
        extra: BTreeMap<Color, u32>,
    }

    /// Written by hand as serde's documentation shows: the field visitor has `visit_str` only.
    #[derive(Debug, PartialEq, Serialize)]
    struct Manual {
        secs: u64,
    }

    enum ManualField {
        Secs,
    }

    impl<'de> Deserialize<'de> for ManualField {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ManualField, D::Error> {
            struct FieldVisitor;
            impl<'de> Visitor<'de> for FieldVisitor {
                type Value = ManualField;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("`secs`")
                }
                fn visit_str<E: de::Error>(self, value: &str) -> Result<ManualField, E> {
                    match value {
                        "secs" => Ok(ManualField::Secs),
                        _ => Err(de::Error::unknown_field(value, &["secs"])),
                    }
                }
            }
            deserializer.deserialize_identifier(FieldVisitor)
        }
    }

    impl<'de> Deserialize<'de> for Manual {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct ManualVisitor;
            impl<'de> Visitor<'de> for ManualVisitor {
                type Value = Manual;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("struct Manual")
                }
                fn visit_map<V: MapAccess<'de>>(self, mut map: V) -> Result<Manual, V::Error> {
                    let mut secs = None;
                    while let Some(ManualField::Secs) = map.next_key()? {
                        secs = Some(map.next_value()?);
                    }
                    Ok(Manual { secs: secs.ok_or_else(|| de::Error::missing_field("secs"))? })
                }
            }
            deserializer.deserialize_struct("Manual", &["secs"], ManualVisitor)
        }
    }

    #[test]
    fn a_map_with_enum_keys_reads_back() {
        let (_dir, db) = open();
        let doc = db.documents("d").unwrap().document::<BTreeMap<Color, u32>>("a");
        let value = BTreeMap::from([(Color::Red, 1), (Color::Blue, 2)]);
        doc.set(&value).unwrap();
        assert_eq!(doc.get().unwrap(), Some(value));
    }

    #[test]
    fn a_flattened_map_with_enum_keys_reads_back() {
        let (_dir, db) = open();
        let doc = db.documents("d").unwrap().document::<WithExtra>("a");
        let value = WithExtra { id: 7, extra: BTreeMap::from([(Color::Red, 1)]) };
        doc.set(&value).unwrap();
        assert_eq!(doc.get().unwrap(), Some(value));
    }

    #[test]
    fn a_hand_written_identifier_visitor_reads_back() {
        let (_dir, db) = open();
        let doc = db.documents("d").unwrap().document::<Manual>("a");
        doc.set(&Manual { secs: 5 }).unwrap();
        assert_eq!(doc.get().unwrap(), Some(Manual { secs: 5 }));
    }
}

/// `update_field` on types whose fields the probe cannot check one at a time (a flattened
/// struct, tagged enums, aliases): the write is checked against the whole document. Before,
/// each of these returned Ok and left a document that `get` refused (found by review).
mod checked_field_writes {
    use super::open;
    use serde::{Deserialize, Serialize};
    use tessera::Error;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Meta {
        version: u32,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Flat {
        id: u32,
        #[serde(flatten)]
        meta: Meta,
    }

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Strict {
        id: u32,
        #[serde(flatten)]
        meta: Meta,
    }

    #[test]
    fn a_flattened_field_is_written_when_it_fits_and_refused_when_it_does_not() {
        let (_dir, db) = open();
        let doc = db.documents("flat").unwrap().document::<Flat>("f");
        let value = Flat { id: 1, meta: Meta { version: 2 } };
        doc.set(&value).unwrap();
        match doc.update_field("version", "not a number") {
            Err(Error::DocumentField { collection, id, field, message }) => {
                assert_eq!((collection.as_str(), id.as_str(), field.as_str()), ("flat", "f", "version"));
                assert!(message.contains("invalid type"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(doc.get().unwrap(), Some(value.clone()), "nothing written");
        doc.update_field("version", &3u32).unwrap();
        doc.update_field("id", &4u32).unwrap();
        assert_eq!(doc.get().unwrap(), Some(Flat { id: 4, meta: Meta { version: 3 } }));
    }

    #[test]
    fn an_unknown_name_on_a_struct_with_a_flattened_part_is_an_unknown_field() {
        let (_dir, db) = open();
        let docs = db.documents("flat").unwrap();
        let strict = docs.document::<Strict>("s");
        strict.set(&Strict { id: 1, meta: Meta { version: 2 } }).unwrap();
        assert!(matches!(strict.update_field("no_such_field", &5u32), Err(Error::UnknownField { path, .. }) if path == "no_such_field"));
        assert_eq!(strict.get().unwrap(), Some(Strict { id: 1, meta: Meta { version: 2 } }));
        // Without deny_unknown_fields the type would ignore the key: Ok would be a write of
        // nothing the type reads.
        let loose = docs.document::<Flat>("l");
        loose.set(&Flat { id: 1, meta: Meta { version: 2 } }).unwrap();
        assert!(matches!(loose.update_field("no_such_field", &5u32), Err(Error::UnknownField { .. })));
    }

    #[test]
    fn a_tagged_enum_document_checks_the_field_against_the_stored_variant() {
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "type")]
        enum Shape {
            Circle { radius: f64 },
            Square { side: f64 },
        }
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "t", content = "c")]
        enum Adjacent {
            Circle { radius: f64 },
            Square { side: f64 },
        }
        let (_dir, db) = open();
        let docs = db.documents("shapes").unwrap();
        let shape = docs.document::<Shape>("s");
        shape.set(&Shape::Circle { radius: 1.0 }).unwrap();
        assert!(matches!(shape.update_field("radius", "big"), Err(Error::DocumentField { field, .. }) if field == "radius"));
        // The tag alone: a Square without its side.
        assert!(matches!(shape.update_field("type", "Square"), Err(Error::DocumentField { .. })));
        assert_eq!(shape.get().unwrap(), Some(Shape::Circle { radius: 1.0 }));
        shape.update_field("radius", &2.0).unwrap();
        assert_eq!(shape.get().unwrap(), Some(Shape::Circle { radius: 2.0 }));

        let adjacent = docs.document::<Adjacent>("a");
        adjacent.set(&Adjacent::Circle { radius: 1.0 }).unwrap();
        assert!(matches!(adjacent.update_field("t", "Square"), Err(Error::DocumentField { .. })));
        assert_eq!(adjacent.get().unwrap(), Some(Adjacent::Circle { radius: 1.0 }));
    }

    #[test]
    fn an_alias_is_refused_and_the_field_is_written_under_its_own_name() {
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        struct Aged {
            name: String,
            #[serde(alias = "years")]
            age: u32,
        }
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        struct MaybeAged {
            name: String,
            #[serde(alias = "years", default, skip_serializing_if = "Option::is_none")]
            age: Option<u32>,
        }
        let (_dir, db) = open();
        let docs = db.documents("aged").unwrap();
        let aged = docs.document::<Aged>("a");
        aged.set(&Aged { name: "Ada".into(), age: 36 }).unwrap();
        assert!(matches!(aged.update_field("years", &37u32), Err(Error::DocumentField { field, .. }) if field == "years"));
        assert_eq!(aged.get().unwrap(), Some(Aged { name: "Ada".into(), age: 36 }));
        aged.update_field("age", &37u32).unwrap();
        assert_eq!(aged.get().unwrap(), Some(Aged { name: "Ada".into(), age: 37 }));
        // The canonical field not stored: the alias would read back, under a key `set` would
        // not write. Refused all the same.
        let maybe = docs.document::<MaybeAged>("m");
        maybe.set(&MaybeAged { name: "Ada".into(), age: None }).unwrap();
        match maybe.update_field("years", &37u32) {
            Err(Error::DocumentField { field, message, .. }) => assert!(field == "years" && message.contains("alias"), "{message}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(maybe.get().unwrap(), Some(MaybeAged { name: "Ada".into(), age: None }));
    }

    #[test]
    fn a_field_not_stored_yet_is_written_when_the_document_still_decodes() {
        let (_dir, db) = open();
        let doc = db.documents("profiles").unwrap().document::<super::Profile>("ada");
        doc.set(&super::Profile { nickname: None, ..super::ada() }).unwrap(); // nickname skipped
        doc.update_field("nickname", &None::<String>).unwrap(); // nothing changes: not refused
        assert_eq!(doc.get().unwrap().unwrap().nickname, None);
        doc.update_field("nickname", "Countess").unwrap();
        assert_eq!(doc.get().unwrap(), Some(super::ada()));
    }

    #[test]
    fn a_refused_field_in_a_caller_transaction_writes_nothing_though_the_transaction_commits() {
        let (_dir, db) = open();
        let docs = db.documents("flat").unwrap();
        let doc = docs.document::<Flat>("f");
        let other = docs.document::<Flat>("g");
        doc.set(&Flat { id: 1, meta: Meta { version: 2 } }).unwrap();
        db.write(|tx| {
            assert!(doc.update_field_in(tx, "version", "not a number").is_err());
            other.set_in(tx, &Flat { id: 9, meta: Meta { version: 9 } })
        })
        .unwrap();
        assert_eq!(doc.get().unwrap(), Some(Flat { id: 1, meta: Meta { version: 2 } }));
        assert_eq!(other.get().unwrap(), Some(Flat { id: 9, meta: Meta { version: 9 } }));
    }
}

/// A value that stores no field (an empty map, a struct whose every field is skipped): `set`
/// returned Ok and `get` then said there was no document (found by review). A document is its
/// stored fields, so such a value is refused, naming the document, and nothing changes.
#[test]
fn a_value_with_no_stored_field_is_refused_by_set() {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Sparse {
        #[serde(skip_serializing_if = "Option::is_none", default)]
        nickname: Option<String>,
    }
    let (_dir, db) = open();
    let docs = db.documents("empty").unwrap();
    let map = docs.document::<std::collections::BTreeMap<String, u32>>("m");
    match map.set(&Default::default()) {
        Err(Error::DocumentField { collection, id, message, .. }) => {
            assert_eq!((collection.as_str(), id.as_str()), ("empty", "m"));
            assert!(message.contains("at least one stored field"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(map.get().unwrap(), None);
    let sparse = docs.document::<Sparse>("s");
    sparse.set(&Sparse { nickname: Some("A".into()) }).unwrap();
    assert!(matches!(sparse.set(&Sparse { nickname: None }), Err(Error::DocumentField { .. })));
    assert!(matches!(sparse.update(|_| Sparse { nickname: None }), Err(Error::DocumentField { .. })));
    assert_eq!(sparse.get().unwrap(), Some(Sparse { nickname: Some("A".into()) }), "left as it was");
}
