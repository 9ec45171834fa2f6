cd /work/runs/ksdab
for r in 1 2 3; do
  /work/runs/bin/sgmcmc-ee3fd09 bench --ksd --rows 10000 --repeats 5 --seconds 0.5 > old_run$r.txt 2>&1
  /tmp/sgmcmc-ksdnew bench --ksd --rows 10000 --repeats 5 --seconds 0.5 > new_run$r.txt 2>&1
done
grep -h " 5000   10 " old_run*.txt new_run*.txt
