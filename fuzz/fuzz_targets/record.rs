//! The path from a stored record's bytes to a typed record: the validating open with the
//! collection's shared-key table (`Doc::from_untrusted_with_keys`), the generated `Decode` of a
//! `#[derive(Record)]` type, the generated field views, and the O(1) open that
//! `collection::decode` and `get_ref` use (`Doc::from_trusted_with_keys`), which is only given
//! bytes the validator accepted (on other bytes its contract allows a panic).
//!
//! Most inputs are structure-aware: a record built from the input with `arbitrary`, encoded as
//! a collection encodes it (its shared keys and field ids), then damaged in a few input-chosen
//! ways (bytes flipped or set, the footer hit, a cut, an insert, a slot-sized copy, a key id
//! moved to another id, the shared-key table grown, swapped, shortened or renamed). One input
//! in eight is raw bytes read with the record type's table.
//!
//! Nothing may panic: a decode is a record or a typed error. When a decode succeeds, every
//! field view succeeds and reads the same, the trusted open decodes the same, and encoding the
//! record again and decoding that gives the same record. An undamaged record decodes to itself.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use std::sync::OnceLock;
use tessera::codec::{encode_into, view_field, Decode, FieldError, FieldIds, FieldNames, View};
use tessera::collection::{Embed, Record};
use tessera::value::{Dict, Doc, Kind, SharedKeys, Value};

#[derive(Record, Arbitrary, Debug, Clone)]
#[record(name = "shipments")]
struct Shipment {
    #[record(key)]
    id: u64,
    tiny: i8,
    small: u8,
    short: i16,
    medium: i32,
    unsigned: u32,
    wide: i64,
    size: usize,
    ratio: f32,
    weight: f64,
    fragile: bool,
    grade: char,
    name: String,
    note: Option<String>,
    tags: Vec<String>,
    samples: Vec<f64>,
    grid: Vec<Vec<i32>>,
    counts: HashMap<String, i64>,
    origin: Place,
    stops: Vec<Place>,
    status: Status,
    history: Vec<Status>,
    detour: Option<Box<Place>>,
}

#[derive(Embed, Arbitrary, Debug, Clone)]
struct Place {
    x: i32,
    y: i16,
    label: String,
    depths: Option<Vec<u16>>,
}

#[derive(Embed, Arbitrary, Debug, Clone)]
enum Status {
    Draft,
    Cancelled,
    Shipped { at: u64, by: String },
    Held(String),
    Moved(Place),
    Pair(i8, bool),
    Weighed(Vec<f32>),
}

// ------------------------------------------------------------------ equality

/// Equality that holds for NaN (any NaN equals any NaN; other floats compare by bits, so
/// -0.0 is not 0.0) and for maps whatever their iteration order.
trait Same {
    fn same(&self, other: &Self) -> bool;
}

macro_rules! same_by_eq {
    ($($type:ty),*) => {$(
        impl Same for $type {
            fn same(&self, other: &Self) -> bool {
                self == other
            }
        }
    )*};
}
same_by_eq!(i8, u8, i16, u16, i32, u32, i64, u64, usize, bool, char, String);

macro_rules! same_float {
    ($($type:ty),*) => {$(
        impl Same for $type {
            fn same(&self, other: &Self) -> bool {
                (self.is_nan() && other.is_nan()) || self.to_bits() == other.to_bits()
            }
        }
    )*};
}
same_float!(f32, f64);

impl<T: Same + ?Sized> Same for Box<T> {
    fn same(&self, other: &Self) -> bool {
        (**self).same(other)
    }
}
impl<T: Same> Same for Option<T> {
    fn same(&self, other: &Self) -> bool {
        match (self, other) {
            (Some(a), Some(b)) => a.same(b),
            (None, None) => true,
            _ => false,
        }
    }
}
impl<T: Same> Same for Vec<T> {
    fn same(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a.same(b))
    }
}
impl<T: Same> Same for HashMap<String, T> {
    fn same(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(key, a)| other.get(key).is_some_and(|b| a.same(b)))
    }
}

