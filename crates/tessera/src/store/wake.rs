//! Waking the other processes of a file when one commits: the committer writes the commit's
//! sequence into a small side file, `PATH-notify` ([`Signal`]), and each process's watcher
//! waits for that file to be written ([`Waiter`]): with inotify on Linux, which wakes it within
//! microseconds of the write; elsewhere by looking every [`POLL_FALLBACK_INTERVAL`].
//!
//! The side file carries no data anyone depends on: the sequence in it is for people reading
//! it. The watcher reads what changed from the database itself (`store/cross_process.rs`).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often a watcher looks for commits when it cannot be woken (no inotify on this
/// platform).
pub(crate) const POLL_FALLBACK_INTERVAL: Duration = Duration::from_millis(2);

/// The side file next to the database at `path`: `PATH-notify`.
pub(crate) fn notify_path_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-notify");
    PathBuf::from(name)
}

fn open_side_file(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)
}

/// The committer's end: writes to the side file.
pub(crate) struct Signal {
    file: File,
}

impl Signal {
    /// Opens (creating if missing) the side file at `path`.
    pub(crate) fn open(path: &Path) -> io::Result<Signal> {
        Ok(Signal { file: open_side_file(path)? })
    }

    /// Wakes every watcher of the file: writes `sequence` (8 bytes, little-endian) at its
    /// start.
    pub(crate) fn raise(&self, sequence: u64) -> io::Result<()> {
        write_at(&self.file, &sequence.to_le_bytes())
    }
}

#[cfg(unix)]
fn write_at(file: &File, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(bytes, 0)
}

#[cfg(windows)]
fn write_at(file: &File, bytes: &[u8]) -> io::Result<()> {
    use std::os::windows::fs::FileExt;
    file.seek_write(bytes, 0).map(drop)
}

#[cfg(not(any(unix, windows)))]
fn write_at(mut file: &File, bytes: &[u8]) -> io::Result<()> {
    use std::io::{Seek, Write};
    file.seek(io::SeekFrom::Start(0))?;
    file.write_all(bytes)
}

/// The watcher's end: waits until the side file is written (or a timeout passes).
pub(crate) struct Waiter {
    #[cfg(target_os = "linux")]
    inotify: File,
}

#[cfg(target_os = "linux")]
impl Waiter {
    /// Watches the side file at `path`, which must exist (open its [`Signal`] first).
    pub(crate) fn open(path: &Path) -> io::Result<Waiter> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: inotify_init1 takes no pointers; it returns a new descriptor or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a descriptor just returned to this thread, owned by nothing else.
        let inotify = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let name = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
        // SAFETY: the descriptor is open (owned by `inotify`) and `name` is a NUL-terminated
        // string that outlives the call.
        let watch = unsafe { libc::inotify_add_watch(inotify.as_raw_fd(), name.as_ptr(), libc::IN_MODIFY) };
        if watch < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Waiter { inotify })
    }

    /// Waits until the side file is written or `timeout` passes. True if it was written.
    pub(crate) fn wait(&mut self, timeout: Duration) -> io::Result<bool> {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let timeout_ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        let mut poll = libc::pollfd { fd: self.inotify.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: `poll` is one valid pollfd, alive for the call; its descriptor is open.
        let ready = unsafe { libc::poll(&mut poll, 1, timeout_ms) };
        if ready < 0 {
            let error = io::Error::last_os_error();
            return if error.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(error) };
        }
        if ready == 0 {
            return Ok(false);
        }
        // Drain the events: one read wakes for every write made before it.
        let mut events = [0u8; 4096];
        loop {
            match self.inotify.read(&mut events) {
                Ok(0) => return Ok(true),
                Ok(_) => continue,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
impl Waiter {
    /// Polls instead of watching: nothing to open.
    pub(crate) fn open(_path: &Path) -> io::Result<Waiter> {
        Ok(Waiter {})
    }

    /// Sleeps [`POLL_FALLBACK_INTERVAL`] (or `timeout`, if shorter); the caller then looks for
    /// commits.
    pub(crate) fn wait(&mut self, timeout: Duration) -> io::Result<bool> {
        std::thread::sleep(timeout.min(POLL_FALLBACK_INTERVAL));
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_to_the_side_file_wakes_the_waiter_and_nothing_else_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = notify_path_of(&dir.path().join("db"));
        assert!(path.ends_with("db-notify"));
        let signal = Signal::open(&path).unwrap();
        let mut waiter = Waiter::open(&path).unwrap();
        if cfg!(target_os = "linux") {
            assert!(!waiter.wait(Duration::from_millis(10)).unwrap(), "no write, no wake-up");
        }
        signal.raise(7).unwrap();
        signal.raise(8).unwrap();
        assert!(waiter.wait(Duration::from_secs(5)).unwrap());
        if cfg!(target_os = "linux") {
            assert!(!waiter.wait(Duration::from_millis(10)).unwrap(), "both writes drained by one wake-up");
        }
        assert_eq!(std::fs::read(&path).unwrap(), 8u64.to_le_bytes());
    }
}
