#!/usr/bin/env bash
# vm.sh: Debian 13 (trixie) virtual machines under qemu's software emulation
# (TCG; no KVM needed): systemd, cgroup v2 only, docker.io 26.1 with its
# containerd and runc, for tests that need a cgroup v2 node on a host that has
# cgroup v1 (internal/testutil/vm). Run as root.
#
#   vm.sh image                     build the disk image, kernel and initrd
#                                   (cached; about a second when current)
#   vm.sh up NAME [--mem MiB] [--cpus N] [--hostname H] [--forward GUESTPORT]...
#                                   boot a VM on a copy-on-write overlay of the
#                                   image; returns once systemd is running (or
#                                   degraded: the failed units are printed)
#                                   and dockerd answers
#   vm.sh exec NAME [CMD...]        run CMD as root in the VM (ssh; stdin and
#                                   the exit status pass through); no CMD: a shell
#   vm.sh copy NAME HOSTPATH VMPATH copy a file (mode kept) or a directory's
#                                   contents to VMPATH
#   vm.sh port NAME GUESTPORT       the host port (on 127.0.0.1) forwarded to GUESTPORT
#   vm.sh pid NAME                  the PID of the VM's qemu
#   vm.sh console NAME [LINES]      the tail of the VM's console (default 50 lines)
#   vm.sh down NAME                 stop the VM (its own qemu, by PID; also after
#                                   a failed up, which leaves it for a look) and
#                                   remove its overlay and state
#   vm.sh status                    the VMs, their PIDs, ports and memory
#
# The image: debootstrap (variant minbase plus $PACKAGES) of trixie from the
# mirror the host's apt uses (VM_MIRROR overrides it), configured by
# configure_root, put on an ext4 file system without partition table
# (mkfs.ext4 -d: no loop device or mount) that boots with -kernel/-initrd and
# root=/dev/vda. Nothing on the kernel command line touches cgroups: trixie's
# systemd mounts cgroup2 only. The inputs (suite, mirror, packages, the
# functions that build the root, the ssh key) are hashed; the image lives in
# $CACHE/images/<hash>, $CACHE/current points at the current one, and images
# of other hashes are removed when no VM uses them.
#
# Access: an ed25519 key made once in $CACHE/ssh (never leaves the cache) is
# root's authorized key in the image; ssh goes to the forwarded port on
# 127.0.0.1 with host key checking off (each image has new host keys) and one
# multiplexed connection per VM (ControlMaster), so an exec costs no new key
# exchange under emulation.
#
# Network: qemu user networking (slirp). The guest is 10.0.2.15; every
# hostfwd listens on 127.0.0.1 only. The guest reaches the host's loopback
# at 10.0.2.2: slirp turns a connection to 10.0.2.2:PORT into one to
# 127.0.0.1:PORT on the host, so a control plane listening on the host's
# 127.0.0.1:6443 is https://10.0.2.2:6443 from the VM (its certificate must
# name 10.0.2.2). Nothing else is reachable: there is no route out but slirp's.
#
# State of VM NAME: $VM_STATE_DIR/NAME (default $CACHE/run/NAME): qemu.pid,
# ssh.port, ports ("GUEST HOST" lines), image (the image directory it
# boots), overlay.qcow2, serial.log (the console), monitor.sock, ssh.ctl.
#
# Env: KDS_CACHE_DIR (see lib.sh), VM_STATE_DIR, VM_MIRROR, VM_BOOT_TIMEOUT
# (seconds, default 900).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

SUITE=trixie
CACHE=$KDS_CACHE_DIR/vm
STATE=${VM_STATE_DIR:-$CACHE/run}
KEY=$CACHE/ssh/id_ed25519
DISK_SIZE=10G
BOOT_TIMEOUT=${VM_BOOT_TIMEOUT:-900}
# What minbase lacks for a node: systemd as PID 1 with udev and D-Bus (the
# systemd cgroup driver talks to systemd over D-Bus), a way in, Docker 26 with
# its containerd and runc, a kernel, and what a kubelet in docker mode runs
# (iptables, CNI plugins, conntrack, nsenter), and NFS.
PACKAGES=(
	systemd systemd-sysv dbus udev kmod procps util-linux mount e2fsprogs
	openssh-server ca-certificates iproute2 iptables conntrack
	docker.io docker-cli containerd runc containernetworking-plugins
	linux-image-amd64
	# The in-tree nfs volume test: a kernel NFS server and mount.nfs (this
	# host's kernel has no NFS).
	nfs-kernel-server nfs-common
)

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

# --- image ---------------------------------------------------------------

