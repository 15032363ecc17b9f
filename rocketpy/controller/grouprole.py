"""Controller state layer: one controller's role in a group sharing its state through etcd
(``controllerType=etcd``), written once as a transition table, as the connection's life is
(:mod:`rocketpy.transport.connstate`). Pure bookkeeping (no Twisted):
:class:`~rocketpy.service.controllergroup.ControllerGroup` fires the events and acts on the
role it enters.

Roles:

* ``loading``: reading the state from etcd (at start, and after it stopped leading: what it
  applied but could not write is forgotten and read again); it does not campaign;
* ``electing``: the state is read and no leader is known: it campaigns for the election key;
* ``following``: another controller holds the election key;
* ``winning``: it holds the election key and reads what it has not applied before it leads
  (after winning, and after etcd refused one entry as too large: the state is read again, the
  key kept);
* ``leading``: it answers as the group's leader and writes the entries;
* ``stopped``: the service stopped.

Events: ``loaded`` (a catch-up ended), ``leader_seen`` (another's election key),
``leader_gone`` (the key was deleted), ``won`` (its campaign created the key), ``caught_up``
(the catch-up after winning ended), ``lost`` (a write refused or failed, the lease expired or
was unreachable for its time to live, or a catch-up after winning failed), ``entry_refused``
(etcd refused one entry as too large: the entry fails, leadership stays), ``stop``."""

__all__ = ["LOADING", "ELECTING", "FOLLOWING", "WINNING", "LEADING", "STOPPED", "ROLES",
           "EVENTS", "TRANSITIONS", "LEADERLESS", "GroupRole"]

LOADING, ELECTING, FOLLOWING = "loading", "electing", "following"
WINNING, LEADING, STOPPED = "winning", "leading", "stopped"
ROLES = (LOADING, ELECTING, FOLLOWING, WINNING, LEADING, STOPPED)
EVENTS = ("loaded", "leader_seen", "leader_gone", "won", "caught_up", "lost", "entry_refused",
          "stop")

#: the pairs that change the role; every other pair keeps it (a leader seen while loading is
#: noted, not followed: the campaign after loading reads it; a catch-up that ends while
#: following changes nothing; nothing leaves ``stopped``)
_CHANGES = {
    (LOADING, "loaded"): ELECTING,
    (LOADING, "stop"): STOPPED,
    (ELECTING, "leader_seen"): FOLLOWING,
    (ELECTING, "won"): WINNING,
    (ELECTING, "stop"): STOPPED,
    (FOLLOWING, "leader_gone"): ELECTING,
    (FOLLOWING, "won"): WINNING,          # its campaign created the key: the key is its own
    (FOLLOWING, "stop"): STOPPED,
    (WINNING, "caught_up"): LEADING,
    (WINNING, "lost"): LOADING,
    (WINNING, "leader_seen"): LOADING,    # another holds the key: its own is gone
    (WINNING, "leader_gone"): LOADING,
    (WINNING, "stop"): STOPPED,
    (LEADING, "lost"): LOADING,
    (LEADING, "leader_seen"): LOADING,
    (LEADING, "leader_gone"): LOADING,
    (LEADING, "entry_refused"): WINNING,  # read the state again, keep the key
    (LEADING, "stop"): STOPPED,
}

#: ``(role, event) -> role``, for every pair
TRANSITIONS = {(role, event): _CHANGES.get((role, event), role)
               for role in ROLES for event in EVENTS}

#: the roles in which this controller knows of no leader answering (``loading`` knows only
#: once it has seen another's key)
LEADERLESS = frozenset((ELECTING, WINNING))


class GroupRole:
    """One controller's place in :data:`TRANSITIONS`, and how many times each change happened."""

    __slots__ = ("role", "changes")

    def __init__(self, role=LOADING):
        self.role = role
        self.changes = {}          # (old, new) -> count

    def fire(self, event):
        """Apply ``event``; the role it left when it changed, else None."""
        new = TRANSITIONS[self.role, event]
        if new == self.role:
            return None
        old, self.role = self.role, new
        self.changes[old, new] = self.changes.get((old, new), 0) + 1
        return old
