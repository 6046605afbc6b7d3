"""What an nvidia-smi-based exporter pays per scrape: one `nvidia-smi --query-gpu` process."""
import json
import resource
import subprocess
import time

QUERY = ("index,uuid,name,temperature.gpu,utilization.gpu,utilization.memory,memory.total,"
         "memory.used,power.draw,power.limit,clocks.sm,clocks.mem")
n, wall = 20, []
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
for _ in range(n):
    t = time.perf_counter()
    subprocess.run(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader"], check=True, capture_output=True)
    wall.append((time.perf_counter() - t) * 1000)
r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
wall.sort()
cpu = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / n * 1000
print(json.dumps({"name": "nvidia-smi --query-gpu (per scrape)", "p50_ms": wall[n // 2], "p99_ms": wall[-1], "cpu_ms_per_scrape": cpu}))