macro_rules! same_fields {
    ($type:ty: $($field:ident),*) => {
        impl Same for $type {
            fn same(&self, other: &Self) -> bool {
                true $(&& self.$field.same(&other.$field))*
            }
        }
    };
}
same_fields!(Shipment: id, tiny, small, short, medium, unsigned, wide, size, ratio, weight, fragile, grade, name, note, tags,
    samples, grid, counts, origin, stops, status, history, detour);
same_fields!(Place: x, y, label, depths);

impl Same for Status {
    fn same(&self, other: &Self) -> bool {
        match (self, other) {
            (Status::Draft, Status::Draft) | (Status::Cancelled, Status::Cancelled) => true,
            (Status::Shipped { at, by }, Status::Shipped { at: at2, by: by2 }) => at == at2 && by == by2,
            (Status::Held(a), Status::Held(b)) => a == b,
            (Status::Moved(a), Status::Moved(b)) => a.same(b),
            (Status::Pair(a, b), Status::Pair(a2, b2)) => a == a2 && b == b2,
            (Status::Weighed(a), Status::Weighed(b)) => a.same(b),
            _ => false,
        }
    }
}

// ------------------------------------------------------------------ the collection's table

/// The record type's own field list (the first one its codec visits): what the generated
/// accessors of `ShipmentView` pass to `ViewParts::field`.
fn record_fields() -> FieldNames {
    static FIELDS: OnceLock<FieldNames> = OnceLock::new();
    *FIELDS.get_or_init(|| {
        let list = FieldIds::lists_of::<Shipment>()[0];
        assert_eq!((list.len(), list[0], list[22]), (23, "id", "detour"), "the record's own field list comes first");
        list
    })
}

/// A shared-key table as `collection::keys::register` builds it: `older` names (a table that
/// already holds names), then every field and variant name of the record type, and the
/// record type's field ids resolved against it.
fn register(older: &[String]) -> (SharedKeys, FieldIds) {
    let mut shared = SharedKeys::new();
    for name in older {
        let _ = shared.add(name);
    }
    let lists = FieldIds::lists_of::<Shipment>();
    for name in lists.iter().flat_map(|list| list.iter()) {
        shared.add(name).expect("field names are shared keys");
    }
    let ids = FieldIds::resolve(&shared, lists);
    (shared, ids)
}

/// The table of a collection of the record type and nothing else (built once: every input
/// that needs no other table reads with it).
fn standard() -> (&'static SharedKeys, &'static FieldIds) {
    static TABLE: OnceLock<(SharedKeys, FieldIds)> = OnceLock::new();
    let (shared, ids) = TABLE.get_or_init(|| register(&[]));
    (shared, ids)
}

/// A table of `names` in order (a name seen twice keeps its first id), with the record type's
/// ids resolved against it, as a collection that loaded it would resolve them.
fn table_of(names: &[String]) -> (SharedKeys, FieldIds) {
    let mut shared = SharedKeys::new();
    for name in names {
        let _ = shared.add(name);
    }
    let ids = FieldIds::resolve(&shared, FieldIds::lists_of::<Shipment>());
    (shared, ids)
}

fn names_of(shared: &SharedKeys) -> Vec<String> {
    (0..shared.len() as u32).map(|id| shared.name(id).expect("id below len").to_owned()).collect()
}

// ------------------------------------------------------------------ damage

#[derive(Arbitrary, Debug)]
enum Damage {
    Flip {
        at: u32,
        mask: u8,
    },
    Set {
        at: u32,
        byte: u8,
    },
    /// A byte of the footer or the tail (the last 32 bytes).
    Footer {
        back: u8,
        byte: u8,
    },
    Truncate {
        keep: u32,
    },
    Cut {
        at: u32,
        len: u8,
    },
    Insert {
        at: u32,
        bytes: [u8; 4],
        len: u8,
    },
    /// A 1-, 2-, 4- or 8-byte copy from elsewhere in the record: one slot replaced by another.
    CopyWithin {
        from: u32,
        to: u32,
        width: u8,
    },
    /// The `nth` byte below the table's length (a key id, a count, a height) set to another
    /// id below it.
    KeyId {
        nth: u16,
        to: u8,
    },
}

