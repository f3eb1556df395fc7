//! Where a first save of 40,000 ints goes: `set` each into the dictionary, then `flush`.
//! `INTERVAL_MS` sets the background flusher's interval (default: the dictionary's own), so
//! that the whole save can be one batch. `MODE=hot` then sets one key 40,000 times and
//! `MODE=get` reads the 40,000 keys (the dictionary table's in-memory rows, on one thread);
//! `MODE=hot2` sets the one key from two threads, 20,000 times each, as the table's row does.
use std::time::Duration;
use tessera::DictionaryOptions;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let db = tessera::Db::open(dir.path().join("db")).unwrap();
    let mut options = DictionaryOptions::default();
    if let Some(ms) = std::env::var("INTERVAL_MS").ok().and_then(|ms| ms.parse().ok()) {
        options.flush_interval = Duration::from_millis(ms);
    }
    let dictionary = db.dictionary_with("ints", options).unwrap();
    for n in 0..40_000i64 {
        dictionary.set(&format!("key-{n}"), &n).unwrap();
    }
    let start = std::time::Instant::now();
    dictionary.flush().unwrap();
    println!("flush {:?}", start.elapsed());
    let start = std::time::Instant::now();
    match std::env::var("MODE").as_deref() {
        Ok("hot") => (0..40_000i64).for_each(|n| dictionary.set("hot key", &n).unwrap()),
        // The table's row: two threads setting the one key 20,000 times each.
        Ok("hot2") => std::thread::scope(|scope| {
            for thread in 0..2i64 {
                let dictionary = &dictionary;
                scope.spawn(move || (0..20_000i64).for_each(|n| dictionary.set("hot key", &(thread * 20_000 + n)).unwrap()));
            }
        }),
        Ok("get") => (0..40_000i64).for_each(|n| assert_eq!(dictionary.get::<i64>(&format!("key-{n}")).unwrap(), Some(n))),
        _ => return,
    }
    println!("{:?}", start.elapsed());
}
