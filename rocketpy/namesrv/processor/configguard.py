"""NameServer processor layer: what UPDATE_NAMESRV_CONFIG may change (Java
``DefaultRequestProcessor.updateConfig`` with its ``configBlackList``, 4.9.8 and 5.1+).

Java applies the body's properties and writes the whole configuration to ``configStorePath``
as unescaped ``key=value`` lines (``MixAll.properties2String``). That opens two holes, closed
here in every profile (a profile decides what answers look like, never whether the wire reaches
the file system):

* **Injection.** A value holding the escape ``\\n`` passes the black list as one key and is
  written as several lines: several keys at the next start (``kvConfigPath``, ``aclEnable``...).
  Every key and value that would not read back as exactly itself from that line is refused with
  INVALID_PARAMETER naming the key (line breaks, control characters, backslashes, lone
  surrogates, ``=``, ``:`` or blanks in a key, a value starting with a blank); the file is stored
  with ``Properties.store``'s escaping besides (:func:`~rocketpy.namesrv.javaprops.store_properties`).
* **The black list.** 5.0.0 has none (CVE-2023-37582: ``configStorePath`` plus an injected line
  writes a file anywhere). Refused with NO_PERMISSION and Java's remark "Can not update config in
  black list.": ``configBlackList``'s keys and always Java's fixed four, every key naming a path,
  dir, file or home, every dotted key (``tls.*``, Java system properties), ``bindAddress``, and
  the keys rocketpy guards itself with (:data:`PROTECTED_KEYS` plus what ``makeService`` adds).

With the start-up check (``value_check``) an update the next start would refuse
(``listenPort=abc``) is refused too: an update must never make the next start fail."""
import logging
import re

from rocketpy.remoting.codes import ResponseCode

from ..acl import ACL_CONFIG_KEYS
from ..broker_access import BROKER_ACCESS_KEYS
from ..config import CONFIG_BLACKLIST_FIXED
from ..configupdate import shown_key, value_refusal
from ..javaprops import format_properties, parse_properties
from ..kvconfig import KV_LIMIT_KEYS
from ..replies import error
from ..route_bounds import ROUTE_BOUND_KEYS
from .registration import DECODE_BUDGET_KEY, MAX_TOPICS_KEY

__all__ = ["ConfigUpdateGuard", "PROTECTED_KEYS", "BLACK_LIST_REMARK", "is_protected",
           "round_trip_problem"]

log = logging.getLogger("rocketpy.namesrv")

#: Java's answer to a black-listed key (NO_PERMISSION).
BLACK_LIST_REMARK = "Can not update config in black list."

#: Keys no update may change, whatever ``configBlackList`` says.
PROTECTED_KEYS = frozenset(CONFIG_BLACKLIST_FIXED
                           + ("bindAddress", MAX_TOPICS_KEY, DECODE_BUDGET_KEY)
                           + ACL_CONFIG_KEYS + BROKER_ACCESS_KEYS
                           + tuple(entry[0] for entry in KV_LIMIT_KEYS + ROUTE_BOUND_KEYS))
_PATH_LIKE = re.compile(r"path|dir|file|home", re.IGNORECASE)
_NAMES = {"\n": "a line feed (U+000A)", "\r": "a carriage return (U+000D)", "\0": "NUL (U+0000)",
          "\\": "a backslash", "=": "'='", ":": "':'", " ": "a blank", "\t": "a tab (U+0009)",
          "\f": "a form feed (U+000C)"}


def is_protected(key, extra=()):
    """True for a key no update may change (see the module docstring)."""
    return (key in PROTECTED_KEYS or key in extra or "." in key
            or _PATH_LIKE.search(key) is not None)


def _name(ch):
    return _NAMES.get(ch) or f"U+{ord(ch):04X}"


def _bad_char(text):
    for ch in text:
        code = ord(ch)
        if code < 0x20 or code == 0x7F or 0xD800 <= code <= 0xDFFF or ch == "\\":
            return ch
    return None


def round_trip_problem(key, value):
    """Why ``key=value`` would not read back as that one key and value, or None."""
    for what, text in (("key", key), ("value", value)):
        ch = _bad_char(text)
        if ch is not None:
            return f"its {what} holds {_name(ch)}"
    for ch in key:
        if ch in "=: \f":
            return f"its key holds {_name(ch)}"
    if key[:1] in ("#", "!"):
        return f"its key starts with {key[0]!r} (a comment)"
    if value[:1] in (" ", "\t", "\f"):
        return "its value starts with a blank"
    if parse_properties(format_properties([(key, value)])) != {key: value}:
        return "it does not"
    return None


class ConfigUpdateGuard:
    """Decides whether UPDATE_NAMESRV_CONFIG may apply a body's properties.

    :param black_list: the ``configBlackList`` text (``;``-separated), read once, as Java does.
    :param protected: more keys no update may change (the layers above: transport limits).
    :param value_check: ``value_check(key, value)`` -> None, or what the start-up check expects
        of that key (a value the next start would refuse is refused now).
    """

    def __init__(self, black_list="", protected=(), value_check=None):
        self.black_list = frozenset(CONFIG_BLACKLIST_FIXED) | frozenset((black_list or "").split(";"))
        self.protected = frozenset(protected)
        self.value_check = value_check
        #: refusals since start, by reason
        self.refused = {"round_trip": 0, "black_list": 0, "value": 0}

    @classmethod
    def from_configuration(cls, configuration, **kwargs):
        return cls(configuration.namesrv_config.config_black_list, **kwargs)

    def refusal(self, props, peer=""):
        """None when ``props`` may be applied, else the Reply that refuses them."""
        for key, value in props.items():
            problem = round_trip_problem(key, value)
            if problem is not None:
                return self._refuse("round_trip", ResponseCode.INVALID_PARAMETER, peer,
                                    f"Can not update config key '{shown_key(key)}': {problem}; "
                                    "a key and its value must read back as themselves from a "
                                    "key=value line.")
        blocked = [key for key in props
                   if key in self.black_list or is_protected(key, self.protected)]
        if blocked:
            return self._refuse("black_list", ResponseCode.NO_PERMISSION, peer, BLACK_LIST_REMARK,
                                f" ({', '.join(map(shown_key, blocked))})")
        remark = value_refusal(props, self.value_check)
        if remark is not None:
            return self._refuse("value", ResponseCode.INVALID_PARAMETER, peer, remark)
        return None

    def _refuse(self, reason, code, peer, remark, detail=""):
        self.refused[reason] += 1
        log.warning("UPDATE_NAMESRV_CONFIG from %s refused: %s%s", peer or "?", remark, detail)
        return error(code, remark)
