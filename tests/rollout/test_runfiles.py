"""The two kinds of run file that survive a kill (:mod:`envgym._runfiles`): JSONL records whose
damaged last line is dropped (and cut off when repairing) while an earlier one is refused, and
whole files replaced atomically. The run folders that use them are tested in
``test_rundir_crash.py`` and ``test_rundir_kill.py``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envgym._runfiles import DamagedFileError, read_jsonl, write_atomic
from envgym.errors import ConfigError
from envgym.trainer.metrics import MetricsLog, read_metrics


def test_read_jsonl_skips_blank_lines_and_repairs_only_the_tail(tmp_path: Path) -> None:
    file = tmp_path / "rows.jsonl"
    file.write_bytes(b'{"update": 1}\n\n{"update": 2}\n  \n{"upd')
    assert read_jsonl(file, dict) == [{"update": 1}, {"update": 2}]
    assert file.read_bytes().endswith(b'{"upd')  # reading alone changes nothing
    assert read_jsonl(file, dict, repair=True) == [{"update": 1}, {"update": 2}]
    assert file.read_bytes() == b'{"update": 1}\n\n{"update": 2}\n  \n'
    assert read_jsonl(tmp_path / "absent.jsonl", dict) == []


@pytest.mark.parametrize("tail", [b"[1,2]\n", b"{}\n", b'{"update": "x"}\n', b'{"update": 3, "a": "\xe2\x9c'])
def test_metrics_rows_damaged_last_line_is_dropped_and_truncated_on_resume(tmp_path: Path, tail: bytes) -> None:
    file = tmp_path / "metrics.jsonl"
    file.write_bytes(b'{"update": 0, "x": 1.0}\n{"update": 1, "x": 2.0}\n' + tail)
    assert [row["update"] for row in read_metrics(tmp_path)] == [0, 1]
    log = MetricsLog(tmp_path, tensorboard=False)
    log.truncate_after(1)  # what a resumed training run does first
    log.write(2, {"x": 3.0})
    log.close()
    assert [row["update"] for row in read_metrics(tmp_path)] == [0, 1, 2]
    file.write_bytes(b'{"update": 0}\n' + tail.rstrip(b"\n") + b"\n" + b'{"update": 1}\n')
    with pytest.raises(DamagedFileError, match=f"line 2 of {file} is damaged") as caught:
        read_metrics(tmp_path)
    assert isinstance(caught.value, ConfigError) and caught.value.number == 2


def test_write_atomic_leaves_the_old_file_when_the_rename_never_happens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "summary.json"
    write_atomic(target, '{"old": true}\n')
    stat = target.stat()
    assert not write_atomic(target, '{"old": true}\n', skip_unchanged=True)  # unchanged: not touched
    assert target.stat().st_mtime_ns == stat.st_mtime_ns and target.stat().st_ino == stat.st_ino

    def killed(src: object, dst: object) -> None:
        raise KeyboardInterrupt  # the process dies between writing the new bytes and the rename

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, '{"new": true}\n')
    monkeypatch.undo()
    assert target.read_text() == '{"old": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no temporary file left
    assert write_atomic(target, '{"new": true}\n') and target.read_text() == '{"new": true}\n'
