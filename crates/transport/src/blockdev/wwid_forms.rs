//! The two ways a SCSI LUN's WWID is written, and which of them name the
//! same LUN.
//!
//! The kernel's sysfs `device/wwid` (what the `wwid` module reads, what
//! `mpio discover` lists) writes the LUN's preferred VPD page 0x83
//! designator as `naa.<hex>`, `eui.<hex>` or `t10.<text>`; a SCSI name
//! string designator as itself (`iqn.…`, or `naa.`/`eui.` then hex).
//! udev's `ID_SERIAL` (`scsi_id --page 0x83`) and multipath-tools' own
//! VPD parser — the WWIDs of every `multipath.conf`, `wwids` and
//! `bindings` file — write the designator type as a digit in front:
//!
//! | kernel               | udev / multipath-tools                 |
//! |----------------------|----------------------------------------|
//! | `naa.600a0980…`      | `3600a0980…` (NAA, type 3)             |
//! | `eui.0102…`          | `20102…` (EUI-64, type 2)              |
//! | `t10.VENDOR  PROD 1` | `1VENDOR_PROD_1` (T10 vendor id, type 1: each run of spaces one `_`) |
//! | `iqn.…`              | `8iqn.…` (SCSI name string, type 8)    |
//!
//! NVMe namespaces have one form only: udev's `ID_WWN`, which
//! multipath-tools uses for them, is the kernel's `wwid` (`eui.…`,
//! `nvme.…`, `uuid.…`). Hex digits are compared without case.
//!
//! [`WwidForms::of`] takes either form and gives both; two WWIDs name the
//! same LUN when their kernel forms are equal ([`same_lun`]). Anything
//! that is neither form is kept as written and matches only itself.

use serde::Serialize;

/// A WWID in the kernel's form and, for SCSI designators, udev's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WwidForms {
    /// As sysfs writes it (`naa.600a0980…`); a T10 vendor id given in
    /// udev's form keeps its `_` for the spaces it cannot give back.
    pub kernel: String,
    /// As udev's `scsi_id` and multipath-tools write it (`3600a0980…`);
    /// `None` where there is no second form (NVMe's `nvme.`, `uuid.`).
    pub udev: Option<String>,
}

impl WwidForms {
    /// Both forms of `wwid`, written in either.
    pub fn of(wwid: &str) -> WwidForms {
        let key = kernel_form(wwid);
        let udev = udev_form(&key);
        // The kernel's T10 text keeps its spaces; udev's has none to give back.
        let kernel = if wwid.trim().starts_with("t10.") {
            wwid.trim().to_string()
        } else {
            key
        };
        WwidForms { kernel, udev }
    }

    /// Whether `regex`-like `test` holds for either form: a blacklist
    /// pattern written for one form applies to the other.
    pub fn any(&self, mut test: impl FnMut(&str) -> bool) -> bool {
        test(&self.kernel) || self.udev.as_deref().is_some_and(test)
    }
}

/// Whether WWIDs `a` and `b`, each in either form, name the same LUN.
pub fn same_lun(a: &str, b: &str) -> bool {
    a == b || kernel_form(a) == kernel_form(b)
}

/// Whether `text` is hex digits only, and not empty.
fn is_hex(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_hexdigit())
}

/// The kernel's form of `wwid` (written in either form), a T10 vendor
/// id's spaces as udev's `_`: equal for the same LUN.
fn kernel_form(wwid: &str) -> String {
    let wwid = wwid.trim();
    let hex_after = |prefix: &str| {
        wwid.get(..prefix.len())
            .filter(|head| head.eq_ignore_ascii_case(prefix))
            .and_then(|_| wwid.get(prefix.len()..))
            .filter(|rest| is_hex(rest))
            .map(str::to_ascii_lowercase)
    };
    if let Some(hex) = hex_after("naa.").or_else(|| hex_after("3")) {
        return format!("naa.{hex}");
    }
    if let Some(hex) = hex_after("eui.").or_else(|| hex_after("2")) {
        return format!("eui.{hex}");
    }
    if let Some(text) = wwid.strip_prefix("t10.") {
        return format!("t10.{}", t10_text(text));
    }
    if let Some(text) = wwid.strip_prefix('1').filter(|text| !text.is_empty()) {
        return format!("t10.{}", t10_text(text));
    }
    if let Some(name) = wwid.strip_prefix('8').filter(|name| name.contains('.')) {
        return kernel_form(name);
    }
    wwid.to_string()
}

