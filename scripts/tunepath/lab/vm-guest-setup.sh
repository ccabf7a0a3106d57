#!/bin/sh
# tunepath lab: the server VM's image, configured from the inside (vmimage.py runs this file).
#
#   configure USER HOSTNAME ROOT_UUID CMDLINE   in the image's chroot, while mmdebstrap builds it:
#       the user (passwordless sudo, no password), root locked, sshd (keys only, the ed25519 host
#       key only, none baked in), the seed unit, GRUB's defaults, fstab, hostname, services.
#   as PID 1 (init=this file)                     in a throwaway VM booted with -kernel/-initrd on
#       the finished disk: on x86 grub-install on /dev/vda, then update-grub; on arm64 (the whole
#       disk is the root file system, and the host boots the kernel its grub.cfg names) only
#       update-grub. Then power off. The build reads "TUNEPATH-BOOTLOADER-OK" on the serial
#       console as the proof it worked.
#
# The seed unit (tunepath-seed.service) installs, at every boot, what one lab's seed disk
# (ext4, label TPSEED) holds: the host key pair, the user's authorized_keys, eth0's address.
set -eu

SEED_LABEL=TPSEED
MARK=TUNEPATH-BOOTLOADER-OK

configure_user() {
    user=$1
    useradd --create-home --user-group --shell /bin/bash "$user"
    usermod --password '*' "$user"         # no password, not "locked": sshd lets keys in
    passwd --lock root >/dev/null
    install -d -m 0700 -o "$user" -g "$user" "/home/$user/.ssh"
    printf '%s ALL=(ALL) NOPASSWD: ALL\n' "$user" > /etc/sudoers.d/tunepath
    chmod 0440 /etc/sudoers.d/tunepath
    if command -v visudo >/dev/null; then visudo -c -q -f /etc/sudoers.d/tunepath; fi
}

configure_sshd() {
    user=$1
    cat > /etc/ssh/sshd_config.d/10-tunepath.conf <<EOF
# tunepath lab VM: the seed disk's ed25519 key is the only host key; keys only, one user
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
AllowUsers $user
UseDNS no
EOF
    rm -f /etc/ssh/ssh_host_*                # no host key in the image: each lab seeds its own
}

configure_seed() {
    user=$1
    cat > /usr/local/sbin/tunepath-seed <<EOF
#!/bin/sh
# tunepath lab: install the host key, the authorized key and eth0's address from the seed disk
set -eu
dev=""
for i in \$(seq 1 40); do
    dev=\$(blkid -L $SEED_LABEL 2>/dev/null || true)
    [ -n "\$dev" ] && break
    sleep 0.25
done
if [ -z "\$dev" ]; then
    echo "tunepath-seed: no disk labelled $SEED_LABEL; keeping what is installed"
else
    mnt=\$(mktemp -d)
    mount -o ro "\$dev" "\$mnt"
    trap 'umount "\$mnt"; rmdir "\$mnt"' EXIT
    install -m 0600 -o root -g root "\$mnt/ssh_host_ed25519_key" /etc/ssh/ssh_host_ed25519_key
    install -m 0644 -o root -g root "\$mnt/ssh_host_ed25519_key.pub" /etc/ssh/ssh_host_ed25519_key.pub
    install -d -m 0700 -o $user -g $user /home/$user/.ssh
    install -m 0600 -o $user -g $user "\$mnt/authorized_keys" /home/$user/.ssh/authorized_keys
    install -m 0644 -o root -g root "\$mnt/interfaces-eth0" /etc/network/interfaces.d/eth0
    echo "tunepath-seed: host key, authorized key and eth0 installed from \$dev"
fi
if [ ! -s /etc/ssh/ssh_host_ed25519_key ]; then  # no seed ever: sshd still starts (no key gets in)
    ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
fi
EOF
    chmod 0755 /usr/local/sbin/tunepath-seed
    cat > /etc/systemd/system/tunepath-seed.service <<'EOF'
[Unit]
Description=tunepath lab: host key, authorized key and address from the seed disk
After=local-fs.target
Before=ssh.service networking.service network-pre.target
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/tunepath-seed
StandardOutput=journal+console

[Install]
WantedBy=multi-user.target
EOF
    systemctl enable tunepath-seed.service
}

