//! The hand-written ublk ABI (`src/uapi.rs`) against the kernel's own
//! header: a C program built with the system's compiler against
//! `<linux/ublk_cmd.h>` prints each struct's size and each field's
//! offset, and every one must equal Rust's. The header comes with
//! Debian's linux-libc-dev (pulled in by gcc, which builds the -sys
//! crates anyway).

use mpio_ublk::{CtrlCmd, DevInfo, IoCmd, IoDesc, ParamBasic, ParamDiscard, Params};
use std::mem::{offset_of, size_of};
use std::process::Command;

/// (C expression, Rust value) pairs: sizes and offsets.
fn layout() -> Vec<(&'static str, usize)> {
    macro_rules! fields {
        ($rust:ty, $c:literal: $($field:ident),*) => {
            std::iter::once((concat!("sizeof(struct ", $c, ")"), size_of::<$rust>()))
                .chain([$((
                    concat!("offsetof(struct ", $c, ", ", stringify!($field), ")"),
                    offset_of!($rust, $field),
                )),*])
        };
    }
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
        .chain(fields!(Params, "ublk_params": len, types, basic, discard))
        .collect()
}

#[test]
fn every_size_and_offset_matches_the_kernel_header() {
    let header = std::path::Path::new("/usr/include/linux/ublk_cmd.h");
    assert!(
        header.exists(),
        "{} is missing (Debian package linux-libc-dev)",
        header.display()
    );
    let layout = layout();
    let dir = std::env::temp_dir().join(format!("mpio-ublk-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut program = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <linux/ublk_cmd.h>\nint main(void) {\n",
    );
    for (expression, _) in &layout {
        program.push_str(&format!(
            "    printf(\"%zu\\n\", (size_t)({expression}));\n"
        ));
    }
    program.push_str("    return 0;\n}\n");
    std::fs::write(dir.join("layout.c"), program).unwrap();
    let build = Command::new("cc")
        .args(["-o", "layout", "layout.c"])
        .current_dir(&dir)
        .output()
        .expect("a C compiler (cc) runs");
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let output = Command::new(dir.join("layout")).output().unwrap();
    let printed = String::from_utf8(output.stdout).unwrap();
    for ((expression, rust), c) in layout.iter().zip(printed.lines()) {
        assert_eq!(c.parse::<usize>().unwrap(), *rust, "{expression}");
    }
    assert_eq!(printed.lines().count(), layout.len());
    let _ = std::fs::remove_dir_all(&dir);
}
