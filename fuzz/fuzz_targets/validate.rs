//! Arbitrary bytes through the validator: it must never panic, and whatever it accepts must be
//! readable in full (every accessor, JSON out, serde, equality) without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_value::{from_value, DictKey, Doc, Kind, Value};

fn walk(value: Value<'_>, budget: &mut usize) {
    if *budget == 0 {
        return;
    }
    *budget -= 1;
    let _ = (value.kind(), value.as_bool(), value.as_i64(), value.as_u64(), value.as_f64(), value.as_str(), value.as_bytes());
    match value.kind() {
        Kind::Array => {
            let array = value.as_array().unwrap();
            assert!(array.get(array.len()).is_none());
            for item in array.iter() {
                walk(item, budget);
            }
        }
        Kind::Dict => {
            let dict = value.as_dict().unwrap();
            for (key, item) in dict.iter() {
                let found = dict.get(key).expect("every key of a valid dict is found by name");
                assert!(found == item);
                assert!(dict.get_key(&DictKey::new(key)).unwrap() == item);
                walk(item, budget);
            }
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(doc) = Doc::from_untrusted(data) {
        let root = doc.root();
        walk(root, &mut 100_000);
        let json = root.to_json();
        serde_json::from_str::<serde_json::Value>(&json).expect("JSON output parses");
        let _ = root.to_json_pretty();
        let _ = root.to_json_canonical();
        let _ = from_value::<serde_json::Value>(root);
        assert!(root == root);
    }
});
