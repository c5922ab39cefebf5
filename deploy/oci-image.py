#!/usr/bin/env python3
"""Assemble an OCI image archive from a root filesystem folder, no engine.

    oci-image.py pack --rootfs DIR --output FILE.oci.tar --tag NAME:TAG \
                      --entrypoint '["/usr/local/bin/x"]' --cmd '["run"]' \
                      [--label k=v ...] [--expose 9847/tcp] [--epoch SECONDS]
    oci-image.py unpack --archive FILE.oci.tar --rootfs DIR
    oci-image.py entrypoint --archive FILE.oci.tar

`pack` writes one gzip-compressed layer holding DIR (owned by root, every
timestamp set to --epoch, entries sorted), the image config, the manifest and
index.json of an OCI image layout, and tars the layout into FILE: the
`oci-archive:` format that podman, skopeo, buildah and containerd's
`ctr import --oci` read. The same inputs give a byte-identical archive.

`unpack` applies the layers of an archive's single image onto DIR, checking
every blob's digest against the manifest; `entrypoint` prints the image's
Entrypoint followed by its Cmd as JSON.

Only the standard library is used, so CI needs nothing beyond python3.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import stat
import sys
import tarfile
from pathlib import Path

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer_tar(rootfs: Path, epoch: int) -> bytes:
    """A tar of rootfs with deterministic metadata: root-owned, fixed mtime."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = sorted(p for p in rootfs.rglob("*"))
        for path in paths:
            rel = path.relative_to(rootfs).as_posix()
            st = path.lstat()
            info = tarfile.TarInfo(rel)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = epoch
            info.mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif stat.S_ISLNK(st.st_mode):
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(path)
                tar.addfile(info)
            elif stat.S_ISREG(st.st_mode):
                info.size = st.st_size
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                raise SystemExit(f"oci-image.py: {path}: not a file, folder or link")
    return buf.getvalue()


def add_bytes(tar: tarfile.TarFile, name: str, data: bytes, epoch: int, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = epoch
    info.mode = mode
    info.uid = info.gid = 0
    tar.addfile(info, io.BytesIO(data))


def add_dir(tar: tarfile.TarFile, name: str, epoch: int) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mtime = epoch
    info.mode = 0o755
    tar.addfile(info)


def canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def pack(args: argparse.Namespace) -> None:
    rootfs = Path(args.rootfs)
    epoch = int(args.epoch)
    layer = layer_tar(rootfs, epoch)
    # mtime=0 and no file name in the gzip header: the same bytes every time.
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0, filename="", compresslevel=9) as g:
        g.write(layer)
    layer_gz = gz.getvalue()
    created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    labels = dict(kv.split("=", 1) for kv in args.label)
    config = {
        "created": created,
        "architecture": args.arch,
        "os": "linux",
        "config": {
            "User": args.user,
            "Entrypoint": json.loads(args.entrypoint),
            "Cmd": json.loads(args.cmd),
            "WorkingDir": "/",
            "Env": ["PATH=/usr/local/bin", *args.env],
            "ExposedPorts": {p: {} for p in args.expose},
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [sha256(layer)]},
        "history": [
            {"created": created, "created_by": "deploy/build-image.sh (FROM scratch, one layer)"}
        ],
    }
    config_bytes = canonical(config)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": sha256(config_bytes), "size": len(config_bytes)},
        "layers": [{"mediaType": OCI_LAYER_GZIP, "digest": sha256(layer_gz), "size": len(layer_gz)}],
        "annotations": {k: v for k, v in labels.items() if k.startswith("org.opencontainers.")},
    }
    manifest_bytes = canonical(manifest)
    index = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            {
                "mediaType": OCI_MANIFEST,
                "digest": sha256(manifest_bytes),
                "size": len(manifest_bytes),
                "platform": {"architecture": args.arch, "os": "linux"},
                "annotations": {"org.opencontainers.image.ref.name": args.tag},
            }
        ],
    }
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        add_bytes(tar, "oci-layout", canonical({"imageLayoutVersion": "1.0.0"}), epoch)
        add_bytes(tar, "index.json", canonical(index), epoch)
        add_dir(tar, "blobs", epoch)
        add_dir(tar, "blobs/sha256", epoch)
        for blob in sorted((config_bytes, manifest_bytes, layer_gz), key=sha256):
            add_bytes(tar, "blobs/sha256/" + sha256(blob).split(":", 1)[1], blob, epoch)
    tmp.replace(out)
    print(
        json.dumps(
            {
                "archive": str(out),
                "manifest": sha256(manifest_bytes),
                "archive_bytes": out.stat().st_size,
                "layer_gzip_bytes": len(layer_gz),
                "unpacked_bytes": sum(
                    p.lstat().st_size for p in rootfs.rglob("*") if p.is_file() and not p.is_symlink()
                ),
            }
        )
    )


