"""Protocol constants of ZooKeeper 3.8: opcodes, special xids, events, permissions, create modes."""

from __future__ import annotations

from enum import IntEnum, IntFlag


class OpCode(IntEnum):
    NOTIFICATION = 0
    CREATE = 1
    DELETE = 2
    EXISTS = 3
    GET_DATA = 4
    SET_DATA = 5
    GET_ACL = 6
    SET_ACL = 7
    GET_CHILDREN = 8
    SYNC = 9
    PING = 11
    GET_CHILDREN2 = 12
    CHECK = 13
    MULTI = 14
    CREATE2 = 15
    RECONFIG = 16
    CHECK_WATCHES = 17
    REMOVE_WATCHES = 18
    CREATE_CONTAINER = 19
    DELETE_CONTAINER = 20
    CREATE_TTL = 21
    MULTI_READ = 22
    AUTH = 100
    SET_WATCHES = 101
    SASL = 102
    GET_EPHEMERALS = 103
    GET_ALL_CHILDREN_NUMBER = 104
    SET_WATCHES2 = 105
    ADD_WATCH = 106
    WHO_AM_I = 107
    CREATE_SESSION = -10
    CLOSE_SESSION = -11
    ERROR = -1


class OpNum:
    """OpCode's values as plain ints, for the request path: reading an IntEnum member costs about
    100 ns (the lookup goes through its metaclass), a plain class attribute about 20 ns, and a
    write compares its opcode a few dozen times. ``OpNum.X == OpCode.X`` for every member (a test
    checks the two agree)."""

    NOTIFICATION = int(OpCode.NOTIFICATION)
    CREATE = int(OpCode.CREATE)
    DELETE = int(OpCode.DELETE)
    EXISTS = int(OpCode.EXISTS)
    GET_DATA = int(OpCode.GET_DATA)
    SET_DATA = int(OpCode.SET_DATA)
    GET_ACL = int(OpCode.GET_ACL)
    SET_ACL = int(OpCode.SET_ACL)
    GET_CHILDREN = int(OpCode.GET_CHILDREN)
    SYNC = int(OpCode.SYNC)
    PING = int(OpCode.PING)
    GET_CHILDREN2 = int(OpCode.GET_CHILDREN2)
    CHECK = int(OpCode.CHECK)
    MULTI = int(OpCode.MULTI)
    CREATE2 = int(OpCode.CREATE2)
    RECONFIG = int(OpCode.RECONFIG)
    CHECK_WATCHES = int(OpCode.CHECK_WATCHES)
    REMOVE_WATCHES = int(OpCode.REMOVE_WATCHES)
    CREATE_CONTAINER = int(OpCode.CREATE_CONTAINER)
    DELETE_CONTAINER = int(OpCode.DELETE_CONTAINER)
    CREATE_TTL = int(OpCode.CREATE_TTL)
    MULTI_READ = int(OpCode.MULTI_READ)
    AUTH = int(OpCode.AUTH)
    SET_WATCHES = int(OpCode.SET_WATCHES)
    SASL = int(OpCode.SASL)
    GET_EPHEMERALS = int(OpCode.GET_EPHEMERALS)
    GET_ALL_CHILDREN_NUMBER = int(OpCode.GET_ALL_CHILDREN_NUMBER)
    SET_WATCHES2 = int(OpCode.SET_WATCHES2)
    ADD_WATCH = int(OpCode.ADD_WATCH)
    WHO_AM_I = int(OpCode.WHO_AM_I)
    CREATE_SESSION = int(OpCode.CREATE_SESSION)
    CLOSE_SESSION = int(OpCode.CLOSE_SESSION)
    ERROR = int(OpCode.ERROR)


class Xid(IntEnum):
    """Reserved xids of replies and requests that are not client calls."""

    NOTIFICATION = -1
    PING = -2
    AUTH = -4
    SET_WATCHES = -8


class EventType(IntEnum):
    NONE = -1
    NODE_CREATED = 1
    NODE_DELETED = 2
    NODE_DATA_CHANGED = 3
    NODE_CHILDREN_CHANGED = 4
    DATA_WATCH_REMOVED = 5
    CHILD_WATCH_REMOVED = 6
    PERSISTENT_WATCH_REMOVED = 7
    # kazoo's names (aliases: the members above stay the canonical ones)
    CREATED = 1
    DELETED = 2
    CHANGED = 3
    CHILD = 4


class KeeperState(IntEnum):
    DISCONNECTED = 0
    SYNC_CONNECTED = 3
    AUTH_FAILED = 4
    CONNECTED_READ_ONLY = 5
    SASL_AUTHENTICATED = 6
    CLOSED = 7
    EXPIRED = -112


class Perms(IntFlag):
    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = 31


class PermNum:
    """Perms' values as plain ints, for the request path (as OpNum is OpCode's): reading an IntFlag
    member costs about 100 ns, and ``acl.perms & Perms.READ`` builds a flag, about 1 µs for each
    ACL entry a check looks at. ``PermNum.X == Perms.X`` for every member (a test checks it)."""

    READ = int(Perms.READ)
    WRITE = int(Perms.WRITE)
    CREATE = int(Perms.CREATE)
    DELETE = int(Perms.DELETE)
    ADMIN = int(Perms.ADMIN)
    ALL = int(Perms.ALL)


class CreateMode(IntEnum):
    PERSISTENT = 0
    EPHEMERAL = 1
    PERSISTENT_SEQUENTIAL = 2
    EPHEMERAL_SEQUENTIAL = 3
    CONTAINER = 4
    PERSISTENT_WITH_TTL = 5
    PERSISTENT_SEQUENTIAL_WITH_TTL = 6

    @property
    def is_ephemeral(self) -> bool:
        return self in (CreateMode.EPHEMERAL, CreateMode.EPHEMERAL_SEQUENTIAL)

    @property
    def is_sequential(self) -> bool:
        return self in (
            CreateMode.PERSISTENT_SEQUENTIAL,
            CreateMode.EPHEMERAL_SEQUENTIAL,
            CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL,
        )

    @property
    def is_ttl(self) -> bool:
        return self in (CreateMode.PERSISTENT_WITH_TTL, CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL)


class AddWatchMode(IntEnum):
    PERSISTENT = 0
    PERSISTENT_RECURSIVE = 1


class WatcherType(IntEnum):
    """Watch kinds named by removeWatches and checkWatches."""

    CHILDREN = 1
    DATA = 2
    ANY = 3


# ephemeralOwner encodings of the extended node types (EphemeralType)
CONTAINER_EPHEMERAL_OWNER = -(1 << 63)
TTL_MASK = 0xFF00000000000000
MAX_TTL_MS = 0x000000FFFFFFFFFF  # EphemeralType.TTL.maxValue(): 40 bits; bits 40-55 are reserved

PROTOCOL_VERSION = 0
DEFAULT_MAX_BUFFER = 0xFFFFF  # jute.maxbuffer default (1 MiB - 1)
FOUR_LETTER_WORDS = (
    "ruok", "srvr", "stat", "mntr", "conf", "cons", "crst", "srst", "envi",
    "wchs", "wchc", "wchp", "dump", "dirs", "isro", "gtmk", "stmk",
)
