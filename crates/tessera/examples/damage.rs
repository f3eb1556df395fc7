//! The damage sweep (`scripts/damage.sh`): builds a database with a collection and its index,
//! a dictionary, documents and a raw keyspace; then, for every page of the file and six
//! offsets in it, flips 8 bytes in a copy and reads everything back through the library's API
//! in a child process, twice (opened with the default options, then with
//! `DbOptions::verify_structure_on_open`), and runs `Db::check` in a third. Each read is
//! classed as intact, silently different data, a typed error, a panic, a crash (a signal) or
//! a hang; each check as flagged, passed or crashed.
//!
//! ```text
//! cargo run --release --example damage -- sweep [DIR]
//! cargo run --release --example damage -- read FILE           # one child: prints what it read
//! cargo run --release --example damage -- read-verified FILE  # the same, opened verified
//! cargo run --release --example damage -- check FILE          # one child: prints the check report
//! cargo run --release --example damage -- salvage [DIR]       # the salvage export on each copy
//! ```
//!
//! `salvage` runs `tessera::collection::salvage` (what `tessera export --salvage` runs) on each
//! damaged copy in this process (it never reads through LMDB, so no child is needed) and
//! classes it: complete and equal to the undamaged file's records, damage reported with every
//! record returned one that was written, a typed error, or (never expected) a record that was
//! not written, or a panic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tessera::collection::Record;
use tessera::{Db, DbOptions};

#[derive(Record, Debug)]
#[record(name = "notes")]
struct Note {
    #[record(key)]
    id: u32,
    #[record(index)]
    score: i32,
    text: String,
}

type Profile = BTreeMap<String, String>;

const PAGE_BYTES: u64 = 4096;
/// Records in the collection.
const NOTES: u32 = 3000;
/// Where in each page the 8 bytes are flipped: the page header, the first nodes, the middle,
/// and the end, where LMDB puts node data.
const OFFSETS: [u64; 6] = [8, 40, 1024, 2048, 3072, 4080];
/// A child that runs longer than this is killed and counted as a hang.
const CHILD_TIME_MAX: Duration = Duration::from_secs(20);

fn build(path: &Path) -> tessera::Result<()> {
    let db = Db::open(path)?;
    let notes = db.collection::<Note>()?;
    db.write(|tx| {
        (0..600u32).try_for_each(|id| {
            notes.insert(tx, &Note { id, score: (id % 97) as i32, text: format!("note {id} {}", "x".repeat((id % 40) as usize)) }).map(drop)
        })
    })?;
    let dictionary = db.dictionary()?;
    for i in 0..1500 {
        dictionary.set(&format!("setting-{i}"), &format!("value {i}"))?;
    }
    dictionary.flush()?;
    let profiles = db.documents("profiles")?;
    for i in 0..800 {
        let profile: Profile = [("name".to_owned(), format!("person {i}")), ("city".to_owned(), format!("city {}", i % 7))].into();
        profiles.document::<Profile>(&format!("p{i:03}")).set(&profile)?;
    }
    let raw = db.keyspace("raw")?;
    db.write(|tx| (0..3000u32).try_for_each(|i| tx.put(&raw, &i.to_be_bytes(), format!("raw value {i}").as_bytes())))?;
    drop((notes, dictionary, profiles));
    db.close()
}

