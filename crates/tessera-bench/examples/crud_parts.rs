//! Where an insert of 10,000 BenchDocs spends its time: encoding, key encoding, LMDB puts.

use std::time::Instant;
use tessera_bench::crud_model::{BenchDoc, parts};

fn main() {
    let n = 10_000;
    if std::env::var("SCAN_ONLY").is_ok() {
        let records: Vec<BenchDoc> = (0..n).map(|i| parts(i).into()).collect();
        let dir = tempfile::tempdir().unwrap();
        let db = tessera::Db::open(dir.path().join("db")).unwrap();
        let docs = db.collection::<BenchDoc>().unwrap();
        db.write(|tx| records.iter().try_for_each(|doc| docs.insert(tx, doc).map(drop))).unwrap();
        let start = Instant::now();
        for _ in 0..200 {
            docs.filter(BenchDoc::priority().gt(2500)).count(&db).unwrap();
        }
        println!("count: {:.3} ms", start.elapsed().as_secs_f64() * 1e3 / 200.0);
        let start = Instant::now();
        for _ in 0..200 {
            tessera::value::to_vec(&records[7]).unwrap();
        }
        for r in records.iter().cycle().take(200_000) {
            tessera::value::to_vec(r).unwrap();
        }
        println!("encode: {:.1} ns", start.elapsed().as_secs_f64() * 1e9 / 200_200.0);
        return;
    }
    let records: Vec<BenchDoc> = (0..n).map(|i| parts(i).into()).collect();
    for _ in 0..3 {
        let start = Instant::now();
        let encoded: Vec<Vec<u8>> = records.iter().map(|r| tessera::value::to_vec(r).unwrap()).collect();
        println!("serde encode: {:.2} ms ({} bytes each)", start.elapsed().as_secs_f64() * 1e3, encoded[0].len());
        // The generated codec with the shared keys a collection of BenchDoc would have.
        let lists = tessera::codec::FieldIds::lists_of::<BenchDoc>();
        let mut shared = tessera::value::SharedKeys::new();
        for name in lists.iter().flat_map(|list| list.iter()) {
            shared.add(name).unwrap();
        }
        let ids = tessera::codec::FieldIds::resolve(&shared, lists);
        let start = Instant::now();
        let mut buffer = Vec::new();
        let mut codec_len = 0;
        for r in &records {
            tessera::codec::encode_into(r, Some(&shared), &ids, &mut buffer).unwrap();
            codec_len = buffer.len();
        }
        println!("codec encode: {:.2} ms ({codec_len} bytes each)", start.elapsed().as_secs_f64() * 1e3);
        let coded: Vec<Vec<u8>> = records
            .iter()
            .map(|r| {
                tessera::codec::encode_into(r, Some(&shared), &ids, &mut buffer).unwrap();
                buffer.clone()
            })
            .collect();
        let start = Instant::now();
        for bytes in &coded {
            let doc = tessera::value::Doc::from_trusted_with_keys(bytes, &shared).unwrap();
            std::hint::black_box(tessera::codec::decode::<BenchDoc>(doc.root(), &ids).unwrap());
        }
        println!("codec decode: {:.2} ms", start.elapsed().as_secs_f64() * 1e3);
        let start = Instant::now();
        let keys = tessera_bench::crud_model::stored_keys(&records);
        println!("keys: {:.2} ms", start.elapsed().as_secs_f64() * 1e3);
        let start = Instant::now();
        let decoded: Vec<BenchDoc> =
            encoded.iter().map(|b| tessera::value::from_value(tessera::value::Doc::from_trusted(b).unwrap().root()).unwrap()).collect();
        println!("serde decode: {:.2} ms", start.elapsed().as_secs_f64() * 1e3);
        assert_eq!(decoded.len(), records.len());
        let dir = tempfile::tempdir().unwrap();
        let db = tessera::Db::open_with(
            dir.path().join("db"),
            tessera::DbOptions { durability: tessera::Durability::BUFFERED, ..Default::default() },
        )
        .unwrap();
        let ks = db.keyspace("x").unwrap();
        let start = Instant::now();
        db.write(|tx| {
            for (k, v) in keys.iter().zip(&encoded) {
                tx.put(&ks, k, v)?;
            }
            Ok(())
        })
        .unwrap();
        println!("puts, new file: {:.2} ms", start.elapsed().as_secs_f64() * 1e3);
        let start = Instant::now();
        db.write(|tx| {
            for k in &keys {
                tx.delete(&ks, k)?;
            }
            Ok(())
        })
        .unwrap();
        println!("deletes: {:.2} ms", start.elapsed().as_secs_f64() * 1e3);
        let start = Instant::now();
        db.write(|tx| {
            for (k, v) in keys.iter().zip(&encoded) {
                tx.put(&ks, k, v)?;
            }
            Ok(())
        })
        .unwrap();
        println!("puts, grown file: {:.2} ms", start.elapsed().as_secs_f64() * 1e3);
        let docs = db.collection::<BenchDoc>().unwrap();
        let start = Instant::now();
        db.write(|tx| records.iter().try_for_each(|doc| docs.insert(tx, doc).map(drop))).unwrap();
        println!("collection insert, grown file: {:.2} ms", start.elapsed().as_secs_f64() * 1e3);
        let start = Instant::now();
        let found = docs.filter(BenchDoc::priority().gt(2500)).count(&db).unwrap();
        println!("count priority > 2500: {:.2} ms ({found})", start.elapsed().as_secs_f64() * 1e3);
        let start = Instant::now();
        let found = docs.filter(BenchDoc::priority().gt(2500)).fetch(&db).unwrap();
        println!("fetch priority > 2500: {:.2} ms ({})", start.elapsed().as_secs_f64() * 1e3, found.len());
        let start = Instant::now();
        for r in &records {
            docs.get(&db, &r.title).unwrap().unwrap();
        }
        println!("get each: {:.2} ms", start.elapsed().as_secs_f64() * 1e3);
        let start = Instant::now();
        for r in &records {
            docs.filter(BenchDoc::title().eq(r.title.as_str())).first(&db).unwrap().unwrap();
        }
        println!("query each: {:.2} ms", start.elapsed().as_secs_f64() * 1e3);
        println!();
    }
}
