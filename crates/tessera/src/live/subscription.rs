//! The subscription handle, one for every kind: a blocking iterator, a callback on a thread of
//! its own, and (with the `futures` feature) a `futures::Stream`. Dropping it unsubscribes.

use super::event::Event;
use super::mailbox::{Mailbox, SubscriptionEnd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A live subscription: [`Event::Initial`] first, then [`Event::Changed`] per commit that
/// changes what it follows, then [`Event::Closed`] once when the database closes (or the
/// subscription fails); after `Closed`, `recv` and the iterator return `None`.
///
/// Iterate it (blocking), poll it as a `futures::Stream` (feature `futures`), or hand it a
/// callback with [`Subscription::for_each`]. Every kind has this one shape: see
/// [`QuerySubscription`], [`ObjectSubscription`] and [`ValueSubscription`].
///
/// ```
/// use tessera::live::Event;
/// use std::time::Duration;
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let settings = db.dictionary()?;
/// let theme = settings.subscribe::<String>("theme")?;
/// assert!(matches!(theme.recv_timeout(Duration::from_secs(5)), Some(Event::Initial(None))));
/// settings.set("theme", &"dark")?;
/// settings.flush()?;
/// let change = theme.recv_timeout(Duration::from_secs(5)).and_then(Event::changed);
/// assert_eq!(change, Some(Some("dark".to_string())));
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct Subscription<S, C> {
    mailbox: Arc<Mailbox<Event<S, C>>>,
    /// `Closed` was delivered: nothing more comes.
    closed: AtomicBool,
}

/// A live query: the current result (in order), then a [`super::ResultChange`] per commit
/// that changes it.
///
/// ```
/// # use std::time::Duration;
/// # use tessera::collection::Record;
/// # #[derive(Record, Debug, Clone, PartialEq)]
/// # struct Task { #[record(key)] id: u32, priority: i32 }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db"))?;
/// # let tasks = db.collection::<Task>()?;
/// # let wait = Duration::from_secs(5);
/// let live: tessera::QuerySubscription<Task> = tasks.subscribe_query(&tasks.filter(Task::priority().ge(1)))?;
/// assert!(live.recv_timeout(wait).is_some());
/// # Ok::<(), tessera::Error>(())
/// ```
pub type QuerySubscription<T> = Subscription<super::Results<T>, super::ResultChange<T>>;

/// A live record: the record at subscription (`None`: absent), then an
/// [`super::ObjectChange`] per commit that writes or deletes it.
///
/// ```
/// # use std::time::Duration;
/// # use tessera::collection::Record;
/// # #[derive(Record, Debug, Clone, PartialEq)]
/// # struct Task { #[record(key)] id: u32, priority: i32 }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db"))?;
/// # let tasks = db.collection::<Task>()?;
/// # let wait = Duration::from_secs(5);
/// let live: tessera::ObjectSubscription<Task> = tasks.subscribe_object(&7)?;
/// assert!(live.recv_timeout(wait).is_some());
/// # Ok::<(), tessera::Error>(())
/// ```
pub type ObjectSubscription<T> = Subscription<Option<Arc<T>>, super::ObjectChange<T>>;

/// A live value (a document, one of its fields, a dictionary key): the value at subscription,
/// then the new value (`None`: absent) per commit that changes it.
///
/// ```
/// use std::time::Duration;
/// # let dir = tempfile::tempdir().unwrap();
/// let db = tessera::Db::open(dir.path().join("db"))?;
/// let settings = db.dictionary()?;
/// let volume: tessera::live::ValueSubscription<u32> = settings.subscribe("volume")?;
/// assert!(matches!(volume.recv_timeout(Duration::from_secs(5)), Some(tessera::live::Event::Initial(None))));
/// # Ok::<(), tessera::Error>(())
/// ```
pub type ValueSubscription<T> = Subscription<Option<T>, Option<T>>;

impl<S, C> Subscription<S, C> {
    pub(crate) fn new(mailbox: Arc<Mailbox<Event<S, C>>>) -> Self {
        Subscription { mailbox, closed: AtomicBool::new(false) }
    }

    /// `Closed` if the mailbox ended for a reason and `Closed` was not delivered yet.
    fn closing(&self) -> Option<Event<S, C>> {
        if !self.mailbox.is_ended() {
            return None;
        }
        let reason = self.mailbox.end_reason()?;
        (!self.closed.swap(true, Ordering::AcqRel)).then_some(Event::Closed(reason))
    }

    /// The next event, waiting for it; `None` after `Closed`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, priority: i32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let wait = Duration::from_secs(5);
    /// let live = tasks.subscribe_object(&1)?;
    /// assert!(live.recv().is_some_and(|event| event.initial().is_some()), "the Initial event is there at once");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn recv(&self) -> Option<Event<S, C>> {
        self.mailbox.recv_until(None).or_else(|| self.closing())
    }

    /// The next event, waiting at most `timeout`; `None` on timeout and after `Closed`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, priority: i32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let wait = Duration::from_secs(5);
    /// let live = tasks.subscribe_object(&1)?;
    /// live.recv_timeout(wait); // Initial
    /// assert!(live.recv_timeout(Duration::from_millis(10)).is_none(), "no commit, no event");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Event<S, C>> {
        self.mailbox.recv_until(Some(Instant::now() + timeout)).or_else(|| self.closing())
    }

    /// An event if one is waiting.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, priority: i32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let wait = Duration::from_secs(5);
    /// let live = tasks.subscribe_object(&1)?;
    /// live.recv_timeout(wait); // Initial
    /// assert!(live.try_recv().is_none());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn try_recv(&self) -> Option<Event<S, C>> {
        self.mailbox.try_recv().or_else(|| self.closing())
    }

    /// Why the subscription ended, once it has: `recv` then delivers the events already
    /// queued, then `Closed`. `None` while it follows the database.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, priority: i32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let wait = Duration::from_secs(5);
    /// let live = tasks.subscribe_object(&1)?;
    /// assert!(live.ended().is_none(), "it follows the database");
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn ended(&self) -> Option<SubscriptionEnd> {
        self.mailbox.end_reason()
    }

    /// Calls `callback` with every event, `Closed` last, on a thread of its own, until the
    /// returned handle is dropped. A panicking callback ends the subscription, and the handle's
    /// [`SubscriptionHandle::ended`] says so; nothing else is affected.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, priority: i32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let wait = Duration::from_secs(5);
    /// use std::sync::mpsc;
    /// let (sender, events) = mpsc::channel();
    /// let handle = tasks.subscribe_object(&1)?.for_each(move |event| drop(sender.send(event.is_closed())))?;
    /// db.write(|tx| tasks.insert(tx, &Task { id: 1, priority: 5 }))?;
    /// assert_eq!(events.recv_timeout(wait).ok(), Some(false)); // Initial
    /// assert_eq!(events.recv_timeout(wait).ok(), Some(false)); // the insert
    /// drop(handle); // stops the callback
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn for_each(self, mut callback: impl FnMut(Event<S, C>) + Send + 'static) -> std::io::Result<SubscriptionHandle>
    where
        S: Send + 'static,
        C: Send + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let mailbox = self.mailbox.clone();
        std::thread::Builder::new().name("tessera-subscription".into()).spawn(move || {
            let subscription = self;
            while !thread_stop.load(Ordering::Acquire) {
                let Some(event) = subscription.recv() else { return };
                if thread_stop.load(Ordering::Acquire) {
                    return;
                }
                let last = event.is_closed();
                let call = std::panic::AssertUnwindSafe(|| callback(event));
                if let Err(payload) = std::panic::catch_unwind(call) {
                    let message = crate::store::panic_message(&*payload);
                    subscription.mailbox.end_with(SubscriptionEnd::CallbackPanicked(message));
                    return; // dropping the subscription unsubscribes
                }
                if last {
                    return;
                }
            }
        })?;
        let reason = mailbox.clone();
        Ok(SubscriptionHandle { stop, wake: Box::new(move || mailbox.end()), end: Box::new(move || reason.end_reason()) })
    }
}

