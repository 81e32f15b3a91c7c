"""What goes into a family image: envgym's Python requirements as installed here, and Debian
packages with the dependencies a base image lacks (for :mod:`envgym.serve.images`).

* :func:`python_distributions`: the closure of envgym's requirements for some extras (what
  ``pip install envgym[<extras>]`` would install), each as installed in this interpreter, and
  :func:`distribution_files` / :func:`envgym_files` the files to copy (RECORD lists; envgym's
  source as a wheel lays it out).
* :func:`debian_closure` over dpkg status files, and :func:`debian_plan`: the ``.deb`` files of
  this machine's apt cache that install them.
"""

from __future__ import annotations

import glob
import importlib
import importlib.metadata
import importlib.util
import re
import subprocess
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envgym._imports import optional
from envgym.errors import ConfigError, NotAvailableError, suggest

__all__ = [
    "APT_ARCHIVES",
    "DPKG_STATUS",
    "debian_closure",
    "debian_plan",
    "distribution_files",
    "envgym_files",
    "linked_packages",
    "parse_status",
    "project_extras",
    "python_distributions",
]

APT_ARCHIVES = Path("/var/cache/apt/archives")
DPKG_STATUS = Path("/var/lib/dpkg/status")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _project_root() -> Path | None:
    root = Path(importlib.import_module("envgym").__file__).resolve().parents[1]  # type: ignore[arg-type]
    return root if (root / "pyproject.toml").is_file() else None


def _requirement_class() -> Any:
    """packaging's ``Requirement`` (parses requirement strings and evaluates their markers)."""
    return optional(
        "packaging.requirements", purpose="reading requirements for envgym image", extra="serve"
    ).Requirement


def _project_table() -> dict[str, list[str]]:
    """envgym's requirements as ``{"": core, extra: [...]}``: the checkout's pyproject.toml when
    there is one (an editable install's metadata may be older), else the installed metadata."""
    root = _project_root()
    if root is not None:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        return {"": list(project["dependencies"]), **project.get("optional-dependencies", {})}
    Requirement = _requirement_class()
    table: dict[str, list[str]] = {"": []}
    for line in importlib.metadata.requires("envgym") or []:
        req = Requirement(line)
        extras = re.findall(r"extra\s*==\s*['\"]([^'\"]+)['\"]", str(req.marker or ""))
        if not extras:
            table[""].append(line.split(";")[0])
        for extra in extras:
            table.setdefault(extra, []).append(line.split(";")[0])
    return table


def project_extras() -> set[str]:
    return set(_project_table()) - {""}


def _envgym_requirements(extras: Iterable[str]) -> list[str]:
    """envgym's own requirement strings for ``extras`` (``envgym[x]`` inside an extra expands)."""
    table = _project_table()
    wanted, seen, found = list(extras), set(), list(table[""])
    while wanted:
        extra = wanted.pop()
        if extra in seen:
            continue
        if extra not in table:
            raise ConfigError(f"envgym has no extra {extra!r}.{suggest(extra, table)}")
        seen.add(extra)
        for line in table[extra]:
            match = re.fullmatch(r"envgym\[([^\]]+)\]", line.strip())
            if match:
                wanted += [e.strip() for e in match[1].split(",")]
            else:
                found.append(line)
    return found


def python_distributions(extras: Iterable[str]) -> list[importlib.metadata.Distribution]:
    """The installed distributions ``pip install envgym[<extras>]`` needs, envgym excluded,
    sorted by name; each as installed here (its version and files)."""
    Requirement = _requirement_class()
    pending = [(Requirement(line), ("",)) for line in _envgym_requirements(extras)]
    chosen: dict[str, importlib.metadata.Distribution] = {}
    expanded: dict[str, set[str]] = {}  # the extras whose requirements were followed, per package
    while pending:
        req, parent_extras = pending.pop()
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in parent_extras):
            continue
        key = _normalize(req.name)
        if key not in chosen:
            try:
                chosen[key] = importlib.metadata.distribution(req.name)
            except importlib.metadata.PackageNotFoundError as err:
                raise NotAvailableError(
                    f"the image needs the Python package {req.name!r} ({req}), which is not installed here: "
                    f"pip install '{req}' (the image copies installed packages; it downloads nothing)."
                ) from err
        wanted = {""} | set(req.extras)
        if wanted <= expanded.get(key, set()):
            continue
        expanded[key] = expanded.get(key, set()) | wanted
        for line in chosen[key].requires or []:
            pending.append((Requirement(line), tuple(sorted(expanded[key]))))
    return sorted(chosen.values(), key=lambda d: _normalize(d.metadata["Name"]))


def distribution_files(dist: importlib.metadata.Distribution) -> list[tuple[str, Path]]:
    """(path inside site-packages, file here) for each installed file of ``dist`` (RECORD)."""
    if dist.files is None:
        raise NotAvailableError(
            f"{dist.metadata['Name']} has no RECORD of its files, so the image cannot copy it: "
            f"reinstall it with pip (pip install --force-reinstall '{dist.metadata['Name']}=={dist.version}')."
        )
    found = []
    for entry in dist.files:
        path = Path(str(dist.locate_file(entry)))
        rel = entry.as_posix()
        # scripts in bin/ and data outside site-packages are not what the server imports
        if rel.startswith("../") or "__pycache__" in entry.parts or not path.is_file():
            continue
        found.append((rel, path))
    return found


