"""Moving bytes between in-memory services and simulated brokers on one MemoryReactorClock
(iosim pumps): the part every such world shares. A world sets ``reactor``, ``pumps`` and
``accepted`` and connects new ``reactor.tcpClients`` in ``_accept``."""


class Pumped:
    """``settle``, ``run`` and ``wait`` over the world's pumps and fake clock."""

    def settle(self):
        for _ in range(1000):
            self._accept()
            moved = False
            for pump in self.pumps:
                moved = pump.pump() or moved
            self.reactor.advance(0)
            if not moved and self.accepted == len(self.reactor.tcpClients):
                return
        raise AssertionError("still moving")

    def run(self, seconds, step=0.05):
        end = self.reactor.seconds() + seconds
        while self.reactor.seconds() < end:
            self.reactor.advance(step)
            self.settle()

    def wait(self, d, step=0.05, limit=120):
        out = []
        d.addBoth(out.append)
        for _ in range(int(limit / step)):
            if out:
                break
            self.reactor.advance(step)
            self.settle()
        assert out, "the Deferred never fired"
        return out[0]
