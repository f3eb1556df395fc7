//! Issue 15, item 6: open never writes what it refuses, a full disk never locks the data out,
//! and map growth uses what room the disk has.
//!
//! What broke: opening a foreign LMDB file returned `ForeignDatabase` but grew the file from
//! 16 KiB to 1 MiB; truncated files were refused as `Corrupted` and extended too (LMDB maps at
//! least up to the last committed page and, with `MDB_WRITEMAP`, sets the file's length to the
//! map's); a database written with `write_map: false` on a full disk could not be reopened with
//! default options; map growth tried only fixed multiples of the map, so a disk with room for
//! less than a doubling reported `DiskFull`.

use std::path::{Path, PathBuf};
use std::process::Command;
use tessera::{Db, DbOptions, Durability, Error};

fn lock_file(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-lock");
    PathBuf::from(name)
}

/// A tessera database without the write map, so that the file is exactly its used pages:
/// `records` values of 1,000 bytes.
fn written_database(path: &Path, records: u32) {
    let db = Db::open_with(path, DbOptions { write_map: false, ..DbOptions::default() }).unwrap();
    let ks = db.keyspace("data").unwrap();
    db.write(|tx| (0..records).try_for_each(|i| tx.put(&ks, &i.to_be_bytes(), &[i as u8; 1000]))).unwrap();
    db.close().unwrap();
    std::fs::remove_file(lock_file(path)).unwrap();
}

/// Opens `path`, which must be refused with an error `expected` accepts, and checks that the
/// file's bytes and length are what they were and that no lock file was left.
fn assert_refused_untouched(path: &Path, case: &str, expected: impl Fn(&Error) -> bool) {
    let before = std::fs::read(path).unwrap();
    assert!(!lock_file(path).exists());
    for options in [DbOptions::default(), DbOptions { write_map: false, ..DbOptions::default() }] {
        match Db::open_with(path, options) {
            Err(error) => assert!(expected(&error), "{case}: {error:?}"),
            Ok(_) => panic!("{case}: opened"),
        }
        let after = std::fs::read(path).unwrap();
        assert_eq!(after.len(), before.len(), "{case}: the length changed");
        assert!(after == before, "{case}: the bytes changed");
        assert!(!lock_file(path).exists(), "{case}: a lock file was left");
    }
}

const PAGE_BYTES: usize = 4096;

#[test]
fn refused_files_are_left_byte_for_byte_as_they_were_and_unlocked() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_database = |error: &Error| matches!(error, Error::NotADatabase { .. });
    let corrupted = |error: &Error| matches!(error, Error::Corrupted(_));

    let garbage = dir.path().join("garbage");
    std::fs::write(&garbage, vec![0xA5; 64 * 1024]).unwrap();
    assert_refused_untouched(&garbage, "not LMDB", not_a_database);

    let tiny = dir.path().join("tiny");
    std::fs::write(&tiny, b"hello").unwrap();
    assert_refused_untouched(&tiny, "five bytes", not_a_database);

    let foreign = dir.path().join("foreign.mdb");
    {
        let env = unsafe { heed::EnvOpenOptions::new().max_dbs(4).flags(heed::EnvFlags::NO_SUB_DIR).open(&foreign) }.unwrap();
        let mut txn = env.write_txn().unwrap();
        let table: heed::Database<heed::types::Bytes, heed::types::Bytes> = env.create_database(&mut txn, Some("theirs")).unwrap();
        table.put(&mut txn, b"k", b"v").unwrap();
        txn.commit().unwrap();
        env.prepare_for_closing().wait();
    }
    std::fs::remove_file(lock_file(&foreign)).unwrap();
    assert_refused_untouched(&foreign, "foreign LMDB", |error| matches!(error, Error::ForeignDatabase { .. }));

    // Truncated below its last committed page, at a page boundary and off one.
    let original = dir.path().join("original");
    written_database(&original, 2_000);
    let bytes = std::fs::read(&original).unwrap();
    assert!(bytes.len() > 100 * PAGE_BYTES, "{} bytes", bytes.len());
    for (name, len) in [("half", bytes.len() / 2 / PAGE_BYTES * PAGE_BYTES), ("odd", bytes.len() / 2 + 100), ("metas only", 2 * PAGE_BYTES)]
    {
        let truncated = dir.path().join(name);
        std::fs::write(&truncated, &bytes[..len]).unwrap();
        assert_refused_untouched(&truncated, name, corrupted);
    }
    // Truncated inside the meta pages.
    let short = dir.path().join("short");
    std::fs::write(&short, &bytes[..PAGE_BYTES + 50]).unwrap();
    assert_refused_untouched(&short, "inside the second meta page", not_a_database);

    // Damaged: both meta pages' magic numbers; a meta page claiming pages the file lacks; the
    // B-tree pages after the metas overwritten.
    let damaged = |name: &str, damage: &dyn Fn(&mut Vec<u8>)| {
        let path = dir.path().join(name);
        let mut copy = bytes.clone();
        damage(&mut copy);
        std::fs::write(&path, copy).unwrap();
        path
    };
    // The meta page body starts after the 16-byte page header: magic, then version.
    let magic = damaged("magic", &|b| {
        b[16] ^= 0xFF;
        b[PAGE_BYTES + 16] ^= 0xFF;
    });
    assert_refused_untouched(&magic, "both magics", not_a_database);
    // mm_last_pg is at byte 120 of the meta body; both metas claim a billion pages.
    let last_page = damaged("last page", &|b| {
        for meta in [16, PAGE_BYTES + 16] {
            b[meta + 120..meta + 128].copy_from_slice(&(1u64 << 30).to_le_bytes());
        }
    });
    assert_refused_untouched(&last_page, "a last page past the end", corrupted);
    let pages = damaged("pages", &|b| b[2 * PAGE_BYTES..].iter_mut().for_each(|byte| *byte = 0x5A));
    assert_refused_untouched(&pages, "damaged B-tree pages", |error| matches!(error, Error::Corrupted(_) | Error::NotADatabase { .. }));

    // A partial page after the last one (a write cut short by a full disk) holds nothing
    // committed: the file opens, with its data, with and without the write map.
    for write_map in [false, true] {
        let tail = dir.path().join(format!("tail-{write_map}"));
        let mut with_tail = bytes.clone();
        with_tail.extend_from_slice(&[0x77; 100]);
        std::fs::write(&tail, with_tail).unwrap();
        let db = Db::open_with(&tail, DbOptions { write_map, ..DbOptions::default() }).unwrap();
        let ks = db.keyspace("data").unwrap();
        assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 2_000);
        db.close().unwrap();
    }

    // The untouched original still opens, and holds its data.
    let db = Db::open(&original).unwrap();
    let ks = db.keyspace("data").unwrap();
    assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), 2_000);
}

