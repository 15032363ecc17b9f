"""Test helper: an in-memory stand-in for :class:`rocketpy.service.etcd.EtcdGateway` that answers
the few ``/v3`` calls the controller group makes as etcd's JSON gateway does (checked against a
real etcd: ``limit`` and ``more``, reads at a past ``revision``, a transaction's compares, puts and
delete ranges, leases) and pushes every change to the watch. Answers fire at once, so a
``ControllerGroup`` runs to its end within the call; ``reads`` counts the log entries read.
"""
import base64

from twisted.internet.defer import Deferred, succeed

__all__ = ["FakeEtcd"]


def _key(text):
    return base64.b64decode(text or "")


def _kv(key, value, create, mod):
    return {"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode(),
            "create_revision": str(create), "mod_revision": str(mod)}


class FakeEtcd:
    def __init__(self):
        self.revision = 1
        self.history = []            # (revision, key, value or None, create revision)
        self.current = {}            # key -> (value, create revision, mod revision)
        self.leases = {}             # lease id -> keys
        self.reads = 0               # log entries answered by range requests
        self.largest_page = 0
        self.events = []             # (revision, event) for a watch from a past revision
        self.on_range = None         # called after each range answer (a test's interleaving)
        self._watchers = []

    # -- the store ---------------------------------------------------------------------------

    def state(self, revision=None):
        """key -> (value, create revision, mod revision) as it was at ``revision``."""
        if revision is None or revision >= self.revision:
            return self.current
        current = {}
        for rev, key, value, create in self.history:
            if rev > revision:
                break
            if value is None:
                current.pop(key, None)
            else:
                current[key] = (value, create, rev)
        return current

    def _select(self, body, state):
        key, end = _key(body["key"]), _key(body.get("range_end"))
        if not end:
            return [key] if key in state else []
        return sorted(k for k in state if key <= k < end)

    def _range(self, body):
        revision = int(body.get("revision", 0)) or None
        state = self.state(revision)
        keys = self._select(body, state)
        limit = int(body.get("limit", 0))
        page = keys[:limit] if limit else keys
        if b"/log/" in _key(body["key"]):
            self.reads += len(page)
            self.largest_page = max(self.largest_page, len(page))
        answer = {"header": {"revision": str(self.revision)}, "count": str(len(keys))}
        if page:
            answer["kvs"] = [_kv(k, *state[k]) for k in page]
        if len(page) < len(keys):
            answer["more"] = True
        return answer

    def _txn(self, body):
        state = self.current
        ok = all(str((state.get(_key(c["key"])) or (None, 0, 0))[1]) == c["create_revision"]
                 for c in body["compare"])
        ops = body["success" if ok else "failure"] if (body.get("success" if ok else "failure")) \
            else []
        responses, events = [], []
        if any("request_put" in op or "request_delete_range" in op for op in ops):
            self.revision += 1
        for op in ops:
            if "request_put" in op:
                put = op["request_put"]
                key, value = _key(put["key"]), _key(put["value"])
                create = state[key][1] if key in state else self.revision
                self.history.append((self.revision, key, value, create))
                state[key] = (value, create, self.revision)
                if "lease" in put:
                    self.leases.setdefault(put["lease"], set()).add(key)
                events.append({"kv": _kv(key, value, create, self.revision)})
                responses.append({"response_put": {}})
            elif "request_delete_range" in op:
                keys = self._select(op["request_delete_range"], state)
                for key in keys:
                    self.history.append((self.revision, key, None, 0))
                    del state[key]
                    events.append({"type": "DELETE", "kv": {
                        "key": base64.b64encode(key).decode(), "mod_revision": str(self.revision)}})
                responses.append({"response_delete_range": {"deleted": str(len(keys))}})
            else:
                responses.append({"response_range": self._range(op["request_range"])})
        self._push(events)
        return {"header": {"revision": str(self.revision)}, "succeeded": ok,
                "responses": responses}

    def _push(self, events):
        if events:
            self.events.extend((self.revision, e) for e in events)
            for on_message in list(self._watchers):
                on_message({"result": {"events": events}})

    # -- the gateway's interface --------------------------------------------------------------

    def post(self, path, body):
        if path == "/v3/kv/range":
            answer = self._range(body)
            if self.on_range is not None:
                self.on_range(body)
            return succeed(answer)
        if path == "/v3/kv/txn":
            return succeed(self._txn(body))
        if path == "/v3/lease/grant":
            lease = str(len(self.leases) + 1000)
            self.leases[lease] = set()
            return succeed({"ID": lease, "TTL": body["TTL"]})
        if path == "/v3/lease/keepalive":
            return succeed({"result": {"TTL": "3" if body["ID"] in self.leases else "0"}})
        if path == "/v3/lease/revoke":
            keys = self.leases.pop(body["ID"], set())
            return succeed(self._txn({"compare": [], "success": [
                {"request_delete_range": {"key": base64.b64encode(k).decode()}}
                for k in sorted(keys)]}))
        raise AssertionError(f"unexpected {path}")

    def watch(self, body, on_message):
        start = int(body["create_request"]["start_revision"])
        past = [e for rev, e in self.events if rev >= start]
        if past:
            on_message({"result": {"events": past}})
        self._watchers.append(on_message)
        return Deferred()             # a watch runs until the service stops

    def stop_watch(self):
        self._watchers.clear()

    def close(self):
        return succeed(None)
