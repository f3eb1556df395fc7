//! [`conform`](super::conform::conform) into a reused per-thread encoder: a write through a
//! dynamic handle conforms each record into a fresh document, and a fresh encoder's
//! allocations (its key index, string cache and tables) cost about as much as the walk.

use super::conform::{self, ConformError, Source};
use crate::collection::TypeDesc;
use std::cell::RefCell;
use tessera_value::codec::{self, Encode, FieldIds};
use tessera_value::{EncodeError, Encoder, SharedKeys, Value};

/// The record being conformed, with the misfit the [`Encode`] trait cannot carry kept aside.
struct Conforming<'a, 'v> {
    record: Value<'v>,
    shape: &'a TypeDesc,
    source: Source,
    misfit: RefCell<Option<ConformError>>,
}

impl Encode for Conforming<'_, '_> {
    fn encode(&self, out: &mut Encoder<'_>, _ids: &FieldIds) -> Result<(), EncodeError> {
        conform::conform(out, self.record, self.shape, self.source).map_err(|error| match error {
            ConformError::Encode(error) => error,
            misfit => {
                *self.misfit.borrow_mut() = Some(misfit);
                EncodeError::Message("the record does not fit the shape".into())
            }
        })
    }
}

/// `record` (read from `source`) checked against `shape` and encoded with `shared` keys, as
/// [`conform::conform`] into a new encoder would, into a new `Vec`.
pub(super) fn conform_into(record: Value<'_>, shape: &TypeDesc, shared: &SharedKeys, source: Source) -> Result<Vec<u8>, ConformError> {
    let source = Conforming { record, shape, source, misfit: RefCell::new(None) };
    // The per-thread encoder takes this buffer for the next record (its own becomes the
    // result): with room for a record of this size, that one is written without regrowing.
    let mut bytes = Vec::with_capacity(record.doc().bytes().len().saturating_add(64));
    let written = codec::encode_into(&source, Some(shared), &FieldIds::default(), &mut bytes);
    match (source.misfit.into_inner(), written) {
        (Some(misfit), _) => Err(misfit),
        (None, Err(error)) => Err(ConformError::Encode(error)),
        (None, Ok(())) => Ok(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_value::{Doc, from_json};

    #[test]
    fn a_reused_encoder_writes_what_a_fresh_one_writes_and_reports_misfits() {
        let shape = TypeDesc::Struct(vec![("id".into(), TypeDesc::Int), ("note".into(), TypeDesc::Option(Box::new(TypeDesc::String)))]);
        let mut shared = SharedKeys::new();
        shared.add("id").unwrap();
        for json in [r#"{"id": 1}"#, r#"{"note": "x", "id": 2}"#, r#"{"id": 3, "note": null}"#] {
            let bytes = from_json(json.as_bytes()).unwrap();
            let record = Doc::from_untrusted(&bytes).unwrap().root();
            let mut fresh = Encoder::with_shared_keys(&shared);
            assert!(conform::conform(&mut fresh, record, &shape, Source::Binary).is_ok());
            assert_eq!(conform_into(record, &shape, &shared, Source::Binary).ok(), Some(fresh.finish().unwrap()), "{json}");
        }
        let bytes = from_json(br#"{"id": "one"}"#).unwrap();
        match conform_into(Doc::from_untrusted(&bytes).unwrap().root(), &shape, &shared, Source::Binary) {
            Err(ConformError::Misfit(misfit)) => assert_eq!(misfit.path, "id"),
            _ => panic!("a string for an integer field is a misfit"),
        }
    }
}
