//! A LUN's world-wide identifier, as the kernel words it: `naa.<hex>`,
//! `eui.<hex>`, `t10.<text>`, `uuid.<uuid>`, `nvme.<...>`.
//!
//! SCSI: the kernel's `device/wwid` (which it builds from VPD page 0x83),
//! else page 0x83 itself (`device/vpd_pg83`) parsed here with the
//! preference of the kernel's `scsi_vpd_lun_id` among the LUN's
//! designators: SCSI name string, NAA registered extended, NAA
//! registered, EUI-64 of 16, 12 or 8 bytes, NAA IEEE (extended), T10
//! vendor id. NVMe: the namespace's `wwid`, else its `nguid` or `eui` (`eui.`
//! then the bytes in hex, as the kernel writes a `wwid` from them).

use super::read_word;
use std::fmt::Write;
use std::path::Path;

/// A SCSI device's WWID, from its sysfs `device` directory.
pub(super) fn scsi(device: &Path) -> Option<String> {
    read_word(&device.join("wwid")).or_else(|| {
        let page = std::fs::read(device.join("vpd_pg83")).ok()?;
        from_vpd_page_83(&page)
    })
}

/// An NVMe namespace's WWID, from its sysfs block directory.
pub(super) fn nvme(block: &Path) -> Option<String> {
    read_word(&block.join("wwid")).or_else(|| {
        ["nguid", "eui"].iter().find_map(|file| {
            let word = read_word(&block.join(file))?;
            let hex: String = word.chars().filter(char::is_ascii_hexdigit).collect();
            (!hex.is_empty() && hex.chars().any(|digit| digit != '0'))
                .then(|| format!("eui.{}", hex.to_ascii_lowercase()))
        })
    })
}

/// The WWID of a VPD page 0x83 (Device Identification), by the kernel's
/// preference among the designators associated with the LUN; `None` for
/// a malformed page or one without such a designator.
pub(super) fn from_vpd_page_83(page: &[u8]) -> Option<String> {
    if page.len() < 4 || page[1] != 0x83 {
        return None;
    }
    let page_len = usize::from(u16::from_be_bytes([page[2], page[3]]));
    let end = (4 + page_len).min(page.len());
    let mut best: Option<(u8, String)> = None;
    let mut offset = 4;
    while offset + 4 <= end {
        let header = &page[offset..offset + 4];
        let length = usize::from(header[3]);
        let Some(body) = page.get(offset + 4..offset + 4 + length) else {
            break;
        };
        offset += 4 + length;
        let code_set = header[0] & 0x0f;
        let association = (header[1] >> 4) & 0x03;
        let designator_type = header[1] & 0x0f;
        if association != 0 {
            continue; // the target port's or device's, not the LUN's
        }
        let Some((rank, word)) = designator(designator_type, code_set, body) else {
            continue;
        };
        if best.as_ref().is_none_or(|(best_rank, _)| rank < *best_rank) {
            best = Some((rank, word));
        }
    }
    best.map(|(_, word)| word)
}

/// One designator's word and its rank (lower is preferred).
fn designator(designator_type: u8, code_set: u8, body: &[u8]) -> Option<(u8, String)> {
    match designator_type {
        // SCSI name string: UTF-8 text.
        0x8 if code_set == 3 => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim_end_matches('\0').trim();
            (!text.is_empty()).then(|| (0, text.to_string()))
        }
        // NAA: the high nibble of the first byte is its format.
        0x3 if code_set == 1 && !body.is_empty() => {
            let rank = match (body[0] >> 4, body.len()) {
                (6, 16) => 1,
                (5, 8) => 2,
                (2 | 3, 8) => 6,
                _ => return None,
            };
            Some((rank, format!("naa.{}", hex(body))))
        }
        // EUI-64 based.
        0x2 if code_set == 1 => {
            let rank = match body.len() {
                16 => 3,
                12 => 4,
                8 => 5,
                _ => return None,
            };
            Some((rank, format!("eui.{}", hex(body))))
        }
        // T10 vendor id: text.
        0x1 => {
            let text = String::from_utf8_lossy(body);
            let text = text.trim_end_matches('\0').trim();
            (!text.is_empty()).then(|| (7, format!("t10.{text}")))
        }
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A designator: code set, association 0 with `kind`, and the body.
    fn designator(code_set: u8, kind: u8, body: &[u8]) -> Vec<u8> {
        let mut bytes = vec![code_set, kind, 0, body.len() as u8];
        bytes.extend_from_slice(body);
        bytes
    }

    fn page(designators: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = designators.concat();
        let mut page = vec![0, 0x83];
        page.extend_from_slice(&(body.len() as u16).to_be_bytes());
        page.extend(body);
        page
    }

    /// LIO's page: a T10 vendor id and an NAA registered extended
    /// designator for the LUN, a relative port designator (association
    /// 1, not the LUN's): the NAA wins, as the kernel's wwid has it.
    #[test]
    fn naa_is_preferred_over_t10_and_port_designators() {
        let naa = [
            0x60, 0x01, 0x40, 0x5a, 0xbc, 0xde, 0xf0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde,
            0xf0, 0x12,
        ];
        let page = page(&[
            designator(2, 0x01, b"LIO-ORG block0 serial"),
            designator(1, 0x03, &naa),
            designator(1, 0x14, &[0, 0, 0, 1]),
        ]);
        assert_eq!(
            from_vpd_page_83(&page).as_deref(),
            Some("naa.6001405abcdef0123456789abcdef012")
        );
    }

    #[test]
    fn eui_and_t10_when_there_is_no_naa() {
        let page_eui = page(&[
            designator(2, 0x01, b"VENDOR  PRODUCT 1234"),
            designator(1, 0x02, &[1, 2, 3, 4, 5, 6, 7, 8]),
        ]);
        assert_eq!(
            from_vpd_page_83(&page_eui).as_deref(),
            Some("eui.0102030405060708")
        );
        let page_t10 = page(&[designator(2, 0x01, b"VENDOR  PRODUCT 1234")]);
        assert_eq!(
            from_vpd_page_83(&page_t10).as_deref(),
            Some("t10.VENDOR  PRODUCT 1234")
        );
    }

    /// Truncated and foreign pages give nothing rather than garbage.
    #[test]
    fn malformed_pages_give_no_wwid() {
        assert_eq!(from_vpd_page_83(&[]), None);
        assert_eq!(from_vpd_page_83(&[0, 0x80, 0, 0]), None);
        let mut truncated = page(&[designator(1, 0x03, &[0x60; 16])]);
        truncated.truncate(10);
        assert_eq!(from_vpd_page_83(&truncated), None);
        // An NAA of the wrong length for its format is skipped.
        assert_eq!(
            from_vpd_page_83(&page(&[designator(1, 0x03, &[0x60; 8])])),
            None
        );
    }
}