fn apply(bytes: &mut Vec<u8>, damage: &Damage, shared_count: usize) {
    let len = bytes.len();
    if len == 0 {
        return;
    }
    let at = |offset: u32| offset as usize % len;
    match *damage {
        Damage::Flip { at: offset, mask } => bytes[at(offset)] ^= mask,
        Damage::Set { at: offset, byte } => bytes[at(offset)] = byte,
        Damage::Footer { back, byte } => bytes[len - 1 - back as usize % len.min(32)] = byte,
        Damage::Truncate { keep } => bytes.truncate(keep as usize % len),
        Damage::Cut { at: offset, len: cut } => {
            let start = at(offset);
            bytes.drain(start..(start + cut as usize).min(len));
        }
        Damage::Insert { at: offset, bytes: new, len: count } => {
            let start = at(offset);
            bytes.splice(start..start, new[..count as usize % 5].iter().copied());
        }
        Damage::CopyWithin { from, to, width } => {
            let width = 1usize << (width & 3);
            if len >= width {
                let room = len - width + 1;
                let (from, to) = (from as usize % room, to as usize % room);
                bytes.copy_within(from..from + width, to);
            }
        }
        Damage::KeyId { nth, to } => {
            if shared_count == 0 {
                return;
            }
            let candidates = bytes.iter().filter(|&&byte| (byte as usize) < shared_count).count();
            if candidates == 0 {
                return;
            }
            let nth = nth as usize % candidates;
            let position = bytes.iter().enumerate().filter(|(_, &byte)| (byte as usize) < shared_count).nth(nth).expect("counted").0;
            bytes[position] = (to as usize % shared_count) as u8;
        }
    }
}

/// How the table a record is read with differs from the one it was written with.
#[derive(Arbitrary, Debug)]
enum TableChange {
    Unchanged,
    /// Names added after the record was written (tables only grow): reads the same.
    Grown(Vec<String>),
    Swapped(u8, u8),
    Shortened(u8),
    Renamed(u8, String),
}

impl TableChange {
    fn keeps_meaning(&self) -> bool {
        matches!(self, TableChange::Unchanged | TableChange::Grown(_))
    }
}

fn change(names: &[String], change: &TableChange) -> Vec<String> {
    let mut names = names.to_vec();
    let len = names.len();
    match change {
        TableChange::Unchanged => {}
        TableChange::Grown(more) => names.extend(more.iter().take(8).cloned()),
        TableChange::Swapped(a, b) => names.swap(*a as usize % len, *b as usize % len),
        TableChange::Shortened(by) => names.truncate(len.saturating_sub(1 + *by as usize % len)),
        TableChange::Renamed(at, name) => names[*at as usize % len] = name.clone(),
    }
    names
}

// ------------------------------------------------------------------ reading

/// Reads every value below `value` as the `validate` target does, with the record's shared
/// keys: every dict key found by name and by (id, name) where it is shared.
fn walk(value: Value<'_>, shared: &SharedKeys, budget: &mut usize) {
    if *budget == 0 {
        return;
    }
    *budget -= 1;
    let _ = (value.kind(), value.as_bool(), value.as_i64(), value.as_u64(), value.as_f64(), value.as_str(), value.as_bytes());
    match value.kind() {
        Kind::Array => {
            let array = value.as_array().unwrap();
            assert!(array.get(array.len()).is_none());
            let _ = array.numbers().map(|numbers| numbers.len());
            for item in array.iter() {
                walk(item, shared, budget);
            }
        }
        Kind::Dict => {
            let dict = value.as_dict().unwrap();
            for (key, item) in dict.iter() {
                assert!(dict.get(key).expect("every key of a valid dict is found by name") == item, "{key:?}");
                if let Some(id) = shared.id(key) {
                    assert!(dict.get_field(id, key).expect("found by id and name") == item, "{key:?}");
                }
                walk(item, shared, budget);
            }
        }
        _ => {}
    }
}

/// Field `index` viewed as `ShipmentView`'s accessor views it.
fn view<'a, T: View<'a>>(dict: &Dict<'a>, ids: &FieldIds, index: usize) -> Result<T::Out, FieldError> {
    let list = record_fields();
    view_field::<T>(dict, ids.fields(list), list, index, ids)
}

