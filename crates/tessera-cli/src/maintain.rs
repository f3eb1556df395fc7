//! `check`, `backup` and `compact`: the file as a whole.

use crate::failure::{EXIT_INVALID, Failure, Outcome, write_failed};
use crate::open::{self, Access};
use serde_json::json;
use std::io::Write;
use std::path::Path;

/// LMDB's magic number, at byte 16 of a data file (the first meta page's body).
const LMDB_MAGIC: u32 = 0xBEEF_C0DE;
/// Where the magic number ends.
const MAGIC_END: usize = 20;

/// Whether `path` starts like an LMDB file; a refusal naming its first bytes if not.
fn require_lmdb(path: &Path) -> Outcome {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(MAGIC_END);
    std::fs::File::open(path)
        .and_then(|file| file.take(MAGIC_END as u64).read_to_end(&mut bytes))
        .map_err(|error| Failure::Io(format!("cannot read {}: {error}", path.display())))?;
    let magic = bytes.get(16..20).and_then(|magic| <[u8; 4]>::try_from(magic).ok()).map(u32::from_ne_bytes);
    if magic == Some(LMDB_MAGIC) { Ok(()) } else { Err(open::not_a_database(path)) }
}

/// Walks `db`'s LMDB structure first (so that opening it cannot crash inside LMDB: opening
/// reads the main tree), then opens it read-only and prints its check report; `Invalid`
/// when damage was found.
pub fn check_in_process(path: &Path, as_json: bool) -> Outcome {
    let file = path.display().to_string();
    let structure = tessera::store::structure::verify(path).map_err(|error| match error {
        tessera::Error::NotADatabase { .. } => open::not_a_database(path),
        other => Failure::from_error(&file, other),
    })?;
    if !structure.is_ok() {
        if as_json {
            outln!("{}", json!({"file": file, "ok": false, "report": format!("LMDB structure damaged, not opened: {structure}")}));
        } else {
            out!("{file}: LMDB structure damaged, not opened: {structure}");
        }
        std::io::stdout().flush().map_err(|error| write_failed("the report", error))?;
        return Err(Failure::Reported(EXIT_INVALID));
    }
    let db = open::database(path, Access::Read)?;
    let report = db.check().map_err(|error| Failure::from_error(&file, error))?;
    if as_json {
        outln!("{}", json!({"file": file, "ok": report.is_ok(), "report": report.to_string()}));
    } else {
        out!("{file}: {report}");
    }
    std::io::stdout().flush().map_err(|error| write_failed("the report", error))?;
    if report.is_ok() { Ok(()) } else { Err(Failure::Reported(EXIT_INVALID)) }
}

/// Runs the check in a child process (this program, `check --in-process`) and passes its
/// report and verdict on; a child killed by a signal means LMDB itself crashed on the file.
pub fn check_in_child(path: &Path, as_json: bool) -> Outcome {
    require_lmdb(path)?;
    let program = std::env::current_exe().map_err(|error| Failure::Io(format!("cannot find this program: {error}")))?;
    let mut command = std::process::Command::new(program);
    command.arg("check").arg("--in-process");
    if as_json {
        command.arg("--json");
    }
    // `--` last before the path: a path beginning with `-` is a path, not an option.
    command.arg("--").arg(path);
    let output =
        command.stderr(std::process::Stdio::inherit()).output().map_err(|error| Failure::Io(format!("cannot run the check: {error}")))?;
    std::io::stdout().write_all(&output.stdout).map_err(|error| write_failed("the report", error))?;
    use std::os::unix::process::ExitStatusExt;
    child_verdict(path, output.status.code(), output.status.signal())
}

/// What the check's child ending with exit `code` or killed by `signal` says of the file at
/// `path`. Only a crash (a memory fault, or LMDB's own assertion aborting) is damage inside
/// LMDB; a kill from outside, or a panic (a defect of tessera met on this file, printed above),
/// gives no verdict (exit status 3).
fn child_verdict(path: &Path, code: Option<i32>, signal: Option<i32>) -> Outcome {
    /// A Rust panic's exit status.
    const PANICKED: i32 = 101;
    match (code, signal) {
        (Some(0), _) => Ok(()),
        // The child printed its reason already.
        (Some(code @ 1..=3), _) => Err(Failure::Reported(code as u8)),
        (_, Some(signal @ (libc::SIGSEGV | libc::SIGBUS | libc::SIGABRT | libc::SIGILL | libc::SIGFPE))) => Err(Failure::Invalid(format!(
            "{}: damaged: the check was killed by signal {signal} inside LMDB, whose B-tree pages are damaged; copy the file before anything writes to it",
            path.display()
        ))),
        (_, Some(signal)) => Err(Failure::Io(format!(
            "{}: no verdict: the check was stopped by signal {signal} from outside (not by what it read); run it again",
            path.display()
        ))),
        (Some(PANICKED), None) => Err(Failure::Io(format!(
            "{}: no verdict: the check panicked (above), a defect of tessera met on this file, which may be damaged; copy the file before anything writes to it",
            path.display()
        ))),
        (Some(code), None) => Err(Failure::Io(format!("{}: no verdict: the check exited with status {code}", path.display()))),
        (None, None) => Err(Failure::Io(format!("{}: no verdict: the check ended without a status", path.display()))),
    }
}

