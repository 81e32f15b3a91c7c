"""Docker images that serve one environment family with ``envgym serve``: built here, no registry.

``envgym image build FAMILY`` makes ``envgym-serve/<family>:latest`` from files on this machine
alone (``docker build --network none``; nothing is downloaded):

* the base is the SWE sandboxes' Debian bookworm image (:data:`BASE_IMAGE`, made by
  ``python -m envgym.environments.swe.images build`` from Debian's packages; its ``python3`` is
  3.11, the minor version of the project's interpreter, so the installed wheels run unchanged);
* Debian packages a family needs (:attr:`FamilyImage.debian`: bubblewrap for SWE, Chromium for
  GUI and WebShop; plus the owners of the libraries the Python extensions link, found by ``ldd``)
  are installed by ``apt-get`` from the ``.deb`` files in this machine's apt cache, with their
  dependencies that the base lacks (resolved over this machine's dpkg database). What the cache
  lacks, ``envgym image fetch FAMILY`` downloads once, at setup time;
* the Python distributions are the closure of envgym's requirements with the extras ``serve``
  and the family's own (what ``pip install envgym[serve,<family>]`` would install), copied file
  by file from this interpreter's installed ``RECORD`` lists into a virtual environment at
  ``/opt/envgym`` (a ``pyvenv.cfg`` over Debian's ``python3``; nothing lands in ``/usr``);
* envgym's own source (``envgym``, with ``environments`` and ``agents`` as its subpackages, as a
  wheel lays them out) and the family's data folders (the SWE libraries' pristine trees).

(:mod:`envgym.serve._packages` works out the Python and Debian packages.)

Two images per family: ``<name>:deps`` (Debian packages, Python packages, data) and the family
image on top of it (envgym's source, the ``envgym serve`` command). Every input of each (file
contents, the Dockerfile, the parent image's id) goes into one SHA-256 that the image carries as
the label ``envgym.image.inputs``: a build whose inputs did not change does nothing, and a change
of envgym's source alone rebuilds only the top image.

:func:`running` starts an image as a container (port published on 127.0.0.1 only, or an internal
network with no route out; memory, PID and CPU limits, no capabilities, a read-only root with a
``/tmp`` tmpfs), waits for ``/health``, yields the server's URL and removes the container when
the block ends, whatever ends it; :func:`served_url` does it for a ``docker:FAMILY`` URL (the
harness's ``--backend remote --url docker:FAMILY``).

SWE inside Docker: each episode's commands still run in envgym's bwrap sandbox (own user, PID,
network and mount namespaces, seccomp filter, no network), nested in the container. For bwrap to
make its namespaces the container runs without Docker's seccomp profile and with ``/proc``
unmasked (``--security-opt seccomp=unconfined``, ``systempaths=unconfined``), as a non-root user
with every capability dropped and ``no-new-privileges``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import io
import json
import logging
import os
import re
import shutil
import subprocess
import tarfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgym.errors import ConfigError, NotAvailableError, suggest
from envgym.registration import list_envs
from envgym.serve._packages import (
    APT_ARCHIVES,
    debian_closure,
    debian_plan,
    distribution_files,
    envgym_files,
    linked_packages,
    project_extras,
    python_distributions,
)

__all__ = [
    "BASE_IMAGE",
    "DOCKER_SCHEME",
    "FAMILIES",
    "INTERNAL_NETWORK",
    "BuildResult",
    "FamilyImage",
    "build",
    "containers",
    "debian_closure",
    "describe",
    "family_image",
    "family_images",
    "fetch_debs",
    "image_tag",
    "python_distributions",
    "reap_stale",
    "running",
    "served_url",
]

log = logging.getLogger(__name__)

BASE_IMAGE = "envgym-swe-base:bookworm"
BASE_HINT = "python -m envgym.environments.swe.images build (scripts/setup.sh runs it)"
#: Labels on every image and container made here.
LABEL_FAMILY = "envgym.image.family"
LABEL_INPUTS = "envgym.image.inputs"
LABEL_OWNER = "envgym.image.owner-pid"
#: The port ``envgym serve`` listens on inside the container.
PORT = 8000
#: The server's user inside the container (not the sandbox user 1000, not root).
SERVER_UID = 999
VENV = "/opt/envgym"
SITE = f"{VENV}/lib/python3.11/site-packages"
#: Docker options bwrap needs to make its namespaces inside a container (see the module docstring).
NESTED_SANDBOX = ("--security-opt", "seccomp=unconfined", "--security-opt", "systempaths=unconfined")


@dataclass(frozen=True)
class DataFolder:
    """A folder of this machine copied into the image, found by a function of its family's code.

    Attributes:
        locate: ``"module:function"`` returning the folder on this machine (a string entry point:
            the library never imports environment code).
        subfolder: the part of it to copy (``""`` for all), to the same place under ``target``.
        env: the variable that points the family's code at ``target``.
        target: the folder's place inside the image.
    """

    locate: str
    subfolder: str
    env: str
    target: str


@dataclass(frozen=True)
class FamilyImage:
    """What the image of one family holds beyond envgym and its core requirements.

    Attributes:
        family: the family name (a package under ``envgym.environments``).
        extras: envgym's extras besides ``serve`` whose requirements are installed.
        debian: Debian packages installed from this machine's apt cache (with the dependencies
            the base lacks), besides those holding the shared libraries that the Python
            packages' compiled extensions link (found by ``ldd``).
        data: folders of this machine the family reads at run time.
        run_options: ``docker run`` options the family needs.
        env: environment variables set in the image.
        memory: the container's default memory limit (``docker run --memory``).
    """

    family: str
    extras: tuple[str, ...] = ()
    debian: tuple[str, ...] = ()
    data: tuple[DataFolder, ...] = ()
    run_options: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    memory: str = "2g"


#: Families whose image needs more than envgym[serve,<family>] (any other family gets that).
FAMILIES: dict[str, FamilyImage] = {
    "swe": FamilyImage(
        family="swe",
        # the docker SDK (extra swe) serves only the Docker sandbox, which does not run in here
        extras=(),
        debian=("bubblewrap",),
        data=(
            DataFolder(
                locate="envgym.environments.swe.libraries:cache_dir",
                subfolder="src",
                env="ENVGYM_SWE_CACHE",
                target=f"{VENV}/data/swe",
            ),
        ),
        run_options=NESTED_SANDBOX,
        # the sandboxes' system is the container's own Debian (the base image they are made of)
        env={"ENVGYM_SANDBOX_ROOTFS": "/"},
    ),
    # WebShop-Browser-v0 drives Chromium over the store served inside the container
    "webshop": FamilyImage(
        family="webshop",
        extras=("webshop",),
        debian=("chromium", "fonts-dejavu-core"),
        run_options=("--shm-size", "1g"),
        memory="4g",
    ),
    "gui": FamilyImage(
        family="gui",
        extras=("gui",),
        # (libatomic1, which Playwright's Node.js driver links, is found by linked_packages)
        debian=("chromium", "fonts-dejavu-core"),
        run_options=("--shm-size", "1g"),
        memory="4g",
    ),
}


def _families() -> list[str]:
    return sorted({spec.family for spec in list_envs()})


def family_image(family: str) -> FamilyImage:
    """The image description of ``family``; a family with no entry in :data:`FAMILIES` gets
    envgym[serve,<family>] (when the extra exists) and nothing else."""
    known = _families()
    if family not in known:
        raise ConfigError(f"unknown family {family!r}.{suggest(family, known)} Families: {', '.join(known)}.")
    if family in FAMILIES:
        return FAMILIES[family]
    extras = (family,) if family in project_extras() else ()
    return FamilyImage(family=family, extras=extras)


def image_tag(family: str) -> str:
    """``envgym-serve/<family>:latest``: the default tag of a family's image."""
    return f"envgym-serve/{family}:latest"


