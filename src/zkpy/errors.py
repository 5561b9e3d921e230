"""ZooKeeper's error codes and one exception class per code.

The values are KeeperException.Code's; the class names are kazoo's (its older ``*Exception``
aliases too), so code written against kazoo catches the same names. Unknown codes map to the
generic ZookeeperError. Each is a class statement, so type checkers see classes.
`RolledBackError` (code 0, not in the code table) is what a multi reports for an op that did
not fail but was undone with the one that did.
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


def _register(*classes: type[ZookeeperError]) -> None:
    for cls in classes:
        _BY_CODE[int(cls.code)] = cls


# Real class statements (not built with type()), so type checkers see classes: a user may
# subclass them and name them in annotations.
class SystemZookeeperError(ZookeeperError):
    """SYSTEMERROR (-1)"""

    code = Code.SYSTEMERROR


class RuntimeInconsistency(ZookeeperError):
    """RUNTIMEINCONSISTENCY (-2)"""

    code = Code.RUNTIMEINCONSISTENCY


class DataInconsistency(ZookeeperError):
    """DATAINCONSISTENCY (-3)"""

    code = Code.DATAINCONSISTENCY


class ConnectionLoss(ZookeeperError):
    """CONNECTIONLOSS (-4)"""

    code = Code.CONNECTIONLOSS
    retryable = True


class MarshallingError(ZookeeperError):
    """MARSHALLINGERROR (-5)"""

    code = Code.MARSHALLINGERROR


class UnimplementedError(ZookeeperError):
    """UNIMPLEMENTED (-6)"""

    code = Code.UNIMPLEMENTED


class OperationTimeoutError(ZookeeperError):
    """OPERATIONTIMEOUT (-7)"""

    code = Code.OPERATIONTIMEOUT
    retryable = True


class BadArgumentsError(ZookeeperError):
    """BADARGUMENTS (-8)"""

    code = Code.BADARGUMENTS


class UnknownSessionError(ZookeeperError):
    """UNKNOWNSESSION (-12)"""

    code = Code.UNKNOWNSESSION


class NewConfigNoQuorumError(ZookeeperError):
    """NEWCONFIGNOQUORUM (-13)"""

    code = Code.NEWCONFIGNOQUORUM


class ReconfigInProcessError(ZookeeperError):
    """RECONFIGINPROGRESS (-14)"""

    code = Code.RECONFIGINPROGRESS


class APIError(ZookeeperError):
    """APIERROR (-100)"""

    code = Code.APIERROR


class NoNodeError(ZookeeperError):
    """NONODE (-101)"""

    code = Code.NONODE


class NoAuthError(ZookeeperError):
    """NOAUTH (-102)"""

    code = Code.NOAUTH


class BadVersionError(ZookeeperError):
    """BADVERSION (-103)"""

    code = Code.BADVERSION


class NoChildrenForEphemeralsError(ZookeeperError):
    """NOCHILDRENFOREPHEMERALS (-108)"""

    code = Code.NOCHILDRENFOREPHEMERALS


class NodeExistsError(ZookeeperError):
    """NODEEXISTS (-110)"""

    code = Code.NODEEXISTS


class NotEmptyError(ZookeeperError):
    """NOTEMPTY (-111)"""

    code = Code.NOTEMPTY


class SessionExpiredError(ZookeeperError):
    """SESSIONEXPIRED (-112)"""

    code = Code.SESSIONEXPIRED


class InvalidCallbackError(ZookeeperError):
    """INVALIDCALLBACK (-113)"""

    code = Code.INVALIDCALLBACK


class InvalidACLError(ZookeeperError):
    """INVALIDACL (-114)"""

    code = Code.INVALIDACL


class AuthFailedError(ZookeeperError):
    """AUTHFAILED (-115)"""

    code = Code.AUTHFAILED


class SessionMovedError(ZookeeperError):
    """SESSIONMOVED (-118)"""

    code = Code.SESSIONMOVED


class NotReadOnlyCallError(ZookeeperError):
    """NOTREADONLY (-119)"""

    code = Code.NOTREADONLY


class EphemeralOnLocalSessionError(ZookeeperError):
    """EPHEMERALONLOCALSESSION (-120)"""

    code = Code.EPHEMERALONLOCALSESSION


class NoWatcherError(ZookeeperError):
    """NOWATCHER (-121)"""

    code = Code.NOWATCHER


class RequestTimeoutError(ZookeeperError):
    """REQUESTTIMEOUT (-122)"""

    code = Code.REQUESTTIMEOUT


class ReconfigDisabledError(ZookeeperError):
    """RECONFIGDISABLED (-123)"""

    code = Code.RECONFIGDISABLED


class SessionClosedRequireSaslError(ZookeeperError):
    """SESSIONCLOSEDREQUIRESASLAUTH (-124)"""

    code = Code.SESSIONCLOSEDREQUIRESASLAUTH


class QuotaExceededError(ZookeeperError):
    """QUOTAEXCEEDED (-125)"""

    code = Code.QUOTAEXCEEDED


class ThrottledOpError(ZookeeperError):
    """THROTTLEDOP (-127)"""

    code = Code.THROTTLEDOP


_register(SystemZookeeperError, RuntimeInconsistency, DataInconsistency, ConnectionLoss, MarshallingError, UnimplementedError, OperationTimeoutError, BadArgumentsError, UnknownSessionError, NewConfigNoQuorumError, ReconfigInProcessError, APIError, NoNodeError, NoAuthError, BadVersionError, NoChildrenForEphemeralsError, NodeExistsError, NotEmptyError, SessionExpiredError, InvalidCallbackError, InvalidACLError, AuthFailedError, SessionMovedError, NotReadOnlyCallError, EphemeralOnLocalSessionError, NoWatcherError, RequestTimeoutError, ReconfigDisabledError, SessionClosedRequireSaslError, QuotaExceededError, ThrottledOpError)


class RolledBackError(RuntimeInconsistency):
    """A multi's op that did not fail but was rolled back with the op that did (its result
    carries code 0; kazoo's name). A RuntimeInconsistency, as zkpy reported it before."""

    code = Code.OK


class ConnectionClosedError(ConnectionLoss):
    """The client was closed or never started (kazoo's name). A ConnectionLoss, so handlers of
    that still catch it, but not retryable: no retry can reopen a closed client."""

    retryable = False


# kazoo's older names (kazoo.exceptions keeps them as aliases too)
ConnectionLossException = ConnectionLoss
MarshallingErrorException = MarshallingError
SystemErrorException = SystemZookeeperError
RuntimeInconsistencyException = RuntimeInconsistency
DataInconsistencyException = DataInconsistency
UnimplementedException = UnimplementedError
OperationTimeoutException = OperationTimeoutError
BadArgumentsException = BadArgumentsError
ApiErrorException = APIError
NoNodeException = NoNodeError
NoAuthException = NoAuthError
BadVersionException = BadVersionError
NoChildrenForEphemeralsException = NoChildrenForEphemeralsError
NodeExistsException = NodeExistsError
InvalidACLException = InvalidACLError
AuthFailedException = AuthFailedError
NotEmptyException = NotEmptyError
SessionExpiredException = SessionExpiredError
InvalidCallbackException = InvalidCallbackError


def error_for(code: int, path: str | None = None) -> ZookeeperError:
    """The exception for a wire error code; unknown codes give the generic ZookeeperError."""
    cls = _BY_CODE.get(code)
    if cls is None:
        err = ZookeeperError(f"unknown error code {code}", path)
        err.code = code
        return err
    return cls(path or "", path)
