"""The eight agent tools the SQaLe models were trained with."""

from sqale_desktop.core.tools.payloads import (
    DDLPayload,
    ForeignKeysPayload,
    JoinPathPayload,
    JoinStep,
    RowsPayload,
    SubmittedPayload,
    TablesPayload,
    ToolOutput,
)
from sqale_desktop.core.tools.specs import TOOL_NAMES, TOOL_SPECS, ToolArg, ToolSpec
from sqale_desktop.core.tools.toolbox import ToolBox

__all__ = [
    "TOOL_NAMES",
    "TOOL_SPECS",
    "DDLPayload",
    "ForeignKeysPayload",
    "JoinPathPayload",
    "JoinStep",
    "RowsPayload",
    "SubmittedPayload",
    "TablesPayload",
    "ToolArg",
    "ToolBox",
    "ToolOutput",
    "ToolSpec",
]