def _base_status() -> str:
    return _docker("run", "--rm", "--network", "none", BASE_IMAGE, "cat", "/var/lib/dpkg/status")


def _python_files(image: FamilyImage) -> list[tuple[str, Path]]:
    """(path inside site-packages, file here) of every Python distribution the image holds."""
    return [pair for dist in python_distributions(("serve", *image.extras)) for pair in distribution_files(dist)]


def _debian_names(image: FamilyImage, python: Sequence[tuple[str, Path]]) -> list[str]:
    """The family's Debian packages and those holding the libraries its Python extensions link."""
    return sorted(set(image.debian) | set(linked_packages(path for _, path in python)))


def _debian_files(image: FamilyImage, names: Sequence[str], base_status: str) -> list[Path]:
    files, missing = debian_plan(names, base_status)
    if missing:
        raise NotAvailableError(
            f"the {image.family} image installs Debian packages from this machine's apt cache ({APT_ARCHIVES}), "
            f"which lacks {len(missing)} of the {len(files)} needed ({', '.join(missing[:8])}"
            f"{', ...' if len(missing) > 8 else ''}). Fetch them once (network, at setup time): "
            f"envgym image fetch {image.family}"
        )
    return files


def fetch_debs(family: str) -> list[str]:
    """Download into the apt cache the Debian packages ``family``'s image installs and the cache
    lacks (``apt-get install --download-only --reinstall``: network, root; a setup step, never run
    by a build). Returns the packages fetched."""
    image = family_image(family)
    names = _debian_names(image, _python_files(image))
    base_status = _base_status()
    _, missing = debian_plan(names, base_status)
    if missing:
        apt = shutil.which("apt-get")
        if apt is None:
            raise NotAvailableError("fetching Debian packages needs apt-get (a Debian host).")
        command = [apt, "install", "--download-only", "--reinstall", "--no-install-recommends", "-y", "-qq", *missing]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise NotAvailableError(f"apt-get could not fetch {len(missing)} packages: {done.stderr.strip()[-2000:]}")
        _, still = debian_plan(names, base_status)
        if still:
            raise NotAvailableError(f"apt-get did not fetch {', '.join(still)}.")
    return missing


