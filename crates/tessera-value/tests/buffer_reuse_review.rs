//! Review of the per-thread buffer reuse on the encode paths: `to_vec`, `to_shared` (one
//! thread-local encoder), `codec::encode_into` (parked per-thread buffers) and
//! `Encoder::finish`.
//!
//! Every document is compared with an oracle that shares no buffer with anything: a fresh
//! `Encoder` (or `codec::encode`) per value, and the serde_json value the document must read
//! back as. Values include re-entrant `Serialize`/`Encode` impls at several depths, values that
//! fail or panic at every step of their serialization, very large and empty values, strings at
//! the format's size boundaries, and several threads at once.

use serde::Serialize;
use serde::ser::{Error as _, SerializeMap, SerializeSeq, SerializeStruct, Serializer};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use tessera_value::codec::{Encode, FieldIds, encode, encode_into, encode_with_serde};
use tessera_value::{Doc, EncodeError, Encoder, to_shared, to_vec};

// ------------------------------------------------------------------ allocation accounting

/// Counts, per thread, the bytes this thread holds allocated and the largest single
/// allocation since the last reset (for the two tests on buffer sizes; the rest ignore it).
struct Counting;

thread_local! {
    static LIVE_BYTES: Cell<isize> = const { Cell::new(0) };
    static LARGEST_ALLOCATION: Cell<usize> = const { Cell::new(0) };
}

fn track(delta: isize, size: usize) {
    let _ = LIVE_BYTES.try_with(|live| live.set(live.get() + delta));
    let _ = LARGEST_ALLOCATION.try_with(|largest| largest.set(largest.get().max(size)));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            track(layout.size() as isize, layout.size());
        }
        pointer
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if !pointer.is_null() {
            track(layout.size() as isize, layout.size());
        }
        pointer
    }
    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) };
        track(-(layout.size() as isize), 0);
    }
    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            track(new_size as isize - layout.size() as isize, new_size);
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

// ------------------------------------------------------------------ oracles

/// The document of `value` from an encoder made for it alone: no buffer is shared with
/// anything (inner `to_vec` calls of a re-entrant value may reuse theirs; see `Mix` for a
/// value whose oracle reuses nothing at all).
fn fresh<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut encoder = Encoder::new();
    value.serialize(&mut encoder).expect("the oracle encodes");
    encoder.finish().expect("the oracle finishes")
}

/// The document read back as JSON, parsed.
fn as_json(bytes: &[u8]) -> serde_json::Value {
    let doc = Doc::from_untrusted(bytes).expect("a valid document");
    serde_json::from_str(&doc.root().to_json()).expect("valid JSON")
}

/// Panics raised on purpose here say "[deliberate panic]"; their messages are kept off stderr, every other
/// panic (a failed assertion) is reported as usual.
fn quiet_traps() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload.downcast_ref::<&str>().copied().or_else(|| payload.downcast_ref::<String>().map(String::as_str));
            if !message.is_some_and(|m| m.contains("[deliberate panic]")) {
                default(info);
            }
        }));
    });
}

/// xorshift64*: deterministic values without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A JSON value with repeated strings and keys (de-duplication, key interning), integers of
/// every slot width, floats, nesting, and now and then a long string.
fn random_json(rng: &mut Rng, depth: u32) -> serde_json::Value {
    use serde_json::Value;
    const WORDS: [&str; 8] =
        ["", "a", "repeat", "a string longer than the sixty-two bytes that fit inline in an item", "k", "é∂", "id", "x"];
    let choice = if depth == 0 { rng.below(6) } else { rng.below(9) };
    match choice {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 0),
        2 => {
            let shift = rng.below(64);
            let n = (rng.next() >> shift) as i64;
            if rng.below(2) == 0 { Value::from(n) } else { Value::from(n.wrapping_neg()) }
        }
        3 => Value::from(u64::MAX - rng.below(3)),
        4 => Value::from((rng.below(1 << 20) as f64) / 7.0),
        5 => {
            let word = WORDS[rng.below(WORDS.len() as u64) as usize];
            if rng.below(16) == 0 { Value::String(word.repeat(300 + rng.below(40) as usize)) } else { Value::String(word.to_owned()) }
        }
        6 | 7 => Value::Array((0..rng.below(12)).map(|_| random_json(rng, depth - 1)).collect()),
        _ => Value::Object(
            (0..rng.below(10))
                .map(|i| {
                    let key =
                        if rng.below(3) == 0 { format!("field{}", rng.below(40)) } else { WORDS[i as usize % WORDS.len()].to_owned() };
                    (key, random_json(rng, depth - 1))
                })
                .collect(),
        ),
    }
}

