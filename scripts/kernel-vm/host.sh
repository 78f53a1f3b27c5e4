# Host side of the kernel test VM, sourced by scripts/kernel-test.sh and
# scripts/kernel-bench.sh (docs/TESTING.md).
#
# It prepares, once and cached, everything a guest needs: a Debian
# kernel and its modules, a private QEMU (installing Debian's
# qemu-system-x86 would replace the newer qemu-utils the NBD tests use),
# and a base initramfs of busybox, the user-space tools the tests call
# and the kernel modules they load. Then `kvm_boot` packs a payload on
# top of the base image, boots it under KVM or TCG, streams the console
# and returns the payload's exit status.
#
# The kernel (MPIO_KERNEL):
#   6.12    Debian's 6.12 from the host's own apt sources (bookworm-security,
#           linux-image-6.12-amd64, or MPIO_KERNEL_PKG): the default
#   newest  the newest Debian kernel: trixie-backports' linux-image-amd64,
#           fetched through an apt source list and state of the harness's
#           own under the cache (the host's apt configuration is never
#           touched: adding trixie to it would upgrade a bookworm host)
# Each kernel's extracted tree and base images are named by its version,
# so the two never share a cache entry.
#
# Settings (environment):
#   MPIO_KERNEL      6.12 | newest       [6.12]
#   MPIO_KVM_CACHE   cache directory     [${XDG_CACHE_HOME:-$HOME/.cache}/mpio/kernel-vm]
#   MPIO_KERNEL_PKG  MPIO_KERNEL=6.12's package, from the host's sources [linux-image-6.12-amd64]
#   MPIO_KVM_ACCEL   auto | kvm | tcg    [auto]
#   MPIO_KVM_CPUS    guest vCPUs         [2]
#   MPIO_KVM_MEM     guest memory        [4G]
#   MPIO_KVM_SHELL   1: a shell on the console instead of powering off

KVM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KVM_CACHE=${MPIO_KVM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpio/kernel-vm}
KVM_KERNEL=${MPIO_KERNEL:-6.12}
KVM_CPUS=${MPIO_KVM_CPUS:-2}
KVM_MEM=${MPIO_KVM_MEM:-4G}
# The apt options of the harness's own configuration for
# MPIO_KERNEL=newest (kvm_newest_apt sets them); the 6.12 kernel and
# QEMU come through the host's sources, with none.
KVM_APT=()

# The newest kernel's archive, and the key it is signed with: bookworm's
# debian-archive-keyring carries trixie's keys.
KVM_NEWEST_SOURCE="http://deb.debian.org/debian trixie-backports main"
KVM_NEWEST_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

# The kernel modules the tests and the benchmark load, with their
# dependencies. A module the kernel does not build is left out of the
# image and listed in the guest's /etc/kvm/modules-missing.
KVM_MODULES="ublk_drv null_blk nbd configfs
    nvme-core nvme-fabrics nvme-loop nvme-tcp nvmet nvmet-tcp
    target_core_mod target_core_iblock tcm_loop sd_mod scsi_debug scsi_dh_alua
    dm-mod dm-multipath dm-round-robin dm-queue-length dm-service-time
    dm-historical-service-time dm-io-affinity
    ext4 crc32c_generic"

# The user-space tools the guest runs, copied with their libraries
# (busybox provides the rest: sh, mount, modprobe, mknod, ...). A caller
# may add to the list before kvm_prepare (kernel-bench.sh's PROFILE=1
# adds perf); the list is part of the image's cache key, so such an
# image is built beside the usual one and never replaces it.
KVM_TOOLS="fio dmsetup nvme mke2fs e2fsck blkdiscard nbd-client nbdkit"
# nbdkit's plugins the tests use as NBD paths.
KVM_NBDKIT_PLUGINS="memory file"

kvm_log() { printf '[kernel-vm] %s\n' "$*" >&2; }

# Debian packages for the tools above (linux-perf: perf, for
# kernel-bench.sh's PROFILE=1), busybox-static, and what builds the
# image. Only missing ones are installed.
kvm_install_host_packages() {
    local wanted=(busybox-static fio dmsetup nvme-cli e2fsprogs util-linux nbd-client nbdkit
                  linux-perf cpio kmod xz-utils zstd binutils) missing=() package
    for package in "${wanted[@]}"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    kvm_apt_install "${missing[@]}"
}

