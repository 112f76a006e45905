"""`--ray` without a cluster: the one-line install hint without Ray, a SQLite database refused, option checks and the
defaults taken from the cluster's resources (no Ray cluster is started here; see tests/test_ray_e2e.py)."""
from __future__ import annotations

import sys

import pytest

from sap.cli import main
from sap.runs.ray_cluster import INSTALL_HINT, RayOptions, default_actors, default_concurrency


def test_ray_asked_for_without_ray_installed_is_one_line_saying_how_to_install_it(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    code = main(["synthesize", "--toolset", "store", "-n", "2", "-o", "out.jsonl", "--db",
                 "postgresql://postgres@127.0.0.1:1/none", "--ray"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and INSTALL_HINT in err and "pip install 'sap-synth[ray]'" in err


def test_ray_on_a_sqlite_database_is_refused_before_a_run_is_created(tmp_path, capsys):
    code = main(["synthesize", "--toolset", "store", "-n", "2", "-o", "out.jsonl", "--db",
                 f"sqlite:///{tmp_path / 'run.db'}", "--ray"])
    assert code == 2
    assert "--ray needs a PostgreSQL run database" in capsys.readouterr().err
    assert not (tmp_path / "run.db").exists()


@pytest.mark.parametrize("options, named", [(RayOptions(actors=0), "--actors"),
                                            (RayOptions(concurrency=0), "--actor-concurrency"),
                                            (RayOptions(lease_seconds=0), "--lease-seconds")])
def test_ray_options_no_cluster_can_use_are_named(options, named):
    from sap.errors import UsageError

    with pytest.raises(UsageError, match=named):
        options.check()


def test_defaults_follow_the_cluster_and_the_agents():
    assert default_actors(8.0, 1.0) == 8
    assert default_actors(3.0, 2.0) == 1
    assert default_actors(0.5, 1.0) == 1
    assert default_concurrency(uses_llm=False) == 1
    assert default_concurrency(uses_llm=True) > 1


def test_one_progress_line_counts_the_whole_run_from_the_store():
    import io

    from sap.cli.common import Progress

    clock = iter([0.0, 40.0, 40.0]).__next__
    stream = io.StringIO()
    progress = Progress(target=10, verbosity=1, every=30.0, stream=stream, clock=clock)
    progress.show({"accepted": 4, "rejected": 1, "failed": 1, "running": 3, "pending": 2})
    assert stream.getvalue().splitlines()[-1].endswith("4/10 accepted (0 truncated), 2 dropped | 0.1 records/s | "
                                                       "ETA 1m00s")


def test_the_python_api_asks_for_a_postgresql_database_with_ray():
    from sap.api import synthesize
    from sap.errors import UsageError

    with pytest.raises(UsageError, match="--ray needs a PostgreSQL run database"):
        synthesize("store", 2, ray=True)