# make_rootfs DIR MIRROR: debootstrap trixie into DIR.
make_rootfs() {
	kds_debootstrap "$SUITE" "$1" "$2" "$CACHE" "${PACKAGES[@]}"
}

# configure_root DIR PUBKEY: make the root boot as a VM: fstab, DHCP on the
# NIC (systemd-networkd), root's ssh key, dockerd on the systemd cgroup
# driver, the virtio drivers in the initrd; timers that would reach for the
# network masked; apt's lists, docs and locales dropped.
configure_root() {
	local dir=$1 pubkey=$2
	echo kds-vm >"$dir/etc/hostname"
	printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$dir/etc/hosts"
	printf '/dev/vda\t/\text4\trw,errors=remount-ro\t0\t1\n' >"$dir/etc/fstab"
	# Empty: systemd makes a machine ID at boot from qemu's -uuid, so each
	# VM has its own.
	: >"$dir/etc/machine-id"
	rm -f "$dir/var/lib/dbus/machine-id"
	mkdir -p "$dir/etc/systemd/network"
	printf '[Match]\nName=eth* en*\n\n[Network]\nDHCP=ipv4\n' >"$dir/etc/systemd/network/10-vm.network"
	install -d -m 700 "$dir/root/.ssh"
	install -m 600 "$pubkey" "$dir/root/.ssh/authorized_keys"
	mkdir -p "$dir/etc/docker"
	printf '{\n  "exec-opts": ["native.cgroupdriver=systemd"]\n}\n' >"$dir/etc/docker/daemon.json"
	printf '%s\n' virtio_pci virtio_blk virtio_net virtio_rng ext4 >>"$dir/etc/initramfs-tools/modules"
	systemctl --root="$dir" enable -q systemd-networkd.service docker.service containerd.service ssh.service
	systemctl --root="$dir" mask -q apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer
	mount -t proc proc "$dir/proc"
	local rc=0
	chroot "$dir" update-initramfs -u -k all >>"$CACHE/debootstrap.log" 2>&1 || rc=$?
	umount "$dir/proc"
	[[ $rc -eq 0 ]] || kds_die "update-initramfs failed (log: $CACHE/debootstrap.log)"
	rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb \
		"$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/usr/share/locale/*
	find "$dir/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
}

