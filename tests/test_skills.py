"""The skills and references describe the live server, field for field and number for
number; and they are served over MCP."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fastmcp import Client
from fastmcp.skills import SkillsClientExtension

from terminal_tools.config import MiB, Settings, setting_fields
from terminal_tools.server import build_server

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parent.parent
SKILLS = sorted((REPO / "skills").glob("*/SKILL.md"))
DOCS = SKILLS + sorted((REPO / "skills").glob("*/references/*.md")) + [
    REPO / "references" / "envelope.md"]
EXPECTED_SKILLS = {"terminal-tools-foundations", "terminal-tools-job-control",
                   "terminal-tools-pty-sessions", "terminal-tools-fs-search",
                   "terminal-tools-troubleshooting"}
# Backticked snake_case words in the docs that are neither tools, parameters, result
# fields nor settings, but are real: environment variables in lower case, bash names.
NOT_API = {"node_modules"}


@pytest.fixture(scope="module")
async def live_tools() -> dict[str, Any]:
    async with Client(build_server(Settings())) as c:
        return {t.name: t for t in await c.list_tools()}


def _fields(schema: Any) -> set[str]:
    """Property names and enum values anywhere in a JSON schema."""
    names: set[str] = set()
    if isinstance(schema, dict):
        names |= set(schema.get("properties", {}))
        names |= {v for v in schema.get("enum", []) if isinstance(v, str)}
        for value in schema.values():
            names |= _fields(value)
    elif isinstance(schema, list):
        for item in schema:
            names |= _fields(item)
    return names


def known_names(tools: dict[str, Any]) -> set[str]:
    names = set(tools)
    for tool in tools.values():
        names |= _fields(tool.input_schema) | _fields(tool.output_schema or {})
    names |= {f.name for f in setting_fields()}
    return names | NOT_API


def test_every_skill_exists_with_front_matter() -> None:
    assert {p.parent.name for p in SKILLS} == EXPECTED_SKILLS
    for path in SKILLS:
        text = path.read_text()
        front = text.split("---")[1]
        assert re.search(rf"^name: {path.parent.name}$", front, re.M), path
        assert re.search(r"^description: \S.{40,}", front, re.M), path
        assert re.search(r"^metadata:\n\s+version: \"\d+\.\d+\.\d+\"", front, re.M), path


async def test_tool_names_parameters_and_fields_in_docs_exist(live_tools: dict) -> None:
    known = known_names(live_tools)
    problems = []
    for path in DOCS:
        text = path.read_text()
        for name in set(re.findall(r"\bterminal_[a-z_]*[a-z]\b", text)):
            if name not in live_tools:
                problems.append(f"{path.name}: no tool {name}")
        for name in set(re.findall(r"`([a-z][a-z0-9]*_[a-z0-9_]+)`", text)):
            if name not in known:
                problems.append(f"{path.name}: `{name}` is not a parameter, field or setting")
    assert not problems, "\n".join(problems)


_UNIT = {"KiB": 1024, "MiB": MiB, "GiB": 1024 * MiB}


def _matches_setting(number: float, unit: str | None, name: str) -> bool:
    field = next(f for f in setting_fields() if f.name == name)
    value = getattr(Settings(), name)
    kind = field.metadata.get("unit", "")
    if kind == "bytes" and unit in _UNIT:
        return number * _UNIT[unit] == value
    return float(number) == float(value)


def test_quoted_defaults_match_the_settings() -> None:
    names = {f.name for f in setting_fields()}
    pattern = re.compile(r"(\d+(?:\.\d+)?)\s*([A-Za-z]+)?[^\d`]{0,40}?\bsetting\s+`(\w+)`")
    checked = 0
    problems = []
    for path in DOCS:
        text = path.read_text()
        for name in re.findall(r"setting\s+`(\w+)`", text):
            if name not in names:
                problems.append(f"{path.name}: unknown setting {name}")
        for number, unit, name in pattern.findall(text):
            if name in names:
                checked += 1
                if not _matches_setting(float(number), unit, name):
                    problems.append(f"{path.name}: {number} {unit} != setting {name} = "
                                    f"{getattr(Settings(), name)}")
    assert not problems, "\n".join(problems)
    assert checked >= 35


async def test_defaults_quoted_in_tool_descriptions_match(live_tools: dict) -> None:
    settings = dataclasses.asdict(Settings())
    found = 0
    for tool in live_tools.values():
        texts = [tool.description or ""] + [
            p.get("description", "") for p in tool.input_schema.get("properties", {}).values()]
        for text in texts:
            for name, number in re.findall(r"the (\w+) setting \((\d+)\)", text):
                found += 1
                assert float(number) == float(settings[name]), (tool.name, name)
    assert found >= 8


def _calls(text: str) -> list[str]:
    """Every ``terminal_x(...)`` call written in the docs, with balanced parentheses."""
    calls = []
    for match in re.finditer(r"\bterminal_[a-z_]+\(", text):
        depth, i = 0, match.end() - 1
        while i < len(text):
            if text[i] == "(":
                depth += 1
            elif text[i] == ")":
                depth -= 1
                if depth == 0:
                    calls.append(text[match.start():i + 1])
                    break
            i += 1
    return calls


async def test_every_example_call_is_valid_for_its_tool(live_tools: dict) -> None:
    checked = 0
    problems = []
    for path in DOCS:
        for source in _calls(path.read_text()):
            try:
                call = ast.parse(source.replace("\\|", "|"), mode="eval").body
            except SyntaxError as exc:
                problems.append(f"{path.name}: cannot parse {source!r}: {exc}")
                continue
            assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            tool = live_tools[call.func.id]
            schema = tool.input_schema
            properties = schema.get("properties", {})
            partial = False
            arguments: dict[str, Any] = {}
            for arg in call.args:  # a signature written as names
                if not (isinstance(arg, ast.Name) and arg.id in properties):
                    problems.append(f"{path.name}: positional argument in {source!r}")
                partial = True
            for keyword in call.keywords:
                if keyword.arg not in properties:
                    problems.append(f"{path.name}: {tool.name} has no parameter "
                                    f"{keyword.arg!r} ({source!r})")
                    continue
                if isinstance(keyword.value, ast.Constant) and keyword.value.value is ...:
                    partial = True
                    continue
                arguments[keyword.arg] = ast.literal_eval(keyword.value)
            if partial:
                continue
            checked += 1
            try:
                jsonschema.validate(arguments, schema)
            except jsonschema.ValidationError as exc:
                problems.append(f"{path.name}: {source!r}: {exc.message}")
    assert not problems, "\n".join(problems)
    assert checked >= 30


async def test_skills_are_listed_and_read_over_mcp() -> None:
    async with Client(build_server(Settings()), extensions=[SkillsClientExtension()]) as c:
        listed = {s.frontmatter.name: s for s in await c.list_skills()}
        assert set(listed) == EXPECTED_SKILLS
        for name in EXPECTED_SKILLS:
            skill = await c.read_skill(f"skill://{name}/SKILL.md")
            assert "SKILL.md" in skill.files
            on_disk = (REPO / "skills" / name / "SKILL.md").read_text()
            body = skill.files["SKILL.md"]
            text = body.decode() if isinstance(body, bytes) else str(body)
            assert text == on_disk


async def test_handshake_era_clients_see_skills_as_resources(legacy_client: Client) -> None:
    uris = {str(r.uri) for r in await legacy_client.list_resources()}
    assert "skill://terminal-tools-job-control/references/signals.md" in uris
    assert "terminal://server-info" in uris


async def test_server_info_resource(client: Client) -> None:
    import json

    info = json.loads((await client.read_resource("terminal://server-info"))[0].text)
    assert info["name"] == "terminal-tools" and info["default_shell"]["kind"] == "bash"
    assert info["search_engine"] in ("ripgrep", "python")
    assert info["settings"]["max_jobs"] == 32 and info["path_source"]
    assert "user_shell" in info and info["categories"] == ["basic", "advanced"]