/// Checks one value through every reusing path against the oracles.
fn check_all_paths(value: &serde_json::Value, context: &str) {
    let expected = fresh(value);
    assert_eq!(as_json(&expected), *value, "{context}: the oracle reads back as the value");
    assert_eq!(to_vec(value).unwrap(), expected, "{context}: to_vec");
    assert_eq!(&*to_shared(value).unwrap(), expected.as_slice(), "{context}: to_shared");
    let mut out = b"stale bytes of an earlier document".to_vec();
    encode_into(&Json(value), None, &FieldIds::default(), &mut out).unwrap();
    assert_eq!(out, encode(&Json(value), &FieldIds::default()).unwrap(), "{context}: encode_into");
    assert_eq!(out, expected, "{context}: encode_into writes serde's layout");
}

/// A serde value through the generated-codec path (`encode_with_serde`).
struct Json<'a>(&'a serde_json::Value);

impl Encode for Json<'_> {
    fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
        encode_with_serde(self.0, out)
    }
}

// ------------------------------------------------------------------ re-entrancy

/// A value that encodes other values (of its own type, one level down) while its own document
/// is half written, through every reusing entry point: `to_vec`, `to_shared` and `encode_into`
/// from `serialize`, and `to_vec` and `encode_into` from `encode`, with `serialize` run inside
/// `encode` (through `encode_with_serde`) and the other way round.
///
/// With `pure` set, every inner document is made by a fresh encoder instead: the oracle, which
/// shares no buffer at all.
#[derive(Clone, Copy)]
struct Mix {
    depth: u32,
    pure: bool,
}

impl Mix {
    fn child(self) -> Mix {
        Mix { depth: self.depth - 1, pure: self.pure }
    }
    fn label(self) -> String {
        // Long and repeated: de-duplicated within the document, and far apart at depth.
        format!("level {} {}", self.depth, "-".repeat(40 + self.depth as usize * 7))
    }
    fn vec(self, value: &Mix) -> Vec<u8> {
        if self.pure { fresh(value) } else { to_vec(value).unwrap() }
    }
    fn shared(self, value: &Mix) -> Vec<u8> {
        if self.pure { fresh(value) } else { to_shared(value).unwrap().to_vec() }
    }
    fn codec(self, value: &Mix) -> Vec<u8> {
        if self.pure {
            encode(value, &FieldIds::default()).unwrap()
        } else {
            let mut out = vec![0xAA; 17];
            encode_into(value, None, &FieldIds::default(), &mut out).unwrap();
            out
        }
    }
}

struct Blob(Vec<u8>);

impl Serialize for Blob {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

impl Serialize for Mix {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_struct("Mix", 6)?;
        map.serialize_field("label", &self.label())?;
        map.serialize_field("depth", &self.depth)?;
        if self.depth > 0 {
            // Encoded while this document has an open dict.
            map.serialize_field("by_to_vec", &Blob(self.vec(&self.child())))?;
            map.serialize_field("by_to_shared", &Blob(self.shared(&self.child())))?;
            map.serialize_field("by_encode_into", &Blob(self.codec(&self.child())))?;
            map.serialize_field("inline", &self.child())?;
        }
        map.serialize_field("label_again", &self.label())?;
        map.end()
    }
}

impl Encode for Mix {
    fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
        out.begin_array()?;
        out.push_str(&self.label())?;
        if self.depth > 0 {
            out.push_bytes(&self.vec(&self.child()))?;
            out.push_bytes(&self.codec(&self.child()))?;
            // The serde side of the child, inside this encoder.
            encode_with_serde(&self.child(), out)?;
            self.child().encode(out, &FieldIds::default())?;
        }
        out.push_str(&self.label())?;
        out.end_array()
    }
}

