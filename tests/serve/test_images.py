"""envgym.serve.images: family images built here (no registry, no network) and run as containers.

The first tests need no Docker (dependency closures, the Debian resolver, the content hash, the
build context, bad input). The rest build the SWE image once per module (a no-op when
scripts/setup.sh built it from the same inputs), run it, and play the oracle's SWE-Tools episode
through envgym.remote: the same reward and components as in process, and no container left.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import urllib.request
from pathlib import Path

import pytest

from envgym.errors import ConfigError, NotAvailableError
from envgym.serve import _packages, images

# --- without Docker ---------------------------------------------------------------------------


def _names(extras: tuple[str, ...]) -> set[str]:
    return {_packages._normalize(d.metadata["Name"]) for d in _packages.python_distributions(extras)}


def test_unknown_family_says_did_you_mean() -> None:
    with pytest.raises(ConfigError, match=r"unknown family 'swee'\. Did you mean 'swe'\?"):
        images.family_image("swee")


def test_a_family_without_an_entry_gets_its_own_extra() -> None:
    assert images.family_image("driving").extras == ("driving",)
    assert images.family_image("games").extras == ()  # no extra named games
    assert images.family_image("swe").debian == ("bubblewrap",)


def test_python_distributions_are_the_closure_of_the_extras() -> None:
    serve = _names(("serve",))
    # envgym's core, the serve extra, and what those require in turn
    assert {"gymnasium", "pettingzoo", "numpy", "typer", "fastapi", "uvicorn", "websockets", "httpx"} <= serve
    assert {"starlette", "pydantic", "h11", "click", "anyio"} <= serve
    # nothing the server does not need: no model stack, no browser, not envgym itself
    assert not serve & {"torch", "transformers", "playwright", "envgym", "pytest", "editables"}
    gui = _names(("serve", "gui"))
    assert gui - serve >= {"miniwob", "playwright", "pillow", "greenlet"}
    with pytest.raises(ConfigError, match=r"no extra 'srve'\. Did you mean 'serve'\?"):
        _packages.python_distributions(("srve",))


def test_distribution_files_stay_inside_site_packages() -> None:
    (fastapi,) = [d for d in _packages.python_distributions(("serve",)) if d.metadata["Name"] == "fastapi"]
    files = dict(_packages.distribution_files(fastapi))
    assert "fastapi/__init__.py" in files and files["fastapi/__init__.py"].is_file()
    assert any(name.endswith(".dist-info/METADATA") for name in files)  # importlib.metadata works inside
    assert not any(name.startswith("../") or "__pycache__" in name for name in files)


def _status(*packages: str) -> dict[str, dict[str, str]]:
    parsed = _packages.parse_status("\n\n".join(packages))
    return parsed


def test_debian_closure_follows_alternatives_and_virtual_packages() -> None:
    installed = "Status: install ok installed\nVersion: 1\nArchitecture: amd64"
    host = _status(
        f"Package: app\n{installed}\nPre-Depends: libc6 (>= 2)\nDepends: libx (>= 1) | liby, mail-transport-agent, libz:any",
        f"Package: libx\n{installed}",
        f"Package: liby\n{installed}",
        f"Package: exim\n{installed}\nProvides: mail-transport-agent\nDepends: libc6",
        f"Package: libz\n{installed}\nDepends: libx",
        f"Package: libc6\n{installed}",
        "Package: removed\nStatus: deinstall ok config-files\nVersion: 1",
    )
    base = _status(f"Package: libc6\n{installed}", f"Package: liby\n{installed}")
    # liby (in the base) satisfies "libx | liby"; libz still needs libx; exim provides the MTA
    assert _packages.debian_closure(["app"], host, base) == ["app", "exim", "libx", "libz"]
    assert _packages.debian_closure(["libc6"], host, base) == []
    assert "removed" not in host
    with pytest.raises(NotAvailableError, match=r"'nope', which this machine has not installed: apt-get install nope"):
        _packages.debian_closure(["nope"], host, base)
    broken = _status(f"Package: app\n{installed}\nDepends: ghost | phantom")
    with pytest.raises(NotAvailableError, match="app depends on 'ghost | phantom'"):
        _packages.debian_closure(["app"], broken, {})


def test_digest_covers_every_input(tmp_path: Path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.bin"
    a.write_text("print(1)\n")
    b.write_bytes(b"\x00\x01")
    files = [("src/a.py", a), ("src/b.bin", b)]
    first = images._digest("FROM x\n", files, "sha256:1")
    assert first == images._digest("FROM x\n", list(reversed(files)), "sha256:1")  # order-free
    changed = {
        images._digest("FROM y\n", files, "sha256:1"),
        images._digest("FROM x\n", files, "sha256:2"),
        images._digest("FROM x\n", [("src/a2.py", a), ("src/b.bin", b)], "sha256:1"),
    }
    a.write_text("print(2)\n")
    changed.add(images._digest("FROM x\n", files, "sha256:1"))
    a.write_text("print(1)\n")
    assert images._digest("FROM x\n", files, "sha256:1") == first
    a.chmod(0o755)
    changed.add(images._digest("FROM x\n", files, "sha256:1"))
    assert first not in changed and len(changed) == 5


def test_context_is_a_tar_with_fixed_owners_and_times(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(os.urandom(3 << 20))  # more than one chunk of the stream
    script = tmp_path / "run"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    stream = b"".join(images._context("FROM x\n", [("site/big", big), ("bin/run", script)]))
    with tarfile.open(fileobj=io.BytesIO(stream)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert list(members) == ["Dockerfile", "site/big", "bin/run"]
        assert tar.extractfile("Dockerfile").read() == b"FROM x\n"  # type: ignore[union-attr]
        assert tar.extractfile("site/big").read() == big.read_bytes()  # type: ignore[union-attr]
    assert {(m.uid, m.gid, m.mtime) for m in members.values()} == {(0, 0, 0)}
    assert (members["site/big"].mode, members["bin/run"].mode) == (0o644, 0o755)


def test_dockerfiles_install_nothing_from_the_network() -> None:
    swe = images.family_image("swe")
    deps = images._deps_dockerfile([(swe.data[0], Path("/x"))], debs=True)
    assert deps.startswith(f"FROM {images.BASE_IMAGE}\n")
    assert "apt-get install -y -qq --no-install-recommends /tmp/envgym-debs/*.deb" in deps
    assert "apt-get update" not in deps and "pip" not in deps
    assert f"COPY data/0/ {images.VENV}/data/swe/src/" in deps
    final = images._final_dockerfile(swe, "envgym-serve/swe:deps", ["envgym/SWE-Tools-v0", "envgym/SWE-v0"])
    command = json.loads(final.split("CMD ", 1)[1])
    assert command[2:] == [
        "envgym.cli",
        "serve",
        "envgym/SWE-Tools-v0",
        "envgym/SWE-v0",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
    ]
    assert f"USER {images.SERVER_UID}:{images.SERVER_UID}" in final
    assert 'ENVGYM_SANDBOX_ROOTFS="/"' in final and f'ENVGYM_SWE_CACHE="{images.VENV}/data/swe"' in final


@pytest.mark.parametrize("tag", ["Envgym/Swe:latest", "a b", "envgym-serve/swe:deps", "x:" + "y" * 129])
def test_bad_tags_are_refused(tag: str) -> None:
    with pytest.raises(ConfigError, match="tag"):
        images._check_tag(tag)
    images._check_tag("registry-less/name_1:v1.2")


def test_served_url_passes_server_urls_through() -> None:
    with images.served_url("ws://127.0.0.1:8000") as url:
        assert url == "ws://127.0.0.1:8000"
    with pytest.raises(ConfigError, match="unknown family 'nope'"), images.served_url("docker:nope"):
        pass


def test_cli_refuses_an_unknown_family() -> None:
    from typer.testing import CliRunner

    from envgym.cli import app

    result = CliRunner().invoke(app, ["image", "build", "guii"])
    assert result.exit_code == 2
    assert "unknown family 'guii'. Did you mean 'gui'?" in result.output


# --- with Docker ------------------------------------------------------------------------------


def _docker_ready() -> str | None:
    if shutil.which("docker") is None:
        return "needs the docker CLI (scripts/setup.sh installs docker.io)"
    done = subprocess.run(["docker", "image", "inspect", images.BASE_IMAGE], capture_output=True, check=False)
    if done.returncode != 0:
        return f"needs a Docker engine and {images.BASE_IMAGE} (scripts/setup.sh builds it)"
    return None


def _labelled() -> set[str]:
    return set(images.containers("swe"))


@pytest.fixture(scope="module")
def swe_image() -> images.BuildResult:
    reason = _docker_ready()
    if reason:
        pytest.skip(reason)
    try:
        return images.build("swe")
    except NotAvailableError as err:  # the SWE libraries or bubblewrap's .deb missing here
        pytest.skip(str(err))


def test_a_second_build_does_nothing(swe_image: images.BuildResult) -> None:
    first = images.build("swe")
    deps = images._image_id("envgym-serve/swe:deps")
    again = images.build("swe")
    # a build does work only when an input changed (in a shared checkout envgym's source may
    # change between two builds; in CI nothing does and the second build is a no-op)
    assert again.built == (again.inputs != first.inputs)
    if not again.built:
        assert again.image_id == first.image_id
    assert images._image_id("envgym-serve/swe:deps") == deps  # the dependencies' inputs did not change
    labels = images._image_labels("envgym-serve/swe:latest")
    assert labels == {images.LABEL_FAMILY: "swe", images.LABEL_INPUTS: again.inputs}
    listed = {row["tag"]: row for row in images.family_images()}
    assert listed["envgym-serve/swe:latest"]["family"] == listed["envgym-serve/swe:deps"]["family"] == "swe"
    assert again.image_id.removeprefix("sha256:").startswith(listed["envgym-serve/swe:latest"]["id"])


def test_running_a_missing_image_says_how_to_build_it() -> None:
    missing = images.running("swe", tag="envgym-serve/none-such:latest")
    with pytest.raises(NotAvailableError, match="build it with `envgym image build swe`"), missing:
        pass


def _play_oracle(env, seed: int) -> tuple[float, int, dict]:
    from envgym.agents.solvers.swe import Solver

    obs, info = env.reset(seed=seed)
    policy = Solver("envgym/SWE-Tools-v0", seed=seed)
    total, steps = 0.0, 0
    while True:
        obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
        total, steps = total + reward, steps + 1
        if terminated or truncated:
            return total, steps, dict(info["reward_components"])


@pytest.mark.slow
def test_swe_episode_in_a_container_scores_as_in_process(swe_image: images.BuildResult) -> None:
    import envgym
    import envgym.remote

    before = _labelled()
    with images.running("swe", memory="1g", cpus=1.5, pids=512) as url:
        (container,) = _labelled() - before
        with envgym.remote.make(url, "envgym/SWE-Tools-v0") as env:
            remote = _play_oracle(env, seed=3)
        # the episode's commands run in bwrap inside the container: no network, no envgym files
        with envgym.remote.make(url, "envgym/SWE-v0") as env:
            env.reset(seed=3)
            probe = "python3 -c 'import socket; print(socket.if_nameindex())'; ls /opt/envgym; cat /proc/1/comm"
            obs, *_ = env.step(probe)
        config = json.loads(subprocess.run(["docker", "inspect", container], capture_output=True, check=True).stdout)[0]
    assert _labelled() == before  # removed at the end of the block
    local_env = envgym.make("envgym/SWE-Tools-v0")
    try:
        local = _play_oracle(local_env, seed=3)
    finally:
        local_env.close()
    assert remote == local
    assert remote[0] > 0 and remote[2]["resolved_reward"] == 1.0
    assert "[(1, 'lo')]" in obs and "No such file or directory" in obs and "bwrap" in obs
    host = config["HostConfig"]
    assert (host["Memory"], host["PidsLimit"], host["NanoCpus"]) == (1 << 30, 512, 1_500_000_000)
    assert host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"] and "no-new-privileges" in host["SecurityOpt"]
    assert {b["HostIp"] for b in host["PortBindings"][f"{images.PORT}/tcp"]} == {"127.0.0.1"}
    assert config["Config"]["User"] == f"{images.SERVER_UID}:{images.SERVER_UID}"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"memory": "--privileged"}, "memory takes docker's syntax"),
        ({"memory": "0"}, "memory takes docker's syntax"),
        ({"pids": 4}, "pids an integer >= 16"),
        ({"cpus": 0}, "cpus must be > 0"),
        ({"network": "host"}, "network must be one of loopback, internal"),
    ],
)
def test_bad_limits_are_refused_before_docker_runs(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message), images.running("swe", **options):
        pass


def test_an_internal_container_serves_this_host_with_no_route_out(swe_image: images.BuildResult) -> None:
    before = _labelled()
    with images.running("swe", network="internal", serve_args=["envgym/SWE-Tools-v0"]) as url:
        (container,) = _labelled() - before
        assert not url.startswith("http://127.0.0.1")
        with urllib.request.urlopen(f"{url}/envs", timeout=10) as answer:
            assert json.loads(answer.read())["envs"] == [{"id": "envgym/SWE-Tools-v0", "kind": "single"}]
        config = json.loads(subprocess.run(["docker", "inspect", container], capture_output=True, check=True).stdout)[0]
        network = subprocess.run(
            ["docker", "network", "inspect", "--format", "{{.Internal}}", images.INTERNAL_NETWORK],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    assert _labelled() == before
    assert config["HostConfig"]["NetworkMode"] == images.INTERNAL_NETWORK and network == "true"
    assert not config["HostConfig"]["PortBindings"]  # nothing published on the host's interfaces


def test_the_container_goes_when_the_block_raises(swe_image: images.BuildResult) -> None:
    before = _labelled()
    with pytest.raises(KeyboardInterrupt), images.running("swe", serve_args=["envgym/SWE-Tools-v0"]) as url:
        assert url.startswith("http://127.0.0.1:")
        assert len(_labelled() - before) == 1
        raise KeyboardInterrupt
    assert _labelled() == before


def test_stale_containers_of_dead_owners_are_reaped(swe_image: images.BuildResult) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    created = subprocess.run(
        [
            "docker",
            "create",
            "--label",
            f"{images.LABEL_FAMILY}=swe",
            "--label",
            f"{images.LABEL_OWNER}={os.uname().nodename}:{dead.pid}",
            "--network",
            "none",
            swe_image.tag,
            "true",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        assert created[:12] in {c[:12] for c in _labelled()}
        assert images.reap_stale() >= 1
        assert created[:12] not in {c[:12] for c in _labelled()}
    finally:
        subprocess.run(["docker", "rm", "-f", created], capture_output=True, check=False)


def test_fetch_has_nothing_to_download_when_the_cache_holds_every_package(swe_image: images.BuildResult) -> None:
    # the SWE image was just built from the apt cache, so bubblewrap's .deb is there: no network
    assert images.fetch_debs("swe") == []
    assert images.fetch_debs("games") == []  # no Debian packages at all


@pytest.mark.slow
def test_the_harness_runs_on_a_family_image(swe_image: images.BuildResult) -> None:
    from envgym.rollout import RunConfig, run

    before = _labelled()
    served = run(
        RunConfig(env_id="envgym/SWE-Tools-v0", agent="oracle", episodes=2, backend="remote", url="docker:swe")
    )
    assert _labelled() == before
    assert served.summary["infra_errors"] == {} and served.summary["success_rate"] == 1.0
    assert [t.total_reward for t in served.trajectories] == pytest.approx([1.0, 1.0])


@pytest.mark.slow
def test_gui_episode_in_a_container_scores_as_in_process() -> None:
    """Needs the GUI image (Chromium inside: minutes to build, so scripts/setup.sh builds it)."""
    reason = _docker_ready()
    if reason or images._image_id("envgym-serve/gui:deps") is None:
        pytest.skip(
            reason or "needs the GUI image: envgym image fetch gui && envgym image build gui (scripts/setup.sh)"
        )
    from envgym.agents.solvers.miniwob import Solver

    import envgym
    import envgym.remote

    env_id = "envgym/MiniWoB-click-checkboxes-v0"

    def play(env) -> tuple[float, int, dict]:
        obs, info = env.reset(seed=5)
        policy, total, steps = Solver(env_id, seed=5), 0.0, 0
        while True:
            obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
            total, steps = total + reward, steps + 1
            if terminated or truncated:
                return total, steps, dict(info["reward_components"])

    images.build("gui")
    before = set(images.containers("gui"))
    with images.running("gui", serve_args=[env_id]) as url, envgym.remote.make(url, env_id) as env:
        remote = play(env)
    assert set(images.containers("gui")) == before
    local_env = envgym.make(env_id)
    try:
        local = play(local_env)
    finally:
        local_env.close()
    assert remote == local and remote[0] > 0


def test_linked_packages_names_the_debian_owner_of_a_linked_library() -> None:
    if shutil.which("dpkg") is None or shutil.which("ldd") is None:
        pytest.skip("needs a Debian host (dpkg, ldd)")
    # python3 links libc (libc6); a text file links nothing
    found = _packages.linked_packages([Path(os.path.realpath("/usr/bin/python3")), Path(__file__)])
    assert "libc6" in found
    assert _packages.linked_packages([Path(__file__)]) == []
