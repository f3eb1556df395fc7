//! Documents past 4 GiB: offsets and lengths need 8-byte widths. Ignored by default because it
//! needs about 10 GB of memory; run with `cargo test --release -p tessera-value --test large -- --ignored`.

use tessera_value::{Doc, Encoder, Kind};

#[test]
#[ignore = "needs ~10 GB of memory; run with --ignored"]
fn documents_larger_than_4_gib_encode_validate_and_read() {
    let big = vec![b'x'; (1usize << 32) + 1000];
    let mut encoder = Encoder::new();
    encoder.begin_array().unwrap();
    encoder.push_str("before").unwrap();
    encoder.push_bytes(&big).unwrap();
    encoder.push_str("after").unwrap();
    encoder.push_str("before").unwrap(); // a repeat more than 4 GiB back: an atom
    encoder.end_array().unwrap();
    drop(big);
    let bytes = encoder.finish().unwrap();
    assert!(bytes.len() > 1 << 32);
    let root = Doc::from_untrusted(&bytes).unwrap().root();
    let array = root.as_array().unwrap();
    assert_eq!(array.len(), 4);
    assert_eq!(array.get(1).unwrap().kind(), Kind::Binary);
    assert_eq!(array.get(1).unwrap().as_bytes().unwrap().len(), (1usize << 32) + 1000);
    assert_eq!(array.get(2).unwrap().as_str(), Some("after"));
    assert_eq!(array.get(3).unwrap().as_str(), Some("before"));
    assert_eq!(Doc::from_trusted(&bytes).unwrap().root().index(2).unwrap().as_str(), Some("after"));
}