#[test]
fn reentrant_encodes_at_every_depth_match_encoders_that_share_nothing() {
    for depth in 0..=4 {
        let (reusing, pure) = (Mix { depth, pure: false }, Mix { depth, pure: true });
        let expected = fresh(&pure);
        assert_eq!(to_vec(&reusing).unwrap(), expected, "to_vec at depth {depth}");
        assert_eq!(&*to_shared(&reusing).unwrap(), expected.as_slice(), "to_shared at depth {depth}");
        // And as the codec sees it.
        let expected = encode(&pure, &FieldIds::default()).unwrap();
        let mut out = Vec::new();
        encode_into(&reusing, None, &FieldIds::default(), &mut out).unwrap();
        assert_eq!(out, expected, "encode_into at depth {depth}");
        // After all that, plain values still come out right on this thread.
        check_all_paths(&serde_json::json!({"after": [depth, "Mix"], "label": reusing.label()}), "after a Mix");
    }
    // The blobs are the documents of the child, all alike.
    let bytes = to_vec(&Mix { depth: 2, pure: false }).unwrap();
    let root = Doc::from_untrusted(&bytes).unwrap().root();
    let child = fresh(&Mix { depth: 1, pure: true });
    for field in ["by_to_vec", "by_to_shared"] {
        assert_eq!(root.get(field).unwrap().as_bytes().unwrap(), child.as_slice(), "{field}");
    }
    assert_eq!(
        root.get("by_encode_into").unwrap().as_bytes().unwrap(),
        encode(&Mix { depth: 1, pure: true }, &FieldIds::default()).unwrap()
    );
    assert_eq!(root.get("label_again").unwrap().as_str(), Some(Mix { depth: 2, pure: true }.label().as_str()));
}

/// A value that, inside its own `serialize`, encodes values that fail or panic (caught there),
/// then goes on: its document must be whole and exact.
struct SurvivesInnerFailures(u32);

impl Serialize for SurvivesInnerFailures {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        seq.serialize_element("before")?;
        let sample = sample_for_traps();
        for step in 0..self.0 {
            let budget = Cell::new(step as usize);
            let failing = Trap { value: &sample, budget: &budget, panics: step % 2 == 0 };
            let inner = catch_unwind(AssertUnwindSafe(|| to_vec(&failing)));
            let failed = match inner {
                Err(_) => true,
                Ok(result) => result.is_err(),
            };
            assert!(failed, "a trap at step {step} fails");
            budget.set(step as usize);
            let shared = catch_unwind(AssertUnwindSafe(|| to_shared(&failing)));
            assert!(shared.is_err() || shared.unwrap().is_err());
            // A good inner value right after the failed one.
            let good = to_shared(&[step, step + 1]).map_err(S::Error::custom)?;
            seq.serialize_element(&Blob(good.to_vec()))?;
        }
        seq.serialize_element("after")?;
        seq.end()
    }
}

#[test]
fn inner_encodes_that_fail_or_panic_leave_the_outer_document_whole() {
    quiet_traps();
    let value = SurvivesInnerFailures(12);
    let expected = fresh(&value);
    assert_eq!(to_vec(&value).unwrap(), expected);
    assert_eq!(&*to_shared(&value).unwrap(), expected.as_slice());
    let root = Doc::from_untrusted(&expected).unwrap().root();
    assert_eq!(root.len(), 14);
    for step in 0..12u32 {
        let blob = root.index(step as usize + 1).unwrap().as_bytes().unwrap();
        assert_eq!(as_json(blob), serde_json::json!([step, step + 1]));
    }
}

// ------------------------------------------------------------------ failures half-way

/// Serializes `value`, failing (an error, or a panic) when `budget` nodes have been written:
/// at every point of a document, in the middle of open arrays and dicts, after a key.
struct Trap<'a> {
    value: &'a serde_json::Value,
    budget: &'a Cell<usize>,
    panics: bool,
}

