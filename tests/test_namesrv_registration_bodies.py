"""The registration-body cache: what each broker address sent last, by digest, without its
topics; bounded by entries."""
from brokerbody import register_body
from rocketpy.namesrv.processor.registration import RegistrationBodies, read_body


def test_an_identical_body_is_found_a_changed_one_is_not():
    cache = RegistrationBodies()
    body = register_body(["T1", "T2"], 1)
    cache.put("a", body, False, 479, read_body(body, False, 479))
    assert cache.entry("a", bytes(body), False, 479) is not None     # equal bytes, another object
    assert cache.entry("a", body, True, 479) is None                 # compressed differs
    assert cache.entry("a", body, False, 400) is None                # request version differs
    assert cache.entry("a", body[:-1] + b" ", False, 479) is None    # same length, other bytes
    assert cache.entry("b", body, False, 479) is None


def test_an_entry_keeps_no_topics_whatever_the_body():
    """Keeping decoded topics (230 B each) made the cache the biggest thing in the server after
    the route state: 64 MiB at 28 brokers of 10,000 topics."""
    cache = RegistrationBodies()
    for key, count in (("small", 2), ("big", 20_000)):
        body = register_body([f"T{i}" for i in range(count)], 1)
        wrapper, _ = read_body(body, False, 479)
        cache.put(key, body, False, 479, (wrapper, None))
        light, _ = cache.entry(key, body, False, 479)[3]
        assert light.topic_config_table == {} and light.topic_queue_mapping_info_map == {}
        assert (light.data_version, light.digest) == (wrapper.data_version, wrapper.digest)
        assert not any(isinstance(v, (bytes, bytearray)) and len(v) > 64
                       for v in cache._last[key])                    # nor the body


def test_entry_count_bound_drops_the_oldest():
    cache = RegistrationBodies(limit=3)
    for key in "abcde":
        cache.put(key, key.encode(), False, 479, read_body(b"", False, 479))
    assert list(cache._last) == ["c", "d", "e"]
    cache.put("c", b"C", False, 479, read_body(b"", False, 479))    # re-registration: newest
    assert list(cache._last) == ["d", "e", "c"]
    cache.forget("d")
    cache.forget_departed(lambda key: key == "e")
    assert list(cache._last) == ["e"]
