"""`sap report`: a one-file HTML page with three embedded PNG charts, the PNGs beside it; exit 2 without matplotlib."""
from __future__ import annotations

import base64
import json
import re
import sys

import pytest

import sap.api
from sap.cli import main

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHARTS = ("tags.png", "chain_length.png", "tool_calls.png")


def test_report_on_a_synthesized_file(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    data = tmp_path / "store.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in sap.api.synthesize("store", 10).records))
    out = tmp_path / "report"
    assert main(["report", str(data), "-o", str(out)]) == 0
    assert "index.html" in capsys.readouterr().out
    page = (out / "index.html").read_text(encoding="utf-8")
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(embedded) == 3
    for name, b64 in zip(CHARTS, embedded):
        png = (out / name).read_bytes()
        assert png.startswith(PNG_SIGNATURE)
        assert base64.b64decode(b64) == png
    assert "<style>" in page and "<link" not in page and "<script" not in page
    assert "prev_output" in page and ">10<" in page  # the tag table and the record count


def test_report_on_bfcl_data_without_tool_docs(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    questions = tmp_path / "BFCL_v3_multi_turn_base.json"
    questions.write_text(json.dumps({"id": "multi_turn_base_3", "initial_config": {"GorillaFileSystem": {"root": {}}},
                                     "question": [[{"role": "user", "content": "Make a folder named 'tmp2'."}],
                                                  [{"role": "user", "content": "Go there."}]]}) + "\n")
    (tmp_path / "possible_answer").mkdir()
    (tmp_path / "possible_answer" / questions.name).write_text(json.dumps(
        {"id": "multi_turn_base_3", "ground_truth": [["mkdir(dir_name='tmp2')"], ["cd(folder='tmp2')", "ls(a=True)"]]}))
    out = tmp_path / "r"
    assert main(["report", str(questions), "-o", str(out)]) == 0
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "bfcl" in page and "unknown" in page and "n/a" in page
    assert all((out / name).read_bytes().startswith(PNG_SIGNATURE) for name in CHARTS)


def test_report_refuses_a_file_as_output_dir(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    data = tmp_path / "d.jsonl"
    data.write_text("")
    target = tmp_path / "taken"
    target.write_text("x")
    assert main(["report", str(data), "-o", str(target)]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_report_without_matplotlib_exits_2_with_the_install_hint(tmp_path, capsys, monkeypatch):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # makes `import` raise ImportError
    data = tmp_path / "d.jsonl"
    data.write_text("")
    assert main(["report", str(data), "-o", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'sap-synth[report]'" in err
    assert not (tmp_path / "r").exists()
