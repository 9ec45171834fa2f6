import re, sys
# usage: diff.py TAG_SHORT TAG_LONG BATCH ROW_BYTES
def parse(t):
    s = open(f"/tmp/ooc/{t}.txt").read()
    m = re.search(r"chain 0: done, (\d+) iterations in ([\d.]+) s", s)
    fsi = int(re.search(r"File system inputs: (\d+)", s).group(1)) * 512
    sys_t = float(re.search(r"System time \(seconds\): ([\d.]+)", s).group(1))
    usr = float(re.search(r"User time \(seconds\): ([\d.]+)", s).group(1))
    return int(m.group(1)), float(m.group(2)), fsi, sys_t, usr
a, b = parse(sys.argv[1]), parse(sys.argv[2])
batch, rb = int(sys.argv[3]), int(sys.argv[4])
di, dt, dfs = b[0] - a[0], b[1] - a[1], b[2] - a[2]
print(f"{sys.argv[2]} - {sys.argv[1]}: {di} iterations in {dt:.2f} s = {di/dt:.0f} it/s; "
      f"rows read {di*batch*rb/dt/1e9:.2f} GB/s; from disk {dfs/dt/1e9:.2f} GB/s ({dfs/1e9:.2f} GB); "
      f"cpu: sys {b[3]-a[3]:.2f} s, user {b[4]-a[4]:.2f} s")