configure_system() {
    name=$1 uuid=$2 cmdline=$3
    echo "$name" > /etc/hostname
    printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$name" > /etc/hosts
    printf '# tunepath lab VM: the lab has no DNS\n' > /etc/resolv.conf   # not this machine's resolvers
    printf 'UUID=%s\t/\text4\terrors=remount-ro\t0\t1\n' "$uuid" > /etc/fstab
    mkdir -p /etc/network/interfaces.d /etc/default/grub.d
    printf 'source /etc/network/interfaces.d/*\n\nauto lo\niface lo inet loopback\n' > /etc/network/interfaces
    cat > /etc/default/grub.d/10-tunepath-vm.cfg <<EOF
# tunepath lab VM: no menu, the serial console, the image's base kernel command line
GRUB_TIMEOUT=0
GRUB_TIMEOUT_STYLE=hidden
GRUB_TERMINAL=serial
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
GRUB_CMDLINE_LINUX_DEFAULT=""
GRUB_CMDLINE_LINUX="$cmdline"
GRUB_DISABLE_OS_PROBER=true
EOF
    # nothing on port 80 (the path starts its own httpd), no timers reaching for a network the lab lacks
    for unit in apache2.service apache-htcacheclean.service apt-daily.timer apt-daily-upgrade.timer \
                e2scrub_all.timer e2scrub_reap.service fstrim.timer; do
        if [ -e "/lib/systemd/system/$unit" ]; then systemctl disable "$unit" >/dev/null 2>&1 || true; fi
    done
    systemctl mask apache2.service >/dev/null
}

configure() {
    [ $# -eq 4 ] || { echo "usage: $0 configure USER HOSTNAME ROOT_UUID CMDLINE" >&2; exit 2; }
    configure_user "$1"
    configure_sshd "$1"
    configure_seed "$1"
    configure_system "$2" "$3" "$4"
    echo "tunepath guest setup: configured for user $1"
}

bootloader() {
    mountpoint -q /proc || mount -t proc proc /proc
    mountpoint -q /sys || mount -t sysfs sysfs /sys
    mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
    mount -o remount,rw /
    uuid=$(awk '$2 == "/" { sub(/^UUID=/, "", $1); print $1 }' /etc/fstab)
    mkdir -p /dev/disk/by-uuid          # no udev here: update-grub writes root=UUID= only with this link
    if [ -b /dev/vda1 ]; then           # x86: GRUB in the MBR gap boots the partition
        ln -sfn ../../vda1 "/dev/disk/by-uuid/$uuid"
        echo "grub-pc grub-pc/install_devices multiselect /dev/vda" | debconf-set-selections
        grub-install --target=i386-pc /dev/vda
    else                                # arm64: a whole-disk file system the host boots from grub.cfg
        ln -sfn ../../vda "/dev/disk/by-uuid/$uuid"
        mkdir -p /boot/grub             # grub-install makes it on x86; update-grub does not
    fi
    update-grub
    echo "$MARK"
}

if [ "$$" = 1 ]; then                   # init= of the bootloader VM
    export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    # a separate shell: `set -e` would be ignored inside a command whose status is tested
    /bin/sh -eu "$0" bootloader || echo "tunepath guest setup: the bootloader step failed (status $?)"
    sync
    mount -o remount,ro / 2>/dev/null || true
    echo o > /proc/sysrq-trigger        # power off: qemu -no-reboot exits
    sleep 30
    exit 1
fi

case "${1:-}" in
    configure) shift; configure "$@" ;;
    bootloader) bootloader ;;
    *) echo "usage: $0 configure USER HOSTNAME ROOT_UUID CMDLINE (or as init= of the bootloader VM)" >&2; exit 2 ;;
esac
