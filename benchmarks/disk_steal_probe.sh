#!/usr/bin/env bash
# How much CPU the hypervisor takes from this machine per MiB of disk I/O,
# measured without zerotorch: dd writes and reads MIB MiB with O_DIRECT in
# DIR, once with the CPUs idle and once with every CPU running a busy loop
# (as training keeps them), and the machine's steal time (/proc/stat) is
# read around each transfer. A virtual disk whose emulation runs on the same
# physical cores charges its work to the guest as steal; while every core
# computes, that time comes out of the step however well the I/O overlaps.
#
#   benchmarks/disk_steal_probe.sh                  # 1024 MiB under /tmp
#   DIR=/mnt/nvme MIB=4096 benchmarks/disk_steal_probe.sh
#
# Prints one RESULT line per transfer:
#   RESULT probe=disk_steal cpus=busy op=write mib=1024 seconds=3.51 steal_s=2.01 steal_ms_per_mib=1.96
set -euo pipefail

DIR=${DIR:-/tmp/zt_disk_steal_probe}
MIB=${MIB:-1024}
if ! [[ "$MIB" =~ ^[1-9][0-9]*$ ]]; then
  echo "disk_steal_probe.sh: MIB must be a positive whole number of MiB, got '$MIB'" >&2
  exit 2
fi
mkdir -p "$DIR"
FILE="$DIR/probe.$$"
HZ=$(getconf CLK_TCK)
CPUS=$(nproc)
BUSY=()
cleanup() {
  for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -f "$FILE"
}
trap cleanup EXIT

steal_ticks() { awk '/^cpu /{print $9}' /proc/stat; }
now() { date +%s.%N; }

# One transfer: op (write|read); prints its RESULT line.
measure() {
  local cpus=$1 op=$2 s0 t0 s1 t1
  s0=$(steal_ticks)
  t0=$(now)
  if [ "$op" = write ]; then
    dd if=/dev/zero of="$FILE" bs=1M count="$MIB" oflag=direct status=none
  else
    dd if="$FILE" of=/dev/null bs=1M iflag=direct status=none
  fi
  t1=$(now)
  s1=$(steal_ticks)
  awk -v cpus="$cpus" -v op="$op" -v mib="$MIB" -v t0="$t0" -v t1="$t1" -v s="$((s1 - s0))" -v hz="$HZ" 'BEGIN {
    printf "RESULT probe=disk_steal cpus=%s op=%s mib=%d seconds=%.2f steal_s=%.2f steal_ms_per_mib=%.2f\n",
      cpus, op, mib, t1 - t0, s / hz, 1000 * s / hz / mib }'
}

echo "disk_steal_probe: $MIB MiB through $DIR ($(df -h --output=source "$DIR" | tail -1)), $CPUS CPUs"
measure idle write
measure idle read
for ((i = 0; i < CPUS; ++i)); do
  (while :; do :; done) &
  BUSY+=($!)
done
sleep 1
# Steal with the CPUs busy and no I/O: the baseline the transfers add to.
s0=$(steal_ticks)
sleep 3
s1=$(steal_ticks)
awk -v s="$((s1 - s0))" -v hz="$HZ" 'BEGIN { printf "RESULT probe=disk_steal cpus=busy op=none seconds=3.00 steal_s=%.2f\n", s / hz }'
measure busy write
measure busy read
