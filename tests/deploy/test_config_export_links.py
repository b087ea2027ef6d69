"""`scanwatch config export DIR` writes every file or none, and never through a symbolic link: a link planted
where it writes (a temporary file's name, a folder of DIR) never redirects a write, and a file where a
folder goes stops the export before anything is written."""

from __future__ import annotations

import argparse
from pathlib import Path

from pipelines.commands import config_export


def _run(target: Path, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = config_export.run(argparse.Namespace(dir=target, prometheus_url=config_export.DEFAULT_PROMETHEUS_URL,
                                                overwrite=False, ownership=None))
    out, err = capsys.readouterr()
    return code, out, err


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def test_a_planted_temporary_link_never_redirects_a_write(tmp_path, capsys):
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    victim.write_text("the operator's file\n")
    (out / "prometheus").mkdir(parents=True)
    (out / "prometheus/.prometheus.yml.scanwatch-tmp").symlink_to(victim)
    (out / "grafana").mkdir()
    (out / "grafana/.dashboards.scanwatch-tmp").symlink_to(tmp_path)
    code, _, err = _run(out, capsys)
    assert code == 0, err
    assert victim.read_text() == "the operator's file\n"
    assert (out / "prometheus/prometheus.yml").read_bytes() == config_export.contents(
        config_export.DEFAULT_PROMETHEUS_URL)[Path("prometheus/prometheus.yml")]
    assert not (out / "prometheus/prometheus.yml").is_symlink()
    assert not [p for p in out.iterdir() if p.name.startswith(".scanwatch")], "a temporary folder was left"


def test_a_linked_folder_is_refused_and_nothing_is_written(tmp_path, capsys):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    out.mkdir()
    (out / "grafana").symlink_to(elsewhere, target_is_directory=True)
    code, _, err = _run(out, capsys)
    lines = err.splitlines()
    assert code == 1 and len(lines) == 1 and "symbolic link" in lines[0] and "grafana" in lines[0], err
    assert "nothing was written" in lines[0]
    assert list(elsewhere.iterdir()) == [], "written through the link"
    assert _files(out) == ["grafana"], "a partial tree"


def test_a_file_where_a_folder_goes_stops_the_export_before_any_write(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "grafana").write_text("not a folder\n")
    code, _, err = _run(out, capsys)
    lines = err.splitlines()
    assert code == 1 and len(lines) == 1 and "grafana" in lines[0] and "nothing was written" in lines[0], err
    assert _files(out) == ["grafana"], "a partial tree"
    assert (out / "grafana").read_text() == "not a folder\n"


def test_a_folder_swapped_for_a_link_after_the_checks_never_redirects_a_write(tmp_path, capsys, monkeypatch):
    """The race the checks cannot close: DIR/grafana is a folder when the export looks, and a link to elsewhere
    by the time it writes. The folders are opened without following links, so the write fails in one line
    and nothing lands outside DIR."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "grafana").mkdir(parents=True)
    real_mkdtemp = config_export.tempfile.mkdtemp

    def swap_then_mkdtemp(*args, **kwargs):
        (out / "grafana").rmdir()
        (out / "grafana").symlink_to(elsewhere, target_is_directory=True)
        return real_mkdtemp(*args, **kwargs)

    monkeypatch.setattr(config_export.tempfile, "mkdtemp", swap_then_mkdtemp)
    code, _, err = _run(out, capsys)
    assert list(elsewhere.rglob("*")) == [], "written through the link"
    lines = err.splitlines()
    assert code == 1 and len(lines) == 1 and lines[0].startswith("scanwatch config export: "), err
    assert (out / "grafana").is_symlink()
    assert not [p for p in out.iterdir() if p.name.startswith(".scanwatch")], "a temporary folder was left"
