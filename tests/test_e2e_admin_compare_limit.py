"""``rocketpy-admin compareNamesrv`` prints at most ``-l`` differences of each kind (issue 30: it
printed 15,220 lines, with no way to ask for fewer); all are counted, ``-l 0`` prints every one
and ``--json`` has every one."""
import json

import pytest

from serverproc import running_server
from test_e2e_admin import admin, register

pytestmark = pytest.mark.network


def test_differences_printed_are_bounded_by_the_limit_and_all_counted():
    topics = [f"Only{i:02d}" for i in range(25)]
    with running_server() as one, running_server() as two:
        conns = [register(one.port, "127.0.0.1:30911", topics), register(two.port, "127.0.0.1:30911", ())]
        n = ["-n", f"{one.addr};{two.addr}"]
        results = {limit: admin("compareNamesrv", *n, *limit) for limit in ((), ("-l", "3"), ("-l", "0"))}
        status, out, _ = admin("compareNamesrv", *n, "--json", "-l", "3")
        bad = admin("compareNamesrv", *n, "-l", "x")
        for conn in conns:
            conn.close()
    verdict = "2 NameServers diverge: 25 topics differ."
    for limit, shown in (((), 20), (("-l", "3"), 3), (("-l", "0"), 25)):
        code, text, err = results[limit]
        assert code == 1 and err.endswith("the NameServers diverge: 25 topics differ\n"), err
        lines = text.splitlines()
        listed = [line.split()[1] for line in lines if line.startswith("topic ")]
        assert listed == topics[:shown], limit
        hidden = [line for line in lines if line.startswith("(")]
        assert hidden == ([f"({25 - shown} more topics not shown: -l 0 prints every difference)"]
                          if shown < 25 else [])
        assert lines[-1] == verdict
    assert status == 1 and len(json.loads(out)["differences"]) == 25
    assert bad == (1, "", "rocketpy-admin compareNamesrv: -l: 'x' is not a number of differences "
                          "(0: all)\n")