impl Serialize for Trap<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let left = self.budget.get();
        if left == 0 {
            if self.panics {
                panic!("[deliberate panic] a Serialize impl panicked half-way");
            }
            return Err(S::Error::custom("trap: a Serialize impl failed half-way"));
        }
        self.budget.set(left - 1);
        let child = |value| Trap { value, budget: self.budget, panics: self.panics };
        match self.value {
            serde_json::Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&child(item))?;
                }
                seq.end()
            }
            serde_json::Value::Object(map) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, value) in map {
                    out.serialize_key(key)?;
                    out.serialize_value(&child(value))?;
                }
                out.end()
            }
            other => other.serialize(serializer),
        }
    }
}

/// Strings and keys that the value encoded after a trap uses too (so that anything the failed
/// document left in the de-duplication or key tables would show), a far repeat (an atom), and
/// big integers and floats (items of their own).
fn sample_for_traps() -> serde_json::Value {
    let long = "a string long enough to be de-duplicated ".repeat(3);
    serde_json::json!({
        "name": long,
        "list": [long, 1, -70000, 1u64 << 40, u64::MAX, 0.1, {"name": "inner", "k": [true, null]}],
        "pad": "p".repeat(20_000),
        "far": long,
        "id": 7,
    })
}

#[test]
fn a_value_that_fails_or_panics_at_any_step_leaves_the_next_document_exact() {
    quiet_traps();
    let trapped = sample_for_traps();
    // The next value shares strings and keys with the trapped one, and differs from it.
    let mut next = trapped.clone();
    next["id"] = serde_json::json!(8);
    next["extra"] = serde_json::json!(["name", "far"]);
    let expected_next = fresh(&next);
    let nodes = {
        let budget = Cell::new(usize::MAX);
        to_vec(&Trap { value: &trapped, budget: &budget, panics: false }).unwrap();
        usize::MAX - budget.get()
    };
    assert!(nodes > 10);
    for at in 0..nodes {
        for panics in [false, true] {
            for shared in [false, true] {
                let budget = Cell::new(at);
                let trap = Trap { value: &trapped, budget: &budget, panics };
                let outcome =
                    catch_unwind(AssertUnwindSafe(|| if shared { to_shared(&trap).map(|_| ()) } else { to_vec(&trap).map(|_| ()) }));
                match (panics, outcome) {
                    (true, Err(_)) => {}
                    (false, Ok(Err(error))) => assert!(error.to_string().contains("trap"), "{error}"),
                    (_, other) => panic!("step {at}, panics {panics}: expected a failure, got {:?}", other.map(|r| r.is_ok())),
                }
                let context = format!("after a {} at step {at} of {nodes} (to_shared {shared})", if panics { "panic" } else { "error" });
                // Each entry point, in turn first after the failure.
                match at % 3 {
                    0 => assert_eq!(to_vec(&next).unwrap(), expected_next, "{context}: to_vec"),
                    1 => assert_eq!(&*to_shared(&next).unwrap(), expected_next.as_slice(), "{context}: to_shared"),
                    _ => {
                        let mut out = Vec::new();
                        encode_into(&Json(&next), None, &FieldIds::default(), &mut out).unwrap();
                        assert_eq!(out, expected_next, "{context}: encode_into");
                    }
                }
                assert_eq!(to_vec(&next).unwrap(), expected_next, "{context}: to_vec again");
            }
        }
    }
    assert_eq!(as_json(&expected_next), next);
}

/// An `Encode` that fails or panics half-way through `encode_into`, at every step.
struct EncodeTrap<'a>(Trap<'a>);

impl Encode for EncodeTrap<'_> {
    fn encode(&self, out: &mut Encoder<'_>, _: &FieldIds) -> Result<(), EncodeError> {
        out.begin_array()?;
        out.push_str("a string long enough to be de-duplicated ")?;
        encode_with_serde(&self.0, out)?;
        out.end_array()
    }
}

