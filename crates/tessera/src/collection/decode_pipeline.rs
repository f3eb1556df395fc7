//! A query's results decoded on a helper thread while the calling thread goes on finding them
//! ([`super::Query::fetch`]).
//!
//! Finding a result (the cursor step, the checksum, the predicate on the stored bytes) and
//! decoding it into a `T` take comparable time in a filtered scan, and neither needs the
//! other's state: the calling thread walks the snapshot and hands the matches, as references
//! into it, to one helper thread in chunks; the helper decodes them in order. The snapshot
//! outlives both (the helper is a scoped thread), and nothing writes the pages it refers to
//! while it is open: a read transaction's pages are not reused, and a write transaction's
//! writer is this thread, busy in the query.
//!
//! A result of at most [`SEQUENTIAL_MATCHES_MAX`] records is decoded on the calling thread: a
//! thread costs about what decoding a hundred records does. The results, and the error or
//! panic if any, are exactly those of decoding every match in order on one thread: the first
//! error by position wins, whichever thread met it, and no record after it is decoded (a
//! hand-written [`crate::codec::Decode`] is user code, which may panic or block). The helper's
//! stack is as large as the calling thread's, so that a decoder that runs on one runs on the
//! other.

use super::engine::Candidate;
use crate::error::Result;
use std::sync::mpsc;

/// Matches decoded on the calling thread alone: a result this small starts no helper.
pub(super) const SEQUENTIAL_MATCHES_MAX: usize = 512;
/// Matches per chunk handed to the helper.
const CHUNK_MATCHES: usize = 128;
/// Chunks waiting for the helper before the finding thread waits for it. The chunks hold
/// references into the snapshot, not copies, so this bounds memory to about 64 × 128 pairs
/// of references.
const CHUNKS_WAITING_MAX: usize = 64;

/// How a match becomes a record: `decode(primary key, stored bytes)`, from either thread.
pub(super) type DecodeFn<'d, T> = &'d (dyn Fn(&[u8], &[u8]) -> Result<T> + Sync);

/// Every match decoded by `decode(primary key, stored bytes)`, in order; the first error by
/// position, from finding or from decoding.
pub(super) fn decode_all<'t, T: Send>(mut matches: impl Iterator<Item = Result<Candidate<'t>>>, decode: DecodeFn<'_, T>) -> Result<Vec<T>> {
    let mut first = Vec::new();
    let mut first_error = None;
    for candidate in matches.by_ref() {
        match candidate {
            Ok(candidate) => first.push(candidate),
            Err(error) => {
                first_error = Some(error);
                break;
            }
        }
        if first.len() > SEQUENTIAL_MATCHES_MAX {
            break;
        }
    }
    if first.len() <= SEQUENTIAL_MATCHES_MAX {
        // The matches before a finding error come first: one of them may not decode.
        let records = first.iter().map(|(key, bytes)| decode(key, bytes)).collect::<Result<Vec<T>>>()?;
        return first_error.map_or(Ok(records), Err);
    }
    std::thread::scope(|scope| {
        let (sender, receiver) = mpsc::sync_channel::<Vec<Candidate<'t>>>(CHUNKS_WAITING_MAX);
        let helper = std::thread::Builder::new()
            .name("tessera-decode".into())
            .stack_size(helper_stack_bytes())
            .spawn_scoped(scope, move || decode_chunks(receiver, decode));
        let Ok(helper) = helper else {
            // No thread to be had: decode here, in order, as without a helper.
            return first
                .into_iter()
                .map(Ok)
                .chain(matches)
                .map(|candidate| candidate.and_then(|(key, bytes)| decode(&key, bytes)))
                .collect();
        };
        // Positions below `sent` went to the helper; `pending` holds the next ones.
        let mut sent = 0usize;
        let mut pending = Vec::with_capacity(CHUNK_MATCHES);
        let mut found_error = None;
        for candidate in first.into_iter().map(Ok).chain(matches) {
            match candidate {
                Ok(candidate) => pending.push(candidate),
                Err(error) => {
                    found_error = Some(error);
                    break;
                }
            }
            if pending.len() == CHUNK_MATCHES {
                let chunk = std::mem::replace(&mut pending, Vec::with_capacity(CHUNK_MATCHES));
                sent += chunk.len();
                if sender.send(chunk).is_err() {
                    break; // the helper stopped at a record that does not decode
                }
            }
        }
        drop(sender);
        let decoded = helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        debug_assert!(decoded.as_ref().map_or(true, |records| records.len() == sent), "the helper decoded every chunk sent");
        // Positions are ordered: the helper's (below `sent`), then the last, partial chunk's,
        // then the match that could not be found. The first error among them is the
        // sequential one, and the chunk is decoded only when the helper's records all were
        // (decoding it beside the helper ran a decoder past a failed record, whose panic then
        // replaced the error).
        let mut records = decoded?;
        for (key, bytes) in &pending {
            records.push(decode(key, bytes)?);
        }
        found_error.map_or(Ok(records), Err)
    })
}

/// Least stack for the helper: std's own default for a spawned thread.
const HELPER_STACK_MIN_BYTES: usize = 2 << 20;
/// Most stack for the helper: a main thread whose `RLIMIT_STACK` is unlimited reports the
/// whole gap below its stack, which no thread could be spawned with (a spawn that fails
/// decodes on the calling thread, correct but slower).
const HELPER_STACK_MAX_BYTES: usize = 256 << 20;

