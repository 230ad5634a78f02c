"""The integration is listed by `rankseam plugins` (found through its entry point) and
importing it does not import LlamaIndex."""

from __future__ import annotations

import json
import subprocess
import sys

from rankseam.testing import invoke_cli


def test_listed_by_rankseam_plugins() -> None:
    result = invoke_cli(["plugins"])
    assert result.exit_code == 0, result.output
    listed = {p["name"]: p for p in json.loads(result.output)}
    assert listed["llamaindex"]["status"] == "ok"
    assert listed["llamaindex"]["distribution"] == "rankseam-llamaindex"


def test_the_entry_point_does_not_import_llamaindex() -> None:
    code = (
        "import sys, rankseam_llamaindex.plugin, rankseam_llamaindex; "
        "print(any(m.startswith('llama_index') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