#[test]
fn encode_into_after_a_failure_at_any_step_writes_the_next_document_exact() {
    quiet_traps();
    let trapped = sample_for_traps();
    let next = serde_json::json!(["a string long enough to be de-duplicated ", trapped]);
    let expected = fresh(&next);
    for at in 0..40 {
        for panics in [false, true] {
            let budget = Cell::new(at);
            let trap = EncodeTrap(Trap { value: &trapped, budget: &budget, panics });
            let mut out = b"kept on error".to_vec();
            let outcome = catch_unwind(AssertUnwindSafe(|| encode_into(&trap, None, &FieldIds::default(), &mut out)));
            match outcome {
                Ok(Err(_)) => assert_eq!(out, b"kept on error", "a failed encode_into leaves `out` as it was"),
                Err(_) => assert!(panics),
                // The whole value fitted the budget: it encoded, exactly.
                Ok(Ok(())) => assert_eq!(out, expected, "step {at}: the untrapped value"),
            }
            let mut out = vec![1, 2, 3];
            encode_into(&Json(&next), None, &FieldIds::default(), &mut out).unwrap();
            assert_eq!(out, expected, "encode_into after a failure at step {at} (panics {panics})");
        }
    }
}

/// A sequence element that panics after opening a container in the shared encoder, caught by
/// the sequence's own `Serialize`, which then carries on: the document cannot be whole (the
/// open container swallows what follows), so it must be refused, never written wrong, and the
/// next document must not see any of it.
struct CatchesChildPanic;

struct OpensThenPanics;

impl Serialize for OpensThenPanics {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        seq.serialize_element("inside the half-open array")?;
        panic!("[deliberate panic] with an array open");
    }
}

impl Serialize for CatchesChildPanic {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        seq.serialize_element(&1)?;
        let caught = catch_unwind(AssertUnwindSafe(|| seq.serialize_element(&OpensThenPanics)));
        assert!(caught.is_err());
        seq.serialize_element(&2)?;
        seq.end()
    }
}

#[test]
fn a_child_panic_caught_inside_serialize_is_refused_not_written_wrong() {
    quiet_traps();
    assert!(to_vec(&CatchesChildPanic).is_err(), "the document has an array left open");
    assert!(to_shared(&CatchesChildPanic).is_err());
    let next = serde_json::json!([1, "inside the half-open array", 2]);
    check_all_paths(&next, "after a caught child panic");
}

// ------------------------------------------------------------------ sizes

/// Strings whose documents sit on each side of the format's width boundaries: inline string
/// lengths, one-, two-, three- and four-byte offsets (255/256, 65535/65536, 2^24), and the
/// near-pointer distance; each after a larger document, so the reused buffer holds stale bytes
/// past the new end.
#[test]
fn documents_at_size_boundaries_after_larger_ones_match_a_fresh_encoder() {
    let big = serde_json::Value::String("B".repeat(3 << 20));
    let mut lengths: Vec<usize> = Vec::new();
    lengths.extend(0..=70);
    lengths.extend(230..=262);
    lengths.extend((65_500..=65_545).step_by(3));
    lengths.extend([(1 << 24) - 40, (1 << 24) - 8, (1 << 24) + 3]);
    for (i, &len) in lengths.iter().enumerate() {
        if i % 8 == 0 || len > 1 << 20 {
            check_all_paths(&big, "the big string");
        }
        let string = serde_json::Value::String("s".repeat(len));
        check_all_paths(&string, &format!("a string of {len} bytes"));
        // A string twice (a pointer or an atom, depending on the distance) in one array.
        let twice = serde_json::json!([string, len, string]);
        check_all_paths(&twice, &format!("a string of {len} bytes twice"));
    }
    // Repeats at and around the near-pointer distance (16 KiB).
    for pad in (16_360..16_400).step_by(3) {
        let value = serde_json::json!(["shared text of some length", "p".repeat(pad), "shared text of some length", "t"]);
        check_all_paths(&value, &format!("a repeat {pad} bytes on"));
    }
}

