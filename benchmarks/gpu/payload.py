"""The GPU check's payload: model files, data and wheels too big for one device call, sent in numbered parts.

A device call carries at most 64 MiB (the tracked tree, ~21 MB, included), so ``prepare.sh`` packs what the check
needs into one gzip'd tar stream, cut into parts of at most ``--max-part-mb``, one folder per part
(``.gpu/p1``, ``.gpu/p2``, ...: each a call's ``carry``), each with the same ``MANIFEST.json`` (every part's size
and sha256, every packed file's sha256). On the device, ``receive`` stores each part under ``/tmp/dpnc-gpu`` (which
lasts while the machine stays warm) and ``assemble`` checks them, unpacks and checks every file.

    python benchmarks/gpu/payload.py build --stage DIR --out .gpu [--max-part-mb 36]
    python benchmarks/gpu/payload.py receive .gpu/p1 [--store /tmp/dpnc-gpu]
    python benchmarks/gpu/payload.py assemble [--store /tmp/dpnc-gpu]      # unpacks into STORE/payload

Standard library only (it runs before anything is installed).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import shutil
import sys
import tarfile
import time
from pathlib import Path

MANIFEST = "MANIFEST.json"
PART = "payload.tgz.part"
CHUNK = 1 << 20


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def build(stage: Path, out: Path, max_part_mb: float) -> dict:
    """Pack ``stage`` (files only) into ``out/p<k>/`` parts of at most ``max_part_mb`` MB; return the manifest."""
    files = sorted(p for p in stage.rglob("*") if p.is_file())
    if not files:
        raise SystemExit(f"nothing to pack in {stage}")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("p*"):
        if old.is_dir():
            shutil.rmtree(old)
    stream = out / "payload.tgz"
    with open(stream, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for p in files:
            info = tar.gettarinfo(str(p), arcname=str(p.relative_to(stage)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(p, "rb") as f:
                tar.addfile(info, f)
    size = stream.stat().st_size
    limit = int(max_part_mb * 1e6)
    n = max(1, math.ceil(size / limit))
    per = math.ceil(size / n)
    parts = []
    with open(stream, "rb") as f:
        for k in range(1, n + 1):
            folder = out / f"p{k}"
            folder.mkdir()
            target = folder / f"{PART}{k}"
            left = per if k < n else size - per * (n - 1)
            with open(target, "wb") as g:
                while left > 0:
                    block = f.read(min(CHUNK, left))
                    if not block:
                        break
                    g.write(block)
                    left -= len(block)
            parts.append({"part": k, "file": target.name, "bytes": target.stat().st_size, "sha256": sha256(target)})
    stream.unlink()
    manifest = {"id": hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16], "parts": parts,
                "stream_bytes": size, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "files": {str(p.relative_to(stage)): {"bytes": p.stat().st_size, "sha256": sha256(p)} for p in files}}
    for k in range(1, n + 1):
        (out / f"p{k}" / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def receive(folder: Path, store: Path) -> dict:
    """Copy the part in ``folder`` (``.gpu/p<k>``) to ``store/parts``, checking its sha256 against the manifest."""
    manifest = json.loads((folder / MANIFEST).read_text())
    parts_dir = store / "parts"
    old = store / MANIFEST
    if old.is_file() and json.loads(old.read_text())["id"] != manifest["id"]:   # another payload: start afresh
        shutil.rmtree(parts_dir, ignore_errors=True)
    parts_dir.mkdir(parents=True, exist_ok=True)
    (store / MANIFEST).write_text(json.dumps(manifest))
    received = []
    for entry in manifest["parts"]:
        src = folder / entry["file"]
        if src.is_file():
            digest = sha256(src)
            if digest != entry["sha256"]:
                raise SystemExit(f"part {entry['part']}: sha256 {digest} != manifest {entry['sha256']} ({src})")
            shutil.copyfile(src, parts_dir / entry["file"])
            received.append(entry["part"])
    have = [e["part"] for e in manifest["parts"] if (parts_dir / e["file"]).is_file()]
    print(f"received part(s) {received}; {store} holds parts {have} of {len(manifest['parts'])} "
          f"(payload {manifest['id']})", flush=True)
    return {"received": received, "have": have, "of": len(manifest["parts"])}


def assemble(store: Path) -> Path:
    """Check every part, unpack the stream into ``store/payload`` and check every file; return that folder."""
    manifest = json.loads((store / MANIFEST).read_text())
    dest, done = store / "payload", store / "payload.ok"
    if done.is_file() and done.read_text() == manifest["id"]:
        print(f"payload {manifest['id']} already unpacked in {dest}", flush=True)
        return dest
    missing, bad = [], []
    for e in manifest["parts"]:
        p = store / "parts" / e["file"]
        if not p.is_file():
            missing.append(e["part"])
        elif p.stat().st_size != e["bytes"] or sha256(p) != e["sha256"]:
            bad.append(e["part"])
    if missing or bad:
        raise SystemExit(f"payload {manifest['id']}: parts missing {missing}, corrupt {bad}: send them with "
                         "benchmarks/gpu/receive.sh (see benchmarks/gpu/README.md)")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    start = time.perf_counter()
    with _Concat([store / "parts" / e["file"] for e in manifest["parts"]]) as raw, \
            gzip.GzipFile(fileobj=raw, mode="rb") as gz, tarfile.open(fileobj=gz, mode="r|") as tar:
        for member in tar:
            if not member.isfile() or member.name.startswith(("/", "..")) or "/../" in member.name:
                raise SystemExit(f"unexpected member {member.name!r} in the payload")
            target = dest / member.name
            target.parent.mkdir(parents=True, exist_ok=True)
            with tar.extractfile(member) as src, open(target, "wb") as f:
                shutil.copyfileobj(src, f, CHUNK)
    wrong = [name for name, e in manifest["files"].items()
             if not (dest / name).is_file() or sha256(dest / name) != e["sha256"]]
    if wrong:
        raise SystemExit(f"payload {manifest['id']}: files differ from the manifest after unpacking: {wrong}")
    done.write_text(manifest["id"])
    print(f"payload {manifest['id']}: {len(manifest['files'])} files unpacked and checked in {dest} "
          f"({time.perf_counter() - start:.1f} s)", flush=True)
    return dest


class _Concat:
    """The parts read back to back as one binary file object."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths, self.f = list(paths), None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.f is not None:
            self.f.close()

    def read(self, size: int = -1) -> bytes:
        out = b""
        while size < 0 or len(out) < size:
            if self.f is None:
                if not self.paths:
                    break
                self.f = open(self.paths.pop(0), "rb")
            block = self.f.read(-1 if size < 0 else size - len(out))
            if not block:
                self.f.close()
                self.f = None
                continue
            out += block
        return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("--stage", type=Path, required=True)
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--max-part-mb", type=float, default=36.0)
    r = sub.add_parser("receive")
    r.add_argument("folder", type=Path)
    r.add_argument("--store", type=Path, default=Path(os.environ.get("DPNC_GPU_STORE", "/tmp/dpnc-gpu")))
    a = sub.add_parser("assemble")
    a.add_argument("--store", type=Path, default=Path(os.environ.get("DPNC_GPU_STORE", "/tmp/dpnc-gpu")))
    args = p.parse_args(argv)
    if args.command == "build":
        m = build(args.stage, args.out, args.max_part_mb)
        print(f"payload {m['id']}: {len(m['files'])} files, {m['stream_bytes'] / 1e6:.1f} MB packed, "
              f"{len(m['parts'])} part(s): " + ", ".join(f"p{e['part']} {e['bytes'] / 1e6:.1f} MB" for e in m["parts"]))
    elif args.command == "receive":
        receive(args.folder, args.store)
    else:
        assemble(args.store)


if __name__ == "__main__":
    sys.exit(main())