kvm_apt_install() {
    (($#)) || return 0
    kvm_log "installing $*"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

# kvm_download PACKAGE[=VERSION] [APT-OPTION...]: the package's .deb in
# the cache, downloaded once (with apt's options, if any); prints its
# path.
kvm_download() {
    local package=$1 deb
    shift
    mkdir -p "$KVM_CACHE/debs"
    deb=$(ls -1 "$KVM_CACHE/debs/${package%%=*}_"*.deb 2>/dev/null | tail -1)
    if [ -z "$deb" ]; then
        kvm_log "downloading $package"
        # apt-get download writes as the _apt user where it can; the
        # cache is root's, so it downloads unsandboxed and says so.
        (cd "$KVM_CACHE/debs" && apt-get "$@" download -q "$package" 2>&1 | grep -v unsandboxed >&2) || true
        deb=$(ls -1 "$KVM_CACHE/debs/${package%%=*}_"*.deb 2>/dev/null | tail -1)
    fi
    [ -n "$deb" ] || { kvm_log "could not download $package"; return 1; }
    echo "$deb"
}

# kvm_newest_ublk_header: the newest kernel's <linux/ublk_cmd.h>, from
# trixie-backports' linux-libc-dev (cached like the kernels); prints its
# path. The ublk crate's ABI test checks every constant mpio uses against
# it: the host's own header (bookworm's, 6.1) lacks most of them.
kvm_newest_ublk_header() {
    local deb root
    kvm_newest_apt || return 1
    deb=$(kvm_download linux-libc-dev "${KVM_APT[@]}") || return 1
    root=$(kvm_extract "$deb")
    [ -s "$root/usr/include/linux/ublk_cmd.h" ] ||
        { kvm_log "no linux/ublk_cmd.h in $deb"; return 1; }
    echo "$root/usr/include/linux/ublk_cmd.h"
}

# kvm_depends PACKAGE PATTERN [APT-OPTION...]: the packages PACKAGE
# depends on whose names match the extended regular expression PATTERN,
# one a line.
kvm_depends() {
    local package=$1 pattern=$2
    shift 2
    apt-cache "$@" depends "$package" 2>/dev/null |
        awk -v pattern="$pattern" '$1 == "Depends:" && $2 ~ pattern {print $2}'
}

# kvm_extract DEB...: the packages' files in one directory under the
# cache, named after the first, extracted once; prints the directory.
kvm_extract() {
    local dir deb
    dir=$KVM_CACHE/root/$(basename "$1" .deb)
    if [ ! -e "$dir/.extracted" ]; then
        rm -rf "$dir" && mkdir -p "$dir"
        for deb in "$@"; do
            dpkg -x "$deb" "$dir"
        done
        touch "$dir/.extracted"
    fi
    echo "$dir"
}

# kvm_newest_apt: sets KVM_APT to apt options for a configuration of the
# harness's own under the cache that sees only trixie-backports (its
# source list, package lists, apt cache and an empty dpkg status: the
# host's apt sources, lists and installed packages play no part). The
# lists are refreshed when a day old; a failed refresh keeps old ones.
# apt checks the archive's signature against KVM_NEWEST_KEYRING. The
# cache is root's, so apt fetches as root, not as its _apt user (which
# it would warn about).
kvm_newest_apt() {
    local dir=$KVM_CACHE/apt/trixie-backports
    [ -s "$KVM_NEWEST_KEYRING" ] ||
        { kvm_log "no $KVM_NEWEST_KEYRING to check trixie-backports with (debian-archive-keyring)"; return 1; }
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    echo "deb [signed-by=$KVM_NEWEST_KEYRING] $KVM_NEWEST_SOURCE" > "$dir/sources.list"
    touch "$dir/status"
    KVM_APT=(-o "Dir::Etc::sourcelist=$dir/sources.list" -o Dir::Etc::sourceparts=/dev/null
        -o "Dir::State::Lists=$dir/lists" -o "Dir::State::status=$dir/status"
        -o "Dir::Cache=$dir/cache" -o Acquire::Languages=none -o APT::Sandbox::User=root)
    [ -n "$(find "$dir" -maxdepth 1 -name updated -mmin -1440)" ] && return 0
    kvm_log "updating the package lists of $KVM_NEWEST_SOURCE (the harness's own, in $dir)"
    if apt-get "${KVM_APT[@]}" update -qq >&2; then
        touch "$dir/updated"
    elif [ -e "$dir/updated" ]; then
        kvm_log "could not update them; the lists of $(date -r "$dir/updated" +%F) stay"
    else
        kvm_log "could not fetch the package lists of $KVM_NEWEST_SOURCE" \
            "(a NO_PUBKEY error: $KVM_NEWEST_KEYRING lacks trixie's keys, which" \
            "debian-archive-keyring 2023.3+deb12u1 and later carry)"
        return 1
    fi
}

# Sets KVM_KROOT (the extracted kernel), KVM_KVER, KVM_VMLINUZ and
# KVM_KERNEL_LABEL (which kernel, for the logs) for MPIO_KERNEL. The
# meta package (linux-image-6.12-amd64, linux-image-amd64) is followed
# to the concrete linux-image-<version> package. From 7.x Debian splits
# that into a small meta package depending on linux-binary-<version>
# (vmlinuz), linux-modules-<version> and linux-base-<version>: those are
# extracted into the same tree, which is then merged-/usr
# (usr/lib/modules/<version>/vmlinuz, no /boot).
kvm_fetch_kernel() {
    local package apt=() image part deb debs=() modules
    case $KVM_KERNEL in
        6.12) package=${MPIO_KERNEL_PKG:-linux-image-6.12-amd64} ;;
        newest)
            package=linux-image-amd64
            kvm_newest_apt || return 1
            apt=("${KVM_APT[@]}") ;;
        *) kvm_log "MPIO_KERNEL must be 6.12 or newest, not $KVM_KERNEL"; return 1 ;;
    esac
    image=$(kvm_depends "$package" '^linux-image-[0-9]' "${apt[@]}" | head -1)
    # The meta package resolves only with current package lists.
    if [ -z "$image" ] && [ "$KVM_KERNEL" = 6.12 ]; then
        apt-get update -qq
        image=$(kvm_depends "$package" '^linux-image-[0-9]' | head -1)
    fi
    image=${image:-$package}
    for part in "$image" $(kvm_depends "$image" '^linux-(binary|modules|base)-[0-9]' "${apt[@]}"); do
        deb=$(kvm_download "$part" "${apt[@]}") || return 1
        debs+=("$deb")
    done
    KVM_KROOT=$(kvm_extract "${debs[@]}")
    for modules in "$KVM_KROOT/lib/modules" "$KVM_KROOT/usr/lib/modules"; do
        [ -d "$modules" ] && break
    done
    KVM_KVER=$(ls -1 "$modules" 2>/dev/null | head -1)
    KVM_VMLINUZ=$KVM_KROOT/boot/vmlinuz-$KVM_KVER
    [ -e "$KVM_VMLINUZ" ] || KVM_VMLINUZ=$modules/$KVM_KVER/vmlinuz
    [ -n "$KVM_KVER" ] && [ -e "$KVM_VMLINUZ" ] || { kvm_log "no kernel in ${debs[*]}"; return 1; }
    KVM_KERNEL_LABEL="$KVM_KERNEL: $KVM_KVER ($(basename "${debs[0]}" .deb))"
    kvm_log "kernel $KVM_KERNEL_LABEL"
}

