"""One trajectory's failure stays its own (issue 26): a bug hit while one slot runs fails that slot with its
exception in the rejections file and the run goes on; a toolset that cannot work at all is refused before any run
starts, in one line with exit 2."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from sap.runs.slots import derive_seed


NO_FINAL = '''"""Tools whose ids only come from each other: no walk can start, so no final state is reachable."""
from sap.toolsets.domains.common import tool_method

NAME = "nofinal"


class Loop:
    """Three lookups, each needing an id only another one returns."""

    @tool_method
    def get_alpha(self, beta_id: str) -> dict:
        """Get an alpha.

        Args:
            beta_id: the beta's id
        """
        return {"alpha_id": "a" + beta_id}

    @tool_method
    def get_beta(self, gamma_id: str) -> dict:
        """Get a beta.

        Args:
            gamma_id: the gamma's id
        """
        return {"beta_id": "b" + gamma_id}

    @tool_method
    def get_gamma(self, alpha_id: str) -> dict:
        """Get a gamma.

        Args:
            alpha_id: the alpha's id
        """
        return {"gamma_id": "g" + alpha_id}


TOOL_CLASS = Loop


def sample_config(seed):
    return {}
'''


def sap(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sap.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600, env={**os.environ})


def test_a_toolset_with_no_reachable_final_state_is_refused_in_one_line_and_leaves_no_run(tmp_path):
    (tmp_path / "nofinal.py").write_text(NO_FINAL)
    done = sap("synthesize", "--toolset", "nofinal.py", "-n", "3", "-o", "o.jsonl", "--db", "sqlite:///r.db",
               cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no final state" in done.stderr and "Traceback" not in done.stderr
    runs = json.loads(sap("runs", "--json", "--db", "sqlite:///r.db", cwd=tmp_path).stdout)
    assert [r for r in runs if r["status"] == "running"] == []


def test_a_bug_in_one_slot_fails_that_slot_and_the_run_goes_on(tmp_path):
    crashing = derive_seed(0, 4)  # slot 4's c0 seed: loading its scenario hits a bug in the module
    module = f'''"""The store domain, with a bug hit while loading slot 4's scenario."""
import sap.toolsets.domains.store as base

NAME = "buggy_store"
DESCRIPTION = base.DESCRIPTION
ERROR_RESULTS_CHANGE_NOTHING = getattr(base, "ERROR_RESULTS_CHANGE_NOTHING", False)
BROKEN = base.sample_config({crashing})


class BuggyStore(base.TOOL_CLASS):
    """The store, whose scenario loader chokes on one scenario."""

    def _load_scenario(self, config):
        if config == BROKEN:
            raise KeyError("scenario field 'vault' is missing")
        super()._load_scenario(config)


TOOL_CLASS = BuggyStore
sample_config = base.sample_config
'''
    (tmp_path / "buggy.py").write_text(module)
    done = sap("synthesize", "--toolset", "buggy.py", "-n", "9", "--max-slots", "10", "--seed", "0", "-o", "o.jsonl",
               "--db", "sqlite:///r.db", cwd=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    rejections = [json.loads(line) for line in (tmp_path / "o.jsonl.rejections.jsonl").read_text().splitlines()]
    crashed = [r for r in rejections if r["kind"] == "an unexpected error in the trajectory"]
    assert [r["index"] for r in crashed] == [4]
    assert crashed[0]["reason"] == "KeyError: \"scenario field 'vault' is missing\""
    records = (tmp_path / "o.jsonl").read_text().splitlines()
    runs = json.loads(sap("runs", "--json", "--db", "sqlite:///r.db", cwd=tmp_path).stdout)
    assert runs[0]["accepted"] == len(records) == 9 and len(rejections) == 1  # 9 of 10 slots accepted
    assert runs[0]["failed"] == 1 and runs[0]["status"] != "running"


def _hanging_store(stuck_slot: int) -> str:
    """The store domain, whose login blocks forever (where no interrupt reaches) in slot `stuck_slot`'s scenario
    while the file `hang.flag` exists, touching `stuck.flag` when it does."""
    return f'''"""The store domain, with a tool that hangs in one scenario."""
import threading
from pathlib import Path

import sap.toolsets.domains.store as base

NAME = "hanging_store"
DESCRIPTION = base.DESCRIPTION
ERROR_RESULTS_CHANGE_NOTHING = getattr(base, "ERROR_RESULTS_CHANGE_NOTHING", False)
STUCK = base.sample_config({derive_seed(0, stuck_slot)})


class HangingStore(base.TOOL_CLASS):
    """The store, whose login never returns for one scenario."""

    def _load_scenario(self, config):
        self._stuck = config == STUCK and Path("hang.flag").exists()
        super()._load_scenario(config)

    def _login(self, user):
        if self._stuck:
            Path("stuck.flag").touch()
            threading.Event().wait()
        return super()._login(user)


TOOL_CLASS = HangingStore
sample_config = base.sample_config
'''


def test_a_tool_that_hangs_fails_its_slot_and_the_run_finishes_and_exits(tmp_path):
    (tmp_path / "hanging.py").write_text(_hanging_store(4))
    (tmp_path / "hang.flag").touch()
    done = sap("synthesize", "--toolset", "hanging.py", "-n", "9", "--max-slots", "10", "--seed", "0", "-o",
               "o.jsonl", "--db", "sqlite:///r.db", cwd=tmp_path)  # the stuck thread would keep a non-daemon alive
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert (tmp_path / "stuck.flag").exists()  # the tool did hang
    rejections = [json.loads(line) for line in (tmp_path / "o.jsonl.rejections.jsonl").read_text().splitlines()]
    assert [r["index"] for r in rejections] == [4]
    assert re.fullmatch(r"ToolHung: tool 'login_by_\w+' did not return within 5 s \(the call is abandoned\)",
                        rejections[0]["reason"]), rejections[0]
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 9


def test_sigterm_while_a_tool_hangs_exits_143_and_the_slot_resumes(tmp_path):
    import signal
    import time

    from sap.store import RunStore

    (tmp_path / "hanging.py").write_text(_hanging_store(0))
    (tmp_path / "hang.flag").touch()
    proc = subprocess.Popen([sys.executable, "-m", "sap.cli", "synthesize", "--toolset", "hanging.py", "-n", "3",
                             "--seed", "0", "-o", "o.jsonl", "--db", "sqlite:///r.db"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not (tmp_path / "stuck.flag").exists() and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)  # the tool's 5 s limit has not run out: the slot is still in progress
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "Traceback" not in err
    store = RunStore(f"sqlite:///{tmp_path / 'r.db'}")
    run_id = store.runs()[-1].id
    assert store.counts(run_id) == {"pending": 1}  # slot 0 was put back, not left running or failed
    (tmp_path / "hang.flag").unlink()
    done = sap("resume", run_id, "--toolset", "hanging.py", "--db", "sqlite:///r.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert store.counts(run_id) == {"accepted": 3}
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 3
