"""The model benchmarks refuse an unknown model name with one line naming the models there are."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.mark.parametrize("script", ["models.py", "model_categories.py"])
def test_unknown_model_is_a_usage_error(script):
    run = subprocess.run([sys.executable, str(BENCHMARKS / script), "--models", "resnet50,no_such_net"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert "unknown model(s) no_such_net; the models are resnet50," in run.stderr
    assert "Traceback" not in run.stderr
