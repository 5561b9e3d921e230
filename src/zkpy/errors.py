"""ZooKeeper's error codes and one exception class per code.

The values are KeeperException.Code's; the class names are kazoo's, so code written
against kazoo catches the same names. Unknown codes map to the generic ZookeeperError.
"""

from __future__ import annotations

from enum import IntEnum


class Code(IntEnum):
    OK = 0
    SYSTEMERROR = -1
    RUNTIMEINCONSISTENCY = -2
    DATAINCONSISTENCY = -3
    CONNECTIONLOSS = -4
    MARSHALLINGERROR = -5
    UNIMPLEMENTED = -6
    OPERATIONTIMEOUT = -7
    BADARGUMENTS = -8
    UNKNOWNSESSION = -12
    NEWCONFIGNOQUORUM = -13
    RECONFIGINPROGRESS = -14
    APIERROR = -100
    NONODE = -101
    NOAUTH = -102
    BADVERSION = -103
    NOCHILDRENFOREPHEMERALS = -108
    NODEEXISTS = -110
    NOTEMPTY = -111
    SESSIONEXPIRED = -112
    INVALIDCALLBACK = -113
    INVALIDACL = -114
    AUTHFAILED = -115
    SESSIONMOVED = -118
    NOTREADONLY = -119
    EPHEMERALONLOCALSESSION = -120
    NOWATCHER = -121
    REQUESTTIMEOUT = -122
    RECONFIGDISABLED = -123
    SESSIONCLOSEDREQUIRESASLAUTH = -124
    QUOTAEXCEEDED = -125
    THROTTLEDOP = -127


class ZookeeperError(Exception):
    """A ZooKeeper error code raised as an exception (KeeperException)."""

    code: int = Code.SYSTEMERROR
    retryable: bool = False

    def __init__(self, message: str = "", path: str | None = None) -> None:
        super().__init__(message or self.__class__.__name__)
        self.path = path


class ProtocolError(Exception):
    """The peer broke the protocol (bad frame, bad record): the connection must end."""


class InvariantError(Exception):
    """zkpy's own invariant broke: a bug, never the peer's fault."""


_BY_CODE: dict[int, type[ZookeeperError]] = {}


def _error(name: str, code: Code, retryable: bool = False) -> type[ZookeeperError]:
    cls = type(name, (ZookeeperError,), {"code": code, "retryable": retryable, "__doc__": f"{code.name} ({int(code)})"})
    _BY_CODE[int(code)] = cls
    return cls


SystemZookeeperError = _error("SystemZookeeperError", Code.SYSTEMERROR)
RuntimeInconsistency = _error("RuntimeInconsistency", Code.RUNTIMEINCONSISTENCY)
DataInconsistency = _error("DataInconsistency", Code.DATAINCONSISTENCY)
ConnectionLoss = _error("ConnectionLoss", Code.CONNECTIONLOSS, retryable=True)
MarshallingError = _error("MarshallingError", Code.MARSHALLINGERROR)
UnimplementedError = _error("UnimplementedError", Code.UNIMPLEMENTED)
OperationTimeoutError = _error("OperationTimeoutError", Code.OPERATIONTIMEOUT, retryable=True)
BadArgumentsError = _error("BadArgumentsError", Code.BADARGUMENTS)
UnknownSessionError = _error("UnknownSessionError", Code.UNKNOWNSESSION)
NewConfigNoQuorumError = _error("NewConfigNoQuorumError", Code.NEWCONFIGNOQUORUM)
ReconfigInProcessError = _error("ReconfigInProcessError", Code.RECONFIGINPROGRESS)
APIError = _error("APIError", Code.APIERROR)
NoNodeError = _error("NoNodeError", Code.NONODE)
NoAuthError = _error("NoAuthError", Code.NOAUTH)
BadVersionError = _error("BadVersionError", Code.BADVERSION)
NoChildrenForEphemeralsError = _error("NoChildrenForEphemeralsError", Code.NOCHILDRENFOREPHEMERALS)
NodeExistsError = _error("NodeExistsError", Code.NODEEXISTS)
NotEmptyError = _error("NotEmptyError", Code.NOTEMPTY)
SessionExpiredError = _error("SessionExpiredError", Code.SESSIONEXPIRED)
InvalidCallbackError = _error("InvalidCallbackError", Code.INVALIDCALLBACK)
InvalidACLError = _error("InvalidACLError", Code.INVALIDACL)
AuthFailedError = _error("AuthFailedError", Code.AUTHFAILED)
SessionMovedError = _error("SessionMovedError", Code.SESSIONMOVED)
NotReadOnlyCallError = _error("NotReadOnlyCallError", Code.NOTREADONLY)
EphemeralOnLocalSessionError = _error("EphemeralOnLocalSessionError", Code.EPHEMERALONLOCALSESSION)
NoWatcherError = _error("NoWatcherError", Code.NOWATCHER)
RequestTimeoutError = _error("RequestTimeoutError", Code.REQUESTTIMEOUT)
ReconfigDisabledError = _error("ReconfigDisabledError", Code.RECONFIGDISABLED)
SessionClosedRequireSaslError = _error("SessionClosedRequireSaslError", Code.SESSIONCLOSEDREQUIRESASLAUTH)
QuotaExceededError = _error("QuotaExceededError", Code.QUOTAEXCEEDED)
ThrottledOpError = _error("ThrottledOpError", Code.THROTTLEDOP)


class ConnectionClosedError(ConnectionLoss):  # type: ignore[valid-type,misc]
    """The client was closed or never started (kazoo's name). A ConnectionLoss, so handlers of
    that still catch it, but not retryable: no retry can reopen a closed client."""

    retryable = False


def error_for(code: int, path: str | None = None) -> ZookeeperError:
    """The exception for a wire error code; unknown codes give the generic ZookeeperError."""
    cls = _BY_CODE.get(code)
    if cls is None:
        err = ZookeeperError(f"unknown error code {code}", path)
        err.code = code
        return err
    return cls(path or "", path)
