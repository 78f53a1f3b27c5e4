//! Big-endian field readers over a byte slice whose length was checked.

use crate::WireError;

/// Checks that `bytes` holds exactly `exact` bytes for `what`.
pub(crate) fn exact(what: &'static str, bytes: &[u8], exact: usize) -> Result<(), WireError> {
    if bytes.len() != exact {
        return Err(WireError::Invalid {
            what,
            reason: format!("{} bytes, must be exactly {exact}", bytes.len()),
        });
    }
    Ok(())
}

/// A cursor reading big-endian fields; every read checks the length.
pub(crate) struct Reader<'a> {
    what: &'static str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(what: &'static str, bytes: &'a [u8]) -> Self {
        Reader { what, bytes, at: 0 }
    }

    pub(crate) fn take(&mut self, len: usize) -> Result<&'a [u8], WireError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|end| *end <= self.bytes.len());
        let Some(end) = end else {
            return Err(WireError::Truncated {
                what: self.what,
                need: self.at.saturating_add(len),
                got: self.bytes.len(),
            });
        };
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    pub(crate) fn u16(&mut self) -> Result<u16, WireError> {
        let mut field = [0; 2];
        field.copy_from_slice(self.take(2)?);
        Ok(u16::from_be_bytes(field))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, WireError> {
        let mut field = [0; 4];
        field.copy_from_slice(self.take(4)?);
        Ok(u32::from_be_bytes(field))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, WireError> {
        let mut field = [0; 8];
        field.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(field))
    }

    /// The bytes not read yet.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let rest = &self.bytes[self.at..];
        self.at = self.bytes.len();
        rest
    }

    /// Fails unless every byte was read.
    pub(crate) fn finish(&self) -> Result<(), WireError> {
        if self.at != self.bytes.len() {
            return Err(WireError::Invalid {
                what: self.what,
                reason: format!("{} trailing bytes", self.bytes.len() - self.at),
            });
        }
        Ok(())
    }
}

/// Checks a 64-bit magic.
pub(crate) fn magic(what: &'static str, found: u64, expected: u64) -> Result<(), WireError> {
    if found != expected {
        return Err(WireError::BadMagic {
            what,
            found,
            expected,
        });
    }
    Ok(())
}