def envgym_files() -> list[tuple[str, Path]]:
    """envgym's source as a wheel lays it out: (path inside site-packages, file here)."""
    files: list[tuple[str, Path]] = []
    seen: set[str] = set()
    for package in ("envgym", "envgym.environments", "envgym.agents"):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise NotAvailableError(f"cannot find envgym's package {package} to copy into the image.")
        folder = Path(next(iter(spec.submodule_search_locations))).resolve()
        prefix = package.replace(".", "/")
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if "__pycache__" in rel.parts or path.suffix == ".pyc" or not path.is_file():
                continue
            name = f"{prefix}/{rel.as_posix()}"
            if name not in seen:
                seen.add(name)
                files.append((name, path))
    pth = Path(importlib.import_module("envgym").__file__).resolve().parents[1] / "envgym.pth"  # type: ignore[arg-type]
    if pth.is_file():
        files.append(("envgym.pth", pth))
    return files


def parse_status(text: str) -> dict[str, dict[str, str]]:
    """The installed packages of a dpkg status file: name -> fields."""
    packages: dict[str, dict[str, str]] = {}
    for paragraph in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = None
        for line in paragraph.splitlines():
            if line[:1] in (" ", "\t") and key is not None:
                fields[key] += "\n" + line
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" in fields and fields.get("Status", "").endswith(" installed"):
            packages[fields["Package"]] = fields
    return packages


def _providers(packages: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """Name or virtual name -> the installed package that satisfies it."""
    found: dict[str, str] = {}
    for name, fields in packages.items():
        found.setdefault(name, name)
        for item in fields.get("Provides", "").split(","):
            virtual = item.strip().split(" ")[0].split(":")[0]
            if virtual:
                found.setdefault(virtual, name)
    return found


def debian_closure(
    names: Sequence[str], host: Mapping[str, Mapping[str, str]], base: Mapping[str, Mapping[str, str]]
) -> list[str]:
    """The packages of ``names`` and their (pre-)dependencies that ``base`` lacks, each picked as
    this machine (``host``, whose installed set satisfies them all) has it; sorted."""
    on_host, in_base = _providers(host), _providers(base)
    chosen: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        if name in chosen or name in in_base:
            continue
        if name not in on_host:
            raise NotAvailableError(
                f"the image needs the Debian package {name!r}, which this machine has not installed: "
                f"apt-get install {name}."
            )
        package = on_host[name]
        if package in chosen or package in in_base:
            continue
        chosen.add(package)
        fields = host[package]
        for relation in ("Pre-Depends", "Depends"):
            for group in fields.get(relation, "").split(","):
                options = [alt.strip().split(" ")[0].split(":")[0] for alt in group.split("|") if alt.strip()]
                if not options or any(o in in_base for o in options):
                    continue
                pick = next((o for o in options if o in on_host), None)
                if pick is None:
                    raise NotAvailableError(f"{package} depends on {group.strip()!r}, which this machine lacks.")
                pending.append(pick)
    return sorted(chosen)


def _newer(a: str, b: str) -> bool:
    """Whether Debian version ``a`` is newer than ``b`` (dpkg's own comparison)."""
    return subprocess.run(["dpkg", "--compare-versions", a, "gt", b], check=False).returncode == 0


def _deb_file(name: str, fields: Mapping[str, str]) -> Path:
    """The cached .deb of ``name`` at the version installed here, else the newest cached one (a
    Debian point update the mirror carries now); the installed version's name when none is."""
    arch = fields["Architecture"]
    exact = APT_ARCHIVES / f"{name}_{fields['Version'].replace(':', '%3a')}_{arch}.deb"
    if exact.is_file():
        return exact
    best: tuple[str, Path] | None = None
    for path in APT_ARCHIVES.glob(f"{glob.escape(name)}_*_{arch}.deb"):
        version = path.name[len(name) + 1 : -len(f"_{arch}.deb")].replace("%3a", ":")
        if "_" not in version and (best is None or _newer(version, best[0])):
            best = (version, path)
    return best[1] if best else exact


def debian_plan(names: Sequence[str], base_status: str) -> tuple[list[Path], list[str]]:
    """(the .deb files of ``names`` and their dependencies the base lacks, the packages among
    them whose file this machine's apt cache lacks)."""
    if not DPKG_STATUS.is_file():
        raise NotAvailableError(f"installing {', '.join(names)} in the image needs a Debian host (no {DPKG_STATUS}).")
    host = parse_status(DPKG_STATUS.read_text(encoding="utf-8"))
    closure = debian_closure(names, host, parse_status(base_status))
    files = [_deb_file(name, host[name]) for name in closure]
    return files, [name for name, path in zip(closure, files, strict=True) if not path.is_file()]


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def linked_packages(files: Iterable[Path]) -> list[str]:
    """The Debian packages holding the shared libraries that the ELF files among ``files`` link
    (``ldd``, then ``dpkg -S``); libraries found beside them (a wheel's bundled ``.libs``) and
    ones no package holds are left out. Sorted."""
    elves = [path for path in files if _is_elf(path)]
    libraries: set[str] = set()
    roots = {str(path.parent) for path in elves}
    for path in elves:
        done = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=False)
        for line in done.stdout.splitlines():
            target = line.partition("=>")[2].strip().split(" (")[0]
            if target.startswith("/") and not any(target.startswith(root) for root in roots):
                libraries.add(target)
    names: set[str] = set()
    for library in sorted(libraries):
        # dpkg knows a merged-/usr library by its /usr path
        for candidate in dict.fromkeys([library, "/usr" + library if not library.startswith("/usr/") else library]):
            found = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True, check=False)
            if found.returncode == 0:
                names.update(line.split(":")[0].strip() for line in found.stdout.splitlines() if ":" in line)
                break
    return sorted(names)
