"""Reads `cargo ... --message-format=json` on stdin; prints the executable of the named target."""
import json
import sys

name = sys.argv[1]
exe = None
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if msg.get("reason") == "compiler-artifact" and msg.get("target", {}).get("name") == name:
        exe = msg.get("executable") or exe
if not exe:
    sys.exit(f"no executable for target {name!r} in cargo's output")
print(exe)
