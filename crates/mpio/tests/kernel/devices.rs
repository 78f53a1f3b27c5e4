//! Kernel devices the tests make and remove: memory-backed null_blk
//! disks (with a second device node, so one disk is two paths), kernel
//! NBD attachments and mounts. Each is a guard that undoes itself when
//! dropped, and every command they run is bounded in time.

use mpio_test_support::{cleanup_within, output_within};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Runs `program args`, which must succeed within `limit`; returns what
/// it printed.
pub fn run(program: &str, args: &[&str], limit: Duration) -> Output {
    let output = output_within(Command::new(program).args(args), limit);
    assert!(
        output.status.success(),
        "{program} {args:?}: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Runs `program args` as a guard's clean-up: within a bound, and never
/// a panic, which would abort a failed test's unwinding
/// ([`cleanup_within`]); whether it ended and succeeded.
pub fn clean_up(program: &str, args: &[&str]) -> bool {
    cleanup_within(Command::new(program).args(args), Duration::from_secs(120))
        .is_some_and(|status| status.success())
}

/// The running kernel's release (`uname -r`).
pub fn kernel_release() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    release.trim().to_string()
}

/// Whether the running kernel is `major.minor` or later.
pub fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = kernel_release();
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|number| number.parse::<u32>().unwrap_or(0));
    let running = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    running >= (major, minor)
}

/// Waits until `condition` holds, at most `limit`.
pub fn wait_until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes `value` to the sysfs or configfs attribute `path`, which must
/// take it.
pub fn write_attribute(path: &Path, value: &str) {
    std::fs::write(path, value)
        .unwrap_or_else(|error| panic!("{} = {value}: {error}", path.display()));
}

/// A sysfs or configfs attribute's text, trimmed, if it can be read.
pub fn read_attribute(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_string())
}

/// Counter `field` of block device `name`'s `/sys/block/NAME/stat`
/// (0: reads completed, 4: writes completed); `name` may be given as
/// `/dev/NAME`.
pub fn block_stat(name: &str, field: usize) -> Option<u64> {
    let name = name.trim_start_matches("/dev/");
    read_attribute(&format!("/sys/block/{name}/stat"))?
        .split_whitespace()
        .nth(field)?
        .parse()
        .ok()
}

/// The threads of process `pid`: each one's name and `/proc` directory.
pub fn threads(pid: u32) -> Vec<(String, PathBuf)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| {
            let task = task.ok()?.path();
            let name = std::fs::read_to_string(task.join("comm")).ok()?;
            Some((name.trim().to_string(), task))
        })
        .collect()
}

/// Loads a kernel module (with parameters); loading one already loaded
/// does nothing.
pub fn modprobe(module_and_parameters: &[&str]) {
    announce_panics();
    run("modprobe", module_and_parameters, Duration::from_secs(60));
}

/// Makes every panic print its message and place on the process's
/// standard error at once, past the test harness's capture (which shows
/// it only when the test ends): a failed test's cleanup can wait on a
/// device no daemon serves, and its cause must not wait with it. Every
/// kernel test loads a module first ([`modprobe`]), which installs it.
fn announce_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let captured = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            let line = format!(
                "KERNEL-TEST PANIC in {}: {info}\n",
                thread.name().unwrap_or("a test thread")
            );
            // Straight to the descriptor: `eprint!` is what the harness
            // captures.
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            captured(info);
        }));
    });
}

/// Loads `module` afresh with `parameters`: unloaded first if an earlier
/// test left it loaded (its parameters would stay, as `modprobe` of a
/// loaded module does nothing). A disk it serves may be held a moment
/// after the test that used it ends (a killed daemon's rings are torn
/// down after it is reaped), so the unload is tried until the module is
/// gone.
pub fn modprobe_fresh(module: &str, parameters: &[&str]) {
    let loaded = Path::new("/sys/module").join(module);
    wait_until(
        &format!("{module} of an earlier test unloads"),
        Duration::from_secs(120),
        || {
            if loaded.exists() {
                // Refused while the module is in use: tried again.
                output_within(
                    Command::new("modprobe").args(["-r", module]),
                    Duration::from_secs(120),
                );
            }
            !loaded.exists()
        },
    );
    let mut arguments = vec![module];
    arguments.extend(parameters);
    modprobe(&arguments);
}

/// A memory-backed null_blk disk made through configfs (the module's
/// parameter-made disks keep no data), removed when dropped.
pub struct NullBlk {
    config: PathBuf,
    /// Its device node.
    pub device: PathBuf,
    /// A second node of the same disk, made by [`NullBlk::second_node`].
    second: Option<PathBuf>,
}

impl NullBlk {
    /// A new disk of `size_mib` MiB that keeps what is written to it.
    pub fn memory_backed(name: &str, size_mib: u64) -> NullBlk {
        NullBlk::memory_backed_with(name, size_mib, &[])
    }

