//! The hand-written ABI (`uapi.rs`) against the kernel's own header: a C
//! program built with the system's compiler against
//! `<linux/ublk_cmd.h>` prints every struct's size and field's offset
//! and the value of every constant mpio uses, and each must equal Rust's.
//!
//! The header is `$MPIO_UBLK_HEADER` (`scripts/test.sh` points it at the
//! newest kernel's, from trixie-backports' linux-libc-dev), else
//! `/usr/include/linux/ublk_cmd.h` (Debian's linux-libc-dev). A constant
//! that header lacks fails the test when `MPIO_UBLK_HEADER` is set; with
//! the system's header (older than the kernels mpio can use) it is
//! listed as not checked.

use crate::uapi::*;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A struct's size and its fields' offsets as (C expression, Rust
/// value) pairs.
macro_rules! fields {
    ($rust:ty, $c:literal: $($field:ident),*) => {
        std::iter::once((concat!("sizeof(struct ", $c, ")"), size_of::<$rust>() as i64))
            .chain([$((
                concat!("offsetof(struct ", $c, ", ", stringify!($field), ")"),
                offset_of!($rust, $field) as i64,
            )),*])
    };
}

/// (C expression, Rust value) pairs: sizes and offsets.
fn layout() -> Vec<(&'static str, i64)> {
    fields!(CtrlCmd, "ublksrv_ctrl_cmd": dev_id, queue_id, len, addr, data)
        .chain(fields!(DevInfo, "ublksrv_ctrl_dev_info":
            nr_hw_queues, queue_depth, state, max_io_buf_bytes, dev_id, ublksrv_pid, flags,
            ublksrv_flags))
        .chain(fields!(IoDesc, "ublksrv_io_desc": op_flags, nr_sectors, start_sector, addr))
        .chain(fields!(IoCmd, "ublksrv_io_cmd": q_id, tag, result, addr))
        .chain(fields!(ParamBasic, "ublk_param_basic":
            attrs, logical_bs_shift, physical_bs_shift, io_opt_shift, io_min_shift, max_sectors,
            chunk_sectors, dev_sectors, virt_boundary_mask))
        .chain(fields!(ParamDiscard, "ublk_param_discard":
            discard_alignment, discard_granularity, max_discard_sectors,
            max_write_zeroes_sectors, max_discard_segments))
        // mpio's `Params` is the header's first members (newer kernels
        // add more after them): each length says where its last ends.
        .chain(fields!(Params, "ublk_params": len, types, basic, discard).skip(1))
        .chain([(
            "offsetof(struct ublk_params, discard) + sizeof(struct ublk_param_discard)",
            i64::from(PARAMS_LEN),
        )])
        .collect()
}

/// (C expression, Rust value) pairs of what only a header with
/// `UBLK_PARAM_TYPE_DMA_ALIGN` (6.15+) has, `ublk_params`' members up to
/// `dma`: checked where it is there.
fn dma_layout() -> Vec<(&'static str, i64)> {
    fields!(ParamDevt, "ublk_param_devt":
        char_major, char_minor, disk_major, disk_minor)
    .chain(fields!(ParamZoned, "ublk_param_zoned":
        max_open_zones, max_active_zones, max_zone_append_sectors, reserved))
    .chain(fields!(ParamDmaAlign, "ublk_param_dma_align": alignment, pad))
    .chain([
        (
            "offsetof(struct ublk_params, devt)",
            offset_of!(Params, devt) as i64,
        ),
        (
            "offsetof(struct ublk_params, zoned)",
            offset_of!(Params, zoned) as i64,
        ),
        (
            "offsetof(struct ublk_params, dma)",
            offset_of!(Params, dma) as i64,
        ),
        (
            "offsetof(struct ublk_params, dma) + sizeof(struct ublk_param_dma_align)",
            i64::from(PARAMS_LEN_DMA),
        ),
    ])
    .collect()
}

/// (macro, Rust value) pairs: every constant `uapi.rs` defines.
fn constants() -> Vec<(&'static str, i64)> {
    let command = |nr| i64::from(ctrl_op(nr));
    let io_command = |nr| i64::from(io_op(nr));
    vec![
        (
            "UBLK_U_CMD_GET_QUEUE_AFFINITY",
            command(CMD_GET_QUEUE_AFFINITY),
        ),
        ("UBLK_U_CMD_GET_DEV_INFO", command(CMD_GET_DEV_INFO)),
        ("UBLK_U_CMD_ADD_DEV", command(CMD_ADD_DEV)),
        ("UBLK_U_CMD_DEL_DEV", command(CMD_DEL_DEV)),
        ("UBLK_U_CMD_START_DEV", command(CMD_START_DEV)),
        ("UBLK_U_CMD_STOP_DEV", command(CMD_STOP_DEV)),
        ("UBLK_U_CMD_SET_PARAMS", command(CMD_SET_PARAMS)),
        ("UBLK_U_CMD_GET_PARAMS", command(CMD_GET_PARAMS)),
        (
            "UBLK_U_CMD_START_USER_RECOVERY",
            command(CMD_START_USER_RECOVERY),
        ),
        (
            "UBLK_U_CMD_END_USER_RECOVERY",
            command(CMD_END_USER_RECOVERY),
        ),
        ("UBLK_U_CMD_GET_FEATURES", command(CMD_GET_FEATURES)),
        ("UBLK_U_CMD_UPDATE_SIZE", command(CMD_UPDATE_SIZE)),
        ("UBLK_U_CMD_TRY_STOP_DEV", command(CMD_TRY_STOP_DEV)),
        ("UBLK_U_IO_FETCH_REQ", io_command(IO_FETCH_REQ)),
        (
            "UBLK_U_IO_COMMIT_AND_FETCH_REQ",
            io_command(IO_COMMIT_AND_FETCH_REQ),
        ),
        ("UBLK_U_IO_NEED_GET_DATA", io_command(IO_NEED_GET_DATA)),
        ("UBLK_S_DEV_DEAD", i64::from(S_DEV_DEAD)),
        ("UBLK_S_DEV_LIVE", i64::from(S_DEV_LIVE)),
        ("UBLK_S_DEV_QUIESCED", i64::from(S_DEV_QUIESCED)),
        ("UBLK_IO_RES_OK", i64::from(IO_RES_OK)),
        ("UBLK_IO_RES_NEED_GET_DATA", i64::from(IO_RES_NEED_GET_DATA)),
        ("UBLK_IO_RES_ABORT", i64::from(IO_RES_ABORT)),
        ("UBLKSRV_CMD_BUF_OFFSET", CMD_BUF_OFFSET),
        ("UBLK_MAX_QUEUE_DEPTH", MAX_QUEUE_DEPTH as i64),
        ("UBLK_F_SUPPORT_ZERO_COPY", F_SUPPORT_ZERO_COPY as i64),
        ("UBLK_F_NEED_GET_DATA", F_NEED_GET_DATA as i64),
        ("UBLK_F_AUTO_BUF_REG", F_AUTO_BUF_REG as i64),
        ("UBLK_F_USER_RECOVERY", F_USER_RECOVERY as i64),
        (
            "UBLK_F_USER_RECOVERY_REISSUE",
            F_USER_RECOVERY_REISSUE as i64,
        ),
        ("UBLK_F_CMD_IOCTL_ENCODE", F_CMD_IOCTL_ENCODE as i64),
        ("UBLK_F_UPDATE_SIZE", F_UPDATE_SIZE as i64),
        ("UBLK_F_SAFE_STOP_DEV", F_SAFE_STOP_DEV as i64),
        ("UBLK_IO_OP_READ", i64::from(IO_OP_READ)),
        ("UBLK_IO_OP_WRITE", i64::from(IO_OP_WRITE)),
        ("UBLK_IO_OP_FLUSH", i64::from(IO_OP_FLUSH)),
        ("UBLK_IO_OP_DISCARD", i64::from(IO_OP_DISCARD)),
        ("UBLK_IO_OP_WRITE_ZEROES", i64::from(IO_OP_WRITE_ZEROES)),
        ("UBLK_IO_F_FUA", i64::from(IO_F_FUA)),
        ("UBLK_ATTR_READ_ONLY", i64::from(ATTR_READ_ONLY)),
        ("UBLK_ATTR_VOLATILE_CACHE", i64::from(ATTR_VOLATILE_CACHE)),
        ("UBLK_ATTR_FUA", i64::from(ATTR_FUA)),
        ("UBLK_PARAM_TYPE_BASIC", i64::from(PARAM_TYPE_BASIC)),
        ("UBLK_PARAM_TYPE_DISCARD", i64::from(PARAM_TYPE_DISCARD)),
        ("UBLK_PARAM_TYPE_DMA_ALIGN", i64::from(PARAM_TYPE_DMA_ALIGN)),
    ]
}

/// The header to check against, and whether it was asked for by name.
fn header() -> (PathBuf, bool) {
    match std::env::var_os("MPIO_UBLK_HEADER") {
        Some(path) => (PathBuf::from(path), true),
        None => (PathBuf::from("/usr/include/linux/ublk_cmd.h"), false),
    }
}

/// Builds and runs a C program printing, for each expression, its value
/// (`#ifdef`-guarded for macros) or `absent`.
fn evaluate(
    header: &Path,
    layout: &[(&str, i64)],
    dma_layout: &[(&str, i64)],
    constants: &[(&str, i64)],
) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("mpio-ublk-header-{}", std::process::id()));
    let include = dir.join("include/linux");
    std::fs::create_dir_all(&include).unwrap();
    // Only this header is taken from where it was named; the rest of
    // <linux/*> stays the system's.
    std::fs::copy(header, include.join("ublk_cmd.h")).unwrap();
    let mut program = String::from(
        "#include <errno.h>\n#include <stddef.h>\n#include <stdio.h>\n#include <linux/ioctl.h>\n#include <linux/ublk_cmd.h>\nint main(void) {\n",
    );
    for (expression, _) in layout {
        program.push_str(&format!(
            "    printf(\"%lld\\n\", (long long)({expression}));\n"
        ));
    }
    for (expression, _) in dma_layout {
        program.push_str(&format!(
            "#ifdef UBLK_PARAM_TYPE_DMA_ALIGN\n    printf(\"%lld\\n\", (long long)({expression}));\n\
             #else\n    printf(\"absent\\n\");\n#endif\n"
        ));
    }
    for (name, _) in constants {
        program.push_str(&format!(
            "#ifdef {name}\n    printf(\"%lld\\n\", (long long)({name}));\n#else\n    \
             printf(\"absent\\n\");\n#endif\n"
        ));
    }
    program.push_str("    return 0;\n}\n");
    std::fs::write(dir.join("check.c"), program).unwrap();
    let build = Command::new("cc")
        .args(["-I", "include", "-o", "check", "check.c"])
        .current_dir(&dir)
        .output()
        .expect("a C compiler (cc) runs");
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let output = Command::new(dir.join("check")).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn every_size_offset_and_constant_matches_the_kernel_header() {
    let (header, named) = header();
    assert!(
        header.exists(),
        "{} is missing (Debian package linux-libc-dev)",
        header.display()
    );
    let (layout, dma_layout, constants) = (layout(), dma_layout(), constants());
    let printed = evaluate(&header, &layout, &dma_layout, &constants);
    assert_eq!(
        printed.len(),
        layout.len() + dma_layout.len() + constants.len()
    );
    for ((expression, rust), c) in layout.iter().zip(&printed) {
        assert_eq!(c.parse::<i64>().unwrap(), *rust, "{expression}");
    }
    let mut absent = Vec::new();
    let guarded = dma_layout.iter().chain(&constants);
    for ((name, rust), c) in guarded.zip(&printed[layout.len()..]) {
        match c.parse::<i64>() {
            Ok(value) => assert_eq!(value, *rust, "{name} in {}", header.display()),
            Err(_) => absent.push(*name),
        }
    }
    assert!(
        absent.is_empty() || !named,
        "{} lacks {absent:?}",
        header.display()
    );
    if !absent.is_empty() {
        println!(
            "not checked, {} being older: {absent:?} (set MPIO_UBLK_HEADER to a newer \
             ublk_cmd.h, as scripts/test.sh does)",
            header.display()
        );
    }
}
