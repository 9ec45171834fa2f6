#!/bin/bash
# usage: bench.sh BIN SCHEME ITER BATCH LIMIT_MIB TAG
BIN=$1; SCHEME=$2; ITER=$3; BATCH=$4; LIM=$5; TAG=$6
CG=/sys/fs/cgroup/memory/ooc
mkdir -p $CG
echo $((LIM<<20)) > $CG/memory.limit_in_bytes
sed "s/ITER/$ITER/; s/^batch_size = .*/batch_size = $BATCH/" /tmp/ooc/run_$SCHEME.tmpl > /tmp/ooc/$TAG.toml
rm -rf /tmp/ooc/out_$TAG
sync; echo 3 > /proc/sys/vm/drop_caches
bash -c "echo \$\$ > $CG/cgroup.procs; exec env $ENVV /usr/bin/time -v timeout 400 $BIN run /tmp/ooc/$TAG.toml --out /tmp/ooc/out_$TAG" > /tmp/ooc/$TAG.txt 2>&1
echo "exit $?" >> /tmp/ooc/$TAG.txt
grep -E "it/s|iterations/s|Elapsed|System time|User time|Maximum resident|Major" /tmp/ooc/$TAG.txt
