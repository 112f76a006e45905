"""A tiny pump station for the precondition tests: the pump only starts once the power is switched on, and says so
("the power must be switched on first"); nothing in the tool docs tells."""
from __future__ import annotations

from sap.toolsets.domains.common import ToolError, tool_method

NAME = "pump"
DESCRIPTION = "A pump station: switch the power, run the pump, label the station, read its log."
ERROR_RESULTS_CHANGE_NOTHING = True


class PumpStation:
    """A power switch, a pump with a flow rate, a station label and a log of what happened."""

    def __init__(self) -> None:
        self._power, self._rate, self._label, self._log = False, 0, "", []

    def _load_scenario(self, config: dict) -> None:
        self._power, self._rate = bool(config.get("power", False)), int(config.get("rate", 0))
        self._label, self._log = str(config.get("label", "")), list(config.get("log", []))

    def _state(self) -> dict:
        return {"power": self._power, "rate": self._rate, "label": self._label, "log": list(self._log)}

    @tool_method
    def switch_power(self, on: bool) -> dict:
        """Switch the station's power.

        Args:
            on: the switch position to set
        """
        self._power = on
        self._log.append(f"power {'on' if on else 'off'}")
        return {"power": on}

    @tool_method
    def start_pump(self, rate: int) -> dict:
        """Run the pump at a flow rate.

        Args:
            rate: litres per minute, from 1 to 50
        """
        if not self._power:
            raise ToolError("The power must be switched on first.")
        if not 1 <= rate <= 50:
            raise ToolError(f"rate {rate} is out of range 1-50")
        self._rate = rate
        self._log.append(f"pump at {rate}")
        return {"rate": rate}

    @tool_method
    def set_label(self, label: str) -> dict:
        """Rename the station.

        Args:
            label: the station's new name
        """
        self._label = label
        return {"label": label}

    @tool_method
    def read_log(self) -> dict:
        """Show the station's log."""
        return {"log": list(self._log)}


TOOL_CLASS = PumpStation


def sample_config(seed: int) -> dict:
    """A station with its power off, named after the seed."""
    return {"power": False, "rate": 0, "label": f"station {seed}", "log": []}
