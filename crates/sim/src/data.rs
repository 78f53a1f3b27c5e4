//! What the simulated storage holds: one disk of 512-byte blocks, and the
//! pattern each write leaves in a block, so that every block read back
//! names the write that produced it.
//!
//! A write is identified by a *value*: a write id (from 1) for a write, 0
//! for write-zeroes and for the disk's initial content. Block `b` written
//! with value `v > 0` holds `v` (8 bytes, little-endian), then `b` (8
//! bytes), then 496 bytes of `v ^ b` truncated to a byte. Block content
//! that matches no value (a torn or misplaced block) decodes to `None`.

/// Bytes per simulated block: one sector, the smallest unit mpio addresses.
pub(crate) const BLOCK_BYTES: usize = 512;

/// Fills `block` (one block's bytes) with the content of value `value` at
/// block index `block_index`.
pub(crate) fn fill(block: &mut [u8], value: u64, block_index: u64) {
    debug_assert_eq!(block.len(), BLOCK_BYTES);
    if value == 0 {
        block.fill(0);
        return;
    }
    block[..8].copy_from_slice(&value.to_le_bytes());
    block[8..16].copy_from_slice(&block_index.to_le_bytes());
    block[16..].fill(filler(value, block_index));
}

/// The value whose content `block` holds at `block_index`, or `None` if
/// it holds something no write wrote there.
pub(crate) fn decode(block: &[u8], block_index: u64) -> Option<u64> {
    let value = u64::from_le_bytes(block[..8].try_into().ok()?);
    let intact = if value == 0 {
        block.iter().all(|&byte| byte == 0)
    } else {
        block[8..16] == block_index.to_le_bytes()
            && block[16..]
                .iter()
                .all(|&byte| byte == filler(value, block_index))
    };
    intact.then_some(value)
}

fn filler(value: u64, block_index: u64) -> u8 {
    (value ^ block_index) as u8
}

/// The simulated disk behind every path: plain bytes. The transport checks
/// ranges before it calls in.
#[derive(Debug)]
pub(crate) struct Disk {
    bytes: Vec<u8>,
}

impl Disk {
    /// A zero-filled disk of `block_count` blocks.
    pub(crate) fn new(block_count: u64) -> Self {
        Disk {
            bytes: vec![0; block_count as usize * BLOCK_BYTES],
        }
    }

    /// Copies `buf.len()` bytes at `offset` into `buf`.
    pub(crate) fn read(&self, offset: u64, buf: &mut [u8]) {
        let start = offset as usize;
        buf.copy_from_slice(&self.bytes[start..start + buf.len()]);
    }

    /// Writes `data` at `offset`.
    pub(crate) fn write(&mut self, offset: u64, data: &[u8]) {
        let start = offset as usize;
        self.bytes[start..start + data.len()].copy_from_slice(data);
    }

    /// Writes `len` zero bytes at `offset`.
    pub(crate) fn zero(&mut self, offset: u64, len: usize) {
        let start = offset as usize;
        self.bytes[start..start + len].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_decodes_back_and_damage_is_seen() {
        let mut block = [0u8; BLOCK_BYTES];
        assert_eq!(decode(&block, 3), Some(0));
        fill(&mut block, 41, 3);
        assert_eq!(decode(&block, 3), Some(41));
        assert_eq!(decode(&block, 4), None, "a block read from elsewhere");
        block[300] ^= 1;
        assert_eq!(decode(&block, 3), None, "a torn block");
        fill(&mut block, 0, 3);
        assert_eq!(block, [0u8; BLOCK_BYTES]);
    }
}
