# Prints, per sampler, the last MAMBA-KSD round of each log: its arms, the draws per arm and the winner's.
# Usage (from docs/experiments/data): python3 mamba_bnn_last_round.py mamba_bnn_run2.log mamba_bnn_run2b.log mamba_bnn_run3/experiment.log mamba_bnn_run3b/experiment.log mamba_bnn_run4_full/experiment.log
import re
import sys

for f in sys.argv[1:]:
    last={}
    for line in open(f, errors='replace'):
        m=re.search(r'\] (\S+): MAMBA-KSD round (\d+) \((\d+) arms.*?\): (.*)$',line)
        if m:
            s,r,arms,rest=m.groups()
            draws=[int(x) for x in re.findall(r'\((\d+) draws\)',rest)]
            win=re.search(r'\*?([^;]*?) [\d.e+-]+ \((\d+) draws\)',rest)
            last[s]=(int(r),int(arms),draws,win.group(1).strip('*'),int(win.group(2)))
    print('==',f)
    for s,(r,arms,draws,w,wd) in last.items():
        print(f'  {s}: last round {r} ({arms} arms), draws per arm {min(draws)}-{max(draws)}; winner {w} on {wd} draws')