#[test]
fn empty_tiny_and_huge_values_alternate_exactly() {
    let huge_strings = serde_json::Value::Array((0..40_000).map(|i| serde_json::Value::String(format!("distinct string {i}"))).collect());
    let huge_numbers = serde_json::Value::Array((0..300_000u64).map(|i| serde_json::Value::from(i * 1_000_003)).collect());
    let values = [
        serde_json::json!(null),
        serde_json::json!(""),
        serde_json::json!([]),
        serde_json::json!({}),
        huge_strings.clone(),
        serde_json::json!("distinct string 5"),
        serde_json::json!(["distinct string 5", "distinct string 5"]),
        huge_numbers,
        serde_json::json!([]),
        serde_json::json!(0),
        serde_json::Value::String("h".repeat(6 << 20)),
        serde_json::json!({"": ""}),
        huge_strings,
        serde_json::json!([[], {}, "", null]),
    ];
    for round in 0..2 {
        for (i, value) in values.iter().enumerate() {
            check_all_paths(value, &format!("round {round}, value {i}"));
        }
    }
    // Unit and bytes, which have no JSON twin.
    assert_eq!(to_vec(&()).unwrap(), fresh(&()));
    assert_eq!(&*to_shared(&Blob(Vec::new())).unwrap(), fresh(&Blob(Vec::new())).as_slice());
    assert_eq!(to_vec(&Blob(vec![0; 300])).unwrap(), fresh(&Blob(vec![0; 300])));
}

/// `to_vec` hands out its buffer and keeps "a fresh one of the same capacity": the capacity of
/// the document just made. The next document, however small, is written into that buffer and
/// handed out with it, so a two-byte document made after an 8 MiB one holds 8 MiB for as long
/// as the caller keeps it (one buffer per alternation: big, small, big, small… keeps a big
/// buffer per small result).
#[test]
fn a_small_document_made_after_a_huge_one_does_not_hold_the_huge_buffer() {
    std::thread::spawn(|| {
        let huge = "x".repeat(8 << 20);
        assert_eq!(to_vec(&huge).unwrap().len(), fresh(&huge).len());
        let small = to_vec(&1u8).unwrap();
        assert_eq!(small, fresh(&1u8));
        assert!(small.capacity() < 1 << 16, "a {}-byte document from to_vec holds a buffer of {} bytes", small.len(), small.capacity());
    })
    .join()
    .unwrap();
}

/// `to_shared` copies the document out and keeps the thread's buffer for the next one, at the
/// largest size it ever had: a thread that once set an 8 MiB dictionary value holds 8 MiB
/// until it exits. (The collection's per-thread record buffers and the store's checksum buffer
/// drop any buffer over 1 MiB for this reason.)
#[test]
fn a_huge_to_shared_does_not_leave_its_buffer_with_the_thread() {
    std::thread::spawn(|| {
        let huge = "x".repeat(8 << 20);
        // Warm up: the thread's encoder and its small buffers exist before the baseline.
        for _ in 0..3 {
            drop(to_shared(&[1, 2, 3]).unwrap());
            drop(to_vec(&[1, 2, 3]).unwrap());
        }
        let baseline = LIVE_BYTES.with(Cell::get);
        let shared = to_shared(&huge).unwrap();
        assert_eq!(&*shared, fresh(&huge).as_slice());
        drop(shared);
        drop(to_shared(&[1, 2, 3]).unwrap());
        let retained = LIVE_BYTES.with(Cell::get) - baseline;
        assert!(retained < 1 << 20, "after a huge to_shared the thread keeps {retained} bytes");
    })
    .join()
    .unwrap();
}

/// `Encoder::finish` consumes the encoder, yet goes through `finish_reuse`, which hands out the
/// buffer and allocates "a fresh one of the same capacity" for a next document that cannot
/// come: every `finish` (`codec::encode`, `from_json`, `to_vec_with_keys`) allocates a second
/// buffer the size of the document and frees it at once.
#[test]
fn finish_allocates_no_second_buffer_the_size_of_the_document() {
    std::thread::spawn(|| {
        let payload = vec![7u8; 4 << 20];
        let mut encoder = Encoder::new();
        encoder.reserve(payload.len() + 4096);
        encoder.push_bytes(&payload).unwrap();
        LARGEST_ALLOCATION.with(|largest| largest.set(0));
        let bytes = encoder.finish().unwrap();
        let largest = LARGEST_ALLOCATION.with(Cell::get);
        assert_eq!(Doc::from_untrusted(&bytes).unwrap().root().as_bytes(), Some(payload.as_slice()));
        assert!(largest < 1 << 16, "finishing a {}-byte document allocated {largest} bytes at once", bytes.len());
    })
    .join()
    .unwrap();
}

