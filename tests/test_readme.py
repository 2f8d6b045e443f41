"""The README opens with the two set-up commands, and CI runs the test command verbatim."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
