"""What a tessera image is, for scripts/test-image.sh: one "ok"/"FAIL" line per check.

    image_inspect.py INSPECT_JSON OCI_DIR LIBS_FILE VERSION ARCH MACHINE

INSPECT_JSON is `podman image inspect`'s output, OCI_DIR the image saved as an OCI layout,
LIBS_FILE the library list scripts/image.sh wrote for it, ARCH the platform it must declare
(amd64, arm64) and MACHINE the ELF machine its binary must be built for (x86_64, aarch64).
"""

import json
import os
import sys
import tarfile

ELF_MACHINES = {0x3E: "x86_64", 0xB7: "aarch64"}


def say(ok, msg):
    print(("ok    " if ok else "FAIL  ") + msg)


def elf_machine(head):
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return "not ELF"
    order = "little" if head[5] == 1 else "big"
    return ELF_MACHINES.get(int.from_bytes(head[18:20], order), "unknown")


def main(inspect, oci, libs_file, version, arch, machine):
    img = json.load(open(inspect))[0]
    cfg = img["Config"]
    labels = cfg.get("Labels") or {}
    say(labels.get("org.opencontainers.image.version") == version
        and labels.get("org.opencontainers.image.source", "").startswith("https://")
        and labels.get("org.opencontainers.image.licenses") == "Apache-2.0",
        f"OCI labels version/source/licenses: {version}, {labels.get('org.opencontainers.image.source')}, {labels.get('org.opencontainers.image.licenses')}")
    say(img.get("Architecture") == arch and img.get("Os") == "linux",
        f"image platform {img.get('Os')}/{img.get('Architecture')} (want linux/{arch})")
    say(cfg.get("User") == "65534:65534", f"image user {cfg.get('User')} (non-root)")
    say(cfg.get("Entrypoint") == ["/opt/tessera/tessera"] and not cfg.get("Cmd"), f"entrypoint {cfg.get('Entrypoint')}")
    size = img.get("Size", 0)
    say(0 < size < 30 * 1000 * 1000, f"image size {size / 1e6:.1f} MB (< 30 MB)")
    # The files of the single layer, against what they must be.
    index = json.load(open(os.path.join(oci, "index.json")))

    def blob(d):
        return os.path.join(oci, "blobs", *d.split(":"))

    manifest = json.load(open(blob(index["manifests"][0]["digest"])))
    files = set()
    head = b""
    for layer in manifest["layers"]:
        with tarfile.open(blob(layer["digest"])) as t:
            for m in t.getmembers():
                if not m.isfile():
                    continue
                name = m.name.lstrip("./")
                files.add("/" + name)
                if name == "opt/tessera/tessera":
                    head = t.extractfile(m).read(20)
                # The probe as shipped, beside OCI_DIR, for test-image.sh's glibc check.
                if name == "opt/tessera/libtessera_probe.so":
                    with open(os.path.join(oci, "..", "probe.so"), "wb") as f:
                        f.write(t.extractfile(m).read())
    got = elf_machine(head)
    say(got == machine, f"/opt/tessera/tessera is an ELF executable for {got} (want {machine})")
    libs = {lib if lib.startswith("/usr/") else "/usr" + lib for lib in open(libs_file).read().split()}
    want = {"/opt/tessera/tessera", "/opt/tessera/libtessera_probe.so",
            "/etc/passwd", "/etc/group",
            "/etc/ssl/certs/ca-certificates.crt"} | libs
    say(files == want, f"image files = binary, CUDA probe, the {len(libs)} libraries it needs, CA roots, passwd/group"
        + ("" if files == want else f" (extra {sorted(files - want)}, missing {sorted(want - files)})"))


def manifest_list(archive):
    """The platforms a multi-architecture OCI archive's image index names, one "ok"/"FAIL" line."""
    with tarfile.open(archive) as t:
        def read(name):
            return json.load(t.extractfile(name))

        index = read("index.json")
        platforms = []
        for d in index.get("manifests", []):
            if d.get("mediaType") == "application/vnd.oci.image.index.v1+json":
                inner = read("blobs/" + d["digest"].replace(":", "/"))
                platforms += [m.get("platform", {}).get("architecture") for m in inner.get("manifests", [])]
            else:
                platforms.append(d.get("platform", {}).get("architecture"))
    say(sorted(platforms) == ["amd64", "arm64"],
        f"manifest list {os.path.basename(archive)} names {len(platforms)} images: {', '.join(map(str, platforms))}")


if __name__ == "__main__":
    if sys.argv[1] == "--manifest-list":
        manifest_list(sys.argv[2])
    else:
        main(*sys.argv[1:])
