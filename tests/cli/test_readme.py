"""The README opens with the two set-up commands, and CI runs the test command verbatim."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ci_runs_the_readme_test_command_verbatim():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)
    main_job, test_command = blocks[0].strip(), blocks[1].strip()
    assert "dxrf reproduce fig2-error-vs-m" in main_job
    assert "pytest" in test_command
    # nothing but the title comes before the two commands
    head = readme[: readme.index("```bash")]
    assert head.count("\n#") == 0 and head.startswith("# dxrf")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in ci


def test_the_readme_python_script_runs_as_written(tmp_path):
    """The README's complete script, run as a file (with its __main__ guard) in an empty directory."""
    import os
    import subprocess
    import sys

    readme = (ROOT / "README.md").read_text()
    script = re.search(r"<!-- quickstart -->\n```python\n(.*?)\n```", readme, flags=re.S).group(1)
    (tmp_path / "quickstart.py").write_text(script)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    proc = subprocess.run([sys.executable, "quickstart.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    test_r2 = float(re.search(r"test R\^2: ([0-9.]+)", proc.stdout).group(1))
    assert test_r2 > 0.8, proc.stdout  # kin40k: about 0.9 with these features
    assert "first predictions:" in proc.stdout and (tmp_path / "kin40k-model.zarr" / "zarr.json").is_file()
