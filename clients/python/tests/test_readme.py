"""The README's two-minute start, run as written: the server started with the section's
redial.toml and flags, its program saved under the name its first line gives and run by the
section's command (with this venv's python, where the client is installed), and what it prints
compared with what the section says it prints."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from conftest import Server

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = "## Two-minute start"


def section_blocks(heading: str) -> list[tuple[str, str]]:
    """The (language, text) of each fenced block of the README's section under `heading`."""
    readme = README.read_text(encoding="utf-8")
    start = readme.find(f"\n{heading}\n")
    assert start >= 0, f'the README has no "{heading}" section'
    end = readme.find("\n## ", start + 1)
    section = readme[start:end if end >= 0 else None]
    return re.findall(r"^```(\S*)\n(.*?)^```$", section, flags=re.M | re.S)


def commands(text: str) -> list[list[str]]:
    """A shell block's commands, as words, without comments."""
    return [words for line in text.splitlines() if (words := shlex.split(line, comments=True))]


@pytest.fixture(scope="module")
def blocks() -> list[tuple[str, str]]:
    found = section_blocks(SECTION)
    assert [lang for lang, _ in found] == ["toml", "sh", "python", "sh", "text"], (
        "the section's blocks: redial.toml, the server, the program, its command, its output"
    )
    return found


@pytest.fixture(scope="module")
def readme_server(blocks: list[tuple[str, str]]) -> Iterator[Server]:
    (serve,) = commands(blocks[1][1])
    assert Path(serve[0]).name == "redial" and serve[1] == "serve", serve
    s = Server(config=blocks[0][1], flags=serve[2:])
    yield s
    s.stop()


def test_the_two_minute_start_prints_what_the_readme_says(
    blocks: list[tuple[str, str]], readme_server: Server, tmp_path: Path
) -> None:
    program = blocks[2][1]
    name = re.match(r"# (\S+\.py)\n", program)
    assert name, 'the program starts with "# <file>.py"'
    (tmp_path / name[1]).write_text(program, encoding="utf-8")
    (run,) = commands(blocks[3][1])
    assert run[0] in ("python", "python3") and run[1:] == [name[1]], run
    env = {k: v for k, v in os.environ.items() if k != "REDIAL_TOKEN"}
    env["REDIAL_SERVER"] = readme_server.url
    done = subprocess.run([sys.executable, *run[1:]], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (
        f"{shlex.join(run)} failed:\n{done.stdout}{done.stderr}\nserver log:\n"
        + "".join(readme_server.log)
    )
    assert done.stdout == blocks[4][1]
