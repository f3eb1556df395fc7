//! Arbitrary bytes through the JSON converter: no panic; accepted exactly when serde_json
//! accepts (both refuse numbers beyond f64's range); and what is accepted round-trips to the
//! same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_value::{from_json, Doc, JsonErrorKind};

fuzz_target!(|data: &[u8]| {
    let ours = from_json(data);
    let theirs = serde_json::from_slice::<serde_json::Value>(data);
    match (&ours, &theirs) {
        (Ok(bytes), Ok(expected)) => {
            let doc = Doc::from_untrusted(bytes).expect("converter output validates");
            let back: serde_json::Value = serde_json::from_str(&doc.root().to_json()).unwrap();
            assert_eq!(&back, expected);
        }
        (Err(error), Ok(_)) => panic!("serde_json accepts what tessera refuses: {error}"),
        (Ok(_), Err(error)) => panic!("tessera accepts what serde_json refuses: {error}"),
        (Err(error), Err(theirs)) => {
            assert!(error.offset <= data.len());
            // A number beyond f64's range is the one value both refuse as too large.
            if error.kind == JsonErrorKind::TooLarge {
                assert!(theirs.to_string().contains("number out of range"), "tessera: {error}; serde_json: {theirs}");
            }
        }
    }
});
