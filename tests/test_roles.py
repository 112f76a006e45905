"""The role table is the one place a role's classes, prompts and answer schemas are named: every path resolves,
each LLM class asks exactly the table's prompts with the table's schemas, the scripted role model answers every
prompt, build_agents builds from it, and importing it loads no other module of sap."""
from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from sap.agents.config import build_agents, build_agents_config
from sap.agents.roles import ROLE_TABLE, RoleSpec, resolve
from sap.llm import LLMClient
from sap.prompts import prompt
from sap.testing.role_model import ANSWERS


def _asks(cls: type) -> dict[str, str]:
    """prompt name -> schema name of every `*.ask("prompt", Schema, ...)` call in the module defining `cls`."""
    tree = ast.parse(Path(inspect.getfile(cls)).read_text(encoding="utf-8"))
    return {node.args[0].value: node.args[1].id for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "ask"
            and len(node.args) >= 2 and isinstance(node.args[0], ast.Constant) and isinstance(node.args[1], ast.Name)}


@pytest.mark.parametrize("spec", ROLE_TABLE, ids=lambda s: s.name)
def test_each_role_names_real_classes_prompts_and_schemas(spec: RoleSpec):
    assert inspect.isclass(resolve(spec.rule)) and inspect.isclass(resolve(spec.llm))
    assert set(spec.schemas) == set(spec.prompt_names())
    for name, path in spec.schemas.items():
        assert issubclass(resolve(path), BaseModel) and prompt(name).system
    asked = _asks(resolve(spec.llm))
    assert asked == {name: path.split(":")[1] for name, path in spec.schemas.items()}


def test_the_role_model_answers_every_prompt_of_every_role():
    assert {name for spec in ROLE_TABLE for name in spec.prompt_names()} <= set(ANSWERS)


def test_build_agents_builds_each_role_from_the_table():
    rule = build_agents(build_agents_config(), LLMClient())
    llm = build_agents(build_agents_config(model_overrides={"model": "openai/m"}, message_mode="global"), LLMClient())
    for spec in ROLE_TABLE:
        assert type(rule[spec.slot]) is resolve(spec.rule) and type(llm[spec.slot]) is resolve(spec.llm)
    assert llm["messenger"].mode == "global" and llm["narrative"] and not rule["narrative"]


def test_importing_the_role_table_loads_no_other_sap_module_nor_langgraph_nor_litellm():
    code = ("import sys, sap.agents.roles; print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('sap', 'langgraph', 'litellm'))))")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.split() == ["sap", "sap.agents", "sap.agents.roles", "sap.lazy", "sap.version"]