/// Everything the API returns, one line per item, in a fixed order.
fn read_all(path: &Path, verify_structure_on_open: bool) -> tessera::Result<String> {
    let db = Db::open_with(path, DbOptions { verify_structure_on_open, ..DbOptions::default() })?;
    let mut out = String::new();
    let notes = db.collection::<Note>()?;
    for note in notes.all().fetch(&db)? {
        out += &format!("note {} {} {}\n", note.id, note.score, note.text);
    }
    for note in notes.filter(Note::score().ge(50)).fetch(&db)? {
        out += &format!("indexed {} {}\n", note.id, note.score);
    }
    for id in (0..NOTES).step_by(7) {
        out += &format!("get {id} {:?}\n", notes.get(&db, &id)?.map(|note| note.text));
    }
    let dictionary = db.dictionary()?;
    for key in dictionary.keys()? {
        out += &format!("dict {key} {:?}\n", dictionary.get::<String>(&key)?);
    }
    let profiles = db.documents("profiles")?;
    for id in profiles.ids_with_prefix("")? {
        out += &format!("doc {id} {:?}\n", profiles.document::<Profile>(&id).get()?);
    }
    let raw = db.keyspace("raw")?;
    db.read(|tx| {
        for entry in tx.range(&raw, ..)? {
            let (key, value) = entry?;
            out += &format!("raw {key:02x?} {}\n", String::from_utf8_lossy(value));
        }
        Ok(())
    })?;
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Intact,
    DifferentData,
    TypedError,
    Panic,
    Crash,
    Hang,
}

