//! The key and value limits every design enforces ([`MAX_KEY_BYTES`],
//! [`MAX_VALUE_BYTES`]), as the typed errors an operation fails with:
//! written once for every design.

use std::ops::Bound;

use crate::{Error, MAX_KEY_BYTES, MAX_VALUE_BYTES};

/// [`Error::KeyTooLarge`] past [`MAX_KEY_BYTES`].
///
/// # Errors
/// A key longer than the limit.
#[inline]
pub fn check_key(key: &[u8]) -> Result<(), Error> {
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::KeyTooLarge {
            len: key.len(),
            max: MAX_KEY_BYTES,
        });
    }
    Ok(())
}

/// [`Error::ValueTooLarge`] past [`MAX_VALUE_BYTES`].
///
/// # Errors
/// A value longer than the limit.
#[inline]
pub fn check_value(value: &[u8]) -> Result<(), Error> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(Error::ValueTooLarge {
            len: value.len(),
            max: MAX_VALUE_BYTES,
        });
    }
    Ok(())
}

/// [`check_key`] on a scan's bounds.
///
/// # Errors
/// A bound's key longer than the limit.
#[inline]
pub fn check_bounds(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<(), Error> {
    for b in [lo, hi] {
        if let Bound::Included(k) | Bound::Excluded(k) = b {
            check_key(k)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_inclusive() {
        assert!(check_key(&vec![0; MAX_KEY_BYTES]).is_ok());
        assert!(matches!(
            check_key(&vec![0; MAX_KEY_BYTES + 1]),
            Err(Error::KeyTooLarge { len, max }) if len == MAX_KEY_BYTES + 1 && max == MAX_KEY_BYTES
        ));
        assert!(check_value(&vec![0; MAX_VALUE_BYTES]).is_ok());
        assert!(check_value(&vec![0; MAX_VALUE_BYTES + 1]).is_err());
        let long = vec![0; MAX_KEY_BYTES + 1];
        assert!(check_bounds(Bound::Unbounded, Bound::Excluded(&long)).is_err());
        assert!(check_bounds(Bound::Included(&[1]), Bound::Unbounded).is_ok());
    }
}
