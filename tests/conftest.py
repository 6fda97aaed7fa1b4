from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = ROOT.parent / "shared" / "traces"


def run_cli(*args: str, env_extra: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("NSYS_LLM_EXPLAIN_DEBUG", None)
    if env_extra:
        env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "nsys_llm_explainer", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture(scope="session")
def demo_trace(tmp_path_factory) -> Path:
    from nsys_llm_explainer.synth import build_scenario

    p = tmp_path_factory.mktemp("demo") / "demo.sqlite"
    build_scenario("demo", str(p))
    return p