/// Every field's view: when the record decoded, each view succeeds and reads the same field.
macro_rules! check_views {
    ($dict:expr, $ids:expr, $decoded:expr, { $($index:literal $field:ident: $type:ty, |$view:ident, $value:ident| $same:expr;)* }) => {$(
        let viewed = view::<$type>(&$dict, $ids, $index);
        debug_assert_eq!(record_fields()[$index], stringify!($field));
        if let Some(record) = $decoded {
            let $view = viewed.unwrap_or_else(|error| panic!("{} decodes but its view fails: {error}", stringify!($field)));
            let $value = &record.$field;
            assert!($same, "{} views as {:?}, decoded {:?}", stringify!($field), $view, $value);
        }
    )*};
}

fn check_all_views(dict: &Dict<'_>, ids: &FieldIds, decoded: Option<&Shipment>) {
    check_views!(dict, ids, decoded, {
        0 id: u64, |view, value| view == *value;
        1 tiny: i8, |view, value| view == *value;
        2 small: u8, |view, value| view == *value;
        3 short: i16, |view, value| view == *value;
        4 medium: i32, |view, value| view == *value;
        5 unsigned: u32, |view, value| view == *value;
        6 wide: i64, |view, value| view == *value;
        7 size: usize, |view, value| view == *value;
        8 ratio: f32, |view, value| view.same(value);
        9 weight: f64, |view, value| view.same(value);
        10 fragile: bool, |view, value| view == *value;
        11 grade: char, |view, value| view == *value;
        12 name: String, |view, value| view == value.as_str();
        13 note: Option<String>, |view, value| view == value.as_deref();
        14 tags: Vec<String>, |view, value| view.len() == value.len() && view.iter().zip(value).all(|(a, b)| *a == b.as_str());
        15 samples: Vec<f64>, |view, value| view.same(value);
        16 grid: Vec<Vec<i32>>, |view, value| view == *value;
        17 counts: HashMap<String, i64>, |view, value| view.len() == value.len() && view.iter().all(|(key, v)| value.get(*key) == Some(v));
        18 origin: Place, |view, value| view.same(value);
        19 stops: Vec<Place>, |view, value| view.same(value);
        20 status: Status, |view, value| view.same(value);
        21 history: Vec<Status>, |view, value| view.same(value);
        22 detour: Option<Box<Place>>, |view, value| view.as_ref().same(&value.as_deref());
    });
}

impl Same for &Place {
    fn same(&self, other: &Self) -> bool {
        (**self).same(*other)
    }
}

fn same_error(a: &FieldError, b: &FieldError) -> bool {
    a.path == b.path && a.problem.to_string() == b.problem.to_string()
}

/// Reads `bytes` as a stored record of a collection whose table is `shared` (its field ids
/// `ids`): `None` when the bytes are refused or do not decode, with every check above made.
/// Largest record whose JSON form `read` writes.
const JSON_CHECKED_BYTES_MAX: usize = 4096;

fn read(bytes: &[u8], shared: &SharedKeys, ids: &FieldIds) -> Option<Shipment> {
    let doc = Doc::from_untrusted_with_keys(bytes, shared).ok()?;
    let root = doc.root();
    walk(root, shared, &mut 10_000);
    // The JSON writer has a target of its own (`json`); here it runs on small records only, since
    // writing the far-repeat case's 16 KiB string byte by byte under coverage instrumentation
    // took most of this target's time.
    if bytes.len() <= JSON_CHECKED_BYTES_MAX {
        let _ = root.to_json();
    }
    let decoded = Shipment::decode(root, ids);

    // What `collection::decode` and `get_ref` do: the O(1) open, then the same decode.
    let trusted = Doc::from_trusted_with_keys(bytes, shared).expect("a validated record opens trusted");
    let trusted_decoded = Shipment::decode(trusted.root(), ids);
    match (&decoded, &trusted_decoded) {
        (Ok(a), Ok(b)) => assert!(a.same(b), "trusted open decodes differently"),
        (Err(a), Err(b)) => assert!(same_error(a, b), "trusted open fails differently: {a} / {b}"),
        (a, b) => panic!("validated and trusted opens disagree: {a:?} / {b:?}"),
    }

    // `RecordRef::new` then the generated accessors.
    match root.as_dict() {
        Some(dict) => check_all_views(&dict, ids, decoded.as_ref().ok()),
        None => assert!(decoded.is_err(), "a record that is not a dict decodes"),
    }
    if let Some(dict) = trusted.root().as_dict() {
        check_all_views(&dict, ids, trusted_decoded.as_ref().ok());
    }

    let record = decoded.ok()?;
    // Written back as the collection would write it, and read back as it would read it.
    let mut again = Vec::new();
    encode_into(&record, Some(shared), ids, &mut again).expect("a decoded record encodes");
    Doc::from_untrusted_with_keys(&again, shared).expect("the encoder's output validates");
    let reopened = Doc::from_trusted_with_keys(&again, shared).expect("the encoder's output opens");
    let back = Shipment::decode(reopened.root(), ids).unwrap_or_else(|error| panic!("a re-encoded record does not decode: {error}"));
    assert!(back.same(&record), "re-encoded record reads differently:\n{record:?}\n{back:?}");
    Some(record)
}

