"""The Python examples in the training and runtime docs are complete programs that run
as shown (each block starting with an import, run in a fresh folder)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ["docs/nn.md", "docs/nn-reference.md", "docs/data.md", "docs/runtime.md"]


def _blocks():
    out = []
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        for k, m in enumerate(re.finditer(r"```python\n(.*?)```", text, re.S)):
            code = m.group(1)
            if re.match(r"(import|from) ", code):
                line = text[:m.start()].count("\n") + 2
                out.append(pytest.param(code, id=f"{doc}:{line}"))
    return out


@pytest.mark.parametrize("code", _blocks())
def test_doc_example_runs(code, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    script = tmp_path / "example.py"  # a file: tessera.jit reads its functions' source
    script.write_text(code)
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
