//! Review of field-decomposed documents and the dictionary (2026-11-30): odd values, odd
//! names, limits, observation and the write-behind cache, each held to "no silent wrong
//! answers": an operation does what was asked or returns a typed error.

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use tessera::live::Event;
use tessera::{Db, DocumentsOptions, Error};

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("review.tessera")).unwrap();
    (dir, db)
}

fn deep() -> DocumentsOptions {
    DocumentsOptions { deep: true, ..Default::default() }
}

const WAIT: Duration = Duration::from_secs(5);

// ------------------------------------------------------------------------------- documents

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct WithExtra {
    a: u32,
    #[serde(flatten)]
    extra: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Inner {
    b: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct DeepExtra {
    a: Inner,
    #[serde(flatten)]
    extra: BTreeMap<String, u32>,
}

/// Before: `set` of a struct whose flattened map repeats one of its fields returned Ok; in a
/// plain document the later value took the key (`get` read `a: 5, extra: {}`), in a deep one
/// `a` was stored both as a value and as nested fields, and `get` refused the document.
#[test]
fn a_value_naming_a_field_twice_is_refused_by_set() {
    let (_dir, db) = open();
    let plain = db.documents("dups").unwrap().document::<WithExtra>("d");
    let stored = WithExtra { a: 1, extra: [("b".to_owned(), 2)].into() };
    plain.set(&stored).unwrap();
    let twice = WithExtra { a: 1, extra: [("a".to_owned(), 5)].into() };
    match plain.set(&twice) {
        Err(Error::DocumentField { id, field, .. }) => assert_eq!((id.as_str(), field.as_str()), ("d", "a")),
        other => panic!("{other:?}, then get read {:?}", plain.get()),
    }
    assert_eq!(plain.get().unwrap(), Some(stored), "nothing written");
    let deep_doc = db.documents_with("dups_deep", deep()).unwrap().document::<DeepExtra>("d");
    let stored = DeepExtra { a: Inner { b: 1 }, extra: BTreeMap::new() };
    deep_doc.set(&stored).unwrap();
    let twice = DeepExtra { a: Inner { b: 2 }, extra: [("a".to_owned(), 5)].into() };
    match deep_doc.set(&twice) {
        Err(Error::DocumentField { field, .. }) => assert_eq!(field, "a"),
        other => panic!("{other:?}, then get read {:?}", deep_doc.get()),
    }
    assert_eq!(deep_doc.get().unwrap(), Some(stored.clone()), "nothing written");
    let updated = deep_doc.update(|_| DeepExtra { a: Inner { b: 3 }, extra: [("a".to_owned(), 5)].into() });
    assert!(matches!(updated, Err(Error::DocumentField { .. })), "{updated:?}");
    assert_eq!(deep_doc.get().unwrap(), Some(stored));
    // Many fields (the sorted check), one repeated.
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Wide {
        zz: u32,
        #[serde(flatten)]
        rest: BTreeMap<String, u32>,
    }
    let wide = db.documents("wide").unwrap().document::<Wide>("w");
    let mut rest: BTreeMap<String, u32> = (0..40).map(|n| (format!("f{n:02}"), n)).collect();
    wide.set(&Wide { zz: 1, rest: rest.clone() }).unwrap();
    assert_eq!(wide.get().unwrap().unwrap().rest.len(), 40);
    rest.insert("zz".into(), 9);
    assert!(matches!(wide.set(&Wide { zz: 1, rest }), Err(Error::DocumentField { field, .. }) if field == "zz"));
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Profile {
    name: String,
    age: u32,
}

fn ada() -> Profile {
    Profile { name: "Ada".into(), age: 36 }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Wrapped(Profile);

/// Before: a document typed as a newtype around a struct, or as an `Option` of one, was
/// stored by `set` (the splitter looks through both) but `get` and `observe` read `None`:
/// the type refused the fields before reading one, and "no field read" was taken for "no
/// document", while `exists` said true.
#[test]
fn a_newtype_or_option_document_reads_back_what_set_stored() {
    let (_dir, db) = open();
    for options in [DocumentsOptions::default(), deep()] {
        let docs = db.documents_with(if options.deep { "deep" } else { "plain" }, options).unwrap();
        let wrapped = docs.document::<Wrapped>("w");
        let live = wrapped.observe().unwrap();
        assert!(matches!(live.recv_timeout(WAIT), Some(Event::Initial(None))));
        wrapped.set(&Wrapped(ada())).unwrap();
        assert!(wrapped.exists().unwrap());
        assert_eq!(wrapped.get().unwrap(), Some(Wrapped(ada())));
        assert_eq!(live.recv_timeout(WAIT).and_then(Event::changed), Some(Some(Wrapped(ada()))));
        wrapped.update_field("age", &37u32).unwrap();
        assert_eq!(wrapped.get().unwrap().map(|w| w.0.age), Some(37));
        let optional = docs.document::<Option<Profile>>("o");
        optional.set(&Some(ada())).unwrap();
        assert_eq!(optional.get().unwrap(), Some(Some(ada())));
        assert!(optional.set(&None).is_err(), "a null is no document");
        assert_eq!(optional.get().unwrap(), Some(Some(ada())));
        assert!(optional.delete().unwrap());
        assert_eq!(optional.get().unwrap(), None);
    }
}

/// Guards: a type that refuses the stored fields is an error naming the document, never
/// `None` for a document that exists.
#[test]
fn a_document_its_type_refuses_whole_is_an_error_not_absent() {
    let (_dir, db) = open();
    let docs = db.documents("refused").unwrap();
    docs.document::<Profile>("p").set(&ada()).unwrap();
    for result in
        [docs.document::<Vec<u32>>("p").get().map(|v| format!("{v:?}")), docs.document::<u32>("p").get().map(|v| format!("{v:?}"))]
    {
        assert!(matches!(&result, Err(Error::DocumentField { id, .. }) if id == "p"), "{result:?}");
    }
    assert_eq!(docs.document::<Vec<u32>>("absent").get().unwrap(), None);
}

// ------------------------------------------------------------------------------ dictionary

fn slow_flush() -> tessera::DictionaryOptions {
    tessera::DictionaryOptions { flush_interval: Duration::from_secs(30), ..Default::default() }
}

/// Checks that `get` reads `expected` for `k`, and that `live` (which showed `shown` last)
/// shows it too once it has seen every write before a last one (a marker no test writes
/// otherwise: no quiet period to wait out).
fn settle(dict: &tessera::Dictionary, live: &tessera::live::ValueSubscription<u32>, mut shown: Option<u32>, expected: Option<u32>) {
    assert_eq!(dict.get::<u32>("k").unwrap(), expected, "get");
    let marker = 1_000;
    dict.set("k", &marker).unwrap();
    dict.flush().unwrap();
    loop {
        match live.recv_timeout(WAIT) {
            Some(Event::Changed(Some(value))) if value == marker => break,
            Some(Event::Changed(value)) => shown = value,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(shown, expected, "the subscription's value, where get read {expected:?}");
}

/// A dictionary that saves only when asked, with `k` stored as `stored` and then set to
/// `pending` (not saved), and a subscription to `k` made then, past its `Initial(pending)`.
fn subscribed_over_a_pending_write(
    db: &Db,
    stored: Option<u32>,
    pending: u32,
) -> (tessera::Dictionary, tessera::live::ValueSubscription<u32>) {
    let dict = db.dictionary_with("d", slow_flush()).unwrap();
    if let Some(stored) = stored {
        dict.set("k", &stored).unwrap();
        dict.flush().unwrap();
    }
    dict.set("k", &pending).unwrap();
    let live = dict.subscribe::<u32>("k").unwrap();
    assert!(matches!(live.recv_timeout(WAIT), Some(Event::Initial(Some(value))) if value == pending));
    (dict, live)
}

// Before (these four): a key subscription made over a pending write took that write as its
// initial value, and then heard only of writes that changed storage. A pending write that
// never reached storage (cleared, removed again, set back to the stored value before the
// save, or superseded by a transaction writing the stored value) left the subscription on a
// value the dictionary no longer had, for good, while `get` read another.

#[test]
fn a_key_subscription_over_a_pending_write_sees_a_clear() {
    let (_dir, db) = open();
    let (dict, live) = subscribed_over_a_pending_write(&db, None, 1);
    dict.clear().unwrap();
    settle(&dict, &live, Some(1), None);
}

#[test]
fn a_key_subscription_over_a_pending_write_sees_it_removed_before_the_save() {
    let (_dir, db) = open();
    let (dict, live) = subscribed_over_a_pending_write(&db, None, 1);
    dict.remove("k").unwrap();
    dict.flush().unwrap();
    settle(&dict, &live, Some(1), None);
}

#[test]
fn a_key_subscription_over_a_pending_write_sees_it_set_back_before_the_save() {
    let (_dir, db) = open();
    let (dict, live) = subscribed_over_a_pending_write(&db, Some(1), 2);
    dict.set("k", &1u32).unwrap();
    dict.flush().unwrap();
    settle(&dict, &live, Some(2), Some(1));
}

#[test]
fn a_key_subscription_over_a_pending_write_sees_a_transaction_supersede_it() {
    let (_dir, db) = open();
    let (dict, live) = subscribed_over_a_pending_write(&db, Some(1), 2);
    db.write(|tx| tx.dictionary(&dict).set("k", &1u32)).unwrap();
    settle(&dict, &live, Some(2), Some(1));
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
enum Val {
    Num(u32),
    Map(BTreeMap<String, u32>),
}

#[derive(Debug, Clone)]
enum DeepOp {
    Set(BTreeMap<String, Val>),
    Field(Val),
    Leaf(String, u32),
    Delete,
}

fn val_strategy() -> impl Strategy<Value = Val> {
    prop_oneof![
        (0u32..3).prop_map(Val::Num),
        proptest::collection::btree_map(prop_oneof![Just("k".to_owned()), Just("j".to_owned())], 0u32..3, 0..3).prop_map(Val::Map),
    ]
}

fn deep_op_strategy() -> impl Strategy<Value = DeepOp> {
    let name = || prop_oneof![Just("x".to_owned()), Just("y".to_owned())];
    prop_oneof![
        proptest::collection::btree_map(name(), val_strategy(), 1..3).prop_map(DeepOp::Set),
        val_strategy().prop_map(DeepOp::Field),
        (prop_oneof![Just("k".to_owned()), Just("j".to_owned())], 0u32..3).prop_map(|(leaf, n)| DeepOp::Leaf(leaf, n)),
        Just(DeepOp::Delete),
    ]
}

/// Every value a subscription reported, from `Initial` on, up to `last` (which a final write
/// makes, so that no quiet period has to be waited out).
fn values_until<V: std::fmt::Debug + PartialEq>(live: &tessera::live::ValueSubscription<V>, last: &Option<V>) -> Vec<Option<V>> {
    let mut seen = Vec::new();
    while seen.last() != Some(last) {
        match live.recv_timeout(WAIT) {
            Some(Event::Initial(value) | Event::Changed(value)) => seen.push(value),
            other => panic!("{other:?} after {seen:?}"),
        }
    }
    seen
}

/// Consecutive repeats dropped: what a distinct-until-changed subscription reports.
fn distinct<V: PartialEq>(values: Vec<V>) -> Vec<V> {
    let mut out: Vec<V> = Vec::new();
    for value in values {
        if out.last() != Some(&value) {
            out.push(value);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Guards (a gap of `documents_properties.rs`, which watches whole documents): in a deep
    /// document, a field moved between a scalar, an empty map and a map of leaves, by `set`,
    /// by `update_field` of the field and of a leaf under it, and by `delete`: `get`, the field
    /// handles and `observe_field` on the field and on a leaf under it agree with a model
    /// after every step, and each subscription reports each change once, in order.
    #[test]
    fn deep_fields_and_their_subscriptions_match_a_model(ops in proptest::collection::vec(deep_op_strategy(), 1..14)) {
        let (_dir, db) = open();
        let doc = db.documents_with("model", deep()).unwrap().document::<BTreeMap<String, Val>>("d");
        let whole = doc.observe_field::<Val>("x").unwrap();
        let leaf = doc.observe_field::<u32>("x.k").unwrap();
        let mut model: Option<BTreeMap<String, Val>> = None;
        let mut expected_x = vec![None];
        let mut expected_k = vec![None];
        for op in &ops {
            let result = match op {
                DeepOp::Set(value) => doc.set(value),
                DeepOp::Field(value) => doc.update_field("x", value),
                DeepOp::Leaf(name, n) => doc.update_field(&format!("x.{name}"), n),
                DeepOp::Delete => doc.delete().map(drop),
            };
            match (op, &mut model) {
                (DeepOp::Set(value), _) => { result.unwrap(); model = Some(value.clone()); }
                (DeepOp::Delete, _) => { result.unwrap(); model = None; }
                (_, None) => prop_assert!(matches!(result, Err(Error::NotFound { .. })), "{:?}", result),
                (DeepOp::Field(value), Some(fields)) => { result.unwrap(); fields.insert("x".into(), value.clone()); }
                (DeepOp::Leaf(name, n), Some(fields)) => {
                    result.unwrap();
                    let mut map = match fields.remove("x") { Some(Val::Map(map)) => map, _ => BTreeMap::new() };
                    map.insert(name.clone(), *n);
                    fields.insert("x".into(), Val::Map(map));
                }
            }
            prop_assert_eq!(doc.get().unwrap(), model.clone(), "after {:?}", op);
            let x = model.as_ref().and_then(|fields| fields.get("x").cloned());
            let k = match &x { Some(Val::Map(map)) => map.get("k").copied(), _ => None };
            prop_assert_eq!(doc.field::<Val>("x").get().unwrap(), x.clone(), "field x after {:?}", op);
            prop_assert_eq!(doc.field::<u32>("x.k").get().unwrap(), k, "field x.k after {:?}", op);
            expected_x.push(x);
            expected_k.push(k);
        }
        // A last write that changes both (no generated value is 99).
        let last = Val::Map([("k".to_owned(), 99)].into());
        doc.set(&[("x".to_owned(), last.clone())].into()).unwrap();
        expected_x.push(Some(last.clone()));
        expected_k.push(Some(99));
        prop_assert_eq!(values_until(&whole, &Some(last)), distinct(expected_x), "observe_field x over {:?}", ops);
        prop_assert_eq!(values_until(&leaf, &Some(99)), distinct(expected_k), "observe_field x.k over {:?}", ops);
    }
}

/// A value whose serde form repeats a key below the top level (a flattened map naming a field
/// of its struct) was encoded by `tessera_value::to_vec` and `to_shared` with the last value
/// kept, silently: the dictionary returned Ok and read back `a: 5, extra: {}`, and so did a
/// document holding it in a field. The serde encoder now refuses a repeated key
/// (`EncodeError::RepeatedKey`), as the documents refuse a repeated top-level field (above).
#[test]
fn a_value_repeating_a_key_below_the_top_level_is_refused() {
    let (_dir, db) = open();
    let twice = WithExtra { a: 1, extra: [("a".to_owned(), 5)].into() };
    let dict = db.dictionary().unwrap();
    let set = dict.set("k", &twice);
    assert!(set.is_err(), "set returned Ok, then get read {:?}", dict.get::<WithExtra>("k"));
    let doc = db.documents("nested").unwrap().document::<BTreeMap<String, WithExtra>>("d");
    let set = doc.set(&[("x".to_owned(), twice)].into());
    assert!(set.is_err(), "set returned Ok, then get read {:?}", doc.get());
}

/// Before: with a bounded cache, a read that missed took its snapshot, a transaction then
/// committed the key (its entry cached clean, so evictable at once) and another read evicted
/// it; the first read then cached the value from its older snapshot, and `get` served that
/// older value after the commit had returned, until evicted (a later write equal to it would
/// have been skipped as unchanged). Saves were guarded against this (`saves`); transactions
/// were not. A race: this finds it in most runs within its second (5 of 6 measured).
#[test]
fn a_bounded_cache_never_serves_a_value_older_than_a_committed_transaction() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let (_dir, db) = open();
    let options = tessera::DictionaryOptions { shards: 1, entries_max: Some(1), flush_interval: Duration::from_secs(30) };
    let dict = db.dictionary_with("bounded", options).unwrap();
    let pad: Vec<String> = (0..5000).map(|n| format!("s{n}")).collect();
    db.write(|tx| tx.dictionary(&dict).set("k", &(0u64, &pad))).unwrap();
    let committed = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let start = std::time::Instant::now();
    let found = std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                db.write(|tx| tx.dictionary(&dict).set("k", &(i, &pad))).unwrap();
                committed.store(i, Ordering::SeqCst);
            }
        });
        scope.spawn(|| {
            let mut j = 0u64;
            while !stop.load(Ordering::Relaxed) {
                j += 1;
                let _ = dict.get::<u64>(&format!("other{}", j % 7)).unwrap();
            }
        });
        let reader = scope.spawn(|| {
            let mut found = None;
            while start.elapsed() < Duration::from_secs(1) {
                let c = committed.load(Ordering::SeqCst);
                let v = dict.get::<(u64, Vec<String>)>("k").unwrap().unwrap().0;
                if v < c {
                    found = Some((v, c));
                    break;
                }
            }
            stop.store(true, Ordering::Relaxed);
            found
        });
        reader.join().unwrap()
    });
    assert_eq!(found, None, "(read, committed before the read began) after {:?}", start.elapsed());
}

#[derive(Debug, Clone)]
enum DictOp {
    Set(u32),
    Remove,
    TxnSet(u32),
    TxnRemove,
    Clear,
    Flush,
    Subscribe,
}

fn dict_op_strategy() -> impl Strategy<Value = DictOp> {
    prop_oneof![
        3 => (0u32..3).prop_map(DictOp::Set),
        2 => Just(DictOp::Remove),
        1 => (0u32..3).prop_map(DictOp::TxnSet),
        1 => Just(DictOp::TxnRemove),
        1 => Just(DictOp::Clear),
        2 => Just(DictOp::Flush),
        2 => Just(DictOp::Subscribe),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Guards (a gap of `dictionary_model.rs`, whose subscriptions see a flush after every
    /// write): key subscriptions made at any point, over pending writes or not, while writes,
    /// transactions, clears and flushes interleave without a flush between them. After a last
    /// write, every subscription shows what `get` reads, its `Initial` was what `get` read
    /// when it was made, and no event repeats the value before it.
    #[test]
    fn key_subscriptions_end_on_what_get_reads(long in any::<bool>(), ops in proptest::collection::vec(dict_op_strategy(), 1..12)) {
        let (_dir, db) = open();
        let dict = db.dictionary_with("d", slow_flush()).unwrap();
        let key = if long { "k".repeat(600) } else { "k".to_owned() };
        let mut model: Option<u32> = None;
        let mut subscriptions = Vec::new();
        for op in &ops {
            match op {
                DictOp::Set(v) => { dict.set(&key, v).unwrap(); model = Some(*v); }
                DictOp::Remove => { dict.remove(&key).unwrap(); model = None; }
                DictOp::TxnSet(v) => { db.write(|tx| tx.dictionary(&dict).set(&key, v)).unwrap(); model = Some(*v); }
                DictOp::TxnRemove => { db.write(|tx| tx.dictionary(&dict).remove(&key)).unwrap(); model = None; }
                DictOp::Clear => { dict.clear().unwrap(); model = None; }
                DictOp::Flush => dict.flush().unwrap(),
                DictOp::Subscribe => {
                    let live = dict.subscribe::<u32>(&key).unwrap();
                    match live.recv_timeout(WAIT) {
                        Some(Event::Initial(value)) => prop_assert_eq!(value, model, "initial after {:?}", ops),
                        other => prop_assert!(false, "{:?}", other),
                    }
                    subscriptions.push((live, model));
                }
            }
            prop_assert_eq!(dict.get::<u32>(&key).unwrap(), model);
        }
        // Saved, then a last write: each subscription has seen the saved value before it.
        dict.flush().unwrap();
        let marker = 1_000;
        dict.set(&key, &marker).unwrap();
        dict.flush().unwrap();
        for (live, mut shown) in subscriptions {
            loop {
                match live.recv_timeout(WAIT) {
                    Some(Event::Changed(Some(value))) if value == marker => break,
                    Some(Event::Changed(value)) => {
                        prop_assert_ne!(value, shown, "a repeated value over {:?}", ops);
                        shown = value;
                    }
                    other => prop_assert!(false, "{:?}", other),
                }
            }
            prop_assert_eq!(shown, model, "the subscription's value over {:?}", ops);
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Address {
    city: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Person {
    name: String,
    address: Option<Address>,
}

/// Before: a document written through a deep handle (`address.city` stored as its own key)
/// read through a plain handle on the same collection returned Ok with the nested struct
/// missing (`address: None`: the leaf's name was an unknown field, ignored), the field handle
/// read `None`, and a map type read a key `"address\0city"`. A plain field name never holds
/// a NUL, so such a key is now an error naming the field's path.
#[test]
fn a_deep_document_read_through_a_plain_handle_is_an_error_not_a_smaller_value() {
    let (_dir, db) = open();
    let deep_doc = db.documents_with("people", deep()).unwrap().document::<Person>("p");
    let ada = Person { name: "Ada".into(), address: Some(Address { city: "London".into() }) };
    deep_doc.set(&ada).unwrap();
    let people = db.documents("people").unwrap();
    let plain = people.document::<Person>("p");
    let named = |result: tessera::Result<String>| match result {
        Err(Error::DocumentField { id, field, .. }) => assert_eq!((id.as_str(), field.as_str()), ("p", "address.city")),
        other => panic!("{other:?}"),
    };
    named(plain.get().map(|v| format!("{v:?}")));
    named(people.document::<BTreeMap<String, String>>("p").get().map(|v| format!("{v:?}")));
    match plain.field::<Address>("address").get() {
        Err(Error::DocumentField { field, .. }) => assert_eq!(field, "address"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(plain.observe(), Err(Error::DocumentField { .. })), "no initial value from a misread");
    assert!(matches!(plain.observe_field::<Address>("address"), Err(Error::DocumentField { field, .. }) if field == "address"));
    // A plain subscription made before a deep handle stores leaves under its field ends with
    // the error, rather than stay on `None`.
    let other = people.document::<Person>("r");
    other.set(&Person { name: "Cy".into(), address: None }).unwrap();
    let live = other.observe_field::<Option<Address>>("address").unwrap();
    assert!(matches!(live.recv_timeout(WAIT), Some(Event::Initial(Some(None)))));
    db.documents_with("people", deep()).unwrap().document::<Person>("r").update_field("address.city", "York").unwrap_or_else(|error| {
        panic!("{error:?}");
    });
    match live.recv_timeout(WAIT) {
        Some(Event::Closed(tessera::live::SubscriptionEnd::Failed(error))) => {
            assert!(matches!(&*error, Error::DocumentField { field, .. } if field == "address"), "{error:?}")
        }
        other => panic!("{other:?}"),
    }
    // A plain handle's write does not make it readable by mistake: refused, nothing written.
    assert!(plain.update_field("address", &Address { city: "Paris".into() }).is_err());
    assert_eq!(deep_doc.get().unwrap(), Some(ada));
    // Fields stored by a plain handle read through a deep one as before.
    let plain_doc = people.document::<Person>("q");
    let bob = Person { name: "Bob".into(), address: Some(Address { city: "Leeds".into() }) };
    plain_doc.set(&bob).unwrap();
    assert_eq!(plain_doc.get().unwrap(), Some(bob.clone()));
    assert_eq!(db.documents_with("people", deep()).unwrap().document::<Person>("q").get().unwrap(), Some(bob));
}

/// `Dictionary::set` and `remove` on a read-only database returned Ok: `get` read the value
/// back from the cache, and only the save (at `flush` or close) failed. Both are now
/// `Error::ReadOnly` at the call, as `clear` already was.
#[test]
fn a_read_only_dictionary_refuses_writes_at_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ro.tessera");
    let db = tessera::Db::open(&path).unwrap();
    db.dictionary().unwrap().set("a", &1).unwrap();
    db.close().unwrap();
    let db = tessera::Db::open_with(&path, tessera::DbOptions { read_only: true, ..Default::default() }).unwrap();
    let settings = db.dictionary().unwrap();
    assert!(matches!(settings.set("b", &2), Err(tessera::Error::ReadOnly { .. })));
    assert!(matches!(settings.remove("a"), Err(tessera::Error::ReadOnly { .. })));
    assert!(matches!(settings.clear(), Err(tessera::Error::ReadOnly { .. })));
    assert_eq!(settings.get::<i32>("a").unwrap(), Some(1));
    assert_eq!(settings.get::<i32>("b").unwrap(), None);
    settings.flush().unwrap();
}