/// The helper's stack size: the calling thread's (a thread made with a large stack, for a
/// decoder that recurses deeply, would otherwise see that decoder overflow the helper's
/// default 2 MiB once a result passes [`SEQUENTIAL_MATCHES_MAX`]), at least
/// [`HELPER_STACK_MIN_BYTES`] and at most [`HELPER_STACK_MAX_BYTES`]. Read once per thread.
fn helper_stack_bytes() -> usize {
    thread_local! {
        static STACK_BYTES: usize = calling_thread_stack_bytes().unwrap_or(0).clamp(HELPER_STACK_MIN_BYTES, HELPER_STACK_MAX_BYTES);
    }
    STACK_BYTES.with(|bytes| *bytes)
}

/// The calling thread's stack size, as its attributes give it (the main thread's is its
/// `RLIMIT_STACK`).
#[cfg(target_os = "linux")]
fn calling_thread_stack_bytes() -> Option<usize> {
    let mut attributes = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: `pthread_getattr_np` initialises `attributes` for this thread when it returns 0;
    // only then are they read, and then destroyed once.
    unsafe {
        if libc::pthread_getattr_np(libc::pthread_self(), attributes.as_mut_ptr()) != 0 {
            return None;
        }
        let mut bytes = 0usize;
        let status = libc::pthread_attr_getstacksize(attributes.as_ptr(), &mut bytes);
        libc::pthread_attr_destroy(attributes.as_mut_ptr());
        (status == 0).then_some(bytes)
    }
}

/// Elsewhere the helper gets [`HELPER_STACK_MIN_BYTES`].
#[cfg(not(target_os = "linux"))]
fn calling_thread_stack_bytes() -> Option<usize> {
    None
}

/// The helper's work: each chunk decoded in order, until the sender is dropped or a record
/// does not decode (dropping the receiver, so that the finding thread stops sending).
fn decode_chunks<T>(chunks: mpsc::Receiver<Vec<Candidate<'_>>>, decode: DecodeFn<'_, T>) -> Result<Vec<T>> {
    let mut records = Vec::new();
    for chunk in chunks {
        for (key, bytes) in &chunk {
            records.push(decode(key, bytes)?);
        }
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::borrow::Cow;

    /// Decodes a record's bytes as a little-endian u32; a record of 4 bytes 0xFF fails.
    fn decode_u32(key: &[u8], bytes: &[u8]) -> Result<u32> {
        let value = u32::from_le_bytes(bytes.try_into().map_err(|_| Error::Corrupted(format!("record {key:?}: not 4 bytes")))?);
        if value == u32::MAX { Err(Error::Corrupted(format!("record {key:?}: damaged"))) } else { Ok(value) }
    }

    /// The oracle: every match decoded in order on one thread.
    fn sequential(stored: &[Result<(Vec<u8>, [u8; 4])>]) -> Result<Vec<u32>> {
        stored
            .iter()
            .map(|entry| match entry {
                Ok((key, bytes)) => decode_u32(key, bytes),
                Err(error) => Err(Error::Corrupted(error.to_string())),
            })
            .collect()
    }

    fn pipelined(stored: &[Result<(Vec<u8>, [u8; 4])>]) -> Result<Vec<u32>> {
        let matches = stored.iter().map(|entry| match entry {
            Ok((key, bytes)) => Ok((Cow::Borrowed(&key[..]), &bytes[..])),
            Err(error) => Err(Error::Corrupted(error.to_string())),
        });
        decode_all(matches, &decode_u32)
    }

    fn stored(count: usize) -> Vec<Result<(Vec<u8>, [u8; 4])>> {
        (0..count as u32).map(|n| Ok((n.to_be_bytes().to_vec(), n.to_le_bytes()))).collect()
    }

    #[test]
    fn results_are_those_of_decoding_in_order_at_every_size() {
        for count in [0, 1, SEQUENTIAL_MATCHES_MAX, SEQUENTIAL_MATCHES_MAX + 1, SEQUENTIAL_MATCHES_MAX + CHUNK_MATCHES, 20_000] {
            let stored = stored(count);
            assert_eq!(pipelined(&stored).unwrap(), sequential(&stored).unwrap(), "{count} matches");
        }
    }

    #[test]
    fn the_first_error_by_position_wins_whichever_thread_meets_it() {
        let count = 5_000;
        // Positions in the first chunks (the helper's), in the middle, in the last partial chunk
        // (decoded by the finding thread), and errors of finding as well as of decoding.
        for (decode_at, find_at) in [
            (Some(10), None),
            (Some(600), None),
            (Some(4_990), None),
            (None, Some(700)),
            (Some(900), Some(700)),
            (Some(700), Some(900)),
            (Some(4_999), Some(4_998)),
        ] {
            let mut stored = stored(count);
            if let Some(at) = decode_at {
                stored[at] = Ok((vec![1, 2], [0xFF; 4]));
            }
            if let Some(at) = find_at {
                stored[at] = Err(Error::Corrupted(format!("cursor at {at}")));
            }
            let expected = sequential(&stored).unwrap_err().to_string();
            assert_eq!(pipelined(&stored).unwrap_err().to_string(), expected, "decode error at {decode_at:?}, find error at {find_at:?}");
        }
    }
}
