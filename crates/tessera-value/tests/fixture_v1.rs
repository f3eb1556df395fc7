//! Version-1 documents, written by the code of commit 0f34021 (see
//! `crates/tessera/tests/fixtures/make_v1.rs`), still validate and read, and amending one
//! writes a version-2 document.

use tessera_value::layout::KeyIndexKind;
use tessera_value::{Doc, MutableDoc, SharedKeys, Value};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/fixtures/v1/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// Every object key of `json` is found in `value` by name, recursively, with equal scalars.
fn assert_same(value: Value<'_>, json: &serde_json::Value) {
    match json {
        serde_json::Value::Object(map) => {
            assert_eq!(value.len(), map.len());
            for (key, child) in map {
                assert_same(value.get(key).unwrap_or_else(|| panic!("key {key:?}")), child);
            }
        }
        serde_json::Value::Array(items) => {
            assert_eq!(value.len(), items.len());
            for (i, child) in items.iter().enumerate() {
                assert_same(value.index(i).unwrap(), child);
            }
        }
        other => assert_eq!(serde_json::from_str::<serde_json::Value>(&value.to_json()).unwrap(), *other),
    }
}

#[test]
fn version_1_documents_validate_and_read() {
    for name in ["people", "many_keys"] {
        let bytes = fixture(&format!("{name}.bin"));
        let json: serde_json::Value = serde_json::from_slice(&fixture(&format!("{name}.json"))).unwrap();
        let doc = Doc::from_untrusted(&bytes).unwrap();
        assert_eq!(doc.format_version(), 1);
        assert_same(doc.root(), &json);
        assert_same(Doc::from_trusted(&bytes).unwrap().root(), &json);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&doc.root().to_json()).unwrap(), json);
    }
    let many = fixture("many_keys.bin");
    assert_eq!(Doc::from_untrusted(&many).unwrap().key_index_kind(), Some(KeyIndexKind::HashedV1));
}

#[test]
fn an_amended_version_1_document_reads() {
    let bytes = fixture("amended.bin");
    let doc = Doc::from_untrusted(&bytes).unwrap();
    assert_eq!(doc.format_version(), 1);
    assert_eq!(doc.root().path("[2].age").unwrap().unwrap().as_i64(), Some(86));
    assert_eq!(doc.root().path("[3].new key").unwrap().unwrap().as_str(), Some("added"));
}

#[test]
fn amending_a_version_1_document_writes_the_current_version() {
    let bytes = fixture("people.bin");
    let json: serde_json::Value = serde_json::from_slice(&fixture("people.json")).unwrap();
    let mut edit = MutableDoc::new(Doc::from_untrusted(&bytes).unwrap());
    edit.root_mut().path_mut("[0]").unwrap().set("extra", 1i64).unwrap();
    let amended = edit.amend().unwrap();
    let doc = Doc::from_untrusted(&amended).unwrap();
    assert_eq!(doc.format_version(), tessera_value::layout::FORMAT_VERSION);
    assert_eq!(doc.key_index_kind(), Some(KeyIndexKind::Hashed));
    let mut expected = json.clone();
    expected[0]["extra"] = 1.into();
    assert_same(doc.root(), &expected);
}

#[test]
fn a_version_1_document_with_shared_keys_reads() {
    let keys = SharedKeys::from_bytes(&fixture("shared.keys")).unwrap();
    let bytes = fixture("shared.bin");
    let json: serde_json::Value = serde_json::from_slice(&fixture("shared.json")).unwrap();
    let doc = Doc::from_untrusted_with_keys(&bytes, &keys).unwrap();
    assert_eq!(doc.format_version(), 1);
    assert_same(doc.root(), &json);
}
