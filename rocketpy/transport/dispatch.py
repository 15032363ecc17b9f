"""Transport layer: the epoll reactor's dispatch without a log context per event.

Twisted's ``EPollReactor.doPoll`` runs each ready descriptor's ``doRead``/``doWrite``
(``_doReadOrWrite``) inside ``log.callWithLogger``: the descriptor's ``logPrefix()`` and a
context dictionary pushed and popped per event, for the legacy log's ``system`` field. A profile
of cached route queries (issue 33) put that wrapper at 11-18 % of the server's CPU. rocketpy logs
through :mod:`twisted.logger` with its own namespaces and reads no such context, so
:func:`lean_dispatch` gives the reactor a ``doIteration`` that polls as ``doPoll`` does and
hands every event to the same ``_doReadOrWrite``; an exception escaping it is logged as
``callWithLogger`` logs it (``log.err`` under the descriptor's prefix), and only then is a
prefix asked for. Legacy ``log.msg`` lines written inside a read lose their ``[prefix]`` (they
read ``[-]``).

It is the second place, after :mod:`rocketpy.transport.tuning`, that reads Twisted's private
state (the reactor's ``_poller``, ``_selectables`` and ``_doReadOrWrite``): it applies only to
a reactor whose class still runs ``EPollReactor.doPoll`` unchanged and has those three, and
leaves any other reactor (poll, select, a test's memory reactor) as it is."""
import errno
import types

from twisted.python import log

__all__ = ["lean_dispatch"]

_PRIVATE = ("_poller", "_selectables", "_doReadOrWrite")


def _epoll_do_poll():
    try:
        from twisted.internet.epollreactor import EPollReactor
    except ImportError:    # no epoll on this platform
        return None
    return EPollReactor.doPoll


def lean_dispatch(reactor):
    """Give ``reactor`` the lean ``doIteration`` when it is Twisted's epoll reactor; whether it
    did."""
    do_poll = _epoll_do_poll()
    if (do_poll is None or getattr(type(reactor), "doIteration", None) is not do_poll
            or not all(hasattr(reactor, name) for name in _PRIVATE)):
        return False
    reactor.doIteration = types.MethodType(_do_poll, reactor)
    return True


def _do_poll(reactor, timeout):
    """``EPollReactor.doPoll``, each event handled without ``callWithLogger``'s context."""
    try:
        events = reactor._poller.poll(-1 if timeout is None else timeout,
                                      len(reactor._selectables))
    except OSError as err:
        if err.errno == errno.EINTR:
            return
        raise
    selectables, handle = reactor._selectables, reactor._doReadOrWrite
    for fd, event in events:
        selectable = selectables.get(fd)
        if selectable is None:
            continue
        try:
            handle(selectable, fd, event)
        except KeyboardInterrupt:
            raise
        except BaseException:
            log.err(system=_prefix(selectable))


def _prefix(selectable):
    try:
        return selectable.logPrefix()
    except KeyboardInterrupt:
        raise
    except BaseException:
        return "(buggy logPrefix method)"
