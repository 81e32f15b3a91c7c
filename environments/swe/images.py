"""The Docker images of the SWE sandboxes, built locally from Debian's packages (no registry).

* ``envgym-swe-base:bookworm``: a Debian bookworm root file system made by ``debootstrap
  --variant=minbase`` with python3, Debian's pytest and pytest-timeout, and git (the interpreter
  the bwrap sandbox uses from the host), imported with ``docker import``; an empty ``/workspace``
  owned by the sandbox user (uid 1000).
* ``envgym-swe/<library>:<version>``: the base plus one layer holding the library's pristine tree
  at ``/workspace`` (``FROM`` the base, ``COPY --chown=1000:1000``). A container's writable layer
  then gives every episode a fresh copy for free, and the pristine bytes live only in a lower image
  layer that no process in the container can read (a readable ``/opt/src`` would hand the agent
  the original of the mutated file).

* the bwrap sandboxes' system (:data:`envgym.sandbox.bwrap.DEFAULT_ROOTFS`): the base image's
  root file system exported to a folder, so that a bwrap sandbox sees the same minimal Debian as
  a container and nothing of the host's ``/usr`` (whose Python packages hold answers: Debian's
  ``six.py`` is the gold patch of every ``six`` task).

``python -m envgym.environments.swe.images build [--library NAME] [--force]`` builds what is
missing (existing images are kept unless ``--force``); scripts/setup.sh runs it after fetching the
libraries. ``python -m envgym.environments.swe.images list`` shows what exists.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from envgym.environments.swe import libraries

from envgym.errors import NotAvailableError
from envgym.sandbox import DEFAULT_ROOTFS, ROOTFS_ENV, DockerSandbox

__all__ = [
    "BASE_IMAGE",
    "DEBIAN_PACKAGES",
    "build",
    "build_base",
    "build_library",
    "build_rootfs",
    "image_exists",
    "library_image",
]

log = logging.getLogger(__name__)

BASE_IMAGE = "envgym-swe-base:bookworm"
#: What debootstrap adds to the minimal system: the sandboxes' interpreter and test runner.
DEBIAN_PACKAGES = ("python3", "python3-pytest", "python3-pytest-timeout", "git")
SUITE = "bookworm"
#: The sandbox user in every image (DockerSandbox re-owns /workspace to its own uid per episode).
AGENT_UID = 1000


def library_image(lib: libraries.Library) -> str:
    """``envgym-swe/<name>:<version>``: the image whose /workspace holds ``lib``'s pristine tree."""
    return f"envgym-swe/{lib.name}:{lib.version}"


def _client():
    return DockerSandbox.client()


def image_exists(name: str) -> bool:
    """Whether the local engine has the image ``name``."""
    from docker.errors import ImageNotFound

    try:
        _client().images.get(name)
    except ImageNotFound:
        return False
    return True


def build_base(*, force: bool = False, mirror: str | None = None) -> bool:
    """Build :data:`BASE_IMAGE` with debootstrap (about a minute, root only); True when built now."""
    if not force and image_exists(BASE_IMAGE):
        log.info("%s exists: kept", BASE_IMAGE)
        return False
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise NotAvailableError(
            "building the SWE base image needs debootstrap: apt-get install debootstrap (scripts/setup.sh does it)."
        )
    if os.geteuid() != 0:
        raise NotAvailableError("debootstrap needs root: run scripts/setup.sh (or this command) as root.")
    if shutil.which("docker") is None:
        raise NotAvailableError("docker import needs the docker CLI: apt-get install docker.io (scripts/setup.sh).")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="envgym-swe-rootfs-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp) / "rootfs"
        command = [
            debootstrap,
            "--variant=minbase",
            f"--include={','.join(DEBIAN_PACKAGES)}",
            SUITE,
            str(rootfs),
        ]
        if mirror:
            command.append(mirror)
        log.info("debootstrap: %s", " ".join(command))
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise NotAvailableError(
                f"debootstrap failed ({done.returncode}): {done.stderr[-2000:] or done.stdout[-2000:]}"
            )
        _prepare_rootfs(rootfs)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        changes = [
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENV LANG=C.UTF-8",
            "WORKDIR /workspace",
            'CMD ["/bin/bash"]',
        ]
        args = ["docker", "import"]
        for change in changes:
            args += ["--change", change]
        imported = subprocess.run(
            [*args, "-", BASE_IMAGE], stdin=tar.stdout, capture_output=True, text=True, check=False
        )
        assert tar.stdout is not None
        tar.stdout.close()
        tar.wait()
        if imported.returncode != 0 or tar.returncode != 0:
            raise NotAvailableError(f"docker import of {BASE_IMAGE} failed: {imported.stderr[-2000:]}")
    log.info("built %s in %.1f s", BASE_IMAGE, time.perf_counter() - started)
    return True


