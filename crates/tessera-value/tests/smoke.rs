use tessera_value::*;

#[test]
fn smoke() {
    let json = br#"{"a":[1,2.5,"x",null,true,false,-7,100000,1e300,-0],"b":{"c":"hello world, a longer string"},"c":"x"}"#;
    let bytes = from_json(json).unwrap();
    let doc = Doc::from_untrusted(&bytes).unwrap();
    assert_eq!(doc.root().to_json(), r#"{"a":[1,2.5,"x",null,true,false,-7,100000,1e300,-0.0],"b":{"c":"hello world, a longer string"},"c":"x"}"#);
}
