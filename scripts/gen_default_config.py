"""Generate ``configs/default.toml`` from ``batchcrawl/config.py``.

The defaults come from the dataclasses (``Config()``); the comments from the source: each section
class's docstring and the string literal that follows each field (read with :mod:`ast`, since Python
keeps no runtime trace of those attribute docstrings).

Usage::

    python scripts/gen_default_config.py          # rewrite configs/default.toml
    python scripts/gen_default_config.py --check  # exit 1 if the checked-in file is out of date
"""

from __future__ import annotations

import argparse
import ast
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from batchcrawl.config import Config  # noqa: E402
from batchcrawl.config import toml_value as config_toml_value  # noqa: E402

CONFIG_PY = ROOT / "batchcrawl" / "config.py"
DEFAULT_TOML = ROOT / "configs" / "default.toml"
WIDTH = 100

HEADER = """\
# batchcrawl: every setting with its default value, comment and unit.
#
# Generated from batchcrawl/config.py by scripts/gen_default_config.py; do not edit by hand.
# Precedence, lowest first: these defaults < CRAWL/crawl.toml (or --config FILE)
# < BATCHCRAWL_SECTION__KEY environment variables < --set section.key=value < explicit CLI flags.
# Units are in the names: _s seconds, _bytes bytes.
"""


def docstrings(source: str) -> tuple[dict[str, str], dict[str, dict[str, str]], dict[str, str]]:
    """Parse ``config.py``: (class name -> class docstring, class name -> {field: docstring},
    section name -> class name from the fields of ``Config``)."""
    tree = ast.parse(source)
    class_docs: dict[str, str] = {}
    field_docs: dict[str, dict[str, str]] = {}
    sections: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        class_docs[node.name] = ast.get_docstring(node) or ""
        fields: dict[str, str] = {}
        body = node.body
        for i, stmt in enumerate(body):
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            name = stmt.target.id
            nxt = body[i + 1] if i + 1 < len(body) else None
            if (
                isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                fields[name] = textwrap.dedent(nxt.value.value).strip()
            if node.name == "Config" and isinstance(stmt.annotation, ast.Name):
                sections[name] = stmt.annotation.id
        field_docs[node.name] = fields
    return class_docs, field_docs, sections


def _comment(text: str, indent: str = "") -> list[str]:
    text = " ".join(text.split())
    return [f"{indent}# {line}" for line in textwrap.wrap(text, WIDTH - len(indent) - 2)] or [
        f"{indent}#"
    ]


def toml_value(value: Any, key_width: int = 0) -> str:
    """TOML text of a default value (:func:`batchcrawl.config.toml_value`); long lists are wrapped
    over several lines."""
    one_line = config_toml_value(value)
    if not isinstance(value, list) or key_width + len(one_line) <= WIDTH:
        return one_line
    items = ", ".join(config_toml_value(v) for v in value)
    lines = textwrap.wrap(items, WIDTH - 4)
    return "[\n" + "\n".join(f"    {line}" for line in lines) + ",\n]"


def render(source: str | None = None) -> str:
    """Text of ``configs/default.toml``."""
    class_docs, field_docs, sections = docstrings(
        CONFIG_PY.read_text(encoding="utf-8") if source is None else source
    )
    defaults = Config().to_dict()
    out = [HEADER]
    for section, values in defaults.items():
        cls = sections[section]
        out.append("")
        out.extend(_comment(class_docs.get(cls, "")))
        out.append(f"[{section}]")
        for key, value in values.items():
            doc = field_docs.get(cls, {}).get(key)
            if not doc:
                raise SystemExit(
                    f"{CONFIG_PY}: {cls}.{key} has no docstring; add one with its unit"
                )
            out.append("")
            out.extend(_comment(doc))
            prefix = f"{key} = "
            out.append(prefix + toml_value(value, len(prefix)))
    return "\n".join(out).replace("\n\n\n", "\n\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is out of date")
    parser.add_argument("--output", type=Path, default=DEFAULT_TOML)
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(
                f"{args.output} is out of date: run scripts/gen_default_config.py", file=sys.stderr
            )
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
