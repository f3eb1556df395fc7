//! Structured edits of a valid document: mutation and amend must produce documents that
//! validate and equal a fresh encode.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_value::{from_json, Doc, Mutable, MutableDoc};

fuzz_target!(|input: (&[u8], Vec<(u8, String)>)| {
    let (json, edits) = input;
    let Ok(bytes) = from_json(json) else { return };
    let doc = Doc::from_untrusted(&bytes).expect("converter output validates");
    let mut edit = MutableDoc::new(doc);
    for (operation, key) in edits.iter().take(16) {
        let root = edit.root_mut();
        let _ = match operation % 5 {
            0 => root.set(key, key.as_str()),
            1 => root.remove(key).map(|_| ()),
            2 => root.push(Mutable::Original(doc.root())),
            3 => root.remove_index(key.len()).map(|_| ()),
            _ => root.path_mut(key).map(|value| *value = Mutable::Int(key.len() as i64)),
        };
    }
    let (Ok(fresh), Ok(amended)) = (edit.encode(), edit.amend()) else { return };
    assert!(amended.starts_with(&bytes));
    let fresh = Doc::from_untrusted(&fresh).expect("re-encoded document validates");
    let amended = Doc::from_untrusted(&amended).expect("amended document validates");
    assert!(fresh.root() == amended.root());
});
