//! Warming the map's next pages before the writer needs them (Linux, `DbOptions::write_map`).
//!
//! With `MDB_WRITEMAP`, LMDB writes a new page straight into the memory map. The first write
//! to a page of the file that no one has written yet faults: the kernel finds or allocates its
//! page-cache page, zeroes it, and marks it writable and dirty. For a commit that grows the
//! file, that is a large share of its time: 10,000 inserts of 110-byte records (about 4 MB of
//! new pages with the durable feed) spent about a quarter of their time in those faults
//! (`examples/feed_parts.rs`, the insert alone: 7.9 ms cold, 6.0 ms with the pages warmed).
//!
//! A [`Warmer`] thread per database does that work ahead, off the writer's path: after each
//! commit (and at open) it faults in the pages past the file's used end, up to
//! [`ahead_bytes`] beyond it (a quarter of the used size, or twice the last growth), with `madvise(MADV_POPULATE_WRITE)`, which maps each page
//! writable without changing its contents. The pages it touches hold nothing LMDB reads: they
//! lie past the last page of the newest commit, and LMDB's own sync covers only used pages, so
//! a durable commit never waits for them. The kernel writes the zeroed pages back in its own
//! time (at most [`AHEAD_BYTES_MAX`] at once, into blocks the file already holds: the map's
//! blocks are reserved when it grows).
//!
//! The thread never holds the database open: it knows the file only by its device and inode,
//! finds the map's address in `/proc/self/maps`, and holds the map lock (shared) only while a
//! system call touches the map; a resize holds it exclusively ([`Warmer::resizing`]), so the
//! map never moves under a call. Lock order: the writer lock, then the resize gate, then the
//! map lock; the thread takes the map lock alone, and its request mutex never while holding
//! the map lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockWriteGuard};

/// Fewest bytes warmed ahead of the used end (a new file's whole first map, 4 MiB).
pub(crate) const AHEAD_BYTES_MIN: u64 = 4 << 20;
/// Most bytes warmed ahead of the used end.
pub(crate) const AHEAD_BYTES_MAX: u64 = 32 << 20;
/// Bytes faulted in per system call: a resize waits for at most one call (about 0.1 to 0.5
/// ms for 64 pages).
const CHUNK_BYTES: u64 = 256 << 10;

/// How far past the used end the pages are warmed: a quarter of what is used, or twice what
/// the last commit that grew the file added, whichever is more, within [`AHEAD_BYTES_MIN`] and
/// [`AHEAD_BYTES_MAX`].
/// Rounded down to whole 64 KiB, so that every chunk starts on a page boundary (`madvise`
/// refuses an unaligned start with `EINVAL`: a quarter of 20 MiB + 4 KiB used is not whole
/// pages, and every chunk after such an end failed silently).
pub(crate) fn ahead_bytes(used_bytes: u64, last_growth_bytes: u64) -> u64 {
    (used_bytes / 4).max(last_growth_bytes.saturating_mul(2)).clamp(AHEAD_BYTES_MIN, AHEAD_BYTES_MAX) >> 16 << 16
}

/// What the writer last reported: where the used pages end, how much the last commit that
/// grew the file added, and how large the map is.
#[derive(Debug, Clone, Copy, Default)]
struct Request {
    used_end_bytes: u64,
    last_growth_bytes: u64,
    map_bytes: u64,
    stop: bool,
}

impl Request {
    fn ahead_bytes(&self) -> u64 {
        ahead_bytes(self.used_end_bytes, self.last_growth_bytes)
    }
}

/// The warming thread's shared state (see the module documentation).
pub(crate) struct Warmer {
    request: Mutex<Request>,
    wake: Condvar,
    /// Shared by the thread during each `madvise`; exclusive during a resize.
    map_lock: RwLock<()>,
    /// Bumped under the exclusive map lock by every resize: the map may have moved.
    map_generation: AtomicU64,
    /// The end (bytes from the map's start) of what the thread has warmed in the current map.
    warmed_end_bytes: AtomicU64,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// The file whose map is warmed, as `/proc/self/maps` names it: by device and inode.
pub(crate) use super::FileIdentity as MappedFile;

impl Warmer {
    /// Starts the thread for the file `file`, whose map is `map_bytes` long with its used pages
    /// ending at `used_end_bytes`; it begins warming at once.
    pub(crate) fn start(file: MappedFile, used_end_bytes: u64, map_bytes: u64) -> std::io::Result<Arc<Warmer>> {
        let warmer = Arc::new(Warmer {
            request: Mutex::new(Request { used_end_bytes, last_growth_bytes: 0, map_bytes, stop: false }),
            wake: Condvar::new(),
            map_lock: RwLock::new(()),
            map_generation: AtomicU64::new(0),
            warmed_end_bytes: AtomicU64::new(0),
            thread: Mutex::new(None),
        });
        let running = warmer.clone();
        let handle = std::thread::Builder::new().name("tessera-warm".into()).spawn(move || running.run(file))?;
        *lock(&warmer.thread) = Some(handle);
        Ok(warmer)
    }

