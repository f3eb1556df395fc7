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
            let height = value.doc().item_height(pos);
            self.place(Slot::pointer(pos, height));
            return Ok(());
        }
        copy_value(self, value)
    }
}