/// `tessera backup`: a consistent, compacted copy, taken while other processes use the file.
pub fn backup(path: &Path, destination: &Path, as_json: bool) -> Outcome {
    if destination.exists() {
        return Err(Failure::Usage(format!("{}: exists; backup writes a new file", destination.display())));
    }
    let db = open::database(path, Access::Read)?;
    let bytes = db.copy_compacted(destination).map_err(|error| Failure::from_error(&destination.display().to_string(), error))?;
    if as_json {
        outln!("{}", json!({"file": path.display().to_string(), "backup": destination.display().to_string(), "bytes": bytes}));
    } else {
        outln!("backed up {} to {} ({bytes} bytes)", path.display(), destination.display());
    }
    Ok(())
}

/// `tessera compact`: rewrites the file without its free pages. No other process may have it
/// open: the compacted copy replaces the file, and a process that had it open would go on
/// writing to the old one.
///
/// A file another process has open is refused (exit status 3) before anything is written, and
/// again just before the copy replaces it: see [`refuse_if_in_use`].
pub fn compact(path: &Path, as_json: bool) -> Outcome {
    // Through a symbolic link, the file it names is compacted (and its lock file probed):
    // renaming the copy over the link would replace the link, leaving the file as it was.
    let resolved = std::fs::canonicalize(path).map_err(|error| Failure::Io(format!("cannot open {}: {error}", path.display())))?;
    let path = resolved.as_path();
    let before = std::fs::metadata(path).map_err(|error| Failure::Io(format!("cannot open {}: {error}", path.display())))?.len();
    refuse_if_in_use(path)?;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".compact-{}", std::process::id()));
    let temporary = std::path::PathBuf::from(temporary);
    // A file with the durable feed is copied without compaction (see `Db::copy_compacted`):
    // said, never reported as compacted.
    let compacted = {
        let db = open::database(path, Access::Read)?;
        let failure = |error| Failure::from_error(&path.display().to_string(), error);
        let feed = db.file_info().map_err(failure)?.durable_feed;
        db.copy_compacted(&temporary).map_err(failure)?;
        !feed
    };
    // The copy is checked before it replaces anything, opened as the commands open files (a
    // file of many collections has more keyspaces than the library's default allows).
    let options = tessera::DbOptions { read_only: true, keyspaces_max: open::KEYSPACES_MAX, ..Default::default() };
    let sound = tessera::Db::open_with(&temporary, options).and_then(|copy| copy.check()).map(|report| report.is_ok());
    let mut copy_lock = temporary.as_os_str().to_owned();
    copy_lock.push("-lock");
    let _ = std::fs::remove_file(copy_lock);
    if !matches!(sound, Ok(true)) {
        let _ = std::fs::remove_file(&temporary);
        return Err(Failure::Invalid(format!("{}: the compacted copy did not check out; the file was left as it was", path.display())));
    }
    if let Err(failure) = refuse_if_in_use(path).and_then(|()| keep_owner_and_mode(path, &temporary)) {
        let _ = std::fs::remove_file(&temporary);
        return Err(failure);
    }
    std::fs::rename(&temporary, path).map_err(|error| {
        let _ = std::fs::remove_file(&temporary);
        Failure::Io(format!("cannot replace {}: {error}", path.display()))
    })?;
    let after = std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0);
    if as_json {
        outln!("{}", json!({"file": path.display().to_string(), "bytes_before": before, "bytes_after": after, "compacted": compacted}));
    } else if compacted {
        outln!("compacted {}: {before} -> {after} bytes", path.display());
    } else {
        outln!(
            "copied {} without compaction (the file has the durable feed, whose commit numbers a compacting copy would restart): {before} -> {after} bytes",
            path.display()
        );
    }
    Ok(())
}

