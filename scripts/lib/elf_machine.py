"""Prints an ELF file's machine (x86_64, aarch64, or the number), read from its header.

Used by scripts/build-arm64.sh and scripts/test-image.sh; `file` would do, but is not on every
machine the image test runs on.
"""

import struct
import sys

MACHINES = {0x3E: "x86_64", 0xB7: "aarch64"}


def machine(path: str) -> str:
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return "not-elf"
    order = "<" if head[5] == 1 else ">"
    (e_machine,) = struct.unpack_from(order + "H", head, 18)
    return MACHINES.get(e_machine, str(e_machine))


if __name__ == "__main__":
    print(machine(sys.argv[1]))
