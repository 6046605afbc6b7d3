#!/bin/bash
# The measurements read per-process and other full-detail families.
export TESSERA_METRICS_DETAIL=full
# The new NVML reads on a real H100: HBM temperature (field value), remapped rows (raw call),
# encoder/decoder utilization, GPM FP pipes and PCIe, against nvidia-smi. Reads only.
cd "$(dirname "$0")"
./tessera --kubelet.enabled=false --kube.enabled=false --web.listen-address=127.0.0.1:19949 --web.dcgm-listen-address=127.0.0.1:19400 --metrics.dcgm-compat > $OUT/tessera2.log 2>&1 &
T=$!
python3 mm.py 14 > /dev/null 2>&1 &
M=$!
sleep 13
python3 -c 'import urllib.request;print(urllib.request.urlopen("http://127.0.0.1:19400/metrics").read().decode())' > $OUT/compat-real.txt
python3 -c 'import urllib.request;print(urllib.request.urlopen("http://127.0.0.1:19949/metrics").read().decode())' > $OUT/all-real.txt
nvidia-smi --query-gpu=temperature.gpu,temperature.memory,utilization.gpu,utilization.encoder,utilization.decoder,memory.used,memory.reserved,memory.free,clocks.sm,clocks.mem,power.draw --format=csv > $OUT/smi.csv
nvidia-smi -q -d ROW_REMAPPER > $OUT/smi-remap.txt
wait $M
kill $T
grep -E "^DCGM" $OUT/compat-real.txt | sed -E 's/\{.*\}//' ; cat $OUT/smi.csv; grep -A8 -i "remapp" $OUT/smi-remap.txt | head -12
grep -E "^(gpu_gpm_available|gpu_remapped|gpu_row_remap|gpu_temperature|gpu_encoder|gpu_decoder|tessera_nvml_errors)" $OUT/all-real.txt
