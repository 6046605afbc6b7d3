"""The GPU's own energy counter and power, read through libnvidia-ml with ctypes (no pynvml
needed): the reference the energy validation measures tessera against. `NVML_LIBRARY` picks
the library (the dry run passes the fake one)."""
import ctypes
import os
import threading


class Nvml:
    def __init__(self, index):
        self.lib = ctypes.CDLL(os.environ.get("NVML_LIBRARY", "libnvidia-ml.so.1"))
        self._check(self.lib.nvmlInit_v2(), "nvmlInit_v2")
        self.handle = ctypes.c_void_p()
        self._check(self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.handle)),
                    "nvmlDeviceGetHandleByIndex_v2")
        self.lock = threading.Lock()

    @staticmethod
    def _check(rc, call):
        if rc != 0:
            raise RuntimeError(f"{call} returned NVML error {rc}")

    def uuid(self):
        buf = ctypes.create_string_buffer(96)
        self._check(self.lib.nvmlDeviceGetUUID(self.handle, buf, 96), "nvmlDeviceGetUUID")
        return buf.value.decode()

    def name(self):
        buf = ctypes.create_string_buffer(96)
        self._check(self.lib.nvmlDeviceGetName(self.handle, buf, 96), "nvmlDeviceGetName")
        return buf.value.decode()

    def energy_joules(self):
        """Energy since the driver loaded (NVML counts mJ)."""
        mj = ctypes.c_ulonglong()
        with self.lock:
            self._check(self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle, ctypes.byref(mj)),
                        "nvmlDeviceGetTotalEnergyConsumption")
        return mj.value / 1000.0

    def power_watts(self):
        mw = ctypes.c_uint()
        with self.lock:
            self._check(self.lib.nvmlDeviceGetPowerUsage(self.handle, ctypes.byref(mw)),
                        "nvmlDeviceGetPowerUsage")
        return mw.value / 1000.0

    def utilization(self):
        class Util(ctypes.Structure):
            _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]
        u = Util()
        with self.lock:
            self._check(self.lib.nvmlDeviceGetUtilizationRates(self.handle, ctypes.byref(u)),
                        "nvmlDeviceGetUtilizationRates")
        return u.gpu / 100.0

    def shutdown(self):
        self.lib.nvmlShutdown()


class Sampler(threading.Thread):
    """Power, utilization and the energy counter every `period` seconds, into a CSV."""

    def __init__(self, nvml, path, clock, period=0.5):
        super().__init__(daemon=True)
        self.nvml, self.path, self.clock, self.period = nvml, path, clock, period
        self.stopping = threading.Event()

    def run(self):
        with open(self.path, "w") as f:
            f.write("t,energy_j,power_w,util\n")
            while not self.stopping.is_set():
                try:
                    row = (self.clock(), self.nvml.energy_joules(), self.nvml.power_watts(),
                           self.nvml.utilization())
                    f.write("%.3f,%.3f,%.3f,%.2f\n" % row)
                    f.flush()
                except RuntimeError as e:
                    f.write(f"# {e}\n")
                self.stopping.wait(self.period)

    def stop(self):
        self.stopping.set()
        self.join(timeout=5)
