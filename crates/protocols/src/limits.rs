//! The key and value limits every design enforces (granary-api's), as
//! the typed errors a transaction fails with.

use std::ops::Bound;

use granary_api::{Error, TxError, MAX_KEY_BYTES, MAX_VALUE_BYTES};

/// [`Error::KeyTooLarge`] past [`MAX_KEY_BYTES`].
#[inline]
pub(crate) fn check_key(key: &[u8]) -> Result<(), TxError> {
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::KeyTooLarge {
            len: key.len(),
            max: MAX_KEY_BYTES,
        }
        .into());
    }
    Ok(())
}

/// [`Error::ValueTooLarge`] past [`MAX_VALUE_BYTES`].
#[inline]
pub(crate) fn check_value(value: &[u8]) -> Result<(), TxError> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(Error::ValueTooLarge {
            len: value.len(),
            max: MAX_VALUE_BYTES,
        }
        .into());
    }
    Ok(())
}

/// [`check_key`] on a scan's bounds.
#[inline]
pub(crate) fn check_bounds(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<(), TxError> {
    for b in [lo, hi] {
        if let Bound::Included(k) | Bound::Excluded(k) = b {
            check_key(k)?;
        }
    }
    Ok(())
}
