"""Records open with a system prompt that describes the assistant's role and domain, not sap's machinery."""
from __future__ import annotations

import pytest

from sap.api import synthesize
from sap.toolsets import load_toolset
from sap.toolsets.system_prompt import system_prompt
from test_bfcl import needs_bfcl


@needs_bfcl
def test_a_bfcl_record_opens_with_its_domain_not_its_backends():
    records = synthesize("bfcl/GorillaFileSystem+TwitterAPI", 1, seed=3).records
    system = records[0]["messages"][0]
    assert system["role"] == "system"
    for internal in ("BFCL", "backend", "GorillaFileSystem", "TwitterAPI", "sap"):
        assert internal.lower() not in system["content"].lower()
    assert "files and folders" in system["content"] and "social media" in system["content"]


def test_builtin_and_user_toolsets_get_a_role_in_words():
    assert "files and folders" in system_prompt(load_toolset("filesystem"))
    custom = load_toolset("store")
    custom.name, custom.description = "my_bank.py", "Bank accounts: balances and transfers."
    assert system_prompt(custom).startswith("You are a helpful assistant for this service: bank accounts: balances")


def test_a_tau2_prompt_carries_its_policy_text():
    tau2 = pytest.importorskip("sap.toolsets.tau2_bench")
    try:
        retail = load_toolset("tau2/retail")
    except tau2.Tau2Unavailable:
        pytest.skip("tau2-bench is not installed")
    text = system_prompt(retail)
    assert text.startswith("You are a customer service agent for an online retail store")
    assert "Retail agent policy" in text and "tau2" not in text.split("Follow this policy")[0]
