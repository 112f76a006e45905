"""Domain modules: a Python file (or built-in module) defining NAME, TOOL_CLASS and sample_config, as a toolset."""
from __future__ import annotations

import importlib.util
import json
import os
import random
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from sap.executors import PythonObjectExecutor
from sap.executors.failures import shape_from_json
from sap.model import Toolset
from sap.provenance.phrasebook import use_phrase_file
from sap.provenance.policy import module_policy
from sap.toolsets.errors import DomainModuleError, UnknownToolset
from sap.toolsets.loaders import ToolDocError, tools_from_class

MAX_TOOLS = 128  # more tools than this made FSM building run for minutes (500 tools: over 2 min, then a traceback)


def toolset_from_module(module: ModuleType, timeout: float = 5.0) -> Toolset:
    """A toolset from a domain module defining NAME, DESCRIPTION, TOOL_CLASS and sample_config(seed).

    A module may set ERROR_RESULTS_CHANGE_NOTHING = True when its tests show that a returned {"error": ...}
    never changes state; its executors then skip the rollback replay after such results. A module may declare its
    soft failures as FAILURE_SHAPES: FailureShapes or {"field": ..., "value": ... (default false), "tools": [...]}
    dicts; a result of that shape is a failed call (see sap.executors.failures). Its rules (sap.provenance.policy)
    are a POLICY attribute or a `<module>.policy.toml` file beside it; how users ask for its tools, a
    `<module>.phrases.toml` phrase file beside it (docs/phrasebook.md; without one, the generic wording). Its
    SAMPLERS give new values of named parameters (`module_samplers`).
    """
    missing = [a for a in ("NAME", "TOOL_CLASS", "sample_config") if not hasattr(module, a)]
    if missing:
        raise ToolDocError(f"domain module lacks {', '.join(missing)}", file=getattr(module, "__file__", None))
    cls = module.TOOL_CLASS
    where = getattr(module, "__file__", None) or module.__name__
    tools = tools_from_class(cls)
    if not tools:
        raise DomainModuleError(f"{where}: TOOL_CLASS {cls.__name__} has no public tool methods")
    if len(tools) > MAX_TOOLS:
        raise DomainModuleError(f"{where}: TOOL_CLASS {cls.__name__} has {len(tools)} tools; a toolset may have at "
                                f"most {MAX_TOOLS} (split it into several domain modules)")
    check_sample_config(module.sample_config, where)
    trusted = bool(getattr(module, "ERROR_RESULTS_CHANGE_NOTHING", False))
    try:
        shapes = tuple(shape_from_json(s) for s in getattr(module, "FAILURE_SHAPES", ()))
    except ValueError as exc:
        raise ToolDocError(str(exc), file=getattr(module, "__file__", None)) from None
    policy = module_policy(module)
    samplers = module_samplers(module, tools, where)
    phrases = Path(module.__file__).with_suffix(".phrases.toml") if getattr(module, "__file__", None) else None
    if phrases is not None and phrases.is_file():
        use_phrase_file(phrases, {t.name: t for t in tools})
    return Toolset(
        name=module.NAME,
        description=getattr(module, "DESCRIPTION", ""),
        tools=tools,
        executor_factory=lambda: PythonObjectExecutor([cls], timeout=timeout, trust_error_results=trusted,
                                                      failure_shapes=shapes),
        sample_config=module.sample_config,
        extra={**({"policy": policy.resolved(tools)} if policy is not None else {}),
               **({"samplers": samplers} if samplers else {})},
    )


def module_samplers(module: ModuleType, tools: list[Any], where: str) -> dict[str, Callable[..., Any]]:
    """A module's SAMPLERS ({parameter or tool.parameter: sampler(rng, c0) -> value}): how users pick a new value of
    that parameter (a search phrase from the books c0 holds), checked once on sample_config(0); a name no tool
    takes, a sampler that is not callable, raises or gives what JSON cannot hold is one DomainModuleError line."""
    raw = getattr(module, "SAMPLERS", None)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise DomainModuleError(f"{where}: SAMPLERS must be a dict of parameter name -> sampler(rng, c0)")
    params = {p for t in tools for p in t.properties}
    own = {f"{t.name}.{p}" for t in tools for p in t.properties}  # `tool.parameter`: that tool's alone
    config = module.sample_config(0)
    for name, sampler in raw.items():
        if name not in params | own:
            raise DomainModuleError(f"{where}: SAMPLERS[{name!r}]: no tool takes a parameter {name!r} "
                                    f"(parameters: {', '.join(sorted(params))}, or tool.parameter)")
        if not callable(sampler):
            raise DomainModuleError(f"{where}: SAMPLERS[{name!r}] is not callable (want sampler(rng, c0) -> value)")
        try:
            json.dumps(sampler(random.Random(0), config))
        except Exception as exc:  # the user's code: any failure is its one line
            raise DomainModuleError(f"{where}: SAMPLERS[{name!r}](rng, sample_config(0)) failed: "
                                    f"{type(exc).__name__}: {exc}") from None
    return dict(raw)


def check_sample_config(sample_config: Callable[[int], Any], where: str) -> None:
    """Refuse a module whose `sample_config(0)` raises or is not a JSON object (every c0 is stored as JSON)."""
    try:
        config = sample_config(0)
        json.dumps(config)
    except Exception as exc:  # the user's code: any failure is its one line
        raise DomainModuleError(f"{where}: sample_config(0) does not give a JSON object: {type(exc).__name__}: "
                                f"{exc}") from None
    if not isinstance(config, dict):
        raise DomainModuleError(f"{where}: sample_config(0) gives a {type(config).__name__}, not a dict")


def import_failure(path: Path, exc: Exception) -> DomainModuleError:
    """The one-line error of a module file that raised `exc` on import: `file:line: Type: message`, the line being
    the syntax error's, or the module's own line the exception passed through last."""
    if isinstance(exc, SyntaxError):
        return DomainModuleError(f"{exc.filename or path}:{exc.lineno}: {type(exc).__name__}: {exc.msg}")
    own = os.path.abspath(path)
    lines = [line for frame, line in traceback.walk_tb(exc.__traceback__)
             if os.path.abspath(frame.f_code.co_filename) == own]
    where = f"{path}:{lines[-1]}" if lines else str(path)
    return DomainModuleError(f"{where}: {type(exc).__name__}: {exc}")


def module_from_path(path: Path) -> ModuleType:
    """Import a Python file as a domain module; a file that fails to import is one DomainModuleError line."""
    if not path.is_file():
        raise UnknownToolset(f"{path}: no such domain module file")
    spec = importlib.util.spec_from_file_location(f"sap_user_domain_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise UnknownToolset(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # any failure of the user's module is reported as its one line
        raise import_failure(path, exc) from None
    return module
