//! Copying a value from any document into an encoder, with an explicit stack.

use crate::encoder::{Encoder, Slot};
use crate::error::EncodeError;
use crate::reader::{Array, Dict, Kind, Repr, Value};

enum Frame<'a> {
    Array(Array<'a>, usize),
    Dict(Dict<'a>, usize),
}

/// Pushes a copy of `value` (and everything under it) into `encoder`.
pub(crate) fn copy_value(encoder: &mut Encoder<'_>, value: Value<'_>) -> Result<(), EncodeError> {
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut current = Some(value);
    loop {
        if let Some(value) = current.take() {
            match value.kind() {
                Kind::Array => {
                    encoder.begin_array()?;
                    stack.push(Frame::Array(value.as_array().expect("kind is array"), 0));
                }
                Kind::Dict => {
                    encoder.begin_dict()?;
                    stack.push(Frame::Dict(value.as_dict().expect("kind is dict"), 0));
                }
                _ => push_scalar(encoder, value)?,
            }
        }
        match stack.last_mut() {
            None => return Ok(()),
            Some(Frame::Array(array, next)) => {
                if *next == array.len() {
                    stack.pop();
                    encoder.end_array()?;
                } else {
                    current = array.get(*next);
                    *next += 1;
                }
            }
            Some(Frame::Dict(dict, next)) => {
                if *next == dict.len() {
                    stack.pop();
                    encoder.end_dict()?;
                } else {
                    let (key, value) = dict.entry(*next).expect("index below len");
                    encoder.key(key)?;
                    current = Some(value);
                    *next += 1;
                }
            }
        }
    }
}

fn push_scalar(encoder: &mut Encoder<'_>, value: Value<'_>) -> Result<(), EncodeError> {
    match value.kind() {
        Kind::Null => encoder.push_null(),
        Kind::Bool => encoder.push_bool(value.as_bool().unwrap_or(false)),
        Kind::Int => encoder.push_i64(value.as_i64().unwrap_or(0)),
        Kind::UInt => encoder.push_u64(value.as_u64().unwrap_or(0)),
        Kind::Float => encoder.push_f64(value.as_f64().unwrap_or(0.0)),
        Kind::String => encoder.push_str(value.as_str().unwrap_or("")),
        Kind::Binary => encoder.push_bytes(value.as_bytes().unwrap_or(&[])),
        Kind::Array | Kind::Dict => unreachable!("containers are copied by copy_value"),
    }
}

impl Encoder<'_> {
    /// Pushes a value read from any document. A value of the document being amended is
    /// referenced in place; any other is copied (a document over a longer or shorter slice of
    /// the same buffer is another document: its positions are not the amended one's).
    ///
    /// ```
    /// use tessera_value::{from_json, Doc, Encoder};
    /// let source = from_json(br#"{"tags": ["a", "b"]}"#).unwrap();
    /// let tags = Doc::from_untrusted(&source).unwrap().root().get("tags").unwrap();
    /// let mut enc = Encoder::new();
    /// enc.begin_array().unwrap();
    /// enc.push_value(tags).unwrap();
    /// enc.end_array().unwrap();
    /// let bytes = enc.finish().unwrap();
    /// assert_eq!(Doc::from_untrusted(&bytes).unwrap().root().to_json(), r#"[["a","b"]]"#);
    /// ```
    pub fn push_value(&mut self, value: Value<'_>) -> Result<(), EncodeError> {
        self.check_value_allowed()?;
        if let Repr::Item(pos) = value.repr()
            && self.b.original_len > 0
            && value.doc().bytes().as_ptr() as usize == self.b.original_ptr
            && value.doc().bytes().len() == self.b.original_len
        {
            // A value referenced once is referenced: an amend's unchanged values (each in one
            // place) stand for no more than the original root did. Once a value is referenced
            // again, every reference counts what it stands for, and past what the original
            // document's root could stand for (rule 9: EXPANDED_ITEMS_PER_BYTE_MAX items per
            // byte) a value is copied: a value placed many times, or a chain of amends each
            // placing one twice, would otherwise make a document standing for a tree far
            // larger than its bytes, which validation refuses. (Counting from the first
            // reference would walk every unchanged value: an amend of one field in a 120 KB
            // document took 30 times as long.)
            let repeat = !self.b.referenced.insert(pos);
            if repeat && !self.b.counting_references {
                self.b.counting_references = true;
                let doc = value.doc();
                let earlier: Vec<usize> = self.b.referenced.iter().copied().collect();
                for earlier in earlier {
                    let items = expanded_items(Value::new(doc, Repr::Item(earlier)), &mut self.b.expanded_memo);
                    self.b.referenced_items = self.b.referenced_items.saturating_add(items);
                }
                // The loop counted this value's first reference; this one is counted below.
            }
            let allowed = !self.b.counting_references || {
                let budget = (self.b.original_len as u64).saturating_mul(crate::validate::EXPANDED_ITEMS_PER_BYTE_MAX);
                let items = expanded_items(value, &mut self.b.expanded_memo);
                let within = self.b.referenced_items.saturating_add(items) <= budget;
                if within {
                    self.b.referenced_items += items;
                }
                within
            };
            if allowed {
                let height = value.doc().item_height(pos);
                self.place(Slot::pointer(pos, height));
                return Ok(());
            }
        }
        copy_value(self, value)
    }
}

/// The items a reader walks to visit all of `value`, as rule 9 of docs/format.md counts them:
/// 1 for a scalar, 1 plus its elements' for a container (a shared item each time it is
/// reached). Memoized by item position, so a subtree shared many times is walked once.
/// Recursive: a value is at most the format's depth limit deep.
fn expanded_items(value: Value<'_>, memo: &mut rustc_hash::FxHashMap<usize, u64>) -> u64 {
    let position = match value.repr() {
        Repr::Item(position) => Some(position),
        _ => None,
    };
    if let Some(items) = position.and_then(|position| memo.get(&position)) {
        return *items;
    }
    let items = match value.kind() {
        Kind::Array => {
            let array = value.as_array().expect("kind is array");
            array.iter().fold(1u64, |items, element| items.saturating_add(expanded_items(element, memo)))
        }
        Kind::Dict => {
            let dict = value.as_dict().expect("kind is dict");
            dict.iter().fold(1u64, |items, (_, element)| items.saturating_add(expanded_items(element, memo)))
        }
        _ => return 1,
    };
    if let Some(position) = position {
        memo.insert(position, items);
    }
    items
}
