"""The one exception type graphopt raises for bad input."""

from xdsl.utils.exceptions import DiagnosticException


class GraphoptError(DiagnosticException):
    """Bad input (malformed IR, unknown op, wrong shapes, missing file, unsupported feature).

    `str(error)` is one line-oriented message that names the location
    (`file:line:col`) or the op/argument at fault; tools print it and exit non-zero.
    """
