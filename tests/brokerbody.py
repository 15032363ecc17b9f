"""Test helper: a JSON RegisterBrokerBody shaped like a genuine 5.x broker's (see the captures)."""
import json

__all__ = ["register_body"]


def register_body(topics, counter=1, perm=6, queues=4, timestamp=1, filters=()):
    """The body of a REGISTER_BROKER carrying ``topics`` with one data version counter."""
    table = {t: {"order": False, "perm": perm, "readQueueNums": queues, "topicFilterType": "SINGLE_TAG",
                 "topicName": t, "topicSysFlag": 0, "writeQueueNums": queues} for t in topics}
    return json.dumps({"filterServerList": list(filters), "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": counter, "stateVersion": 0, "timestamp": timestamp},
        "topicConfigTable": table}}).encode()