// ------------------------------------------------------------------ threads

#[test]
fn many_threads_reusing_their_buffers_at_once_match_fresh_encoders() {
    quiet_traps();
    std::thread::scope(|scope| {
        for thread in 0..6u64 {
            scope.spawn(move || {
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (thread + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9));
                for round in 0..120 {
                    let value = random_json(&mut rng, 4);
                    let context = format!("thread {thread}, round {round}");
                    match rng.below(5) {
                        0 => {
                            // A failure first, at a random step.
                            let budget = Cell::new(rng.below(20) as usize);
                            let panics = rng.below(2) == 0;
                            let _ = catch_unwind(AssertUnwindSafe(|| to_vec(&Trap { value: &value, budget: &budget, panics })));
                        }
                        1 => {
                            let depth = rng.below(3) as u32;
                            assert_eq!(to_vec(&Mix { depth, pure: false }).unwrap(), fresh(&Mix { depth, pure: true }), "{context}: Mix");
                        }
                        2 => {
                            let big = serde_json::Value::String(format!("{thread}").repeat(200_000 + rng.below(1000) as usize));
                            check_all_paths(&big, &context);
                        }
                        _ => {}
                    }
                    check_all_paths(&value, &context);
                }
            });
        }
    });
}

// ------------------------------------------------------------------ thread exit

/// Encodes on drop: held in a thread-local whose destructor runs after the thread's encoder is
/// gone (it was registered first, so it is destroyed last).
struct EncodesOnExit {
    mode: String,
    done: std::sync::mpsc::Sender<Vec<u8>>,
}

impl Drop for EncodesOnExit {
    fn drop(&mut self) {
        let value = ["encoded", "at thread exit"];
        let bytes = match self.mode.as_str() {
            "to_vec" => to_vec(&value).unwrap(),
            "to_shared" => to_shared(&value).unwrap().to_vec(),
            _ => {
                let mut out = Vec::new();
                encode_into(&value.map(str::to_owned).to_vec(), None, &FieldIds::default(), &mut out).unwrap();
                out
            }
        };
        let _ = self.done.send(bytes);
    }
}

thread_local! {
    static ON_EXIT: std::cell::RefCell<Option<EncodesOnExit>> = const { std::cell::RefCell::new(None) };
}

#[test]
#[ignore = "run as a child process by encoding_in_a_thread_local_destructor_works_on_every_path"]
fn encode_at_thread_exit_child() {
    let mode = std::env::var("BUFFER_REUSE_REVIEW_MODE").unwrap();
    let (done, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        ON_EXIT.with(|slot| *slot.borrow_mut() = Some(EncodesOnExit { mode, done }));
        // The thread's reused encoders, made after: their destructors run first.
        drop(to_vec(&0u8).unwrap());
        let mut out = Vec::new();
        encode_into(&0u8, None, &FieldIds::default(), &mut out).unwrap();
    })
    .join()
    .unwrap();
    let bytes = received.recv_timeout(std::time::Duration::from_secs(10)).expect("the destructor encoded");
    assert_eq!(bytes, fresh(&["encoded", "at thread exit"]));
}

/// `encode_into` uses `try_with` so that a call from a thread-local destructor (after the
/// thread's buffers are gone) gets fresh buffers; `to_vec` and `to_shared` use `with`, which
/// panics there, and a panic in a thread-local destructor aborts the process.
#[test]
fn encoding_in_a_thread_local_destructor_works_on_every_path() {
    let mut failed = Vec::new();
    for mode in ["encode_into", "to_vec", "to_shared"] {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["encode_at_thread_exit_child", "--exact", "--ignored", "--test-threads=1"])
            .env("BUFFER_REUSE_REVIEW_MODE", mode)
            .output()
            .unwrap();
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let reason = stderr
                .lines()
                .filter(|line| line.contains("panicked") || line.contains("fatal") || line.contains("Thread Local"))
                .collect::<Vec<_>>()
                .join(" | ");
            failed.push(format!("{mode}: {} ({reason})", output.status));
        }
    }
    assert!(failed.is_empty(), "encoding from a thread-local destructor failed: {failed:#?}");
}

