//! Kernel tests: mpio against a real Linux kernel's block layer.
//!
//! Each test needs root and kernel modules the build machines' kernel
//! lacks (null_blk, nbd, ext4, ...), so each is `#[ignore]`d with that
//! reason: a plain `cargo test` lists them as ignored, never as passed.
//! `scripts/kernel-test.sh` runs them with `--ignored`, natively where
//! the running kernel has the modules, the caller is root and no
//! kernel is asked for, else in a QEMU guest booting Debian's 6.12
//! kernel or the newest Debian kernel (`MPIO_KERNEL`; docs/TESTING.md,
//! `scripts/test.sh` runs both). There
//! `MPIO_BIN` names the `mpio` binary; each test loads the modules it
//! needs, makes its own devices and removes them when it ends.

#[path = "../common/mod.rs"]
mod common;
#[path = "../daemon/mod.rs"]
mod daemon;

mod devices;
mod failover;
mod fio;
mod names;
mod nbd_ext4;
mod null_blk_paths;
mod nvme;
mod nvme_ana;
mod nvme_stall;
mod restart_path_down;
mod scsi;
mod scsi_paths;
mod soak;
mod ublk;
mod ublk_hang;
mod ublk_latency;
mod ublk_limits;
mod ublk_remove;
mod ublk_resize;
mod ublk_restart;
mod ublk_transports;
