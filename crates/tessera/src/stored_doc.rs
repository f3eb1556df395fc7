//! Validation of documents read back from storage: the encoder writes up to the format's
//! height limit (`HEIGHT_MAX`, 255 levels), and bytes it wrote must read back, so stored bytes
//! are validated with that bound, not with `DEPTH_DEFAULT` (128), the bound for input from
//! outside (JSON, files handed to the CLI). A value 150 levels deep was written with Ok, then
//! refused by every reader, and `Db::check` called the sound file damaged (found by review).
//! Readers handle any height the format allows, so the larger bound costs no safety.

use tessera_value::layout::HEIGHT_MAX;
use tessera_value::{Doc, FormatError, SharedKeys, ValidateOptions};

/// The bound stored documents are validated with.
const STORED: ValidateOptions = ValidateOptions { depth_max: HEIGHT_MAX };

/// [`Doc::from_untrusted`] for bytes read from storage.
pub(crate) fn validate(bytes: &[u8]) -> Result<Doc<'_>, FormatError> {
    Doc::validate(bytes, None, &STORED)
}

/// [`Doc::from_untrusted_with_keys`] for bytes read from storage.
pub(crate) fn validate_with_keys<'a>(bytes: &'a [u8], keys: &'a SharedKeys) -> Result<Doc<'a>, FormatError> {
    Doc::validate(bytes, Some(keys), &STORED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_encoder_writes_at_any_height_validates_as_stored() {
        let depth = usize::from(HEIGHT_MAX) - 1;
        let mut encoder = tessera_value::Encoder::new();
        (0..depth).for_each(|_| encoder.begin_array().unwrap());
        (0..depth).for_each(|_| encoder.end_array().unwrap());
        let bytes = encoder.finish().unwrap();
        assert!(Doc::from_untrusted(&bytes).is_err(), "deeper than input may be");
        assert!(validate(&bytes).is_ok());
    }
}
