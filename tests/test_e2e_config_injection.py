"""End to end (issue 12, part 1): UPDATE_NAMESRV_CONFIG cannot reach the file system.

A real ``twistd rocketnamesrv -c FILE``: the newline injection (one key whose value holds the
escape ``\\n``) is refused with INVALID_PARAMETER naming the key, and the config file is byte for
byte unchanged across a restart -- so the KV store stays where it was and access control stays
on. And in every profile (5.0 included, whose Java release has no black list:
CVE-2023-37582) a path key, given directly or injected, is refused and no file is written.
"""
import pytest

from rocketpy.namesrv.acl import sign
from serverproc import RemotingClient, running_server

pytestmark = pytest.mark.network

ADMIN = ("ops-admin", "change-me-please")


def _config(tmp_path, **extra):
    """A -c file (its own kvConfigPath) and the bytes it holds."""
    conf = tmp_path / "namesrv.properties"
    lines = [f"kvConfigPath={tmp_path / 'kv' / 'kvConfig.json'}", "productEnvName=center"]
    lines += [f"{k}={v}" for k, v in extra.items()]
    conf.write_text("\n".join(lines) + "\n")
    return conf


def _signed(client, code, ext=None, body=None):
    return client.call(code, sign(ext or {}, body, *ADMIN), body)


def _config_text(client, signed):
    answer = _signed(client, 319) if signed else client.call(319)
    assert answer.code == 0, answer
    return answer.body.decode()


def test_injected_update_refused_and_file_unchanged_across_a_restart(tmp_path):
    accounts = tmp_path / "plain_acl.yml"
    accounts.write_text(f"accounts:\n  - accessKey: {ADMIN[0]}\n    secretKey: {ADMIN[1]}\n"
                        "    admin: true\n")
    conf = _config(tmp_path, aclEnable="true", aclConfigPath=accounts)
    before = conf.read_bytes()
    evil = tmp_path / "evil" / "kvConfig.json"
    body = (f"productEnvName=x\\nkvConfigPath={evil}\\naclEnable=false").encode()
    with running_server("-c", str(conf), kv_path=False) as server:
        client = RemotingClient(server.port)
        answer = _signed(client, 318, body=body)
        assert answer.code == 29, answer                       # INVALID_PARAMETER
        assert answer.remark.startswith("Can not update config key 'productEnvName': its value "
                                        "holds a line feed (U+000A)"), answer.remark
        assert "productEnvName=center\n" in _config_text(client, True)
        client.close()
    assert conf.read_bytes() == before
    with running_server("-c", str(conf), kv_path=False) as server:   # the restart
        client = RemotingClient(server.port)
        text = _config_text(client, True)
        assert f"kvConfigPath={tmp_path / 'kv' / 'kvConfig.json'}\n" in text
        assert "aclEnable=true\n" in text and "productEnvName=center\n" in text
        unsigned = client.call(100, {"namespace": "ns", "key": "k", "value": "v"})
        assert unsigned.code == 16, unsigned                   # access control is still on
        assert _signed(client, 100, {"namespace": "ns", "key": "k", "value": "v"}).code == 0
        client.close()
    assert (tmp_path / "kv" / "kvConfig.json").exists() and not evil.exists()
    assert conf.read_bytes() == before


@pytest.mark.parametrize("profile", ["4.9", "5.0", "5.3"])
def test_path_keys_refused_and_no_file_written_in_every_profile(tmp_path, profile):
    conf = _config(tmp_path)
    before = conf.read_bytes()
    evil = tmp_path / "evil"
    bodies = [
        f"configStorePath={evil / 'direct.properties'}\nproductEnvName=pwn\n",         # the CVE
        f"productEnvName=x\\nconfigStorePath={evil / 'injected.properties'}\n",
        f"kvConfigPath={evil / 'kv.json'}\n",
        f"productEnvName=x\\u000arocketmqHome={evil}\n",
        "tls.server.mode=disabled\n",
    ]
    with running_server("-c", str(conf), f"--profile={profile}", kv_path=False) as server:
        client = RemotingClient(server.port)
        for body in bodies:
            answer = client.call(318, None, body.encode(), version=413)
            assert answer.code in (16, 29), (profile, body, answer)
        assert "productEnvName=center" in _config_text(client, False)
        # a harmless key still works, and the file is written escaped
        assert client.call(318, None, b"orderMessageEnable=true\n", version=413).code == 0
        client.close()
    assert not evil.exists()
    after = conf.read_text(encoding="ascii")
    assert "orderMessageEnable=true\n" in after and "productEnvName=center\n" in after
    assert sorted(after.splitlines()) == sorted(set(after.splitlines()))  # one line per key
    assert before.decode() != after and "pwn" not in after and "evil" not in after