/// A record built from the input, written as a collection writes it, damaged, and read back.
/// The damages and the table come first in the input, so that they are decided by its first
/// bytes whatever the record takes.
fn structured(data: &[u8]) -> arbitrary::Result<()> {
    let mut input = Unstructured::new(data);
    let damages = (0..input.int_in_range(0..=4u8)?).map(|_| input.arbitrary::<Damage>()).collect::<arbitrary::Result<Vec<_>>>()?;
    let table: TableChange = input.arbitrary()?;
    // Names the table held before the record type's.
    let older = (0..input.int_in_range(0..=3u8)?).map(|_| input.arbitrary::<String>()).collect::<arbitrary::Result<Vec<_>>>()?;
    // Written by name, with no shared keys (a record from before its keys were shared).
    let by_name: bool = input.arbitrary()?;
    // Makes `grid` rectangular (a packed matrix).
    let rectangular: bool = input.arbitrary()?;
    // Repeats a tag and the name after a 16 KiB string, so that the repeats are atoms.
    let far_repeat = input.ratio(1, 16)?.then(|| input.arbitrary::<u16>()).transpose()?;
    let mut record = Shipment::arbitrary_take_rest(input)?;
    if rectangular {
        let columns = record.grid.first().map_or(0, Vec::len);
        for row in &mut record.grid {
            row.resize(columns, 7);
        }
    }
    if let Some(extra) = far_repeat {
        let first = record.tags.first().cloned().unwrap_or_else(|| "repeated tag".to_owned());
        record.tags.push("~".repeat(16_400 + extra as usize % 1_024));
        record.tags.push(first);
        record.tags.push(record.name.clone());
    }

    let registered;
    let (written_with, write_ids) = if older.is_empty() {
        standard()
    } else {
        registered = register(&older);
        (&registered.0, &registered.1)
    };
    let mut bytes = Vec::new();
    let encoded = if by_name {
        encode_into(&record, None, &FieldIds::default(), &mut bytes)
    } else {
        encode_into(&record, Some(written_with), write_ids, &mut bytes)
    };
    encoded.unwrap_or_else(|error| panic!("a record does not encode: {error}"));

    let loaded;
    let (read_with, read_ids) = if let TableChange::Unchanged = table {
        (written_with, write_ids)
    } else {
        loaded = table_of(&change(&names_of(written_with), &table));
        (&loaded.0, &loaded.1)
    };
    for damage in &damages {
        apply(&mut bytes, damage, written_with.len());
    }
    let decoded = read(&bytes, read_with, read_ids);
    if damages.is_empty() && table.keeps_meaning() {
        let decoded = decoded.expect("an undamaged record decodes");
        assert!(decoded.same(&record), "an undamaged record reads differently:\n{record:?}\n{decoded:?}");
    }
    Ok(())
}

fn raw(data: &[u8]) {
    let (shared, ids) = standard();
    let _ = read(data, shared, ids);
}

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((mode, rest)) if mode % 8 == 0 => raw(rest),
        Some((_, rest)) => {
            let _ = structured(rest);
        }
        None => {}
    }
});
