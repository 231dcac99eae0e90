"""Run the lit/FileCheck suite in tests/filecheck."""

import subprocess
import sys
from pathlib import Path

SUITE = Path(__file__).parent / "filecheck"


def test_filecheck_suite():
    lit = Path(sys.executable).parent / "lit"
    run = subprocess.run([sys.executable, lit, "-q", SUITE], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
