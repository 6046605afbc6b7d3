"""GPU load for validation runs: a matmul loop with a duty cycle, for a fixed time."""
import sys
import time

import torch

def main() -> None:
    size = int(sys.argv[1])          # matrix edge
    busy = float(sys.argv[2])        # fraction of each 100 ms spent launching work
    seconds = float(sys.argv[3])
    dtype = torch.bfloat16 if (len(sys.argv) > 4 and sys.argv[4] == "bf16") else torch.float32
    a = torch.randn(size, size, device="cuda", dtype=dtype)
    b = torch.randn(size, size, device="cuda", dtype=dtype)
    end = time.time() + seconds
    while time.time() < end:
        t0 = time.time()
        while time.time() - t0 < 0.1 * busy:
            (a @ b)
            torch.cuda.synchronize()
        rest = 0.1 - (time.time() - t0)
        if rest > 0:
            time.sleep(rest)

if __name__ == "__main__":
    main()
