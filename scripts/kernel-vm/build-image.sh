#!/usr/bin/env bash
# Builds the kernel test VM's base initramfs (docs/TESTING.md):
#
#   build-image.sh KERNEL_ROOT KERNEL_VERSION OUT.cpio.gz
#
# KERNEL_ROOT is a Debian kernel extracted with dpkg -x: a linux-image
# package with lib/modules/<version> (6.12), or from 7.x the split
# linux-binary, linux-modules and linux-base packages, merged-/usr, with
# usr/lib/modules/<version>. The image holds static busybox with its applets, the tools in $KVM_TOOLS
# and the nbdkit plugins in $KVM_NBDKIT_PLUGINS with their shared
# libraries, and the modules in $KVM_MODULES with
# every module they depend on, decompressed (busybox cannot load .ko.xz)
# and indexed with depmod so the guest's modprobe finds them. It holds
# no test code: each boot adds its payload as a second cpio archive.
set -euo pipefail

kernel_root=$1 kernel_version=$2 out=$3
# The directory whose lib/modules/<version> holds the modules, as
# modprobe -d and depmod -b take it: KERNEL_ROOT, or its usr/ when the
# tree is merged-/usr.
module_root=$kernel_root
[ -d "$module_root/lib/modules/$kernel_version" ] || module_root=$kernel_root/usr
modules_dir=$module_root/lib/modules/$kernel_version
[ -d "$modules_dir" ] || { echo "build-image.sh: no modules for $kernel_version in $kernel_root" >&2; exit 1; }

stage=$(mktemp -d "${out%/*}/stage.XXXXXX")
trap 'rm -rf "$stage" "$stage.cpio.gz"' EXIT
mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,lib,lib64,etc/kvm,dev,proc,sys,tmp,run,mnt}
ln -s ../lib "$stage/usr/lib"

# busybox: the shell, mount, modprobe, mknod, ... as applet links.
busybox=/bin/busybox
ldd "$busybox" >/dev/null 2>&1 && { echo "build-image.sh: $busybox is not static (busybox-static)" >&2; exit 1; }
cp "$busybox" "$stage/bin/busybox"
for applet in $("$busybox" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$stage/bin/$applet"
done
ln -sf ../bin/busybox "$stage/sbin/modprobe"

# copy_with_libraries FILE TARGET: FILE at TARGET in the image, with the
# libraries ldd lists for it.
copy_with_libraries() {
    mkdir -p "$(dirname "$stage$2")"
    cp -L "$1" "$stage$2"
    for lib in $(ldd "$1" | awk '/=> \// {print $3}'); do
        [ -e "$stage$lib" ] && continue
        mkdir -p "$stage$(dirname "$lib")"
        cp -L "$lib" "$stage$lib"
    done
}
for tool in ${KVM_TOOLS:?}; do
    path=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v "$tool") ||
        { echo "build-image.sh: $tool is not installed" >&2; exit 1; }
    copy_with_libraries "$path" "/usr/bin/$tool"
done
# nbdkit loads its plugins from its plugin directory at run time.
plugins=$(nbdkit --dump-config | sed -n 's/^plugindir=//p')
for plugin in ${KVM_NBDKIT_PLUGINS:-}; do
    copy_with_libraries "$plugins/nbdkit-$plugin-plugin.so" "$plugins/nbdkit-$plugin-plugin.so"
done
cp -L /lib64/ld-linux-x86-64.so.2 "$stage/lib64/"
# mkfs.ext4 is mke2fs under another name.
ln -sf mke2fs "$stage/usr/bin/mkfs.ext4"

# Modules and their dependencies, as modprobe resolves them.
[ -e "$modules_dir/modules.dep" ] || depmod -b "$module_root" "$kernel_version"
: > "$stage/etc/kvm/modules-missing"
for module in ${KVM_MODULES:?}; do
    if ! depends=$(modprobe -d "$module_root" -S "$kernel_version" --show-depends "$module" 2>/dev/null); then
        echo "$module" >> "$stage/etc/kvm/modules-missing"
        continue
    fi
    for ko in $(echo "$depends" | awk '$1 == "insmod" {print $2}'); do
        relative=${ko#"$module_root"/}
        case $relative in
            *.ko.xz) target=$stage/${relative%.xz} decompress=(xz -dc) ;;
            *.ko.zst) target=$stage/${relative%.zst} decompress=(zstd -qdc) ;;
            *.ko.gz) target=$stage/${relative%.gz} decompress=(gzip -dc) ;;
            *) target=$stage/$relative decompress=(cat) ;;
        esac
        [ -e "$target" ] && continue
        mkdir -p "$(dirname "$target")"
        "${decompress[@]}" "$ko" > "$target"
    done
done
for index in modules.builtin modules.builtin.modinfo modules.order; do
    [ -e "$modules_dir/$index" ] && cp "$modules_dir/$index" "$stage/lib/modules/$kernel_version/"
done
depmod -b "$stage" "$kernel_version"

# Written beside OUT under a name of its own and renamed: a build running
# at the same time never reads or writes a half-written image.
(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) |
    gzip -1 > "$stage.cpio.gz"
mv "$stage.cpio.gz" "$out"
echo "build-image.sh: $out ($(du -h "$out" | cut -f1)); modules not built by $kernel_version:" \
    "$(tr '\n' ' ' < "$stage/etc/kvm/modules-missing")" >&2