    /// Reports a commit or a resize: the used pages now end at `used_end_bytes` of a map of
    /// `map_bytes`. Wakes the thread only when less than half of the warmed distance is left.
    pub(crate) fn committed(&self, used_end_bytes: u64, map_bytes: u64) {
        let mut request = lock(&self.request);
        let changed = request.used_end_bytes != used_end_bytes || request.map_bytes != map_bytes;
        if used_end_bytes > request.used_end_bytes {
            request.last_growth_bytes = used_end_bytes - request.used_end_bytes;
        }
        request.used_end_bytes = used_end_bytes;
        request.map_bytes = map_bytes;
        if changed && self.needs_work(&request) {
            self.wake.notify_one();
        }
    }

    /// Holds the map still for a resize: the thread is not inside a system call on the map
    /// while the guard lives, and finds the map anew afterwards.
    pub(crate) fn resizing(&self) -> ResizeGuard<'_> {
        let guard = self.map_lock.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.map_generation.fetch_add(1, Ordering::SeqCst);
        self.warmed_end_bytes.store(0, Ordering::SeqCst);
        ResizeGuard { _guard: guard }
    }

    /// How far the current map has been warmed, in bytes from its start.
    #[cfg(test)]
    pub(crate) fn warmed_end_bytes(&self) -> u64 {
        self.warmed_end_bytes.load(Ordering::SeqCst)
    }

    /// Stops the thread and waits for it; called before the environment is closed.
    pub(crate) fn stop(&self) {
        lock(&self.request).stop = true;
        self.wake.notify_one();
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
    }

    /// Whether the warmed pages reach less than half of the distance wanted past the used end.
    fn needs_work(&self, request: &Request) -> bool {
        let wanted_end = self.wanted_end(request);
        let warmed_end = self.warmed_end_bytes.load(Ordering::SeqCst).max(request.used_end_bytes);
        warmed_end < wanted_end && wanted_end - warmed_end > request.ahead_bytes() / 2
    }

    fn wanted_end(&self, request: &Request) -> u64 {
        request.used_end_bytes.saturating_add(request.ahead_bytes()).min(request.map_bytes)
    }

    /// Whether the thread has pages to warm, knowing the map as `map`.
    fn has_work(&self, request: &Request, map: Option<KnownMap>) -> bool {
        let generation = self.map_generation.load(Ordering::SeqCst);
        match map.filter(|known| known.is_current(generation, request)).map(|known| (known.generation, known.base)) {
            // A new map: find it once there is work.
            None => self.needs_work(request),
            // Not found: nothing to do until the next resize.
            Some((_, None)) => false,
            // Warming: on to the wanted end.
            Some((_, Some(_))) => self.warmed_end_bytes.load(Ordering::SeqCst) < self.wanted_end(request),
        }
    }

    /// The thread: waits for work, then warms one chunk at a time until the wanted end.
    fn run(&self, file: MappedFile) {
        let mut map: Option<KnownMap> = None;
        loop {
            let request = {
                let mut request = lock(&self.request);
                loop {
                    if request.stop {
                        return;
                    }
                    if self.has_work(&request, map) {
                        break *request;
                    }
                    request = self.wake.wait(request).unwrap_or_else(|poisoned| poisoned.into_inner());
                }
            };
            let _still = self.map_lock.read().unwrap_or_else(|poisoned| poisoned.into_inner());
            let generation = self.map_generation.load(Ordering::SeqCst);
            if !map.is_some_and(|known| known.is_current(generation, &request)) {
                let base = find_map(file, request.map_bytes);
                map = Some(KnownMap { generation, map_bytes: request.map_bytes, base });
            }
            let Some(KnownMap { base: Some(base), .. }) = map else { continue };
            let start = self.warmed_end_bytes.load(Ordering::SeqCst).max(request.used_end_bytes);
            let end = self.wanted_end(&request).min(start.saturating_add(CHUNK_BYTES));
            if start < end {
                populate_write(base, start, end);
            }
            self.warmed_end_bytes.store(end.max(start), Ordering::SeqCst);
        }
    }
}