def _prepare_rootfs(rootfs: Path) -> None:
    """The sandbox user, an empty /workspace it owns, and no package caches."""
    with open(rootfs / "etc/passwd", "a", encoding="utf-8") as handle:
        handle.write(f"agent:x:{AGENT_UID}:{AGENT_UID}::/tmp:/bin/bash\n")
    with open(rootfs / "etc/group", "a", encoding="utf-8") as handle:
        handle.write(f"agent:x:{AGENT_UID}:\n")
    workspace = rootfs / "workspace"
    workspace.mkdir(exist_ok=True)
    os.chown(workspace, AGENT_UID, AGENT_UID)
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        folder = rootfs / cache
        if folder.is_dir():
            for entry in folder.iterdir():
                if entry.is_file():
                    entry.unlink()


def build_library(lib: libraries.Library, *, force: bool = False) -> bool:
    """Build :func:`library_image` for ``lib`` on top of the base; True when built now."""
    name = library_image(lib)
    if not force and image_exists(name):
        log.info("%s exists: kept", name)
        return False
    if not image_exists(BASE_IMAGE):
        build_base()
    tree = libraries.source_tree(lib)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="envgym-swe-image-") as tmp:
        context = Path(tmp)
        shutil.copytree(tree, context / "tree", symlinks=True)
        (context / "Dockerfile").write_text(
            f"FROM {BASE_IMAGE}\n"
            f"COPY --chown={AGENT_UID}:{AGENT_UID} tree/ /workspace/\n"
            f'LABEL envgym.swe.library="{lib.name}" envgym.swe.version="{lib.version}"\n'
        )
        _client().images.build(path=str(context), tag=name, rm=True, forcerm=True, network_mode="none")
    log.info("built %s in %.1f s", name, time.perf_counter() - started)
    return True


def build_rootfs(*, force: bool = False) -> bool:
    """Export :data:`BASE_IMAGE`'s file system to the bwrap sandboxes' root (``$ENVGYM_SANDBOX_ROOTFS``
    or :data:`DEFAULT_ROOTFS`); True when made now. The folder appears whole or not at all (it is
    unpacked next to its place and renamed)."""
    chosen = os.environ.get(ROOTFS_ENV, DEFAULT_ROOTFS)
    if chosen == "host":
        return False
    target = Path(chosen)
    if not force and (target / "usr" / "bin" / "python3").exists():
        log.info("%s exists: kept", target)
        return False
    if os.geteuid() != 0:
        raise NotAvailableError("unpacking the sandbox root file system needs root: run scripts/setup.sh as root.")
    if not image_exists(BASE_IMAGE):
        build_base()
    started = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    created = subprocess.run(
        ["docker", "create", "--network", "none", BASE_IMAGE, "/bin/true"], capture_output=True, text=True, check=False
    )
    if created.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise NotAvailableError(f"docker create {BASE_IMAGE} failed: {created.stderr[-2000:]}")
    container = created.stdout.strip()
    try:
        export = subprocess.Popen(["docker", "export", container], stdout=subprocess.PIPE)
        unpacked = subprocess.run(
            ["tar", "-x", "--numeric-owner", "-C", str(staging)], stdin=export.stdout, capture_output=True, check=False
        )
        assert export.stdout is not None
        export.stdout.close()
        export.wait()
        if export.returncode != 0 or unpacked.returncode != 0:
            raise NotAvailableError(
                f"exporting {BASE_IMAGE} failed: {unpacked.stderr.decode(errors='replace')[-2000:]}"
            )
        os.chmod(staging, 0o755)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}-old-", dir=target.parent))
            os.rename(target, old / "rootfs")
            shutil.rmtree(old, ignore_errors=True)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)
    log.info("unpacked %s to %s in %.1f s", BASE_IMAGE, target, time.perf_counter() - started)
    return True


def build(names: Sequence[str] | None = None, *, force: bool = False) -> list[str]:
    """Build the base and the library images that are missing; returns the images built now."""
    try:
        _client()
    except NotAvailableError as err:
        raise NotAvailableError(f"cannot build the SWE images: {err}") from err
    built: list[str] = []
    if build_base(force=force):
        built.append(BASE_IMAGE)
    if build_rootfs(force=force):
        built.append(os.environ.get(ROOTFS_ENV, DEFAULT_ROOTFS))
    chosen = libraries.LIBRARIES if not names else tuple(libraries.by_name(n) for n in names)
    for lib in chosen:
        if build_library(lib, force=force):
            built.append(library_image(lib))
    return built


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m envgym.environments.swe.images", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    build_cmd = sub.add_parser("build", help="build the missing images (idempotent)")
    build_cmd.add_argument("--library", action="append", help="only this library (repeatable); default: all")
    build_cmd.add_argument("--force", action="store_true", help="rebuild images that exist")
    sub.add_parser("list", help="show which images exist")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        if args.command == "build":
            built = build(args.library, force=args.force)
            print("built: " + (", ".join(built) if built else "nothing (all images exist)"))
        else:
            for name in [BASE_IMAGE, *(library_image(lib) for lib in libraries.LIBRARIES)]:
                print(f"{name}\t{'present' if image_exists(name) else 'missing'}")
    except NotAvailableError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
