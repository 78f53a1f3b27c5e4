//! The one error type of the wire format.

/// Bytes that are not a valid NBD message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer bytes than the message needs.
    #[error("{what}: {got} bytes, need {need}")]
    Truncated {
        /// The message or field.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes given.
        got: usize,
    },
    /// A magic number is not the one the protocol puts there.
    #[error("{what}: magic {found:#x}, expected {expected:#x}")]
    BadMagic {
        /// The message.
        what: &'static str,
        /// The magic found.
        found: u64,
        /// The magic expected.
        expected: u64,
    },
    /// A length field exceeds what the message may carry.
    #[error("{what}: length {len} exceeds the limit of {max}")]
    TooLong {
        /// The field.
        what: &'static str,
        /// The length found.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// A field holds a value the protocol does not allow here.
    #[error("{what}: {reason}")]
    Invalid {
        /// The message or field.
        what: &'static str,
        /// Why it is invalid.
        reason: String,
    },
}
