//! The encoder's output opened in O(1) with `from_trusted` reads exactly what the validating
//! open reads: every value, every key looked up by name, and the JSON it converts back to.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_value::{from_json, Doc, Value};

/// Walks `trusted` and `validated` side by side.
fn same(trusted: Value<'_>, validated: Value<'_>, depth: usize) {
    assert_eq!(trusted.kind(), validated.kind());
    assert_eq!(trusted.len(), validated.len());
    if depth > 64 {
        return;
    }
    if let (Some(t), Some(v)) = (trusted.as_dict(), validated.as_dict()) {
        for ((key_t, value_t), (key_v, value_v)) in t.iter().zip(v.iter()) {
            assert_eq!(key_t, key_v);
            // Lookup by name, through the key index, finds the entry that iteration found.
            assert!(t.get(key_t).expect("key found by name") == value_t);
            same(value_t, value_v, depth + 1);
        }
    } else if let (Some(t), Some(v)) = (trusted.as_array(), validated.as_array()) {
        for (value_t, value_v) in t.iter().zip(v.iter()) {
            same(value_t, value_v, depth + 1);
        }
    } else {
        assert_eq!(trusted.to_json(), validated.to_json());
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(bytes) = from_json(data) else { return };
    let validated = Doc::from_untrusted(&bytes).expect("converter output validates");
    let trusted = Doc::from_trusted(&bytes).expect("converter output opens");
    same(trusted.root(), validated.root(), 0);
    assert_eq!(trusted.root().to_json(), validated.root().to_json());
});
