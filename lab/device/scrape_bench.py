"""Sequential scrapes of a /metrics URL: latency p50/p99, payload bytes, series count."""
import sys
import time
import urllib.request

url, n = sys.argv[1], int(sys.argv[2])
lat = []
body = b""
for _ in range(n):
    t = time.perf_counter()
    body = urllib.request.urlopen(url, timeout=5).read()
    lat.append((time.perf_counter() - t) * 1000)
lat.sort()
series = sum(1 for l in body.decode().splitlines() if l and not l.startswith("#"))
print(f"| {url} | {lat[len(lat)//2]:.2f} | {lat[int(len(lat)*0.99)-1]:.2f} | {len(body)} | {series} |")