# --- docker ---------------------------------------------------------------------------------


def _docker(*args: str, input: bytes | None = None, check: bool = True, timeout: float | None = 120) -> str:
    docker = shutil.which("docker")
    if docker is None:
        raise NotAvailableError("envgym images need the docker CLI and a running engine: apt-get install docker.io.")
    done = subprocess.run([docker, *args], input=input, capture_output=True, check=False, timeout=timeout)
    if check and done.returncode != 0:
        raise NotAvailableError(
            f"docker {args[0]} failed ({done.returncode}): {done.stderr.decode(errors='replace').strip()[-2000:]}"
        )
    return done.stdout.decode(errors="replace").strip()


def _image_labels(name: str) -> dict[str, str] | None:
    docker = shutil.which("docker")
    if docker is None:
        return None
    done = subprocess.run(
        [docker, "image", "inspect", "--format", "{{json .Config.Labels}}", name], capture_output=True, check=False
    )
    if done.returncode != 0:
        return None
    return json.loads(done.stdout or b"null") or {}


def _image_id(name: str) -> str | None:
    docker = shutil.which("docker")
    if docker is None:
        return None
    done = subprocess.run([docker, "image", "inspect", "--format", "{{.Id}}", name], capture_output=True, check=False)
    return done.stdout.decode().strip() if done.returncode == 0 else None


# --- build ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildResult:
    """What :func:`build` did.

    Attributes:
        tag: the image's name.
        image_id: its id.
        built: False when an image with the same inputs existed (nothing was done).
        inputs: the SHA-256 of every input (the image's ``envgym.image.inputs`` label).
        seconds: time spent.
        size_bytes: the image's size.
    """

    tag: str
    image_id: str
    built: bool
    inputs: str
    seconds: float
    size_bytes: int


def _served_ids(family: str) -> list[str]:
    return sorted({spec.id for spec in list_envs(family=family)})


