"""tools.record_head_sweep: the recorder writes the sweep's tables and a provenance naming its own command."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from tools.record_head_sweep import main

from bounded import no_hang


def test_recorder_writes_heads_and_provenance_with_its_command(tmp_path):
    torch.set_num_threads(1)
    with no_hang(600):
        assert main(["--model", "minilm-l6", "--out", str(tmp_path), "--quick", "--no-interventions"]) == 0
    heads = pd.read_csv(tmp_path / "heads.csv")
    assert len(heads) == 6 * 12 and {"symmetry", "labels", "previous"} <= set(heads.columns)
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert prov["command"].startswith("python -m tools.record_head_sweep --model minilm-l6")
    assert prov["complete"] is True and prov["model"] == "minilm-l6"


def test_recorder_refuses_an_unknown_model(capsys):
    with pytest.raises(SystemExit):
        main(["--model", "gpt-5", "--out", "x"])
    assert "invalid choice: 'gpt-5'" in capsys.readouterr().err
