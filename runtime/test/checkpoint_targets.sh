#!/bin/sh
# checkpoint_targets.sh DIR A B [LAUNCHER...]
#
# A and B are checkpoint_targets_test.c linked for two targets. Each saves
# the same parameter table into DIR/a and DIR/b (run as LAUNCHER A save
# DIR/a: e.g. mpirun -n 2, or nothing); the two checkpoint files must be
# the same bytes, and each program must resume the other's, bit for bit.
set -eu
dir=$1 a=$2 b=$3
shift 3
rm -rf "$dir"
mkdir -p "$dir"
"$@" "$a" save "$dir/a"
"$@" "$b" save "$dir/b"
if ! cmp "$dir/a/checkpoint.safetensors" "$dir/b/checkpoint.safetensors"; then
  echo "checkpoint_targets: $(basename "$a") and $(basename "$b") wrote different checkpoints of the same table (kept in $dir)" >&2
  exit 1
fi
"$@" "$a" resume "$dir/b"
"$@" "$b" resume "$dir/a"
echo "checkpoint_targets: $(basename "$a") and $(basename "$b"): the same bytes ($(wc -c < "$dir/a/checkpoint.safetensors") bytes), each resumed the other's"
rm -rf "$dir"