def _deps_dockerfile(data: Sequence[tuple[DataFolder, Path]], debs: bool) -> str:
    lines = [f"FROM {BASE_IMAGE}"]
    if debs:
        lines += [
            "COPY debs/ /tmp/envgym-debs/",
            (
                "RUN apt-get install -y -qq --no-install-recommends /tmp/envgym-debs/*.deb >/dev/null"
                " && rm -rf /tmp/envgym-debs /var/cache/apt/archives/*.deb"
            ),
        ]
    lines += [
        (
            f'RUN echo "envgym:x:{SERVER_UID}:{SERVER_UID}::/tmp:/usr/sbin/nologin" >> /etc/passwd'
            f' && echo "envgym:x:{SERVER_UID}:" >> /etc/group'
            f" && mkdir -p {VENV}/bin && ln -s /usr/bin/python3 {VENV}/bin/python3"
            f' && printf "home = /usr/bin\\ninclude-system-site-packages = false\\n" > {VENV}/pyvenv.cfg'
        ),
        f"COPY site/ {SITE}/",
        # compiled here (the copies carry fixed times): the server starts without compiling
        f"RUN {VENV}/bin/python3 -m compileall -q -j 0 {SITE} >/dev/null",
    ]
    lines += [f"COPY data/{i}/ {folder.target}/{folder.subfolder}/" for i, (folder, _) in enumerate(data)]
    return "\n".join(lines) + "\n"


def _final_dockerfile(image: FamilyImage, deps: str, ids: Sequence[str]) -> str:
    env = {
        "PATH": f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
        **{folder.env: folder.target for folder in image.data},
        **image.env,
    }
    command = [f"{VENV}/bin/python3", "-m", "envgym.cli", "serve", *ids, "--host", "0.0.0.0", "--port", str(PORT)]
    lines = [
        f"FROM {deps}",
        f"COPY envgym/ {SITE}/",
        f"RUN {VENV}/bin/python3 -m compileall -q -j 0 {SITE}/envgym >/dev/null",
        "ENV " + " ".join(f"{key}={json.dumps(value)}" for key, value in env.items()),
        "WORKDIR /tmp",
        f"USER {SERVER_UID}:{SERVER_UID}",
        f"EXPOSE {PORT}",
        f"CMD {json.dumps(command)}",
    ]
    return "\n".join(lines) + "\n"


def _deps_inputs(image: FamilyImage) -> tuple[str, list[tuple[str, Path]]]:
    """The dependencies image: Debian packages, Python packages, data (changes rarely)."""
    python = _python_files(image)
    names = _debian_names(image, python)
    debs = _debian_files(image, names, _base_status()) if names else []
    data: list[tuple[DataFolder, Path]] = []
    for folder in image.data:
        module, _, function = folder.locate.partition(":")
        root = Path(getattr(importlib.import_module(module), function)()) / folder.subfolder
        if not root.is_dir():
            raise NotAvailableError(f"the {image.family} image needs {root}, which is missing (run scripts/setup.sh).")
        data.append((folder, root))
    files: list[tuple[str, Path]] = [(f"debs/{path.name}", path) for path in debs]
    files += [(f"site/{rel}", path) for rel, path in python]
    for i, (_, root) in enumerate(data):
        files += [
            (f"data/{i}/{path.relative_to(root).as_posix()}", path)
            for path in sorted(root.rglob("*"))
            if path.is_file() and not path.is_symlink()
        ]
    return _deps_dockerfile(data, bool(debs)), files


