//! Subscription handles: a blocking iterator, a callback on a thread of its own, and (with the
//! `futures` feature) a `futures::Stream`. Dropping a handle unsubscribes.

use super::mailbox::{Mailbox, SubscriptionEnd};
use super::{ObjectChange, ResultChange};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

macro_rules! subscription {
    ($(#[$doc:meta])* $name:ident, $event:ident) => {
        $(#[$doc])*
        pub struct $name<T> {
            mailbox: Arc<Mailbox<$event<T>>>,
        }

        impl<T> $name<T> {
            pub(crate) fn new(mailbox: Arc<Mailbox<$event<T>>>) -> Self {
                $name { mailbox }
            }

            /// The next delivery, waiting for it; `None` once the database is gone.
            pub fn recv(&self) -> Option<$event<T>> {
                self.mailbox.recv_until(None)
            }

            /// The next delivery, waiting at most `timeout`.
            pub fn recv_timeout(&self, timeout: Duration) -> Option<$event<T>> {
                self.mailbox.recv_until(Some(Instant::now() + timeout))
            }

            /// A delivery if one is waiting.
            pub fn try_recv(&self) -> Option<$event<T>> {
                self.mailbox.try_recv()
            }

            /// Why the subscription ended, once it has: `recv` then returns `None` after the
            /// deliveries already queued. `None` while it follows the database.
            pub fn ended(&self) -> Option<SubscriptionEnd> {
                self.mailbox.end_reason()
            }

            /// Calls `callback` with every delivery, on a thread of its own, until the returned
            /// handle is dropped. A panicking callback ends the subscription, and the handle's
            /// [`SubscriptionHandle::ended`] says so; nothing else is affected.
            pub fn for_each(self, mut callback: impl FnMut($event<T>) + Send + 'static) -> std::io::Result<SubscriptionHandle>
            where
                T: Send + Sync + 'static,
            {
                let stop = Arc::new(AtomicBool::new(false));
                let thread_stop = stop.clone();
                let mailbox = self.mailbox.clone();
                std::thread::Builder::new().name("tessera-subscription".into()).spawn(move || {
                    let subscription = self;
                    while !thread_stop.load(Ordering::Acquire) {
                        let Some(event) = subscription.mailbox.recv_until(None) else { return };
                        if thread_stop.load(Ordering::Acquire) {
                            return;
                        }
                        let call = std::panic::AssertUnwindSafe(|| callback(event));
                        if let Err(payload) = std::panic::catch_unwind(call) {
                            let message = crate::store::panic_message(&*payload);
                            subscription.mailbox.end_with(SubscriptionEnd::CallbackPanicked(message));
                            return; // dropping the subscription unsubscribes
                        }
                    }
                })?;
                let reason = mailbox.clone();
                Ok(SubscriptionHandle { stop, wake: Box::new(move || mailbox.end()), end: Box::new(move || reason.end_reason()) })
            }
        }

        impl<T> Iterator for $name<T> {
            type Item = $event<T>;

            /// Blocks for the next delivery.
            fn next(&mut self) -> Option<$event<T>> {
                self.recv()
            }
        }

        #[cfg(feature = "futures")]
        impl<T> futures_core::Stream for $name<T> {
            type Item = $event<T>;

            fn poll_next(self: std::pin::Pin<&mut Self>, context: &mut std::task::Context<'_>) -> std::task::Poll<Option<$event<T>>> {
                self.mailbox.poll(context.waker())
            }
        }

        impl<T> std::fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(stringify!($name))
            }
        }
    };
}

subscription!(
    /// A live query: the current result, then a [`ResultChange`] per commit that changes it.
    /// Iterate it (blocking), poll it as a `futures::Stream` (feature `futures`), or hand it a
    /// callback with `for_each`. Dropping it unsubscribes.
    QuerySubscription,
    ResultChange
);
subscription!(
    /// A live object: an [`ObjectChange`] per commit that changes the record. Dropping it
    /// unsubscribes.
    ObjectSubscription,
    ObjectChange
);

/// Keeps a callback subscription alive; dropping it stops the callback and unsubscribes.
pub struct SubscriptionHandle {
    stop: Arc<AtomicBool>,
    wake: Box<dyn Fn() + Send + Sync>,
    end: Box<dyn Fn() -> Option<SubscriptionEnd> + Send + Sync>,
}

impl SubscriptionHandle {
    /// Why the callback gets nothing more, once that is so: the database closed, the
    /// subscription could not follow a commit, or the callback panicked (and was removed).
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