impl<S, C> Iterator for Subscription<S, C> {
    type Item = Event<S, C>;

    /// Blocks for the next event; `None` after `Closed`.
    fn next(&mut self) -> Option<Event<S, C>> {
        self.recv()
    }
}

#[cfg(feature = "futures")]
impl<S, C> futures_core::Stream for Subscription<S, C> {
    type Item = Event<S, C>;

    fn poll_next(self: std::pin::Pin<&mut Self>, context: &mut std::task::Context<'_>) -> std::task::Poll<Option<Event<S, C>>> {
        match self.mailbox.poll(context.waker()) {
            std::task::Poll::Ready(None) => std::task::Poll::Ready(self.closing()),
            other => other,
        }
    }
}

impl<S, C> std::fmt::Debug for Subscription<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").field("ended", &self.ended()).finish()
    }
}

/// Keeps a callback subscription alive; dropping it stops the callback and unsubscribes.
///
/// ```
/// # use std::time::Duration;
/// # use tessera::collection::Record;
/// # #[derive(Record, Debug, Clone, PartialEq)]
/// # struct Task { #[record(key)] id: u32, priority: i32 }
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = tessera::Db::open(dir.path().join("db"))?;
/// # let tasks = db.collection::<Task>()?;
/// # let wait = Duration::from_secs(5);
/// let handle = tasks.subscribe_object(&1)?.for_each(|_event| {})?;
/// assert!(handle.ended().is_none());
/// drop(handle); // unsubscribes
/// # Ok::<(), tessera::Error>(())
/// ```
pub struct SubscriptionHandle {
    stop: Arc<AtomicBool>,
    wake: Box<dyn Fn() + Send + Sync>,
    end: Box<dyn Fn() -> Option<SubscriptionEnd> + Send + Sync>,
}

impl SubscriptionHandle {
    /// Why the callback gets nothing more, once that is so: the database closed, the
    /// subscription could not follow a commit, or the callback panicked (and was removed).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use tessera::collection::Record;
    /// # #[derive(Record, Debug, Clone, PartialEq)]
    /// # struct Task { #[record(key)] id: u32, priority: i32 }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = tessera::Db::open(dir.path().join("db"))?;
    /// # let tasks = db.collection::<Task>()?;
    /// # let wait = Duration::from_secs(5);
    /// let handle = tasks.subscribe_object(&1)?.for_each(|_event| panic!("a callback that fails"))?;
    /// let deadline = std::time::Instant::now() + wait;
    /// while handle.ended().is_none() {
    ///     assert!(std::time::Instant::now() < deadline, "a panicking callback ends the subscription");
    ///     std::thread::sleep(Duration::from_millis(1));
    /// }
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn ended(&self) -> Option<SubscriptionEnd> {
        (self.end)()
    }
}

impl Drop for SubscriptionHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        (self.wake)();
    }
}

impl std::fmt::Debug for SubscriptionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SubscriptionHandle")
    }
}
