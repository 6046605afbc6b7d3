#!/bin/bash
# The measurements read per-process and other full-detail families.
export TESSERA_METRICS_DETAIL=full
# GPM while Nsight Compute holds the counters: raw NVML answers and tessera's exposition.
# Needs a tessera build beside this script (./tessera), the CUDA toolkit's ncu, PyTorch and
# nvidia-ml-py. Reads the GPU only: no setting is changed.
cd "$(dirname "$0")"
nvidia-smi -L; which ncu; ncu --version | tail -1
scrape() {
  python3 - "$1" <<'PY'
import sys, urllib.request
t = urllib.request.urlopen("http://127.0.0.1:19949/metrics", timeout=5).read().decode()
keep = ("gpu_gpm_available", "gpu_sm_activity_ratio", "gpu_utilization_ratio", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE", "DCGM_FI_PROF_PCIE", "DCGM_FI_PROF_NVLINK", "DCGM_FI_PROF_DRAM", "tessera_nvml_errors")
print("==", sys.argv[1])
for l in t.splitlines():
    if l.startswith(keep):
        print(l)
PY
}
./tessera --kubelet.enabled=false --kube.enabled=false --web.listen-address=127.0.0.1:19949 --web.enable-debug --metrics.dcgm-compat > $OUT/tessera.log 2>&1 &
T=$!
sleep 4
scrape idle > $OUT/scrapes.txt
python3 mm.py 12 > $OUT/mm-plain.log 2>&1 &
sleep 8; scrape load-no-profiler >> $OUT/scrapes.txt; wait $!
python3 gpm_probe.py plain 2 > $OUT/probe.txt 2>&1
ncu --clock-control none --launch-count 30 --metrics sm__throughput.avg.pct_of_peak_sustained_elapsed python3 mm.py 40 > $OUT/ncu.log 2>&1 &
N=$!
sleep 6
for i in 1 2 3 4 5 6; do scrape "under-ncu-$i" >> $OUT/scrapes.txt; python3 gpm_probe.py "under-ncu-$i" 1 >> $OUT/probe.txt 2>&1; sleep 2; done
curl -s 127.0.0.1:19949/debug/attribution > $OUT/debug-under-ncu.json 2>/dev/null || python3 -c 'import urllib.request;print(urllib.request.urlopen("http://127.0.0.1:19949/debug/attribution").read().decode())' > $OUT/debug-under-ncu.json
wait $N
sleep 3; scrape after-ncu >> $OUT/scrapes.txt
python3 gpm_probe.py after 1 >> $OUT/probe.txt 2>&1
kill $T
cat $OUT/probe.txt; grep -c . $OUT/scrapes.txt; tail -5 $OUT/ncu.log