/// Mounts a tmpfs of `size` on `dir` (root on Linux, as in CI); false where that is not allowed.
fn mount_tmpfs(dir: &Path, size: &str) -> bool {
    let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(dir).status();
    mounted.is_ok_and(|status| status.success())
}

fn unmount(dir: &Path) {
    let _ = Command::new("umount").arg(dir).status();
}

#[test]
fn a_database_filled_to_a_full_disk_reopens_with_any_options() {
    let dir = tempfile::tempdir().unwrap();
    if !mount_tmpfs(dir.path(), "3m") {
        eprintln!("notice: cannot mount a small tmpfs here; the reopen after a full disk is not tested");
        return;
    }
    let path = dir.path().join("full.tessera");
    let committed = {
        let db = Db::open_with(&path, DbOptions { write_map: false, map_size_initial_bytes: 1 << 20, ..DbOptions::default() }).unwrap();
        let ks = db.keyspace("ks").unwrap();
        let mut committed = 0u32;
        loop {
            let result = db.write_with(Durability::Immediate, |tx| tx.put(&ks, &committed.to_be_bytes(), &[9u8; 16 * 1024]));
            match result {
                Ok(()) => committed += 1,
                Err(Error::DiskFull | Error::Io(_)) => break,
                Err(other) => panic!("{other:?}"),
            }
            assert!(committed < 10_000, "the disk never filled");
        }
        committed
    };
    assert!(committed > 10, "{committed}");
    let options = [
        DbOptions::default(),
        DbOptions { map_size_initial_bytes: 64 << 20, ..DbOptions::default() },
        DbOptions { write_map: false, ..DbOptions::default() },
    ];
    for (index, options) in options.into_iter().enumerate() {
        let db = Db::open_with(&path, options).unwrap_or_else(|error| panic!("options {index}: {error:?}"));
        let ks = db.keyspace("ks").unwrap();
        let count = db.read(|tx| tx.len(&ks)).unwrap();
        assert!(count == committed as u64, "options {index}: {count} of {committed} records");
        db.close().unwrap();
    }
    unmount(dir.path());
}

#[test]
fn map_growth_takes_the_largest_step_the_disk_has_room_for() {
    // A simulated disk: 3 MiB free beyond the file. The map starts at 4 MiB; growing it 4x or
    // 2x does not fit, 7 MiB does.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("grow.tessera"), DbOptions { map_size_initial_bytes: 4 << 20, ..DbOptions::default() }).unwrap();
    assert_eq!(db.map_size_bytes(), 4 << 20);
    db.inject_free_bytes(Some(3 << 20));
    let ks = db.keyspace("ks").unwrap();
    let mut committed_bytes = 0u64;
    for i in 0u32.. {
        match db.write(|tx| tx.put(&ks, &i.to_be_bytes(), &[1u8; 64 * 1024])) {
            Ok(()) => committed_bytes += 64 * 1024,
            Err(Error::DiskFull) => break,
            Err(other) => panic!("{other:?}"),
        }
        assert!(i < 1_000, "the simulated disk never filled");
    }
    let map_bytes = db.map_size_bytes();
    assert!(map_bytes > 4 << 20 && map_bytes <= 7 << 20, "the map grew to {map_bytes} bytes");
    assert!(committed_bytes > 5 << 20, "only {committed_bytes} bytes fitted a 7 MiB disk");
    // Full: a typed error, and what was committed is there.
    assert_eq!(db.read(|tx| tx.len(&ks)).unwrap(), committed_bytes / (64 * 1024));
}