/// Gives the copy at `copy` the owner, group and permission bits of the file at `path`, which it
/// is about to replace: made with the umask's mode, a private (0600) database would become
/// readable by every user. An owner this process may not give (another user's file) is refused.
fn keep_owner_and_mode(path: &Path, copy: &Path) -> Outcome {
    use std::os::unix::fs::MetadataExt;
    let original = std::fs::metadata(path).map_err(|error| Failure::Io(format!("cannot read {}: {error}", path.display())))?;
    std::os::unix::fs::chown(copy, Some(original.uid()), Some(original.gid())).map_err(|error| {
        Failure::Io(format!(
            "cannot give the compacted copy the owner of {} (uid {}, gid {}): {error}; the file was left as it was",
            path.display(),
            original.uid(),
            original.gid()
        ))
    })?;
    std::fs::set_permissions(copy, original.permissions())
        .map_err(|error| Failure::Io(format!("cannot give the compacted copy the permissions of {}: {error}", path.display())))
}

/// Refuses (an I/O failure, exit status 3) when another process has `path` open: replacing the
/// file under it would leave it writing to the old one, and its commits would be lost. LMDB
/// holds a shared lock on the first byte of the lock file `PATH-lock` in every process that has
/// the file open (a read-only handle opened without a lock file takes none; it never writes).
/// Called while this process does not have the file open: probing opens and closes the lock
/// file, which would drop a lock of this process's own on it.
fn refuse_if_in_use(path: &Path) -> Outcome {
    let mut lock_file = path.as_os_str().to_owned();
    lock_file.push("-lock");
    match process_holding_lock(Path::new(&lock_file)) {
        Ok(None) => Ok(()),
        Ok(Some(pid)) => Err(Failure::Io(format!(
            "{}: another process (pid {pid}) has the database open; close it before compacting (use `tessera backup` to copy a file in use)",
            path.display()
        ))),
        Err(error) => Err(Failure::Io(format!("{}: cannot tell whether another process has it open: {error}", path.display()))),
    }
}

/// The id of a process holding a lock on the first byte of `lock_file` (`None`: no lock file,
/// or no other process holds one).
#[cfg(unix)]
fn process_holding_lock(lock_file: &Path) -> std::io::Result<Option<i64>> {
    use std::os::fd::AsRawFd;
    let file = match std::fs::OpenOptions::new().read(true).write(true).open(lock_file) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    // SAFETY: an all-zero `flock` is a valid value of this plain C struct.
    let mut probe: libc::flock = unsafe { std::mem::zeroed() };
    probe.l_type = libc::F_WRLCK as libc::c_short;
    probe.l_whence = libc::SEEK_SET as libc::c_short;
    probe.l_start = 0;
    probe.l_len = 1;
    // SAFETY: `file` is an open descriptor for the call, and `probe` a valid `flock` that
    // F_GETLK only reads and overwrites; F_GETLK takes no lock and changes nothing.
    let status = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut probe) };
    if status == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((probe.l_type != libc::F_UNLCK as libc::c_short).then_some(i64::from(probe.l_pid)))
}

/// Elsewhere LMDB's locks cannot be probed this way: nothing is refused.
#[cfg(not(unix))]
fn process_holding_lock(_lock_file: &Path) -> std::io::Result<Option<i64>> {
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any ending other than 0 to 3 was reported as damage inside LMDB: a check killed from
    /// outside (SIGKILL, SIGTERM) or one that panicked said the file was damaged (exit 1).
    #[test]
    fn only_a_crash_of_the_check_is_damage() {
        let path = Path::new("app.tessera");
        let status = |code: Option<i32>, signal: Option<i32>| child_verdict(path, code, signal).err().map(|failure| failure.exit_status());
        assert_eq!(status(Some(0), None), None);
        assert_eq!(status(Some(1), None), Some(EXIT_INVALID));
        assert_eq!(status(Some(3), None), Some(3));
        for crash in [libc::SIGSEGV, libc::SIGBUS, libc::SIGABRT] {
            assert_eq!(status(None, Some(crash)), Some(EXIT_INVALID), "signal {crash}");
        }
        for outside in [libc::SIGKILL, libc::SIGTERM, libc::SIGINT] {
            assert_eq!(status(None, Some(outside)), Some(3), "signal {outside}");
        }
        assert_eq!(status(Some(101), None), Some(3));
        assert_eq!(status(Some(42), None), Some(3));
    }
}