    /// As [`NullBlk::memory_backed`], with configfs `attributes` (say,
    /// `blocksize`) set before it powers on.
    pub fn memory_backed_with(name: &str, size_mib: u64, attributes: &[(&str, &str)]) -> NullBlk {
        // nr_devices=0: no parameter-made disk beside the tests' own.
        modprobe(&["null_blk", "nr_devices=0"]);
        let config = Path::new("/sys/kernel/config/nullb").join(name);
        let _ = std::fs::remove_dir(&config);
        std::fs::create_dir(&config)
            .unwrap_or_else(|error| panic!("{}: {error} (is configfs mounted?)", config.display()));
        let set = |attribute: &str, value: &str| {
            std::fs::write(config.join(attribute), value)
                .unwrap_or_else(|error| panic!("{name}/{attribute} = {value}: {error}"));
        };
        set("size", &size_mib.to_string());
        set("memory_backed", "1");
        for (attribute, value) in attributes {
            set(attribute, value);
        }
        set("power", "1");
        // 6.12 names a configfs-made disk after its directory; older
        // kernels `nullb<index>`.
        let index = std::fs::read_to_string(config.join("index")).expect("nullb index");
        let disk = [name.to_string(), format!("nullb{}", index.trim())]
            .into_iter()
            .find(|disk| Path::new("/sys/block").join(disk).exists())
            .unwrap_or_else(|| panic!("no disk for null_blk {name}"));
        let device = Path::new("/dev").join(disk);
        wait_until("the null_blk node appears", Duration::from_secs(30), || {
            device.exists()
        });
        NullBlk {
            config,
            device,
            second: None,
        }
    }

    /// The disk's size in 512-byte sectors.
    pub fn sectors(&self) -> u64 {
        let name = self.device.file_name().unwrap().to_str().unwrap();
        let size = std::fs::read_to_string(format!("/sys/block/{name}/size")).unwrap();
        size.trim().parse().unwrap()
    }

    /// Two path words to this disk: `file:` its node and a second node
    /// ([`NullBlk::second_node`]).
    pub fn two_paths(&mut self) -> [String; 2] {
        let second = self.second_node();
        [
            format!("file:{}", self.device.display()),
            format!("file:{}", second.display()),
        ]
    }

    /// A second device node for the same disk: two file descriptions,
    /// two paths to one LUN, as two HBAs give a host.
    pub fn second_node(&mut self) -> PathBuf {
        let name = self.device.file_name().unwrap().to_str().unwrap();
        let numbers = std::fs::read_to_string(format!("/sys/block/{name}/dev")).unwrap();
        let (major, minor) = numbers.trim().split_once(':').unwrap();
        let node = PathBuf::from(format!("/dev/{name}-second"));
        let _ = std::fs::remove_file(&node);
        run(
            "mknod",
            &[node.to_str().unwrap(), "b", major, minor],
            Duration::from_secs(10),
        );
        self.second = Some(node.clone());
        node
    }
}

impl Drop for NullBlk {
    fn drop(&mut self) {
        if let Some(node) = &self.second {
            let _ = std::fs::remove_file(node);
        }
        let _ = std::fs::write(self.config.join("power"), "0");
        let _ = std::fs::remove_dir(&self.config);
    }
}

/// An NBD export attached as a kernel block device (`/dev/nbdN`) by
/// `nbd-client`, detached when dropped.
pub struct NbdDevice {
    /// The block device.
    pub device: PathBuf,
}

impl NbdDevice {
    /// Attaches export `name` served on unix socket `socket` to the
    /// first free `/dev/nbdN`.
    pub fn attach(socket: &str, name: &str) -> NbdDevice {
        modprobe(&["nbd"]);
        // A device is in use while its `pid` attribute exists.
        let index = (0..16)
            .find(|index| !Path::new(&format!("/sys/block/nbd{index}/pid")).exists())
            .expect("a free /dev/nbdN");
        let device = PathBuf::from(format!("/dev/nbd{index}"));
        let device_word = device.to_str().unwrap();
        run(
            "nbd-client",
            &["-N", name, "-u", socket, device_word],
            Duration::from_secs(120),
        );
        let size = format!("/sys/block/nbd{index}/size");
        wait_until(
            "the nbd device has its size",
            Duration::from_secs(30),
            || std::fs::read_to_string(&size).is_ok_and(|sectors| sectors.trim() != "0"),
        );
        NbdDevice { device }
    }
}

impl Drop for NbdDevice {
    fn drop(&mut self) {
        clean_up("nbd-client", &["-d", self.device.to_str().unwrap()]);
    }
}

/// A file system mounted on a fresh directory, unmounted when dropped.
pub struct Mount {
    /// Where it is mounted.
    pub dir: PathBuf,
    mounted: bool,
}

impl Mount {
    /// Mounts `device` (file system `kind`) on `dir`.
    pub fn new(device: &Path, kind: &str, dir: PathBuf) -> Mount {
        std::fs::create_dir_all(&dir).unwrap();
        run(
            "mount",
            &["-t", kind, device.to_str().unwrap(), dir.to_str().unwrap()],
            Duration::from_secs(120),
        );
        Mount { dir, mounted: true }
    }

    /// Unmounts it, which must succeed.
    pub fn unmount(mut self) {
        run(
            "umount",
            &[self.dir.to_str().unwrap()],
            Duration::from_secs(300),
        );
        self.mounted = false;
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if self.mounted {
            clean_up("umount", &[self.dir.to_str().unwrap()]);
        }
    }
}
