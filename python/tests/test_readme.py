"""The README's Python example runs as written (from the checkout's root) and prints what
the README shows after it."""

import re
import subprocess
import sys

from conftest import ROOT


def readme_example():
    """The first ``python`` block of the README's "## Python" section, and the ``text``
    block that follows it (what it prints)."""
    md = (ROOT / "README.md").read_text()
    section = md.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shown = re.search(r"```python\n.*?```.*?```text\n(.*?)```", section, re.S).group(1)
    return code, shown


def test_readme_example_runs_as_written():
    code, shown = readme_example()
    assert len(code.strip().splitlines()) == 5
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == shown


def test_readme_example_agrees_with_the_cli(cli):
    _, shown = readme_example()
    first = cli("estimate", "hlo_samples/resnet18_infer_b8.hlo", cwd=ROOT).stdout.splitlines()[0]
    # "hlo_samples/resnet18_infer_b8.hlo: 6.147 ms on v3 (76 kernels)"
    ms, kernels = re.search(r": ([\d.]+) ms on v3 \((\d+) kernels\)", first).groups()
    assert shown.splitlines()[0] == f"{ms} ms on v3, {kernels} kernels"
