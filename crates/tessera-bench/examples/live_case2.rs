//! Profiling helper: the live table's case 2 alone (1,000 object subscriptions over 10,000
//! BenchDocs, one transaction changing every object), beside the refetch of the same objects;
//! `MODE=queries` makes them case 1's queries (`title == "title{i}"`) instead; `SUBS` sets how
//! many (1,000; 0 times the commit without a change log); `ROUNDS` how many commits (3).

use std::time::{Duration, Instant};
use tessera_bench::crud_model::{BenchDoc, parts};

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let options = tessera::DbOptions { durability: tessera::Durability::BUFFERED, ..Default::default() };
    let db = tessera::Db::open_with(dir.path().join("db"), options).unwrap();
    let docs = db.collection::<BenchDoc>().unwrap();
    db.write(|tx| (0..10_000).try_for_each(|i| docs.insert(tx, &parts(i).into()).map(drop))).unwrap();
    let count: usize = std::env::var("SUBS").ok().and_then(|n| n.parse().ok()).unwrap_or(1000);
    let titles: Vec<String> = (0..count).map(|i| format!("title{i}")).collect();
    let mode = std::env::var("MODE").unwrap_or_default();
    let live = mode != "refetch";
    let (objects, queries): (Vec<_>, Vec<_>) = if mode == "queries" {
        let queries = titles.iter().map(|title| docs.subscribe_query(&docs.filter(BenchDoc::title().eq(title.as_str()))).unwrap());
        (Vec::new(), queries.inspect(|sub| drop(sub.recv_timeout(Duration::from_secs(60)).unwrap())).collect())
    } else {
        let objects = titles.iter().map(|title| docs.subscribe_object(title).unwrap());
        (objects.inspect(|sub| drop(sub.recv_timeout(Duration::from_secs(60)).unwrap())).collect(), Vec::new())
    };
    // `NEGATE=1`: odd rounds set each priority to `-i`, as the live table's case 2 does.
    let negate = std::env::var("NEGATE").is_ok_and(|v| v == "1");
    let rounds: i32 = std::env::var("ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(3);
    for round in 0..rounds {
        let start = Instant::now();
        let mut ended = start;
        db.write(|tx| {
            (0..10_000).try_for_each(|i| {
                docs.update(tx, &format!("title{i}"), |d| d.priority = if negate && round % 2 == 1 { -i } else { d.priority + 1 }).map(drop)
            })?;
            ended = Instant::now();
            Ok(())
        })
        .unwrap();
        let committed = Instant::now();
        let mut first_received = None;
        if live {
            for sub in &objects {
                sub.recv_timeout(Duration::from_secs(60)).unwrap();
                first_received.get_or_insert_with(Instant::now);
            }
            for sub in &queries {
                sub.recv_timeout(Duration::from_secs(60)).unwrap();
            }
        } else {
            for title in &titles {
                docs.get(&db, title).unwrap().unwrap();
            }
        }
        if let Some(first) = first_received {
            print!("first object received {:?} after the commit; ", first - committed);
        }
        println!(
            "closure {:?}, commit {:?}, then {:?}, from closure end {:?}",
            ended - start,
            committed - ended,
            committed.elapsed(),
            ended.elapsed()
        );
    }
}
