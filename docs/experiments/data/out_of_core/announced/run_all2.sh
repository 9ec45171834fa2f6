#!/bin/bash
# As run_all.sh, plus the uniform scheme (30 and 90 iterations), for the build with per-row
# announcements and MADV_RANDOM on out-of-core mappings.
cd /tmp/ooc
for r in 1 2 3; do
  echo "round $r"
  echo -n "dd: "; ./ddrate.sh
  for it in 10000 30000; do ./bench.sh $BIN block $it 10000 2048 s${r}_b10k_$it >/dev/null; done
  python3 diff.py s${r}_b10k_10000 s${r}_b10k_30000 10000 40
  for it in 30 90; do ./bench.sh $BIN uniform $it 10000 2048 s${r}_u10k_$it >/dev/null; done
  python3 diff.py s${r}_u10k_30 s${r}_u10k_90 10000 40
  echo -n "dd: "; ./ddrate.sh
done
