"""ListenError: a listener of this server could not bind its port, and which one it was.

``zkpy server`` checks its ports before it starts (``cli.preflight``); a port taken between that
check and the bind still ends the start with one line naming the port, not the client port's
name on another port's error."""

from __future__ import annotations

from zkpy.runtime.osdisk import describe_error


class ListenError(OSError):
    def __init__(self, what: str, host: str, port: int, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.what, self.host, self.port = what, host, port

    def __str__(self) -> str:
        return f"cannot serve {self.what} on {self.host}:{self.port}: {describe_error(OSError(self.errno, self.strerror))}"