# Sets KVM_QEMU and KVM_FIRMWARE. Debian's qemu-system-x86 (7.2 in bookworm) breaks the
# newer qemu-utils this machine may carry, so it is not installed: it and
# qemu-system-common (which holds TCG, a loadable module in Debian's
# build) are extracted into the cache, QEMU_MODULE_DIR points QEMU at
# the latter, and their libraries and firmware (seabios, ipxe-qemu,
# qemu-system-data), which conflict with nothing, are installed.
kvm_fetch_qemu() {
    if command -v qemu-system-x86_64 >/dev/null; then
        KVM_QEMU=$(command -v qemu-system-x86_64) KVM_FIRMWARE=/usr/share/qemu
        return 0
    fi
    local deb common root depends missing=() package
    deb=$(kvm_download qemu-system-x86) || return 1
    common=$(kvm_download "qemu-system-common=$(dpkg-deb -f "$deb" Version)") || return 1
    root=$(kvm_extract "$deb")
    KVM_QEMU=$root/usr/bin/qemu-system-x86_64
    QEMU_MODULE_DIR=$(kvm_extract "$common")/usr/lib/x86_64-linux-gnu/qemu
    export QEMU_MODULE_DIR
    # Depends: "libaio1 (>= 0.3.93), ..., qemu-system-common (= ...), seabios"
    depends=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' |
        sed -e 's/([^)]*)//g' -e 's/|.*//' -e 's/ //g' | grep -v '^qemu-system-common$')
    for package in $depends; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    kvm_apt_install "${missing[@]}"
    # Debian's qemu-system-x86 links seabios' BIOS into QEMU's data
    # directory; the extracted one finds it in a directory of its own.
    KVM_FIRMWARE=$KVM_CACHE/firmware
    mkdir -p "$KVM_FIRMWARE"
    ln -sf /usr/share/seabios/* /usr/share/qemu/* "$KVM_FIRMWARE/"
    if ldd "$KVM_QEMU" | grep -q 'not found'; then
        kvm_log "QEMU misses libraries: $(ldd "$KVM_QEMU" | grep 'not found' | tr -s ' \t\n' ' ')"
        return 1
    fi
}

# Sets KVM_BASE: the base initramfs for KVM_KVER, rebuilt only when its
# inputs change (the build script, the module list, the tools' package
# versions, the kernel). perf's package version counts only in an image
# that carries perf: the usual image's key stays as it was without it. Each kernel's images live in a directory of
# their own, images/<version>/, named by a hash of those inputs. Each
# use touches the image; images of other inputs are removed once unused
# for a day, so a run of another checkout with other inputs (which
# builds its own) keeps its image while it boots.
kvm_build_base_image() {
    local stamp dir
    stamp=$({
        sha256sum "$KVM_DIR/build-image.sh"
        echo "$KVM_KVER" "$KVM_MODULES" "$KVM_TOOLS" "$KVM_NBDKIT_PLUGINS"
        dpkg-query -W busybox-static fio dmsetup nvme-cli e2fsprogs util-linux nbd-client nbdkit libc6
        case " $KVM_TOOLS " in *" perf "*) dpkg-query -W linux-perf ;; esac
    } | sha256sum | cut -c1-16)
    dir=$KVM_CACHE/images/$KVM_KVER
    KVM_BASE=$dir/base-$stamp.cpio.gz
    mkdir -p "$dir"
    find "$dir" -maxdepth 1 -name 'base-*.cpio.gz' ! -name "${KVM_BASE##*/}" -mmin +1440 -delete
    if [ -s "$KVM_BASE" ]; then
        touch "$KVM_BASE"
        kvm_log "base image $KVM_BASE (cached)"
        return 0
    fi
    kvm_log "building base image $KVM_BASE"
    KVM_MODULES=$KVM_MODULES KVM_TOOLS=$KVM_TOOLS KVM_NBDKIT_PLUGINS=$KVM_NBDKIT_PLUGINS \
        bash "$KVM_DIR/build-image.sh" "$KVM_KROOT" "$KVM_KVER" "$KVM_BASE"
}

