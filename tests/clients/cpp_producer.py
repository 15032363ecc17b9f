"""Drive Apache's C++ client (PyPI ``rocketmq``) once: send one message, print one JSON line.

Run as a subprocess by ``tests/test_clients_cpp.py`` (``send_sync`` blocks in C++, so never on a
reactor): ``python cpp_producer.py NAMESRV_ADDR TOPIC BODY``.  Prints
``{"ok": true, "status": ..., "msg_id": ..., "offset": ...}`` or ``{"ok": false, "error": ...}``
and exits 0 either way; an import failure exits 3 with the reason on stderr.
The caller gives it a temporary HOME: the C++ client writes its logs under ``$HOME/logs``.
"""
import json
import sys


def main():
    namesrv, topic, body = sys.argv[1:4]
    try:
        from rocketmq.client import Message, Producer
    except Exception as exc:  # the wheel is x86_64 Linux only; report, don't hide
        print(f"cannot import the C++ client (pip install rocketmq==0.4.4): {exc!r}",
              file=sys.stderr)
        return 3
    producer = Producer("PID-rocketpy-cpp", timeout=3000)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    try:
        msg = Message(topic)
        msg.set_keys("rocketpy-key")
        msg.set_tags("rocketpy-tag")
        msg.set_body(body)
        try:
            result = producer.send_sync(msg)
        except Exception as exc:
            out = {"ok": False, "error": str(exc), "type": type(exc).__name__}
        else:
            out = {"ok": True, "status": int(result.status), "msg_id": result.msg_id,
                   "offset": result.offset}
    finally:
        producer.shutdown()
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
