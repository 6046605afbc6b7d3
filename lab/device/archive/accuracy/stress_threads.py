"""The probe under concurrency: several threads launch kernels on their own streams while
the probe traces them in duty cycles; another thread copies memory and
synchronizes. Checks every result, then prints one line. Usage: stress_threads.py SECONDS"""
import torch, threading, time, sys
dur = float(sys.argv[1]); errors = []; launched = [0] * 4
def launcher(i):
    s = torch.cuda.Stream(); x = torch.ones(4096, device="cuda")
    with torch.cuda.stream(s):
        t = time.time(); n = 0
        while time.time() - t < dur:
            for _ in range(200): x.add_(1.0)
            n += 200
        s.synchronize()
    if float(x[0]) != 1.0 + n: errors.append(f"thread {i}: {float(x[0])} != {1.0 + n}")
    launched[i] = n
def copier():
    t = time.time(); h = torch.arange(1 << 20, dtype=torch.float32)
    while time.time() - t < dur:
        d = h.to("cuda", non_blocking=True); torch.cuda.synchronize()
        if not torch.equal(d.cpu(), h): errors.append("copy mismatch")
        time.sleep(0.003)
ts = [threading.Thread(target=launcher, args=(i,)) for i in range(4)] + [threading.Thread(target=copier)]
[t.start() for t in ts]; [t.join() for t in ts]
print(f"stress: {sum(launched)} kernels from 4 threads, errors {errors or 'none'}")
sys.exit(1 if errors else 0)
