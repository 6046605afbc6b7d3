"""The pass/fail tally the check_*.py scripts share; scripts/test-prometheus.sh sums them."""


class Checker:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def ok(self, msg):
        self.passed += 1
        print(f"ok    {msg}")

    def fail(self, msg):
        self.failed += 1
        print(f"FAIL  {msg}")

    def note(self, msg):
        print(f"note  {msg}")

    def check(self, cond, msg):
        if cond:
            self.ok(msg)
        else:
            self.fail(msg)
