"""A tiny bank domain for the rollout-harness tests: find a customer, list accounts, inspect one, transfer money."""
from __future__ import annotations

from sap.jsonutil import json_copy
from sap.toolsets.domains.common import ToolError, tool_method

NAME = "bank"
DESCRIPTION = "A small bank: find customers, list their accounts and transfer money."
ERROR_RESULTS_CHANGE_NOTHING = True


class Bank:
    """Customers by id and accounts by id, each with an owner and a balance."""

    def __init__(self) -> None:
        self._customers: dict[str, str] = {}
        self._accounts: dict[str, dict] = {}

    def _load_scenario(self, config: dict) -> None:
        self._customers = dict(config.get("customers", {}))
        self._accounts = json_copy(config.get("accounts", {}))

    def _state(self) -> dict:
        return {"customers": dict(self._customers), "accounts": json_copy(self._accounts)}

    @tool_method
    def find_customer(self, name: str) -> dict:
        """Find a customer by full name.

        Args:
            name: the customer's full name
        """
        for cid, full in self._customers.items():
            if full.lower() == name.lower():
                return {"customer_id": cid}
        raise ToolError(f"no customer named {name!r}")

    @tool_method
    def list_accounts(self, customer_id: str) -> dict:
        """List a customer's accounts with their balances.

        Args:
            customer_id: the customer's id
        """
        return {"accounts": [{"account_id": aid, "balance": a["balance"]}
                             for aid, a in sorted(self._accounts.items()) if a["owner"] == customer_id]}

    @tool_method
    def account_details(self, account_id: str) -> dict:
        """Show one account.

        Args:
            account_id: the account's id
        """
        if account_id not in self._accounts:
            raise ToolError(f"no account {account_id!r}")
        return {"account_id": account_id, **self._accounts[account_id]}

    @tool_method
    def transfer(self, from_account: str, to_account: str, amount: float) -> dict:
        """Move money between two accounts.

        Args:
            from_account: the account to take the money from
            to_account: the account to pay into
            amount: how much to move
        """
        for aid in (from_account, to_account):
            if aid not in self._accounts:
                raise ToolError(f"no account {aid!r}")
        if amount <= 0 or self._accounts[from_account]["balance"] < amount:
            raise ToolError(f"insufficient funds in {from_account}")
        self._accounts[from_account]["balance"] -= amount
        self._accounts[to_account]["balance"] += amount
        return {"from_balance": self._accounts[from_account]["balance"]}


TOOL_CLASS = Bank


def sample_config(seed: int) -> dict:
    """The one scenario of the tests."""
    return {"customers": {"c1": "Ada Lovelace", "c2": "Bob Stone"},
            "accounts": {"a1": {"owner": "c1", "balance": 100}, "a2": {"owner": "c1", "balance": 50},
                         "b9": {"owner": "c2", "balance": 0}}}
