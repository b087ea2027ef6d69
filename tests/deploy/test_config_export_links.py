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
                                                overwrite=False))
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
