"""One error root: every exception class sap defines derives from SapError, and the CLI prints any of them as one
line with exit code 2."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import sap
from sap.cli import main
from sap.errors import SapError

# BaseException on purpose: a tool's own `except Exception` cannot swallow the executor's time limit, and SIGTERM
# stops a run the way Ctrl-C (KeyboardInterrupt) does
NOT_SAP_ERRORS = {"sap.executors.python_object.ToolTimeout", "sap.cli.common.Terminated"}


def sap_exception_classes() -> list[type[BaseException]]:
    """Every exception class defined in a module of the sap package."""
    found = []
    for info in pkgutil.walk_packages(sap.__path__, "sap."):
        if info.name.endswith(".__main__"):  # runs the command line when imported
            continue
        module = importlib.import_module(info.name)
        found += [obj for _, obj in inspect.getmembers(module, inspect.isclass)
                  if issubclass(obj, BaseException) and obj.__module__ == info.name]
    return found


def test_every_sap_exception_derives_from_sap_error():
    classes = sap_exception_classes()
    assert len(classes) >= 25  # the walk reached the package's modules
    strays = [f"{c.__module__}.{c.__qualname__}" for c in classes
              if not issubclass(c, SapError) and f"{c.__module__}.{c.__qualname__}" not in NOT_SAP_ERRORS]
    assert strays == []


def test_builtin_bases_are_kept_for_callers_that_catch_them():
    from sap.export.hf import HFUnavailable
    from sap.llm import LLMRoleError
    from sap.store import RunConflict, StoreError
    from sap.toolsets import ToolDocError, UnknownToolset

    assert issubclass(UnknownToolset, LookupError) and issubclass(ToolDocError, ValueError)
    assert issubclass(LLMRoleError, RuntimeError) and issubclass(HFUnavailable, ImportError)
    assert issubclass(RunConflict, StoreError) and issubclass(StoreError, RuntimeError)


def _fails_with(capsys, monkeypatch, exc: BaseException) -> tuple[int, str]:
    """Run `sap synthesize` with loading the toolset raising `exc`; the exit code and stderr."""
    def load_toolset(name):
        raise exc

    monkeypatch.setattr("sap.toolsets.load_toolset", load_toolset)
    code = main(["synthesize", "--toolset", "store", "-n", "1", "-o", "out.jsonl"])
    return code, capsys.readouterr().err


def test_fsm_verification_error_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    from sap.fsm.verify import FSMVerificationError, Violation

    monkeypatch.chdir(tmp_path)
    exc = FSMVerificationError("store", 3, [Violation("reachability", "state s2 unreachable"),
                                            Violation("termination", "no final state")])
    code, err = _fails_with(capsys, monkeypatch, exc)
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith("sap synthesize: error: FSM for toolset 'store' still violates V_spec after 3 rounds")
    assert "state s2 unreachable; " in err and "no final state" in err


@pytest.mark.parametrize("module, name, args, message", [
    ("sap.llm", "LLMRoleError", ("planner", "openai/m", "rejected", "401"),
     "LLM role 'planner' (openai/m) failed, rejected: 401"),
    ("sap.export.hf", "HFUnavailable", ("pip install 'sap-synth[hf]'",), "pip install 'sap-synth[hf]'"),
    ("sap.runs.driver", "FingerprintMismatch", ("run r1 cannot be resumed",), "run r1 cannot be resumed"),
    ("sap.cache.sampling", "TemplateAbandoned", ("no chain within 5 restarts",), "no chain within 5 restarts"),
])
def test_sap_errors_are_one_line_and_exit_2(tmp_path, capsys, monkeypatch, module, name, args, message):
    monkeypatch.chdir(tmp_path)
    code, err = _fails_with(capsys, monkeypatch, getattr(importlib.import_module(module), name)(*args))
    assert (code, err) == (2, f"sap synthesize: error: {message}\n")


def test_an_error_outside_sap_still_raises(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ZeroDivisionError):
        _fails_with(capsys, monkeypatch, ZeroDivisionError("a bug, not bad input"))