// ------------------------------------------------------------------ history

/// 100 distinct strings, then the same 100 again.
fn repeated_strings() -> Vec<String> {
    let strings: Vec<String> = (0..100).map(|i| format!("a string of its own, number {i}")).collect();
    strings.iter().chain(strings.iter()).cloned().collect()
}

/// The string de-duplication cache is direct-mapped and keeps its size from document to
/// document (it doubles during a document of more than 128 strings, and `reset` only bumps its
/// generation): two strings that share a slot in a fresh encoder's 64-entry table do not in a
/// grown one. So whether a repeated string is stored once or twice, and the document's bytes,
/// depend on what the thread encoded before, even when that was the same value: a value's
/// second encoding on a thread differs from its first. Callers rely on one value having one
/// encoding: a dictionary skips a write of the bytes already cached, a collection's upsert of
/// equal bytes is `Unchanged`.
#[test]
fn the_same_value_encoded_twice_on_one_thread_has_the_same_bytes() {
    std::thread::spawn(|| {
        let value = repeated_strings();
        let expected = fresh(&value);
        let expected_codec = encode(&value, &FieldIds::default()).unwrap();
        let vecs = [to_vec(&value).unwrap(), to_vec(&value).unwrap()];
        let shared = [to_shared(&value).unwrap().to_vec(), to_shared(&value).unwrap().to_vec()];
        let mut codec = [Vec::new(), Vec::new()];
        for out in &mut codec {
            encode_into(&value, None, &FieldIds::default(), out).unwrap();
        }
        // Every one reads back as the value.
        for bytes in vecs.iter().chain(&shared).chain(&codec) {
            assert_eq!(as_json(bytes), serde_json::json!(value));
        }
        let lens = |docs: &[Vec<u8>; 2]| [docs[0].len(), docs[1].len()];
        assert_eq!(
            (lens(&vecs), lens(&shared), lens(&codec)),
            ([expected.len(); 2], [expected.len(); 2], [expected_codec.len(); 2]),
            "document lengths of the same value, encoded twice by to_vec, to_shared, encode_into"
        );
        assert_eq!(vecs[1], vecs[0], "to_vec, second time");
        assert_eq!(codec[1], codec[0], "encode_into, second time");
    })
    .join()
    .unwrap();
}

/// The same after a document of many strings, which grows the table further.
#[test]
fn a_documents_bytes_do_not_depend_on_what_the_thread_encoded_before() {
    std::thread::spawn(|| {
        let value = repeated_strings();
        let expected = fresh(&value);
        let expected_codec = encode(&value, &FieldIds::default()).unwrap();
        let many: Vec<String> = (0..50_000).map(|i| format!("s{i}")).collect();
        to_vec(&many).unwrap();
        encode_into(&many, None, &FieldIds::default(), &mut Vec::new()).unwrap();
        let after_vec = to_vec(&value).unwrap();
        let after_shared = to_shared(&value).unwrap().to_vec();
        let mut after_codec = Vec::new();
        encode_into(&value, None, &FieldIds::default(), &mut after_codec).unwrap();
        assert_eq!(as_json(&after_vec), as_json(&expected), "reads back as the value");
        assert_eq!(
            (after_vec.len(), after_shared.len(), after_codec.len()),
            (expected.len(), expected.len(), expected_codec.len()),
            "the value's document after one of many strings (to_vec, to_shared, encode_into) vs a fresh encoder's"
        );
        assert_eq!(after_vec, expected, "to_vec after a document of many strings");
        assert_eq!(after_shared, expected, "to_shared after a document of many strings");
        assert_eq!(after_codec, expected_codec, "encode_into after a document of many strings");
    })
    .join()
    .unwrap();
}