# kvm_prepare: everything above.
kvm_prepare() {
    kvm_install_host_packages
    kvm_fetch_kernel
    kvm_fetch_qemu
    kvm_build_base_image
}

# kvm_add_binary OVERLAY FILE [NAME]: FILE as /usr/local/bin/NAME in the
# overlay, without debug info, with the libraries it links that the
# base image lacks.
kvm_add_binary() {
    local overlay=$1 file=$2 name=${3:-$(basename "$2")} lib
    mkdir -p "$overlay/usr/local/bin"
    objcopy --strip-debug "$file" "$overlay/usr/local/bin/$name"
    for lib in $(ldd "$file" | awk '/=> \// {print $3}'); do
        [ -e "$overlay$lib" ] && continue
        mkdir -p "$overlay$(dirname "$lib")"
        cp -L "$lib" "$overlay$lib"
    done
}

# kvm_accel: the accelerator to use. KVM only where it can run a stock
# kernel: Intel or AMD KVM, not PVM (kvm_pvm, found on the build
# machines, runs only PVM guests; docs/TESTING.md).
kvm_accel() {
    case ${MPIO_KVM_ACCEL:-auto} in
        kvm | tcg) echo "$MPIO_KVM_ACCEL" ;;
        auto)
            if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] &&
                { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }; then
                echo kvm
            else
                echo tcg
            fi ;;
        *) kvm_log "MPIO_KVM_ACCEL must be auto, kvm or tcg"; return 1 ;;
    esac
}