/// Runs this program as a child on `file`; its outcome and what it printed.
fn child(mode: &str, file: &Path) -> (ExitStatus, String) {
    let mut child = Command::new(std::env::current_exe().expect("own path"))
        .args([mode, &file.to_string_lossy()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn a child");
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > CHILD_TIME_MAX {
            let _ = child.kill();
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let hung = started.elapsed() > CHILD_TIME_MAX;
    let text = reader.join().unwrap_or_default();
    (status, if hung { "HANG".to_owned() } else { text })
}

fn classify(status: ExitStatus, text: &str, expected: &str) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    if text == "HANG" {
        return Outcome::Hang;
    }
    match (status.code(), status.signal()) {
        (Some(0), _) if text == expected => Outcome::Intact,
        (Some(0), _) => Outcome::DifferentData,
        (Some(1), _) => Outcome::TypedError,
        (Some(_), _) => Outcome::Panic,
        (None, _) => Outcome::Crash,
    }
}

fn sweep(dir: &Path) {
    std::fs::create_dir_all(dir).expect("sweep directory");
    let original = dir.join("original.tessera");
    let _ = std::fs::remove_file(&original);
    let _ = std::fs::remove_file(dir.join("original.tessera-lock"));
    build(&original).expect("build the database");
    let expected = read_all(&original, false).expect("read the undamaged database");
    assert_eq!(read_all(&original, true).expect("read the undamaged database, verified"), expected);
    let bytes = std::fs::read(&original).expect("read the file");
    // Pages past the last one LMDB used are zeros (the map's reserved tail): damage there is
    // never read. The used pages are those up to the last non-zero one.
    let pages = bytes.chunks(PAGE_BYTES as usize).rposition(|page| page.iter().any(|&b| b != 0)).map_or(0, |last| last + 1) as u64;
    println!("{} bytes, {pages} used pages, {} damaged copies", bytes.len(), pages * OFFSETS.len() as u64);
    // Per read mode (default, verified): outcomes.
    let mut read_outcomes: [BTreeMap<Outcome, u64>; 2] = Default::default();
    // Checks that flagged the copy, passed it, crashed.
    let (mut check_flagged, mut check_passed, mut check_crashed) = (0u64, 0u64, 0u64);
    let mut silent_unflagged = 0u64;
    let mut examples: BTreeMap<(&str, Outcome), Vec<String>> = BTreeMap::new();
    let copy = dir.join("damaged.tessera");
    for page in 0..pages {
        for offset in OFFSETS {
            let mut damaged = bytes.clone();
            let at = (page * PAGE_BYTES + offset) as usize;
            for byte in &mut damaged[at..at + 8] {
                *byte ^= 0xFF;
            }
            let _ = std::fs::remove_file(dir.join("damaged.tessera-lock"));
            let mut outcomes = [Outcome::Intact; 2];
            let mut verified_error = String::new();
            for (verified, mode) in ["read", "read-verified"].into_iter().enumerate() {
                std::fs::write(&copy, &damaged).expect("write the damaged copy");
                let _ = std::fs::remove_file(dir.join("damaged.tessera-lock"));
                let (status, text) = child(mode, &copy);
                let outcome = classify(status, &text, &expected);
                outcomes[verified] = outcome;
                if verified == 1 {
                    verified_error = text.lines().next().unwrap_or("").chars().take(200).collect();
                }
                *read_outcomes[verified].entry(outcome).or_default() += 1;
                let list = examples.entry((mode, outcome)).or_default();
                if list.len() < 3 {
                    list.push(format!(
                        "page {page} offset {offset}: {}",
                        text.lines().next().unwrap_or("").chars().take(160).collect::<String>()
                    ));
                }
            }
            let outcome = outcomes[0];
            if outcomes == [Outcome::Intact, Outcome::TypedError] {
                println!("read intact, refused by the verified open: page {page} offset {offset}: {}", verified_error.trim());
            }
            std::fs::write(&copy, &damaged).expect("write the damaged copy again");
            let _ = std::fs::remove_file(dir.join("damaged.tessera-lock"));
            let (status, report) = child("check", &copy);
            let flagged = status.code() != Some(0) || !report.starts_with("ok");
            match (status.code(), flagged) {
                (None, _) => check_crashed += 1,
                (Some(_), true) => check_flagged += 1,
                (Some(_), false) => check_passed += 1,
            }
            if outcome != Outcome::Intact && !flagged {
                println!("check passed a copy that reads as {outcome:?}: page {page} offset {offset}");
            }
            if status.code().is_none() {
                println!("check crashed at page {page} offset {offset}");
            }
            if outcome == Outcome::DifferentData {
                silent_unflagged += u64::from(!flagged);
                let check =
                    if status.code().is_none() { "check crashed".to_owned() } else { report.lines().next().unwrap_or("").to_owned() };
                println!("different data at page {page} offset {offset}; check: {check}");
            }
        }
    }
    println!("\n| outcome of reading every item through the API | default open | verify_structure_on_open |\n|---|---|---|");
    let all = [Outcome::Intact, Outcome::TypedError, Outcome::DifferentData, Outcome::Panic, Outcome::Crash, Outcome::Hang];
    for outcome in all {
        let [default, verified] = [0, 1].map(|mode| read_outcomes[mode].get(&outcome).copied().unwrap_or(0));
        println!("| {outcome:?} | {default} | {verified} |");
    }
    println!(
        "\nDb::check (opened with the default options, as `tessera check` does) flagged {check_flagged} copies, passed {check_passed} and crashed on {check_crashed}; different data that check passed: {silent_unflagged}"
    );
    for ((mode, outcome), list) in &examples {
        if *outcome != Outcome::Intact {
            for example in list {
                println!("  {mode} {outcome:?}: {example}");
            }
        }
    }
}

/// The salvage's outcome on one damaged copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum SalvageOutcome {
    /// Nothing skipped, every record as written.
    Complete,
    /// Damage reported; every record returned was written.
    Reported,
    /// Refused: not a database, a foreign or unsupported one.
    TypedError,
    /// Nothing reported, but the records differ from the written ones.
    SilentlyIncomplete,
    /// A record returned that was never written.
    DifferentData,
    Panic,
}

/// The salvage on every damaged copy of the sweep's database, in this process.
fn salvage_sweep(dir: &Path) {
    use std::collections::BTreeSet;
    std::fs::create_dir_all(dir).expect("sweep directory");
    let original = dir.join("original.tessera");
    let _ = std::fs::remove_file(&original);
    let _ = std::fs::remove_file(dir.join("original.tessera-lock"));
    build(&original).expect("build the database");
    let mut written = Vec::<String>::new();
    let report = tessera::collection::salvage(&original, &[], &mut written).expect("salvage the undamaged database");
    assert!(report.is_complete() && written.len() == 600, "the undamaged file: {} records", written.len());
    let written_set: BTreeSet<&String> = written.iter().collect();
    let bytes = std::fs::read(&original).expect("read the file");
    let pages = bytes.chunks(PAGE_BYTES as usize).rposition(|page| page.iter().any(|&b| b != 0)).map_or(0, |last| last + 1) as u64;
    println!("{pages} used pages, {} damaged copies", pages * OFFSETS.len() as u64);
    let copy = dir.join("damaged.tessera");
    let mut outcomes: BTreeMap<SalvageOutcome, u64> = BTreeMap::new();
    let (mut records_lost, mut copies_losing_records) = (0usize, 0u64);
    for page in 0..pages {
        for offset in OFFSETS {
            let mut damaged = bytes.clone();
            let at = (page * PAGE_BYTES + offset) as usize;
            for byte in &mut damaged[at..at + 8] {
                *byte ^= 0xFF;
            }
            std::fs::write(&copy, &damaged).expect("write the damaged copy");
            let salvaged = std::panic::catch_unwind(|| {
                let mut records = Vec::<String>::new();
                tessera::collection::salvage(&copy, &[], &mut records).map(|report| (report, records))
            });
            let outcome = match salvaged {
                Err(_) => SalvageOutcome::Panic,
                Ok(Err(error)) => {
                    println!("typed error at page {page} offset {offset}: {error}");
                    SalvageOutcome::TypedError
                }
                Ok(Ok((_, records))) if records.iter().any(|record| !written_set.contains(record)) => SalvageOutcome::DifferentData,
                Ok(Ok((report, records))) => {
                    let lost = written.len().saturating_sub(records.len());
                    records_lost += lost;
                    copies_losing_records += u64::from(lost > 0);
                    if !report.is_complete() && lost == 0 {
                        let trees: BTreeSet<String> =
                            report.structure.problems.iter().map(|problem| problem.tree.name().to_owned()).collect();
                        let entries: BTreeSet<&str> = report.skipped.iter().map(|entry| entry.keyspace.as_str()).collect();
                        println!("nothing lost at page {page} offset {offset}: pages of {trees:?}, entries of {entries:?}");
                    }
                    match (report.is_complete(), lost) {
                        (true, 0) => SalvageOutcome::Complete,
                        (true, _) => SalvageOutcome::SilentlyIncomplete,
                        (false, _) => SalvageOutcome::Reported,
                    }
                }
            };
            if outcome >= SalvageOutcome::SilentlyIncomplete {
                println!("{outcome:?} at page {page} offset {offset}");
            }
            *outcomes.entry(outcome).or_default() += 1;
        }
    }
    println!("\n| salvage outcome | copies |\n|---|---|");
    for (outcome, count) in &outcomes {
        println!("| {outcome:?} | {count} |");
    }
    println!("\n{records_lost} records lost in all, on {copies_losing_records} copies (of {} records each)", written.len());
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some(mode @ ("read" | "read-verified")) => match read_all(Path::new(&args[2]), mode == "read-verified") {
            Ok(text) => print!("{text}"),
            Err(error) => {
                println!("error: {error}");
                std::process::exit(1);
            }
        },
        Some("check") => match Db::open(&args[2]).and_then(|db| db.check()) {
            Ok(report) if report.is_ok() => println!("ok"),
            Ok(report) => println!("{report}"),
            Err(error) => {
                println!("error: {error}");
                std::process::exit(1);
            }
        },
        Some("salvage") => salvage_sweep(&args.get(2).map(PathBuf::from).unwrap_or_else(|| std::env::temp_dir().join("tessera-salvage"))),
        Some("sweep") => sweep(&args.get(2).map(PathBuf::from).unwrap_or_else(|| std::env::temp_dir().join("tessera-damage"))),
        _ => eprintln!("usage: damage sweep [DIR] | salvage [DIR] | read FILE | read-verified FILE | check FILE"),
    }
}
