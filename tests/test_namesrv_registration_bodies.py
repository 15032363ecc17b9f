"""The registration-body cache: bounded by entries and by the bytes of the bodies it keeps."""
from rocketpy.namesrv.processor.registration import RegistrationBodies


def test_cache_stays_within_its_byte_bound_dropping_the_oldest():
    cache = RegistrationBodies(limit=4096, max_bytes=10_000)
    for i in range(50):
        cache.put(f"b{i}", bytes([i]) * 3000, False, 479, object())
        assert cache.bytes == sum(len(e[0]) for e in cache._last.values()) <= 10_000
    assert list(cache._last) == ["b47", "b48", "b49"]
    assert cache.entry("b49", bytes([49]) * 3000, False, 479) is not None
    assert cache.entry("b0", bytes([0]) * 3000, False, 479) is None


def test_default_bound_holds_four_full_frames_not_4096():
    cache = RegistrationBodies()
    body = b"x" * (16 * 1024 * 1024)
    for i in range(10):
        cache.put(i, body, False, 479, None)
    assert len(cache._last) == 4 and cache.bytes == 64 * 1024 * 1024


def test_replacing_forgetting_and_sweeping_keep_the_byte_count():
    cache = RegistrationBodies(max_bytes=1000)
    cache.put("a", b"a" * 400, False, 479, None)
    cache.put("b", b"b" * 400, False, 479, None)
    cache.put("a", b"A" * 500, False, 479, None)       # re-registration: replaces, newest now
    assert cache.bytes == 900 and list(cache._last) == ["b", "a"]
    cache.put("c", b"c" * 300, False, 479, None)       # evicts b, the oldest
    assert list(cache._last) == ["a", "c"] and cache.bytes == 800
    cache.forget("a")
    cache.forget_departed(lambda key: False)
    assert cache.bytes == 0 and not cache._last
    cache.put("huge", b"h" * 1001, False, 479, None)   # bigger than the bound: not kept
    assert cache.bytes == 0 and not cache._last


def test_entry_count_bound_drops_the_oldest_too():
    cache = RegistrationBodies(limit=3)
    for key in "abcde":
        cache.put(key, key.encode(), False, 479, None)
    assert list(cache._last) == ["c", "d", "e"] and cache.bytes == 3


def test_decoded_topics_count_against_the_byte_bound():
    """What the cache keeps decoded costs more than the body (and a compressed body of a few
    KB can decode to 100,000 topics): each entry is charged its body and its topics."""
    from rocketpy.namesrv.processor.registration import DECODED_TOPIC_BYTES, read_body
    from brokerbody import register_body
    body = register_body([f"T{i}" for i in range(2000)], 1)
    decoded = read_body(body, False, 479)
    cost = len(body) + 2000 * DECODED_TOPIC_BYTES
    cache = RegistrationBodies(max_bytes=cost - 1)
    cache.put("a", body, False, 479, decoded)
    assert cache._last == {} and cache.bytes == 0     # over the bound once decoded: not kept
    cache = RegistrationBodies(max_bytes=cost + cost // 2)
    cache.put("a", body, False, 479, decoded)
    assert cache.bytes == cost
    cache.put("b", body, False, 479, decoded)         # two do not fit
    assert list(cache._last) == ["b"] and cache.bytes == cost
