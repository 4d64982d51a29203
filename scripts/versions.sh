# Pinned versions of everything setup.sh installs. One place to bump them.
GUEST_KERNEL_PKG=${GUEST_KERNEL_PKG:-linux-image-6.17.13+deb13-amd64}
ZIGLANG_VERSION=0.17.0     # ships clang 22 (BPF: -mcpu=v4)
LIBCLANG_VERSION=18.1.1    # libclang.so for bindgen
# QEMU < 10 (Debian 12's 7.2) oopses the guest on a stale int3 when the
# kernel patches static keys while sched_ext attaches under multi-threaded
# TCG; bookworm-backports has 10.x.
QEMU_MIN_MAJOR=10
# What building the binaries needs (a host build: `make host-build`), and
# what the guest experiments add.
BUILD_APT_PACKAGES="libelf-dev zlib1g-dev pkg-config"
GUEST_APT_PACKAGES="busybox-static cpio debootstrap rt-tests stress-ng sysbench redis-server redis-tools numactl"
# An upstream sched_ext scheduler as a reference policy (`make
# upstream-baseline`): the scx release of scx_utils / scx_stats above.
SCX_BPFLAND_VERSION=1.1.4
