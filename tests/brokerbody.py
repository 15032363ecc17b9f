"""Test helper: a JSON RegisterBrokerBody shaped like a genuine 5.x broker's (see the captures)."""
import json
import zlib

__all__ = ["register_body", "flood_registration"]


def register_body(topics, counter=1, perm=6, queues=4, timestamp=1, filters=()):
    """The body of a REGISTER_BROKER carrying ``topics`` with one data version counter."""
    table = {t: {"order": False, "perm": perm, "readQueueNums": queues, "topicFilterType": "SINGLE_TAG",
                 "topicName": t, "topicSysFlag": 0, "writeQueueNums": queues} for t in topics}
    return json.dumps({"filterServerList": list(filters), "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": counter, "stateVersion": 0, "timestamp": timestamp},
        "topicConfigTable": table}}).encode()


def flood_registration(index, topics):
    """``(ext fields, body)`` of a REGISTER_BROKER from flooding broker ``index`` (cluster
    ``Flood``) carrying ``topics`` new topics of its own, ``flood{index}-0`` onwards."""
    body = register_body([f"flood{index}-{i}" for i in range(topics)])
    ext = {"brokerName": f"flood-{index}", "brokerAddr": f"127.0.0.1:{21000 + index}",
           "clusterName": "Flood", "haServerAddr": "127.0.0.1:1", "brokerId": "0",
           "compressed": "false", "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
    return ext, body