/// A T10 vendor id as multipath-tools words it: each run of spaces one
/// `_`, none at the end.
fn t10_text(text: &str) -> String {
    let words: Vec<&str> = text
        .split([' ', '_'])
        .filter(|word| !word.is_empty())
        .collect();
    words.join("_")
}

/// udev's form of a WWID in the kernel's form, if SCSI has one.
fn udev_form(kernel: &str) -> Option<String> {
    if let Some(hex) = kernel.strip_prefix("naa.") {
        return Some(format!("3{hex}"));
    }
    if let Some(hex) = kernel.strip_prefix("eui.") {
        return Some(format!("2{hex}"));
    }
    if let Some(text) = kernel.strip_prefix("t10.") {
        return Some(format!("1{text}"));
    }
    kernel.strip_prefix("iqn.").map(|_| format!("8{kernel}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naa_eui_t10_and_name_strings_have_both_forms() {
        let cases = [
            (
                "naa.600a098038303053",
                "naa.600a098038303053",
                Some("3600a098038303053"),
            ),
            (
                "3600A098038303053",
                "naa.600a098038303053",
                Some("3600a098038303053"),
            ),
            (
                "eui.0102030405060708",
                "eui.0102030405060708",
                Some("20102030405060708"),
            ),
            (
                "20102030405060708",
                "eui.0102030405060708",
                Some("20102030405060708"),
            ),
            (
                "t10.VENDOR  PRODUCT 1234",
                "t10.VENDOR  PRODUCT 1234",
                Some("1VENDOR_PRODUCT_1234"),
            ),
            (
                "1VENDOR_PRODUCT_1234",
                "t10.VENDOR_PRODUCT_1234",
                Some("1VENDOR_PRODUCT_1234"),
            ),
            (
                "8iqn.2003-01.org.x:lun0",
                "iqn.2003-01.org.x:lun0",
                Some("8iqn.2003-01.org.x:lun0"),
            ),
            (
                "8naa.600a098038303053",
                "naa.600a098038303053",
                Some("3600a098038303053"),
            ),
            ("uuid.0f1e2d3c", "uuid.0f1e2d3c", None),
            ("nvme.8086-4c", "nvme.8086-4c", None),
        ];
        for (written, kernel, udev) in cases {
            let forms = WwidForms::of(written);
            assert_eq!(forms.kernel, kernel, "{written}");
            assert_eq!(forms.udev.as_deref(), udev, "{written}");
        }
    }

    #[test]
    fn both_forms_name_the_same_lun_and_others_do_not() {
        assert!(same_lun("3600a098038303053", "naa.600a098038303053"));
        assert!(same_lun("naa.600A098038303053", "3600a098038303053"));
        assert!(same_lun("t10.LIO-ORG block0", "1LIO-ORG_block0"));
        assert!(same_lun("20102030405060708", "eui.0102030405060708"));
        assert!(!same_lun("3600a098038303053", "naa.600a098038303054"));
        assert!(!same_lun("3600a098038303053", "eui.600a098038303053"));
        assert!(!same_lun("uuid.1", "uuid.2"));
        // Not hex after the digit: kept as written.
        assert!(!same_lun("3xyz", "naa.xyz"));
    }

    #[test]
    fn a_test_holds_for_either_form() {
        let forms = WwidForms::of("naa.600a0980");
        assert!(forms.any(|wwid| wwid.starts_with("3600a")));
        assert!(forms.any(|wwid| wwid.starts_with("naa.")));
        assert!(!forms.any(|wwid| wwid.starts_with("2")));
    }
}