def _digest(dockerfile: str, files: Sequence[tuple[str, Path]], parent_id: str) -> str:
    digest = hashlib.sha256()
    digest.update(f"parent {parent_id}\n".encode())
    digest.update(dockerfile.encode())
    for name, path in sorted(files):
        digest.update(f"\0{name}\0{os.access(path, os.X_OK):d}\0".encode())
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def _context(dockerfile: str, files: Sequence[tuple[str, Path]]) -> Iterator[bytes]:
    """The build context as a tar stream (root-owned files, fixed times: Docker's layer cache
    then keys on contents alone)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w|") as tar:
        for name, path, data in [("Dockerfile", None, dockerfile.encode()), *((n, p, None) for n, p in files)]:
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid = 0, 0, 0
            if path is None:
                info.mode, info.size = 0o644, len(data or b"")
                tar.addfile(info, io.BytesIO(data or b""))
            else:
                info.mode, info.size = (0o755 if os.access(path, os.X_OK) else 0o644), path.stat().st_size
                with open(path, "rb") as handle:
                    tar.addfile(info, handle)
            if buffer.tell() > 1 << 20:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
    yield buffer.getvalue()


def _ensure(
    tag: str, dockerfile: str, files: Sequence[tuple[str, Path]], parent: str, family: str, force: bool
) -> tuple[str, bool]:
    """Build ``tag`` unless an image of that name has the same inputs; (image id, built now)."""
    parent_id = _image_id(parent)
    if parent_id is None:
        raise NotAvailableError(f"no image {parent} to build {tag} on.")
    inputs = _digest(dockerfile, files, parent_id)
    labels = _image_labels(tag)
    if not force and labels is not None and labels.get(LABEL_INPUTS) == inputs:
        log.info("%s is up to date (inputs %s)", tag, inputs[:12])
        return _image_id(tag) or "", False
    docker = shutil.which("docker")
    assert docker is not None
    log.info("building %s (%d files)", tag, len(files))
    labels_args = ["--label", f"{LABEL_FAMILY}={family}", "--label", f"{LABEL_INPUTS}={inputs}"]
    process = subprocess.Popen(
        [docker, "build", "--network", "none", "--force-rm", *(["--no-cache"] if force else []), *labels_args]
        + ["--tag", tag, "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert process.stdin is not None and process.stdout is not None
    # drained beside the upload: docker's progress lines must never fill the pipe and stall it
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: process.stdout.read(65536), b"")), daemon=True)
    reader.start()
    with contextlib.suppress(BrokenPipeError):
        for chunk in _context(dockerfile, files):
            process.stdin.write(chunk)
        process.stdin.close()
    reader.join()
    output = b"".join(chunks).decode(errors="replace")
    if process.wait() != 0:
        raise NotAvailableError(f"docker build of {tag} failed ({process.returncode}):\n{output[-3000:]}")
    image_id = _image_id(tag) or ""
    return image_id, True


def build(family: str, *, tag: str | None = None, force: bool = False) -> BuildResult:
    """Build the image that serves ``family`` (idempotent: same inputs, same image, no work).

    Two images: ``<tag name>:deps`` (Debian packages, Python packages, data: rebuilt when one of
    them changes) and ``tag`` on top of it (envgym's source and the server command).

    Raises:
        ConfigError: an unknown family or a malformed tag.
        NotAvailableError: no Docker engine, no base image, or a needed package missing here
            (the message names the command that fixes it).
    """
    started = time.perf_counter()
    image = family_image(family)
    tag = tag or image_tag(family)
    _check_tag(tag)
    if _image_id(BASE_IMAGE) is None:
        _docker("version", "--format", "{{.Server.Version}}")  # no engine: say that first
        raise NotAvailableError(f"the envgym images are built on {BASE_IMAGE}, which is missing: {BASE_HINT}.")
    deps = f"{_repository(tag)}:deps"
    dockerfile, files = _deps_inputs(image)
    _, deps_built = _ensure(deps, dockerfile, files, BASE_IMAGE, family, force)
    source = [(f"envgym/{rel}", path) for rel, path in envgym_files()]
    dockerfile = _final_dockerfile(image, deps, _served_ids(family))
    image_id, built = _ensure(tag, dockerfile, source, deps, family, force)
    if built or deps_built:  # the family's images this build replaced (untagged, unless a container runs one)
        _docker("image", "prune", "--force", "--filter", f"label={LABEL_FAMILY}={family}", check=False)
    seconds = time.perf_counter() - started
    if built:
        log.info("built %s in %.1f s", tag, seconds)
    digest = _image_labels(tag) or {}
    return BuildResult(tag, image_id, built or deps_built, digest.get(LABEL_INPUTS, ""), seconds, _size(tag))


def _size(tag: str) -> int:
    docker = shutil.which("docker")
    if docker is None:
        return 0
    done = subprocess.run([docker, "image", "inspect", "--format", "{{.Size}}", tag], capture_output=True, check=False)
    return int(done.stdout.decode().strip() or 0) if done.returncode == 0 else 0


_TAG = re.compile(r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*(?::[A-Za-z0-9_.-]{1,128})?$")


def _repository(tag: str) -> str:
    """The name part of ``tag`` (``envgym-serve/swe`` of ``envgym-serve/swe:latest``)."""
    name, _, version = tag.rpartition(":")
    return name if name and "/" not in version else tag


def _check_tag(tag: str) -> None:
    if tag.endswith(":deps"):
        raise ConfigError(
            f"the tag ':deps' names the dependencies image of a family image; choose another, not {tag!r}."
        )
    if not _TAG.match(tag):
        raise ConfigError(
            f"an image tag looks like 'envgym-serve/swe:latest' (lowercase name, optional :tag), got {tag!r}."
        )


# --- run ------------------------------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_stale() -> int:
    """Remove the containers that :func:`running` started in processes that are gone (a process
    killed without cleanup leaves its container); returns how many."""
    listed = _docker(
        "ps", "-a", "--filter", f"label={LABEL_OWNER}", "--format", '{{.ID}} {{.Label "' + LABEL_OWNER + '"}}'
    )
    stale = []
    for line in listed.splitlines():
        container, _, owner = line.partition(" ")
        host, _, pid = owner.partition(":")
        if host == os.uname().nodename and pid.isdigit() and not _pid_alive(int(pid)):
            stale.append(container)
    if stale:
        _docker("rm", "-f", *stale, check=False)
    return len(stale)


def _wait_healthy(url: str, container: str, deadline: float) -> None:
    delay = 0.05
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if json.loads(answer.read()).get("status") == "healthy":
                    return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        state = _docker("inspect", "--format", "{{.State.Status}}", container, check=False)
        if state not in ("created", "running"):
            logs = _docker("logs", "--tail", "40", container, check=False)
            raise NotAvailableError(f"the container {container[:12]} stopped before serving ({state}):\n{logs}")
        if time.monotonic() > deadline:
            logs = _docker("logs", "--tail", "40", container, check=False)
            raise NotAvailableError(f"the container {container[:12]} did not answer {url}/health in time:\n{logs}")
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


#: The Docker network of ``running(network="internal")``: no route out, reachable from this host.
INTERNAL_NETWORK = "envgym-internal"
NETWORKS = ("loopback", "internal")
_MEMORY = re.compile(r"^[1-9][0-9]*[bkmg]?$")


def _internal_network() -> str:
    """Create :data:`INTERNAL_NETWORK` (``docker network create --internal``) when missing."""
    if _docker("network", "ls", "--quiet", "--filter", f"name=^{INTERNAL_NETWORK}$") == "":
        _docker("network", "create", "--internal", INTERNAL_NETWORK, check=False)  # may race another caller
        _docker("network", "inspect", "--format", "{{.Internal}}", INTERNAL_NETWORK)  # raises when still missing
    return INTERNAL_NETWORK


@contextlib.contextmanager
def running(
    family: str,
    *,
    tag: str | None = None,
    memory: str | None = None,
    cpus: float = 2.0,
    pids: int = 1024,
    network: str = "loopback",
    serve_args: Sequence[str] = (),
    start_timeout: float = 120.0,
) -> Iterator[str]:
    """Run the image of ``family`` and yield its server's base URL (``http://HOST:PORT``).

    The container holds at most ``memory`` (the family's default), ``pids`` processes and
    ``cpus`` CPUs, runs as a non-root user with no capabilities over a read-only root, and is
    removed when the block ends (normally, by an exception or by Ctrl-C). ``network``:
    ``"loopback"`` publishes the server on a free port of 127.0.0.1 only; ``"internal"`` puts
    the container on an internal Docker network (:data:`INTERNAL_NETWORK`) with no route out at
    all, and the URL is its address there, which only this host reaches (Linux engines; Docker
    Desktop does not route to containers). ``serve_args`` replace the served ids and flags of
    ``envgym serve`` (the image's default serves every id of the family).

    Raises:
        ConfigError: a bad limit or network.
        NotAvailableError: the image is missing (build it with ``envgym image build FAMILY``), or
            the server did not become healthy within ``start_timeout`` seconds.
    """
    image = family_image(family)
    tag = tag or image_tag(family)
    _check_tag(tag)
    memory = memory or image.memory
    if not isinstance(memory, str) or not _MEMORY.match(memory):
        raise ConfigError(
            f"memory takes docker's syntax, a number with an optional unit b, k, m or g (2g), got {memory!r}."
        )
    if not cpus > 0 or not isinstance(pids, int) or pids < 16:
        raise ConfigError(f"cpus must be > 0 and pids an integer >= 16, got cpus={cpus!r}, pids={pids!r}.")
    if network not in NETWORKS:
        raise ConfigError(
            f"network must be one of {', '.join(NETWORKS)}, got {network!r}.{suggest(str(network), NETWORKS)}"
        )
    if _image_id(tag) is None:
        raise NotAvailableError(f"no image {tag}: build it with `envgym image build {family}`.")
    reap_stale()
    # a name known before `docker run` returns: an interrupt during it still finds the container
    name = f"envgym-{family}-{os.getpid()}-{os.urandom(4).hex()}"
    options = [
        "--detach",
        "--name",
        name,
        *(["--publish", f"127.0.0.1::{PORT}"] if network == "loopback" else ["--network", _internal_network()]),
        "--memory",
        memory,
        "--memory-swap",
        memory,
        "--pids-limit",
        str(pids),
        "--cpus",
        str(cpus),
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--read-only",
        "--tmpfs",
        "/tmp:rw,exec,mode=1777",
        "--label",
        f"{LABEL_FAMILY}={family}",
        "--label",
        f"{LABEL_OWNER}={os.uname().nodename}:{os.getpid()}",
        *image.run_options,
    ]
    command: list[str] = []
    if serve_args:
        command = [f"{VENV}/bin/python3", "-m", "envgym.cli", "serve", *serve_args, "--host", "0.0.0.0"]
        command += ["--port", str(PORT)]
    try:
        container = _docker("run", *options, tag, *command)
        if network == "loopback":
            published = _docker("port", container, f"{PORT}/tcp")
            url = f"http://127.0.0.1:{published.splitlines()[0].rsplit(':', 1)[1]}"
        else:
            address = _docker(
                "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", container
            )
            url = f"http://{address}:{PORT}"
        _wait_healthy(url, container, time.monotonic() + start_timeout)
        log.info("%s serves %s at %s", container[:12], family, url)
        yield url
    finally:
        _docker("rm", "-f", name, check=False)


#: The URL scheme that names a family's image instead of a running server: ``docker:swe``.
DOCKER_SCHEME = "docker:"


def served_url(url: str, **options: Any) -> contextlib.AbstractContextManager[str]:
    """A context manager giving a server URL for ``url``: ``url`` itself, or for
    ``docker:FAMILY`` the URL of a container of FAMILY's image that lives as long as the block
    (:func:`running` with ``options``). What a harness calls with the ``--url`` it was given."""
    if isinstance(url, str) and url.startswith(DOCKER_SCHEME):
        return running(url.removeprefix(DOCKER_SCHEME), **options)
    return contextlib.nullcontext(url)


def containers(family: str | None = None) -> list[str]:
    """Ids of the containers (running or not) that :func:`running` started, of one family or all."""
    label = f"{LABEL_FAMILY}={family}" if family else LABEL_OWNER
    return _docker("ps", "-a", "--quiet", "--filter", f"label={label}").split()


def family_images() -> list[dict[str, str]]:
    """The family images here (``docker images`` with the family label): tag, family, id, size."""
    listed = _docker(
        "images", "--filter", f"label={LABEL_FAMILY}", "--format", "{{.Repository}}:{{.Tag}}\t{{.ID}}\t{{.Size}}"
    )
    rows = []
    for line in listed.splitlines():
        tag, image_id, size = line.split("\t")
        if not tag.endswith(":<none>"):
            family = (_image_labels(tag) or {}).get(LABEL_FAMILY, "")
            rows.append({"tag": tag, "family": family, "id": image_id, "size": size})
    return sorted(rows, key=lambda row: row["tag"])


def describe(result: BuildResult) -> dict[str, object]:
    """``result`` as JSON-ready data (what ``envgym image build --json`` prints)."""
    return {
        "tag": result.tag,
        "image_id": result.image_id,
        "built": result.built,
        "inputs": result.inputs,
        "seconds": round(result.seconds, 2),
        "size_bytes": result.size_bytes,
    }
