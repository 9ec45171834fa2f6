#!/bin/bash
# Out-of-core block SGLD, 150M x 10 f32 (6 GB) in a 2 GiB memory cgroup; rates by differencing
# two run lengths (so that loading and the finiteness scan cancel); dd before and after each round.
cd /tmp/ooc
for r in 1 2 3; do
  echo "round $r"
  echo -n "dd: "; ./ddrate.sh
  for it in 10000 30000; do ./bench.sh $BIN block $it 10000 2048 r${r}_b10k_$it >/dev/null; done
  python3 diff.py r${r}_b10k_10000 r${r}_b10k_30000 10000 40
  for it in 1000 3000; do ./bench.sh $BIN block $it 100000 2048 r${r}_b100k_$it >/dev/null; done
  python3 diff.py r${r}_b100k_1000 r${r}_b100k_3000 100000 40
  echo -n "dd: "; ./ddrate.sh
done
