#!/usr/bin/env bash
# fresh-machine.sh [--quick] [COMMAND...]: run the README's commands the way a newcomer would, on a
# Debian 12 machine that has never seen the project.
#
# The machine is a minimal Debian 12 (bookworm) root made with debootstrap (--variant=minbase:
# apt, bash, coreutils; no compiler, no CUDA, none of the packages installed here by hand), entered
# with chroot. The project arrives as a clone of the committed HEAD: uncommitted changes do not
# travel. Each COMMAND runs in the clone, in order, as its own timed stage; the run stops at the
# first that fails. With no COMMAND:
#     bash scripts/test.sh                      (the README's test command: what CI runs)
#     DEMO_STEPS=20 bash scripts/demo.sh        (the README's demo, a few steps)
# --quick: the CI freshness stage (.ci/run): scripts/install-deps.sh, then a CMake configure of the
#     CPU build: the packages the project lists are enough to configure on a bare machine.
#
# It prints what it ran, the commit, and each stage's exit status and seconds; the exit status is
# the first failing stage's. Exit 77 (nothing was tested) where this machine cannot make the root:
# not root, no debootstrap (and apt cannot install it), the Debian mirror unreachable, or mounts
# refused. Needs about 4 GB of disk under the cache folder for a whole test run.
#
# The base system is cached as a tarball in ${ZT_FRESH_CACHE:-~/.cache/zt-fresh} (about 3 minutes
# the first time, then seconds); every run unpacks a new root and deletes it afterwards, also when
# interrupted (ZT_FRESH_KEEP=1 keeps it, for a look inside). ZT_FRESH_MIRROR overrides the Debian
# mirror (default: the first one this machine's apt uses). Times on the 2-core development machine
# are in docs/testing.md ("A fresh machine").
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { echo "[fresh-machine] $*" >&2; }
cannot() { say "SKIP: $* — nothing was tested"; exit 77; }

quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
cmds=("$@")
if ((quick)); then
  cmds=("bash scripts/install-deps.sh"
        "cmake -S . -B build -DCMAKE_BUILD_TYPE=Release")
elif ((${#cmds[@]} == 0)); then
  cmds=("bash scripts/test.sh" "DEMO_STEPS=20 bash scripts/demo.sh")
fi

[ "$(id -u)" = 0 ] || cannot "needs root (debootstrap, chroot and mounts)"
git -C "$ROOT" rev-parse HEAD >/dev/null 2>&1 || { say "error: $ROOT is not a git checkout"; exit 1; }
commit="$(git -C "$ROOT" rev-parse --short HEAD)"
if ! git -C "$ROOT" diff --quiet HEAD 2>/dev/null; then
  say "note: uncommitted changes in $ROOT stay behind: the fresh machine gets commit $commit"
fi

cache="${ZT_FRESH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/zt-fresh}"
mkdir -p "$cache"
tarball="$cache/bookworm-minbase.tar"
mirror="${ZT_FRESH_MIRROR:-$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)}"
mirror="${mirror:-http://deb.debian.org/debian}"

source "$ROOT/scripts/stages.sh"  # stage: each part timed, the times printed at the end

# ---- the base system, made once (flock: two runs side by side make it once) ----
base_system() {
  exec 9>"$cache/.lock"
  flock 9
  if [ ! -s "$tarball" ]; then
    if ! command -v debootstrap >/dev/null; then
      say "installing debootstrap"
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; } >/dev/null 2>&1 ||
        cannot "debootstrap is missing and apt-get could not install it"
    fi
    say "making the base system with debootstrap from $mirror (once; cached as $tarball)"
    rm -rf "$cache/base"
    if ! debootstrap --variant=minbase bookworm "$cache/base" "$mirror" >"$cache/debootstrap.log" 2>&1; then
      tail -5 "$cache/debootstrap.log" >&2
      rm -rf --one-file-system "$cache/base"
      cannot "debootstrap failed (log: $cache/debootstrap.log): is $mirror reachable?"
    fi
    tar -C "$cache/base" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball" ||
      { say "error: could not write $tarball"; return 1; }
    rm -rf --one-file-system "$cache/base"
  fi
  flock -u 9
}

# ---- a new root from it, the project cloned in ----
# The root's folder: a new unique name in the cache (mktemp fills in the X's).
root="$(mktemp -d "$cache/root.XXXXXX")"
cleanup() {
  local m
  for m in dev sys proc; do
    if mountpoint -q "$root/$m"; then umount -R "$root/$m" 2>/dev/null || umount -l -R "$root/$m" 2>/dev/null || true; fi
  done
  # what a test mounted inside (ip netns add's /run/netns, a tmpfs), deepest first
  { findmnt -rn -o TARGET | grep "^$root/" | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done; } || true
  if [ "${ZT_FRESH_KEEP:-0}" = 1 ]; then say "kept: $root"; return; fi
  if findmnt -rn -o TARGET | grep -q "^$root/"; then
    say "warning: something is still mounted under $root; not deleting it"
  else
    rm -rf --one-file-system "$root"
  fi
}
trap 'rc=$?; cleanup; say "commit $commit of $ROOT, in a fresh Debian 12 root (debootstrap minbase, no CUDA)"; zt_stage_summary; exit $rc' EXIT
trap 'exit 130' INT TERM
# (stage runs these functions as `f || rc=$?`, where set -e does not apply: failures return)
new_root() {
  tar -C "$root" -xf "$tarball" || return 1
  # apt inside gets the mirror this machine uses; DNS as here.
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/" && rm -f "$root/etc/apt/sources.list"
  fi
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  # HTTPS as here too: this machine's own trust anchors (/usr/local/share/ca-certificates, e.g. the
  # CA of a TLS-inspecting proxy in front of npm's registry), for the ca-certificates package to
  # add when install-deps installs it, and for node (NODE_EXTRA_CA_CERTS in in_root). The network
  # of this machine, not a dependency of the project: a machine without such a proxy needs none.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    mkdir -p "$root/usr/local/share/ca-certificates" &&
      cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" &&
      cat /usr/local/share/ca-certificates/*.crt >"$root/etc/zt-host-extra-ca.pem"
  fi
  # /proc, /sys and /dev (shared memory for MPI ranks, /dev/null ...); rslave: unmounting them here
  # never propagates back to this machine's own mounts.
  { mount -t proc proc "$root/proc" &&
    mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys" &&
    mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"; } 2>/dev/null ||
    cannot "mounting /proc, /sys and /dev into the root was refused (a container without CAP_SYS_ADMIN?)"
  git clone -q "$ROOT" "$root/root/project"
}
in_root() {
  local ca=()
  [ -f "$root/etc/zt-host-extra-ca.pem" ] && ca=(NODE_EXTRA_CA_CERTS=/etc/zt-host-extra-ca.pem)
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 CI=true "${ca[@]}" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "cd /root/project && $1"
}

stage base base_system
stage root new_root
# ---- the commands: each a stage; the first that fails ends the run with its status ----
for c in "${cmds[@]}"; do
  rc=0
  stage "$c" in_root "$c" || rc=$?
  # 77 from here means "could not test": a command that exits 77 failed, it did not skip.
  if ((rc == 77)); then exit 1; fi
  if ((rc != 0)); then exit $rc; fi
done