# kvm_boot OVERLAY LIMIT_SECONDS LOG: boots the base image with the
# overlay directory on top (it holds /kvm/run, the payload), streams the
# console to stdout and LOG, and returns the payload's exit status. A
# guest that does not finish within the limit is killed and reported
# with the console's last lines. A guest whose kernel dies before its
# init says it booted never ran the payload: it is reported and booted
# again, at most KVM_BOOT_ATTEMPTS times in all. Under TCG a boot was
# seen to die that way (an `int3` oops in `sched_clock_cpu` as the
# kernel patched its own code while the other vCPU ran it): an
# emulation fault, not a test's.
KVM_BOOT_ATTEMPTS=${KVM_BOOT_ATTEMPTS:-3}
kvm_boot() {
    local overlay=$1 limit=$2 log=$3 accel initrd status attempt
    accel=$(kvm_accel) || return 1
    install -D -m 755 "$KVM_DIR/init" "$overlay/init"
    [ "${MPIO_KVM_SHELL:-0}" = 1 ] && echo 1 > "$overlay/kvm/shell"
    initrd=$(mktemp "$KVM_CACHE/initrd.XXXXXX")
    {
        cat "$KVM_BASE"
        (cd "$overlay" && find . -mindepth 1 | LC_ALL=C sort |
            cpio -o -H newc --quiet -R 0:0 | gzip -1)
    } > "$initrd"
    # tsc=reliable: the TSC watchdog, fooled by emulated time, would move
    # some boots to the HPET (docs/TESTING.md, "Profiling").
    local qemu=("$KVM_QEMU" -nodefaults -no-user-config -machine q35 -display none
        -no-reboot -L "$KVM_FIRMWARE" -smp "$KVM_CPUS" -m "$KVM_MEM" -kernel "$KVM_VMLINUZ" -initrd "$initrd"
        -append "console=ttyS0 panic=-1 quiet loglevel=4 mitigations=off tsc=reliable ${MPIO_KVM_APPEND:-}"
        -serial stdio)
    case $accel in
        kvm) qemu+=(-accel kvm -cpu host) ;;
        # Multi-threaded TCG with a large translation cache: a guest
        # vCPU per host thread, and fewer retranslations.
        tcg) qemu+=(-accel tcg,thread=multi,tb-size=512 -cpu max) ;;
    esac
    if [ "${MPIO_KVM_SHELL:-0}" = 1 ]; then
        kvm_log "booting $KVM_KERNEL_LABEL under $accel (${KVM_CPUS} vCPUs, $KVM_MEM)"
        "${qemu[@]}"
        rm -f "$initrd"
        return 0
    fi
    for attempt in $(seq 1 "$KVM_BOOT_ATTEMPTS"); do
        kvm_log "booting $KVM_KERNEL_LABEL under $accel (${KVM_CPUS} vCPUs, $KVM_MEM), limit ${limit}s"
        set +e
        # The serial console ends lines with CR LF; the log keeps them
        # plain. sed -u passes each line on as it comes (tr would buffer
        # 4 KiB).
        timeout -k 10 "$limit" "${qemu[@]}" < /dev/null 2>&1 | sed -u 's/\r$//' | tee "$log"
        status=${PIPESTATUS[0]}
        set -e
        grep -a -q '^MPIO-KVM-EXIT=' "$log" && break
        if [ "$status" = 124 ] || [ "$status" = 137 ]; then
            kvm_log "the guest did not finish within ${limit}s and was killed; its last console lines:"
        else
            kvm_log "the guest ended (qemu status $status) without reporting; its last console lines:"
        fi
        tail -n 40 "$log" | sed 's/^/  | /' >&2
        if grep -a -q '^kernel-vm: .* booted in ' "$log" || [ "$attempt" = "$KVM_BOOT_ATTEMPTS" ]; then
            break
        fi
        cp "$log" "$log.boot-$attempt"
        kvm_log "its kernel died before the payload started (attempt $attempt of $KVM_BOOT_ATTEMPTS; console kept in $log.boot-$attempt): booting again"
    done
    rm -f "$initrd"
    local exit_line
    exit_line=$(grep -a -m1 '^MPIO-KVM-EXIT=' "$log" || true)
    [ -n "$exit_line" ] || return 1
    return "${exit_line#MPIO-KVM-EXIT=}"
}
