"""``zkpy shell`` and Debian's ``zkCli.sh`` run one script against the same server and print the
same transcript, modulo ids and times, against zkpy and against Apache ZooKeeper 3.8.

The script is test_zkcli.py's (every data command, flag and error text, watches included; its
root renamed so the two tests never share nodes) followed by the shell's own commands: quotas,
config, reconfig (refused: reconfigEnabled is off), usage errors, history, redo, printwatches,
close, quit (``setAcl -R`` meets no NoAuth: zkCli prints that error with no line end, so
whatever prints next joins its line). ``printwatches off`` stays off to the end: zkCli prints events on its own thread, so
an event caused just before ``printwatches on`` may print or not there.
``connect`` is left out: zkCli's connect returns before the session is up, so the command after
it races the connection (it fails with ConnectionLoss or not); zkpy's waits for the session.
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys

import pytest
from tests.interop.test_zkcli import SCRIPT as DATA_SCRIPT
from tests.interop.test_zkcli import ZKCLI, normalise, run_zkcli

from zkpy.testing.servers import ServerProcess

SHELL_SCRIPT = """create /zkshq
create /zkshq/a x
setquota -n 2 /zkshq
setquota -b 100 /zkshq
setquota -N 5 /zkshq
setquota -n 3 /zkshq/a
setquota -n 3 /zkshq-missing
setquota /zkshq
listquota /zkshq
listquota /zkshq-missing
listquota /zkshq/a
delquota -n /zkshq
listquota /zkshq
delquota /zkshq
listquota /zkshq
delquota /zkshq
config
config -s
reconfig -add server.5=127.0.0.1:1234:1235;2181
reconfig -remove 3
reconfig
get /zookeeper/config
bogus
ls
get
create -s
get /zkshq/a extra
ls /zkshq extra
stat /zkshq/a extra
getEphemerals
sync
whoami extra
get -w /zkshq/a
set /zkshq/a loud
addWatch -m PERSISTENT
create /zkshq/acl2 x world:anyone:raz,nocolon
getAcl /zkshq/acl2
ls -x /zkshq
set /zkshq/a
stat -w
addauth
setAcl -R /zkshq world:anyone:cdrwa
getAcl /zkshq/a
history
redo 1
redo 9999
printwatches off
ls -w /zkshq
create /zkshq/quiet
printwatches
deleteall /zkshq -b 0
close
ls /
quit
ls /
"""

SCRIPT = DATA_SCRIPT.replace("zkcli", "zksh") + SHELL_SCRIPT
BANNERS = ("Welcome to ZooKeeper!", "JLine support is disabled")


def run_shell(server: ServerProcess, script: str) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "zkpy.cli.main", "shell", server.hosts],
                          input=script.encode("utf-8"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=60, check=False)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def transcript(raw: str, port: int) -> list[str]:
    lines, events = normalise(raw, port)
    return [line for line in lines if line not in BANNERS] + ["", "--- watch events, in order ---"] + events


def test_shell_script_matches_zkcli(any_server: ServerProcess) -> None:
    if not os.path.exists(ZKCLI):
        if os.environ.get("CI"):
            pytest.fail(f"{ZKCLI} is missing (Debian's zookeeper package)")
        pytest.skip(f"{ZKCLI} is not installed (apt-get install -y zookeeper)")
    want = transcript(run_zkcli(any_server, SCRIPT), any_server.port)
    rc, raw = run_shell(any_server, SCRIPT)
    got = transcript(raw, any_server.port)
    # the oracle itself ran the whole script (an equal pair of failures would pass)
    assert "Created /zksh/data" in want and "KeeperErrorCode = Reconfig is disabled" in want, "\n".join(want)
    assert "Output quota for /zkshq count=2,bytes=100=;byteHardLimit=-1;countHardLimit=5" in want
    assert any("NodeCreated path:/zksh/w/a/b" in e for e in want), "\n".join(want)
    if got != want:
        diff = "\n".join(difflib.unified_diff(want, got, "zkCli.sh", "zkpy shell", lineterm=""))
        pytest.fail(f"zkpy shell's transcript differs from zkCli.sh's:\n{diff}")
    assert rc == 1  # some commands of the script fail on purpose
