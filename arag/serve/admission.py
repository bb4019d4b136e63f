"""The server's admission: the tools' own call gate (arag.tools.hosting.admission), under the name
the server's modules import it by."""

from arag.tools.hosting.admission import CallGate, ClientGone, ServerBusy, ServerStopping, set_within, unless

__all__ = ["CallGate", "ClientGone", "ServerBusy", "ServerStopping", "set_within", "unless"]
