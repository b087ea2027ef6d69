"""SCANWATCH_WORKSPACES_FILE: a bad file is one line naming the file, the entry and the field."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipelines.core.settings import ConfigError, Settings

A, B = "rst_" + "a" * 40, "rst_" + "b" * 40
ENV = {"SCANWATCH_BASE_URL": "http://sim.example/v1", "KEY_A": A, "KEY_B": B}


def _load(tmp_path, text: str, **env: str):
    path = tmp_path / "workspaces.yml"
    path.write_text(text)
    return Settings.load({**ENV, **env, "SCANWATCH_WORKSPACES_FILE": str(path)})


GOOD = """workspaces:
  - name: acme
    api_key_env: KEY_A
  - name: globex
    base_url: https://api.example/v1/
    api_key_env: KEY_B
"""


def test_a_good_file_lists_each_workspace_with_its_own_address_and_key(tmp_path):
    acme, globex = _load(tmp_path, GOOD).workspaces
    assert (acme.name, acme.base_url, acme.api_key, acme.key_variable, acme.label) == (
        "acme", "http://sim.example/v1", A, "KEY_A", "acme")
    assert (globex.base_url, globex.api_key) == ("https://api.example/v1", B)
    assert _load(tmp_path, GOOD).workspace_names == ["acme", "globex"]


@pytest.mark.parametrize(("text", "says"), [
    ("workspaces: [name: acme\n", "not valid YAML at line"),
    ("workspaces: []\n", "top-level 'workspaces:' list"),
    ("other: 1\n", "top-level 'workspaces:' list"),
    ("workspaces:\n  - api_key_env: KEY_A\n", "workspaces[0]: field 'name' is missing"),
    ("workspaces:\n  - name: Acme Corp\n    api_key_env: KEY_A\n", "workspaces[0]: field 'name' must be a short label"),
    ("workspaces:\n  - name: acme\n    api_key_env: KEY_A\n  - name: acme\n    api_key_env: KEY_B\n",
     "workspaces[1] (acme): field 'name' repeats an earlier entry"),
    ("workspaces:\n  - name: acme\n", "workspaces[0] (acme): field 'api_key_env' is missing"),
    ("workspaces:\n  - name: acme\n    api_key_env: KEY_UNSET\n",
     "workspaces[0] (acme): field 'api_key_env': KEY_UNSET is not set"),
    ("workspaces:\n  - name: acme\n    api_key_env: KEY_BAD\n",
     "workspaces[0] (acme): field 'api_key_env': KEY_BAD does not look like an API key"),
    ("workspaces:\n  - name: acme\n    api_key: rst_x\n", "workspaces[0]: unknown field 'api_key'"),
    ("workspaces:\n  - name: acme\n    base_url: http://h/api\n    api_key_env: KEY_A\n",
     "workspaces[0] (acme): field 'base_url': its base_url must be an http(s) address ending in /v1"),
    ("workspaces:\n  - name: acme\n    base_url: https://u:pw@h/v1\n    api_key_env: KEY_A\n",
     "field 'base_url': its base_url carries a user name or password"),
    ("workspaces:\n  - name: acme\n    api_key_env: KEY_A\n  - name: beta\n    api_key_env: KEY_A\n",
     "(beta): field 'api_key_env': KEY_A holds the same key as acme's variable"),
])
def test_each_problem_is_one_line_naming_file_entry_and_field(tmp_path, text, says):
    with pytest.raises(ConfigError) as err:
        _ = _load(tmp_path, text, KEY_BAD="sk_live_1").workspaces
    line = str(err.value)
    assert says in line and str(tmp_path / "workspaces.yml") in line and "\n" not in line
    assert A not in line and "pw" not in line


def test_a_missing_file_names_the_variable(tmp_path):
    with pytest.raises(ConfigError, match=r"SCANWATCH_WORKSPACES_FILE names .* which does not exist"):
        _ = Settings.load({"SCANWATCH_WORKSPACES_FILE": str(tmp_path / "nope.yml")}).workspaces


def test_a_bad_file_syncs_nothing_and_touches_nothing(tmp_path):
    path = tmp_path / "workspaces.yml"
    path.write_text(GOOD.replace("KEY_B", "KEY_UNSET"))
    db = tmp_path / "history" / "scanwatch.duckdb"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SCANWATCH_")}, **ENV,
           "SCANWATCH_WORKSPACES_FILE": str(path), "SCANWATCH_DB": str(db)}
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "sync"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"scanwatch sync: {path}: workspaces[1] (globex): field 'api_key_env': KEY_UNSET is not set: "
        "create an API key (rst_...) under Settings, API keys"]
    assert not db.parent.exists()


def test_a_label_names_the_workspace_on_metrics_and_the_name_stays_the_cli_s(tmp_path):
    acme, globex = _load(tmp_path, GOOD.replace("    api_key_env: KEY_A\n",
                                                "    api_key_env: KEY_A\n    label: Acme Corp\n")).workspaces
    assert (acme.name, acme.label) == ("acme", "Acme Corp")
    assert (globex.name, globex.label) == ("globex", "globex")


@pytest.mark.parametrize(("label", "says"), [
    ("''", "field 'label' must be the name to show"),
    ("' Acme'", "no leading or trailing space"),
    ("[Acme]", "field 'label' must be"),
    ('"Acme\\nCorp"', "field 'label' must be"),
    ("default", "not 'default'"),
    ("rst_abcdef", "field 'label' must be"),
    ("globex", "(globex): field 'label': 'globex' is already acme's label"),
])
def test_a_bad_label_is_one_line(tmp_path, label, says):
    text = GOOD.replace("    api_key_env: KEY_A\n", f"    api_key_env: KEY_A\n    label: {label}\n")
    with pytest.raises(ConfigError) as err:
        _ = _load(tmp_path, text).workspaces
    line = str(err.value)
    assert says in line and "workspaces" in line and "\n" not in line and "rst_abcdef" not in line