class Archive:
    """An OCI archive with one image, every blob checked against its digest."""

    def __init__(self, path: Path):
        self.tar = tarfile.open(path)

    def blob(self, digest: str) -> bytes:
        algo, hexd = digest.split(":", 1)
        member = self.tar.extractfile(f"blobs/{algo}/{hexd}")
        if member is None:
            raise SystemExit(f"oci-image.py: blob {digest} missing")
        data = member.read()
        if sha256(data) != digest:
            raise SystemExit(f"oci-image.py: blob {digest} does not match its digest")
        return data

    def manifest(self) -> dict:
        index = json.loads(self.tar.extractfile("index.json").read())  # type: ignore[union-attr]
        manifests = index["manifests"]
        if len(manifests) != 1:
            raise SystemExit(f"oci-image.py: expected one image in index.json, found {len(manifests)}")
        return json.loads(self.blob(manifests[0]["digest"]))

    def config(self) -> dict:
        return json.loads(self.blob(self.manifest()["config"]["digest"]))


def unpack(args: argparse.Namespace) -> None:
    archive = Archive(Path(args.archive))
    manifest = archive.manifest()
    config = archive.config()
    rootfs = Path(args.rootfs)
    rootfs.mkdir(parents=True, exist_ok=True)
    diff_ids = config["rootfs"]["diff_ids"]
    for layer, diff_id in zip(manifest["layers"], diff_ids, strict=True):
        data = archive.blob(layer["digest"])
        if layer["mediaType"].endswith("+gzip"):
            data = gzip.decompress(data)
        if sha256(data) != diff_id:
            raise SystemExit(f"oci-image.py: layer {layer['digest']} does not match diff_id {diff_id}")
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar.getmembers():
                if Path(member.name).name.startswith(".wh."):
                    raise SystemExit("oci-image.py: whiteouts are not supported (one-layer images only)")
            tar.extractall(rootfs, filter="tar" if hasattr(tarfile, "tar_filter") else None)
    print(f"unpacked {len(diff_ids)} layer(s) into {rootfs}")


def entrypoint(args: argparse.Namespace) -> None:
    cfg = Archive(Path(args.archive)).config()["config"]
    print(json.dumps((cfg.get("Entrypoint") or []) + (cfg.get("Cmd") or [])))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--rootfs", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--tag", required=True)
    p.add_argument("--entrypoint", required=True, help="JSON list")
    p.add_argument("--cmd", default="[]", help="JSON list")
    p.add_argument("--user", default="0:0")
    p.add_argument("--arch", default="amd64")
    p.add_argument("--label", action="append", default=[])
    p.add_argument("--expose", action="append", default=[])
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE for the image config")
    p.add_argument("--epoch", default=os.environ.get("SOURCE_DATE_EPOCH", "0"))
    p.set_defaults(func=pack)
    u = sub.add_parser("unpack")
    u.add_argument("--archive", required=True)
    u.add_argument("--rootfs", required=True)
    u.set_defaults(func=unpack)
    e = sub.add_parser("entrypoint")
    e.add_argument("--archive", required=True)
    e.set_defaults(func=entrypoint)
    args = ap.parse_args()
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