/// What the thread last found in `/proc/self/maps`: the map's address (`None`: no mapping of
/// the file was `map_bytes` long) while the map generation was `generation`.
#[derive(Debug, Clone, Copy)]
struct KnownMap {
    generation: u64,
    map_bytes: u64,
    base: Option<usize>,
}

impl KnownMap {
    /// Whether this lookup still holds: no resize since, and the size looked for is the one
    /// last reported. A request copied before a resize but served after it looks for the old
    /// size and finds nothing; the resize's report (the new size) then asks for a new lookup
    /// instead of leaving the map cold until the next resize.
    fn is_current(&self, generation: u64, request: &Request) -> bool {
        self.generation == generation && self.map_bytes == request.map_bytes
    }
}

/// The exclusive hold of the map lock during a resize (see [`Warmer::resizing`]).
pub(crate) struct ResizeGuard<'a> {
    _guard: RwLockWriteGuard<'a, ()>,
}

/// Faults in bytes `start..end` of the map at `base` writable, without changing them.
fn populate_write(base: usize, start: u64, end: u64) {
    #[cfg(target_os = "linux")]
    {
        let (Ok(start), Ok(end)) = (usize::try_from(start), usize::try_from(end)) else { return };
        // SAFETY: `base` is the address of this file's whole map as `/proc/self/maps` gave it
        // under the map lock, which a resize takes exclusively, so the map is still there and
        // still `map_bytes` long; `start..end` lies within it (`end` is at most the map's
        // length). MADV_POPULATE_WRITE faults pages in writable; it never changes their
        // contents or the mapping, so LMDB's readers and writer see the same bytes. An error
        // (an older kernel) only leaves the pages to fault on first use.
        let _ = unsafe { libc::madvise((base + start) as *mut libc::c_void, end - start, libc::MADV_POPULATE_WRITE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (base, start, end);
}

/// The address of `file`'s shared, writable mapping from offset 0 that is `map_bytes` long
/// (LMDB's map), as `/proc/self/maps` lists it; `None` if there is none.
pub(crate) fn find_map(file: MappedFile, map_bytes: u64) -> Option<usize> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|line| mapping_of(line, file, map_bytes))
}

/// The start address of one `/proc/self/maps` line if it is `file`'s map (see [`find_map`]).
fn mapping_of(line: &str, file: MappedFile, map_bytes: u64) -> Option<usize> {
    let mut fields = line.split_ascii_whitespace();
    let (range, perms, offset, device, inode) = (fields.next()?, fields.next()?, fields.next()?, fields.next()?, fields.next()?);
    let (start, end) = range.split_once('-')?;
    let (start, end) = (usize::from_str_radix(start, 16).ok()?, usize::from_str_radix(end, 16).ok()?);
    let (major, minor) = device.split_once(':')?;
    let (major, minor) = (u64::from_str_radix(major, 16).ok()?, u64::from_str_radix(minor, 16).ok()?);
    let shared_writable = perms.as_bytes().get(..4).is_some_and(|p| p[0] == b'r' && p[1] == b'w' && p[3] == b's');
    let ours = inode.parse::<u64>().ok()? == file.inode && (major, minor) == device_numbers(file.device);
    let whole = u64::from_str_radix(offset, 16).ok()? == 0 && (end.checked_sub(start)? as u64) == map_bytes;
    (shared_writable && ours && whole).then_some(start)
}

/// The major and minor numbers of a device number, as `/proc/self/maps` prints them.
fn device_numbers(device: u64) -> (u64, u64) {
    #[cfg(target_os = "linux")]
    {
        (u64::from(libc::major(device as libc::dev_t)), u64::from(libc::minor(device as libc::dev_t)))
    }
    #[cfg(not(target_os = "linux"))]
    {
        (device >> 8, device & 0xff)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: MappedFile = MappedFile { device: 0x0801, inode: 1234 };

    #[test]
    fn a_maps_line_is_the_map_only_when_every_field_matches() {
        let line = |text: &str| mapping_of(text, FILE, 0x40_0000);
        assert_eq!(line("7f0000000000-7f0000400000 rw-s 00000000 08:01 1234 /tmp/db"), Some(0x7f00_0000_0000));
        assert_eq!(line("7f0000000000-7f0000400000 r--s 00000000 08:01 1234 /tmp/db"), None, "read-only");
        assert_eq!(line("7f0000000000-7f0000400000 rw-p 00000000 08:01 1234 /tmp/db"), None, "private");
        assert_eq!(line("7f0000000000-7f0000400000 rw-s 00001000 08:01 1234 /tmp/db"), None, "offset");
        assert_eq!(line("7f0000000000-7f0000800000 rw-s 00000000 08:01 1234 /tmp/db"), None, "length");
        assert_eq!(line("7f0000000000-7f0000400000 rw-s 00000000 08:02 1234 /tmp/db"), None, "device");
        assert_eq!(line("7f0000000000-7f0000400000 rw-s 00000000 08:01 1235 /tmp/db"), None, "inode");
        assert_eq!(line("7f0000000000-7f0000400000 rw-s 00000000 08:01 1234 /tmp/db (deleted)"), Some(0x7f00_0000_0000));
        assert_eq!(line("garbage"), None);
        assert_eq!(line(""), None);
    }

    /// Waits (up to 10 s) until `ready` holds.
    fn eventually(what: &str, mut ready: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !ready() {
            assert!(std::time::Instant::now() < deadline, "{what} within 10 s");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_thread_warms_past_the_used_end_and_follows_the_map_when_it_moves() {
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Db::open(dir.path().join("db")).unwrap();
        let warmer = db.inner.warmer.get().expect("on by default with write_map on Linux").clone();
        let map_bytes = || db.map_size_bytes();
        // A new file's map (4 MiB) is warmed to its end.
        eventually("the first map warmed to its end", || warmer.warmed_end_bytes() == map_bytes());
        assert_eq!(map_bytes(), AHEAD_BYTES_MIN, "the default first map");
        // Writes that grow the map several times: each new map is found and warmed again,
        // and what was written reads back (the thread never changes the map's contents).
        let ks = db.keyspace("values").unwrap();
        let value = vec![7u8; 3000];
        for round in 0u32..12 {
            db.write(|tx| (0..1000u32).try_for_each(|i| tx.put(&ks, &(round * 1000 + i).to_be_bytes(), &value))).unwrap();
        }
        assert!(map_bytes() > 4 * AHEAD_BYTES_MIN, "the map grew: {} bytes", map_bytes());
        let used = || {
            let info = db.inner.env.info();
            (info.last_page_number as u64 + 1) * db.inner.page_bytes
        };
        eventually("the moved map warmed past its used end", || warmer.warmed_end_bytes() > used());
        let tx = db.read_txn().unwrap();
        for key in 0u32..12_000 {
            assert_eq!(tx.get(&ks, &key.to_be_bytes()).unwrap(), Some(&value[..]), "key {key}");
        }
    }

    /// A file of its own, mapped shared and writable from offset 0 as LMDB maps it, so that a
    /// test can move the map as a resize does.
    #[cfg(target_os = "linux")]
    struct Mapped {
        _dir: tempfile::TempDir,
        file: std::fs::File,
        base: usize,
        bytes: usize,
    }

    #[cfg(target_os = "linux")]
    impl Mapped {
        fn new(bytes: usize) -> Mapped {
            let dir = tempfile::tempdir().unwrap();
            let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(dir.path().join("map")).unwrap();
            let mut mapped = Mapped { _dir: dir, file, base: 0, bytes: 0 };
            mapped.map(bytes);
            mapped
        }

        /// Sets the file's length (a hole: no page of it is cached) and maps it whole.
        fn map(&mut self, bytes: usize) {
            use std::os::fd::AsRawFd;
            self.file.set_len(bytes as u64).unwrap();
            // SAFETY: a new mapping of a file this test owns; nothing else refers to it.
            let base = unsafe {
                libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, self.file.as_raw_fd(), 0)
            };
            assert_ne!(base, libc::MAP_FAILED);
            // No read-around: a fault would otherwise bring `read_ahead_kb` (8 MiB here) of the
            // file's neighbouring pages into the cache, and `cold_pages` would see them warm.
            // SAFETY: advice on the mapping just made; it changes no contents.
            assert_eq!(unsafe { libc::madvise(base, bytes, libc::MADV_RANDOM) }, 0);
            (self.base, self.bytes) = (base as usize, bytes);
        }

        /// What `mdb_env_set_mapsize` does: unmap, then map anew (usually elsewhere).
        fn remap(&mut self, bytes: usize) {
            self.unmap();
            self.map(bytes);
        }

        fn unmap(&mut self) {
            // SAFETY: the mapping made by `map`; the warmer is out of it (the caller holds
            // `Warmer::resizing` or has stopped the thread).
            assert_eq!(unsafe { libc::munmap(self.base as *mut libc::c_void, self.bytes) }, 0);
        }

        fn file(&self) -> MappedFile {
            use std::os::unix::fs::MetadataExt;
            let meta = self.file.metadata().unwrap();
            MappedFile { device: meta.dev(), inode: meta.ino() }
        }

        /// The pages of bytes `start..end` not in the page cache (`mincore`): never faulted in.
        fn cold_pages(&self, start: u64, end: u64) -> usize {
            let page = 4096;
            let pages = (end - start).div_ceil(page) as usize;
            let mut resident = vec![0u8; pages];
            // SAFETY: `start..end` lies in the mapping, `start` is page-aligned, and `resident`
            // has one byte per page.
            let status =
                unsafe { libc::mincore((self.base + start as usize) as *mut libc::c_void, (end - start) as usize, resident.as_mut_ptr()) };
            assert_eq!(status, 0, "mincore: {}", std::io::Error::last_os_error());
            resident.iter().filter(|&&flags| flags & 1 == 0).count()
        }
    }

    #[cfg(target_os = "linux")]
    impl Drop for Mapped {
        fn drop(&mut self) {
            self.unmap();
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_resize_while_the_thread_waits_for_the_map_lock_is_followed() {
        // The thread copied a request naming the old size, then waited for the map lock while
        // the map moved: it looked for the old size, found nothing, and then took that as "no
        // map until the next resize", leaving every page of the new map cold.
        let mut mapped = Mapped::new(4 << 20);
        let warmer = Warmer::start(mapped.file(), 0, 4 << 20).unwrap();
        eventually("the first map warmed", || warmer.warmed_end_bytes() == 4 << 20);
        let resize = warmer.resizing();
        warmer.committed(64 << 10, 4 << 20); // wakes the thread, which waits for the map lock
        std::thread::sleep(std::time::Duration::from_millis(100));
        mapped.remap(16 << 20);
        drop(resize);
        warmer.committed(64 << 10, 16 << 20);
        let wanted_end = (64 << 10) + ahead_bytes(64 << 10, 64 << 10);
        eventually("the moved map warmed", || warmer.warmed_end_bytes() == wanted_end);
        assert_eq!(mapped.cold_pages(64 << 10, wanted_end), 0, "every page up to the warmed end is faulted in");
        warmer.stop();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn every_page_up_to_the_warmed_end_is_faulted_in_when_a_quarter_of_the_used_bytes_is_not_whole_pages() {
        // 20 MiB + 4 KiB used: a quarter of it ends 1 KiB into a page. The chunks that began
        // there were refused by madvise (EINVAL), silently, and counted as warmed.
        let mapped = Mapped::new(64 << 20);
        let used = (20 << 20) + 4096;
        let warmer = Warmer::start(mapped.file(), used, 64 << 20).unwrap();
        let first_end = used + ahead_bytes(used, 0);
        eventually("the first distance warmed", || warmer.warmed_end_bytes() == first_end);
        // A commit that adds 3 MiB: more than half of the distance is used up.
        let used_after = used + (3 << 20);
        warmer.committed(used_after, 64 << 20);
        let wanted_end = used_after + ahead_bytes(used_after, 3 << 20);
        eventually("the next distance warmed", || warmer.warmed_end_bytes() == wanted_end);
        warmer.stop();
        assert_eq!(mapped.cold_pages(used, wanted_end), 0, "pages in {used}..{wanted_end} never faulted in");
    }

    #[test]
    fn no_thread_without_write_map_or_when_switched_off() {
        let dir = tempfile::tempdir().unwrap();
        let off = crate::DbOptions { warm_pages_ahead: false, ..crate::DbOptions::default() };
        assert!(crate::Db::open_with(dir.path().join("off"), off).unwrap().inner.warmer.get().is_none());
        let no_map = crate::DbOptions { write_map: false, ..crate::DbOptions::default() };
        assert!(crate::Db::open_with(dir.path().join("no-map"), no_map).unwrap().inner.warmer.get().is_none());
    }

    #[test]
    fn the_distance_ahead_follows_the_used_bytes_and_the_last_growth_within_bounds() {
        assert_eq!(ahead_bytes(0, 0), AHEAD_BYTES_MIN);
        assert_eq!(ahead_bytes(64 << 20, 0), 16 << 20, "a quarter of the used bytes");
        assert_eq!(ahead_bytes(8 << 20, 5 << 20), 10 << 20, "twice the last growth");
        assert_eq!(ahead_bytes(1 << 40, 0), AHEAD_BYTES_MAX);
        assert_eq!(ahead_bytes(0, 1 << 30), AHEAD_BYTES_MAX);
        assert_eq!(ahead_bytes((20 << 20) + 4096, 0), 5 << 20, "whole 64 KiB, rounded down");
    }
}