# ensure_tools: debootstrap, qemu and qemu-img from the host's (bookworm) apt.
ensure_tools() {
	local missing=()
	command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
	command -v qemu-system-x86_64 >/dev/null 2>&1 || missing+=(qemu-system-x86)
	command -v qemu-img >/dev/null 2>&1 || missing+=(qemu-utils)
	[[ ${#missing[@]} -gt 0 ]] || return 0
	kds_log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	}
}

ensure_key() {
	[[ -s $KEY && -s $KEY.pub ]] && return
	mkdir -p "$(dirname "$KEY")"
	chmod 700 "$(dirname "$KEY")"
	rm -f "$KEY" "$KEY.pub"
	ssh-keygen -q -t ed25519 -N '' -C kubelet-dockershim-vm -f "$KEY"
}

input_hash() {
	{
		echo "$SUITE $1 $DISK_SIZE ${PACKAGES[*]}"
		declare -f make_rootfs kds_debootstrap configure_root build_image
		cat "$KEY.pub"
	} | sha256sum | cut -c1-16
}

# build_image DIR MIRROR: the root, then DIR/{disk.raw,vmlinuz,initrd.img}.
build_image() {
	local out=$1 mirror=$2 root=$CACHE/rootfs.tmp
	rm -rf "$root"
	make_rootfs "$root" "$mirror"
	configure_root "$root" "$KEY.pub"
	mkdir -p "$out"
	cp "$(realpath "$root/vmlinuz")" "$out/vmlinuz"
	cp "$(realpath "$root/initrd.img")" "$out/initrd.img"
	rm -f "$out/disk.raw"
	nice -n 10 mkfs.ext4 -q -L kds-root -d "$root" "$out/disk.raw" "$DISK_SIZE" >/dev/null
	chmod 444 "$out/disk.raw"
	rm -rf "$root"
}

# prune_images KEEP: remove images but KEEP that no VM's state names.
prune_images() {
	local d used
	used=$(cat "$STATE"/*/image 2>/dev/null || true)
	for d in "$CACHE"/images/*/; do
		d=${d%/}
		[[ -d $d && $(basename "$d") != "$1" ]] || continue
		grep -qxF "$d" <<<"$used" || rm -rf "$d"
	done
}

cmd_image() {
	local mirror hash dir start=$SECONDS
	ensure_tools
	ensure_key
	mkdir -p "$CACHE/images"
	exec 9>"$CACHE/lock"
	flock 9
	mirror=${VM_MIRROR:-$(kds_debian_mirror)}
	hash=$(input_hash "$mirror")
	dir=$CACHE/images/$hash
	if [[ -s $dir/hash && $(<"$dir/hash") == "$hash" ]]; then
		kds_log "up-to-date $dir"
	else
		kds_log "building $dir: debootstrap $SUITE from $mirror (log: $CACHE/debootstrap.log)"
		rm -rf "$dir"
		build_image "$dir" "$mirror"
		echo "$hash" >"$dir/hash"
		kds_log "built $dir in $((SECONDS - start))s"
	fi
	ln -sfn "images/$hash" "$CACHE/current.tmp"
	mv -T "$CACHE/current.tmp" "$CACHE/current"
	prune_images "$hash"
	echo "$dir"
}

# --- VMs -------------------------------------------------------------------

vm_dir() {
	[[ $1 =~ ^[a-zA-Z0-9][a-zA-Z0-9._-]{0,39}$ ]] || kds_die "bad VM name '$1' (letters, digits, . _ -; at most 40)"
	echo "$STATE/$1"
}

# vm_pid NAME: the PID of the VM's qemu when it is running (and is ours: its
# command line names the VM's overlay), else nothing.
vm_pid() {
	local d pid
	d=$(vm_dir "$1")
	pid=$(cat "$d/qemu.pid" 2>/dev/null) || return 0
	[[ $pid =~ ^[0-9]+$ ]] || return 0
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$d/overlay.qcow2" && echo "$pid"
	return 0
}

# ssh_opts DIR: set SSH_OPTS to the options of an ssh to the VM of DIR.
ssh_opts() {
	local d=$1
	SSH_OPTS=(-i "$KEY" -p "$(<"$d/ssh.port")" -o BatchMode=yes -o StrictHostKeyChecking=no
		-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=20
		-o ServerAliveInterval=15 -o ServerAliveCountMax=8
		-o ControlMaster=auto -o "ControlPath=$d/ssh.ctl" -o ControlPersist=600)
}

# vm_ssh DIR ARGS...: ssh to the VM; ARGS after -- are quoted for its shell.
vm_ssh() {
	local d=$1 opts=() remote=()
	shift
	while [[ $# -gt 0 && $1 != -- ]]; do
		opts+=("$1")
		shift
	done
	[[ $# -gt 0 ]] && shift
	if [[ $# -gt 0 ]]; then
		remote=("$(printf '%q ' "$@")")
	fi
	ssh_opts "$d"
	# shellcheck disable=SC2029 # quoted above, for the VM's shell
	ssh "${SSH_OPTS[@]}" "${opts[@]}" root@127.0.0.1 "${remote[@]}"
}

# free_port: a TCP port nothing listens on, from 20000-29999. qemu fails to
# start when another process takes it first; up then tries again.
free_port() {
	local p i used
	used=$(ss -Htln | awk '{print $4}' | sed 's/.*://')
	for ((i = 0; i < 100; i++)); do
		p=$((20000 + RANDOM % 10000))
		grep -qxF "$p" <<<"$used" || {
			echo "$p"
			return
		}
	done
	kds_die "no free port found"
}

# start_qemu DIR NAME HOSTNAME MEM CPUS IMAGE GUESTPORTS...: one attempt
# with new ports.
start_qemu() {
	local d=$1 name=$2 host=$3 mem=$4 cpus=$5 img=$6 fwd p hp
	shift 6
	hp=$(free_port)
	echo "$hp" >"$d/ssh.port"
	fwd="hostfwd=tcp:127.0.0.1:$hp-:22"
	: >"$d/ports"
	for p in "$@"; do
		hp=$(free_port)
		echo "$p $hp" >>"$d/ports"
		fwd+=",hostfwd=tcp:127.0.0.1:$hp-:$p"
	done
	# The kernel panics into a reboot, which -no-reboot turns into qemu's
	# exit. mitigations=off: speculation barriers only cost time under TCG.
	# -nodefaults: no VGA, parallel port, floppy or CD drive to probe.
	# thread=single: one host thread runs every vCPU. With multi-threaded TCG
	# a vCPU can still run code translated before the kernel patched it
	# (text_poke_bp's int3), and the guest panics with "Oops: int3" in
	# update_cfs_group the first time a cgroup gets a CPU quota (the
	# cfs_bandwidth static key); seen with qemu 7.2 and Debian 13's 6.12.
	qemu-system-x86_64 -name "kds-vm-$name" -accel "tcg,thread=single,tb-size=${VM_TB_MIB:-256}" -cpu max -smp "$cpus" -m "$mem" \
		-uuid "$(cat /proc/sys/kernel/random/uuid)" \
		-kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
		-append "root=/dev/vda rw console=ttyS0 net.ifnames=0 systemd.hostname=$host systemd.firstboot=off mitigations=off panic=-1" \
		-drive "file=$d/overlay.qcow2,if=virtio,format=qcow2,cache=unsafe,discard=unmap" \
		-netdev "user,id=net0,$fwd" -device virtio-net-pci,netdev=net0 \
		-device virtio-rng-pci -nodefaults -display none -serial "file:$d/serial.log" \
		-monitor "unix:$d/monitor.sock,server,nowait" -no-reboot \
		-daemonize -pidfile "$d/qemu.pid" 2>"$d/qemu.err"
}

cmd_up() {
	local name=${1:-} mem=2048 cpus=2 host='' ports=() d img start=$SECONDS state pid attempt
	[[ -n $name ]] || usage
	shift
	while [[ $# -gt 0 ]]; do
		case $1 in
		--mem) mem=${2:?--mem needs MiB} && shift 2 ;;
		--cpus) cpus=${2:?--cpus needs a count} && shift 2 ;;
		--hostname) host=${2:?--hostname needs a name} && shift 2 ;;
		--forward) ports+=("${2:?--forward needs a guest port}") && shift 2 ;;
		*) kds_die "up: unknown option $1" ;;
		esac
	done
	d=$(vm_dir "$name")
	[[ -z $host || $host =~ ^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$ ]] || kds_die "bad hostname '$host'"
	[[ -z $(vm_pid "$name") ]] || kds_die "VM $name is running (vm.sh down $name)"
	[[ -s $CACHE/current/hash ]] || kds_die "no VM image: build it with scripts/vm.sh image"
	img=$(realpath "$CACHE/current")
	if [[ -s $KEY.pub && $(input_hash "${VM_MIRROR:-$(kds_debian_mirror)}") != "$(<"$img/hash")" ]]; then
		kds_log "WARNING: the image is older than this script's inputs: run scripts/vm.sh image"
	fi
	command -v qemu-system-x86_64 >/dev/null || kds_die "qemu-system-x86_64 missing: run scripts/vm.sh image"
	rm -rf "$d"
	mkdir -p "$d"
	echo "$img" >"$d/image"
	qemu-img create -q -f qcow2 -b "$img/disk.raw" -F raw "$d/overlay.qcow2"
	for attempt in 1 2 3 4 5; do
		start_qemu "$d" "$name" "${host:-$name}" "$mem" "$cpus" "$img" "${ports[@]}" && break
		grep -q 'host forwarding' "$d/qemu.err" && [[ $attempt -lt 5 ]] && continue
		cat "$d/qemu.err" >&2
		kds_die "qemu did not start"
	done
	pid=$(vm_pid "$name")
	[[ -n $pid ]] || kds_die "qemu started but $d/qemu.pid names no qemu of ours"
	kds_log "$name: qemu $pid, ssh 127.0.0.1:$(<"$d/ssh.port"); console: $d/serial.log"
	wait_for "$d" "$pid" "ssh" true
	state=$(vm_ssh "$d" -- timeout "$BOOT_TIMEOUT" systemctl is-system-running --wait) || true
	case $state in
	running) ;;
	degraded)
		kds_log "$name: systemd is degraded; failed units:"
		vm_ssh "$d" -- systemctl list-units --failed --no-legend --plain --no-pager >&2 || true
		;;
	*) kds_die "$name: systemd is '$state' (console: $d/serial.log)" ;;
	esac
	wait_for "$d" "$pid" "dockerd" docker version --format '{{.Server.Version}}'
	kds_log "$name: systemd $state and dockerd answering $((SECONDS - start))s after start"
}

# wait_for DIR PID WHAT CMD...: run CMD in the VM until it succeeds, for up
# to BOOT_TIMEOUT seconds since up began; fail when qemu exits.
wait_for() {
	local d=$1 pid=$2 what=$3
	shift 3
	while ! vm_ssh "$d" -- "$@" >/dev/null 2>&1; do
		if [[ ! -d /proc/$pid ]]; then
			tail -n 40 "$d/serial.log" >&2
			kds_die "qemu exited while waiting for $what (console: $d/serial.log)"
		fi
		((SECONDS < BOOT_TIMEOUT)) || kds_die "no $what after ${BOOT_TIMEOUT}s (console: $d/serial.log)"
		sleep 2
	done
}

# running_dir NAME: the state directory of a running VM.
running_dir() {
	[[ -n $(vm_pid "$1") ]] || kds_die "VM $1 is not running"
	vm_dir "$1"
}

cmd_exec() {
	local name=${1:-} d
	[[ -n $name ]] || usage
	shift
	d=$(running_dir "$name")
	if [[ $# -eq 0 ]]; then
		vm_ssh "$d" -t
	else
		vm_ssh "$d" -- "$@"
	fi
}

cmd_copy() {
	[[ $# -eq 3 ]] || usage
	local d src=$2 dst=$3 mode
	d=$(running_dir "$1")
	if [[ -d $src ]]; then
		# shellcheck disable=SC2016 # expanded by the VM's shell
		tar -C "$src" -cf - . | vm_ssh "$d" -- sh -c 'mkdir -p "$1" && tar --no-same-owner -C "$1" -xf -' sh "$dst"
	elif [[ -f $src ]]; then
		mode=$(stat -c %a "$src")
		# shellcheck disable=SC2016 # expanded by the VM's shell
		vm_ssh "$d" -- sh -c 'mkdir -p "$(dirname "$1")" && cat >"$1.kds-tmp" && chmod "$2" "$1.kds-tmp" && mv -f "$1.kds-tmp" "$1"' \
			sh "$dst" "$mode" <"$src"
	else
		kds_die "copy: $src is neither a file nor a directory"
	fi
}

cmd_port() {
	[[ $# -eq 2 ]] || usage
	local d hp
	d=$(running_dir "$1")
	if [[ $2 == 22 ]]; then
		cat "$d/ssh.port"
		return
	fi
	hp=$(awk -v p="$2" '$1 == p {print $2}' "$d/ports")
	[[ -n $hp ]] || kds_die "VM $1 forwards no port $2 (up --forward $2)"
	echo "$hp"
}

cmd_pid() {
	[[ $# -eq 1 ]] || usage
	local pid
	pid=$(vm_pid "$1")
	[[ -n $pid ]] || kds_die "VM $1 is not running"
	echo "$pid"
}

cmd_console() {
	[[ $# -ge 1 && $# -le 2 ]] || usage
	local d
	d=$(vm_dir "$1")
	[[ -f $d/serial.log ]] || kds_die "VM $1 has no console log"
	# The console carries terminal escapes; drop them and carriage returns.
	tail -n "${2:-50}" "$d/serial.log" | sed -e 's/\x1b\[[0-9;?!]*[a-zA-Z]//g' -e 's/\r$//'
}

cmd_down() {
	[[ $# -eq 1 ]] || usage
	local d pid i
	d=$(vm_dir "$1")
	[[ -d $d ]] || kds_die "no VM $1"
	pid=$(vm_pid "$1")
	if [[ -S $d/ssh.ctl ]]; then
		ssh_opts "$d"
		ssh "${SSH_OPTS[@]}" -O exit root@127.0.0.1 >/dev/null 2>&1 || true
	fi
	if [[ -n $pid ]]; then
		# The overlay is thrown away: no need for a clean shutdown.
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			[[ -d /proc/$pid ]] || break
			sleep 0.2
		done
		[[ ! -d /proc/$pid ]] || kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -rf "$d"
	kds_log "$1: down"
}

cmd_status() {
	local d name pid rss
	printf '%-24s %-8s %-6s %-10s %s\n' NAME PID SSH RSS_MiB FORWARDS
	for d in "$STATE"/*/; do
		[[ -d $d ]] || continue
		d=${d%/}
		name=$(basename "$d")
		pid=$(vm_pid "$name")
		rss=-
		[[ -z $pid ]] || rss=$(($(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status") / 1024))
		printf '%-24s %-8s %-6s %-10s %s\n' "$name" "${pid:-stopped}" "$(cat "$d/ssh.port" 2>/dev/null)" "$rss" \
			"$(awk '{printf "%s->127.0.0.1:%s ", $1, $2}' "$d/ports" 2>/dev/null)"
	done
}

main() {
	local cmd=${1:-}
	[[ -n $cmd ]] || usage
	shift
	kds_require_root "$cmd" "$@"
	case $cmd in
	image) cmd_image "$@" ;;
	up) cmd_up "$@" ;;
	exec) cmd_exec "$@" ;;
	copy) cmd_copy "$@" ;;
	port) cmd_port "$@" ;;
	pid) cmd_pid "$@" ;;
	console) cmd_console "$@" ;;
	down) cmd_down "$@" ;;
	status) cmd_status "$@" ;;
	*) usage ;;
	esac
}

main "$@"
