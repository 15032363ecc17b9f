"""NameServer processor layer: access control for the administrative requests (a rocketpy
addition: no Java NameServer has any; it mirrors the broker's ACL 1.0 -- ``AclClientRPCHook``,
``AclUtils.combineRequestContent``, ``PlainAccessValidator``, ``PlainPermissionManager.validate``
of 4.9.8 and 5.x).

Anyone who can reach a Java NameServer can rewrite its KV settings, wipe a broker's write
permission, delete topics or change its configuration. Two independent layers close that, both
off by default (so rocketpy answers exactly like Java until configured); with both set a request
must pass both:

* ``adminAllowNetworks`` (``127.0.0.0/8,10.1.0.0/16,::1``): administrative requests from any
  other address are refused.
* ``aclEnable``: administrative requests must carry RocketMQ's own signature (the
  ``AccessKey``/``Signature``/``SecurityToken`` extFields ``mqadmin`` adds through
  ``AclClientRPCHook``), made with a secret key from ``aclConfigPath`` (``plain_acl.yml``'s
  ``accounts``, or ``tools.yml``'s ``accessKey``/``secretKey``). Stock ``mqadmin`` signs with
  ``rocketmq2``/``12345678`` from its ``conf/tools.yml``, so it keeps working once the NameServer
  knows that account (change both sides in production). The signature is
  ``Base64(HmacSHA1(secretKey, extFields values sorted by key, without Signature and
  _UNIQUE_KEY_QUERY, + body))``: :func:`signing_content`.

Replays: the signature covers the header's fields, the keys and the body -- no time and no
nonce (Java's ``AclClientRPCHook`` signs nothing else), so a captured signed request verifies
forever, on a Java broker as here. ``aclReplayWindowSeconds`` (off by default) refuses a
signature already accepted within that many seconds: a replay inside the window, and also a
genuine client's byte-identical request repeated inside it; a replay after it still passes
(TLS, which keeps requests from being captured, is the protection against that).

A refusal is ``NO_PERMISSION`` (16) with a remark saying why; a refused oneway is dropped.
:data:`ADMIN_CODES` are 100, 102, 205, 216, 217, 318 and 327. What brokers and clients need stays
open, UNREGISTER_BROKER included: a broker sends it unsigned when it shuts down, and whoever can
send it can send REGISTER_BROKER (which must stay open) and change that broker's routes anyway,
so guarding it would break graceful shutdown and protect nothing. Broker-side requests are
protected by ``bindAddress``, a firewall and TLS.

The access-control keys are read once, when the processor is built (``-c`` file or ``-D``); an
UPDATE_NAMESRV_CONFIG naming one is refused whether or not access control is on.
GET_NAMESRV_CONFIG reports them as Java reports any extra key, which is why secret keys live in
the separate accounts file. Stdlib only, no Twisted; the checks do no I/O, and the one file read
(:func:`load_accounts`, from :meth:`AccessControl.from_properties`) happens once, when the
processor is built at start-up. Observable through
:attr:`AccessControl.counters` and ``on_refused(code, remote_addr, reason)``."""
import base64
import hashlib
import hmac
import ipaddress
from dataclasses import dataclass

from rocketpy.remoting.catalogue import NAMESRV, codes_with
from rocketpy.remoting.codes import ResponseCode, request_code_name

from .home import Home

__all__ = [
    "ADMIN_CODES", "ACL_CONFIG_KEYS", "ADMIN_ALLOW_NETWORKS", "ACL_ENABLE", "ACL_CONFIG_PATH",
    "ACCESS_KEY", "SECRET_KEY", "SIGNATURE", "SECURITY_TOKEN", "UNIQUE_MSG_QUERY_FLAG",
    "AclConfigError", "Account", "AccessControl", "parse_networks", "client_address",
    "load_accounts", "parse_accounts", "signing_content", "calculate_signature", "sign",
    "default_acl_config_path", "describe_code", "networks_refusal", "ACL_REPLAY_WINDOW",
    "MAX_REMEMBERED_SIGNATURES",
]

#: Requests that change NameServer state on an operator's behalf (guarded): the codes the
#: catalogue declares administrative.
ADMIN_CODES = codes_with(NAMESRV, lambda r: r.administrative)

#: Configuration keys (NamesrvConfig style; in the ``-c`` properties file or ``-D``).
ADMIN_ALLOW_NETWORKS = "adminAllowNetworks"
ACL_ENABLE = "aclEnable"
ACL_CONFIG_PATH = "aclConfigPath"
ACL_REPLAY_WINDOW = "aclReplayWindowSeconds"
ACL_CONFIG_KEYS = (ADMIN_ALLOW_NETWORKS, ACL_ENABLE, ACL_CONFIG_PATH, ACL_REPLAY_WINDOW)
#: Signatures the replay window remembers at most: past it, signed requests are refused until
#: the oldest leave the window (only requests that passed the signature check are remembered,
#: so only an admin can fill it; ~100 bytes each).
MAX_REMEMBERED_SIGNATURES = 65536

#: ``SessionCredentials`` extFields keys, and ``MixAll.UNIQUE_MSG_QUERY_FLAG`` (added after
#: signing by the query-message client, so the Java validator leaves it out too).
ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
_UNSIGNED_KEYS = (SIGNATURE, UNIQUE_MSG_QUERY_FLAG)



class AclConfigError(ValueError):
    """The access-control settings or the accounts file cannot be used (the server must not
    start with a guard it cannot apply)."""


@dataclass(frozen=True)
class Account:
    """One ``accounts`` entry: Java ``PlainAccessConfig``'s accessKey, secretKey, admin."""

    access_key: str
    secret_key: str
    admin: bool = False

    def __repr__(self):  # never print a secret into a log
        return f"Account(access_key={self.access_key!r}, admin={self.admin})"


# ---------------------------------------------------------------------------- the signature

def _java_string_order(key):
    """``String.compareTo``: UTF-16 code units, which big-endian UTF-16 bytes sort like."""
    return key.encode("utf-16-be", "surrogatepass")


def signing_content(ext_fields, body):
    """The bytes ``AclClientRPCHook`` signs (``AclUtils.combineRequestContent``).

    Every extFields value (the request's custom header fields as sent, plus ``AccessKey`` and
    ``SecurityToken``), ordered by key as a ``TreeMap<String,String>``, without ``Signature``
    (and ``_UNIQUE_KEY_QUERY``, as ``PlainAccessValidator.parse``), concatenated and UTF-8
    encoded; then the body, if any.
    """
    ext = ext_fields or {}
    keys = sorted((k for k in ext if k not in _UNSIGNED_KEYS and ext[k] is not None),
                  key=_java_string_order)
    text = "".join(str(ext[k]) for k in keys)
    return text.encode("utf-8", "replace") + (body or b"")


def calculate_signature(content, secret_key):
    """``AclSigner.calSignature``: Base64 of HmacSHA1 keyed with the UTF-8 secret."""
    mac = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(mac).decode("ascii")


def sign(ext_fields, body, access_key, secret_key, security_token=None):
    """What ``AclClientRPCHook.doBeforeRequest`` does to a request: a new extFields dict with
    ``AccessKey`` (and ``SecurityToken``) added and the ``Signature`` over everything."""
    ext = dict(ext_fields or {})
    ext[ACCESS_KEY] = access_key
    if security_token is not None:
        ext[SECURITY_TOKEN] = security_token
    ext[SIGNATURE] = calculate_signature(signing_content(ext, body), secret_key)
    return ext


# ---------------------------------------------------------------------------- settings

def parse_networks(text, key=None):
    """``adminAllowNetworks`` (or another allow-list, ``key``): networks separated by commas,
    semicolons or blanks.

    Each is an address (``10.0.0.7``, ``::1``) or a network (``10.0.0.0/8``); host bits may be
    set (``10.1.2.3/8`` means ``10.0.0.0/8``). Empty text means no restriction.
    """
    networks = []
    for item in (text or "").replace(";", ",").replace(" ", ",").replace("\t", ",").split(","):
        item = item.strip()
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError as exc:
            raise AclConfigError(f"{key or ADMIN_ALLOW_NETWORKS}: {item!r} is not a network "
                                 f"({exc})") from None
    return tuple(networks)


def client_address(remote_addr):
    """The peer's IP from a channel's ``remote_addr`` (``"10.0.0.7:51234"``, ``"::1:51234"``,
    ``"[::1]:51234"``), IPv4-mapped IPv6 as IPv4; None when it is not an IP address."""
    text = (remote_addr or "").strip()
    host, sep, port = text.rpartition(":")
    if sep and port.isdigit() and host:
        text = host
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    text = text.split("%", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if address.version == 6 and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _scalar(text):
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _strip_comment(line):
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def parse_accounts(text):
    """Accounts from ``plain_acl.yml`` (``accounts:`` list of accessKey/secretKey/admin) or
    ``tools.yml`` (top-level ``accessKey``/``secretKey``, taken as an admin account).

    Reads the small YAML subset these files use (mappings, block lists, plain or quoted
    scalars); other keys (``whiteRemoteAddress``, ``topicPerms``, ...) are ignored.
    """
    top = {}
    entries = []
    in_accounts = False
    item_indent = None
    key_indent = None
    for raw in text.splitlines():
        line = _strip_comment(raw).rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        content = line.strip()
        is_item = content == "-" or content.startswith("- ")
        if indent == 0 and not is_item:
            key, sep, value = content.partition(":")
            in_accounts = key.strip() == "accounts" and not value.strip()
            if not in_accounts and sep:
                top[key.strip()] = _scalar(value)
            item_indent = key_indent = None
            continue
        if not in_accounts:
            continue
        if is_item and (item_indent is None or indent <= item_indent):
            item_indent = indent
            entries.append({})
            rest = content[1:]
            content = rest.lstrip(" ")
            is_item = False
            if not content:
                key_indent = None  # "-" alone: the keys follow on the next lines
                continue
            key_indent = indent = indent + 1 + len(rest) - len(content)
        if not entries:
            continue
        if key_indent is None:
            key_indent = indent
        if indent != key_indent or is_item:
            continue  # nested lists and maps (topicPerms, groupPerms)
        key, sep, value = content.partition(":")
        if sep:
            entries[-1][key.strip()] = _scalar(value)
    accounts = {}
    for entry in entries:
        access_key, secret_key = entry.get("accessKey"), entry.get("secretKey")
        if access_key and secret_key:
            accounts[access_key] = Account(access_key, secret_key,
                                           entry.get("admin", "false").lower() == "true")
    if top.get("accessKey") and top.get("secretKey"):
        accounts.setdefault(top["accessKey"], Account(top["accessKey"], top["secretKey"], True))
    return accounts


def load_accounts(path):
    """:func:`parse_accounts` of a file; :class:`AclConfigError` when it is missing or has none."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise AclConfigError(f"{ACL_CONFIG_PATH} {path}: {exc}") from None
    accounts = parse_accounts(text)
    if not accounts:
        raise AclConfigError(f"{ACL_CONFIG_PATH} {path}: no account with accessKey and secretKey")
    return accounts


def default_acl_config_path():
    """``~/namesrv/plain_acl.yml``, beside the default kvConfig.json."""
    return Home().acl_config_path()


# ---------------------------------------------------------------------------- the guard

def describe_code(code):
    """``100 (PUT_KV_CONFIG)``, for remarks."""
    name = request_code_name(code)
    return f"{code} ({name})" if name else str(code)


def networks_refusal(networks, channel, key, what):
    """None when ``channel``'s peer is in ``networks``, else the remark: ``what`` and client
    ... is not in ``key``."""
    remote_addr = getattr(channel, "remote_addr", "") or ""
    address = client_address(remote_addr)
    if address is not None and any(address in net for net in networks
                                   if net.version == address.version):
        return None
    shown = address if address is not None else remote_addr or "(unknown)"
    return f"{what} and client {shown} is not in {key}"


class AccessControl:
    """Decides whether a request may run; see the module docstring.

    :param allow_networks: networks administrative requests may come from (empty: any).
    :param accounts: ``{accessKey: Account}`` when signatures are required, else None.
    :param replay_window_ms: refuse a signature accepted less than this long ago (0: never).
    :param on_refused: optional ``on_refused(code, remote_addr, reason)``, called per refusal
        (for the transport's metrics or an audit log).
    """

    def __init__(self, allow_networks=(), accounts=None, *, admin_codes=ADMIN_CODES,
                 on_refused=None, replay_window_ms=0):
        self.allow_networks = tuple(allow_networks)
        self.accounts = None if accounts is None else dict(accounts)
        self.admin_codes = frozenset(admin_codes)
        #: every code :meth:`decide` looks at
        self.codes = self.admin_codes
        self.on_refused = on_refused
        if replay_window_ms and self.accounts is None:
            raise AclConfigError(f"{ACL_REPLAY_WINDOW} needs {ACL_ENABLE}=true (it remembers "
                                 "signatures)")
        self.replay_window_ms = replay_window_ms
        self._seen = {}          # signature -> when it was accepted (ms), oldest first
        self.counters = {"checked": 0, "allowed": 0, "refused_network": 0,
                         "refused_signature": 0, "refused_config_key": 0, "refused_replay": 0}

    @classmethod
    def from_properties(cls, props, **kwargs):
        """From the ``-c`` file / ``-D`` properties (:data:`ACL_CONFIG_KEYS`)."""
        props = props or {}
        networks = parse_networks(props.get(ADMIN_ALLOW_NETWORKS, ""))
        accounts = None
        if str(props.get(ACL_ENABLE, "false")).strip().lower() == "true":
            path = str(props.get(ACL_CONFIG_PATH) or "").strip() or default_acl_config_path()
            accounts = load_accounts(path)
        window = str(props.get(ACL_REPLAY_WINDOW, "0")).strip() or "0"
        if not window.isdigit() or int(window) > 86400:
            raise AclConfigError(f"{ACL_REPLAY_WINDOW}: {window!r} is not a number of seconds "
                                 "from 0 to 86400")
        return cls(networks, accounts, replay_window_ms=int(window) * 1000, **kwargs)

    @property
    def enabled(self):
        """True when some request can be refused for who sent it."""
        return bool(self.allow_networks) or self.accounts is not None

    def decide(self, request, channel, now_ms=0):
        """None when ``request`` from ``channel`` may run at ``now_ms``, else the refusal
        remark."""
        code = request.code
        if code not in self.codes:
            return None
        self.counters["checked"] += 1
        if self.allow_networks:
            refusal = networks_refusal(self.allow_networks, channel, ADMIN_ALLOW_NETWORKS,
                                       f"request code {describe_code(code)} is administrative")
            if refusal is not None:
                return self._refuse(request, channel, "refused_network", refusal)
        if self.accounts is not None:
            why = self._signature_problem(request)
            if why is not None:
                return self._refuse(request, channel, "refused_signature",
                                    f"{why} (request code {describe_code(code)} needs an "
                                    f"admin signature, {ACL_ENABLE}=true)")
            if self.replay_window_ms:
                why = self._replay_problem(request.ext_fields[SIGNATURE], now_ms)
                if why is not None:
                    return self._refuse(request, channel, "refused_replay",
                                        f"{why} (request code {describe_code(code)}, "
                                        f"{ACL_REPLAY_WINDOW}={self.replay_window_ms // 1000})")
        self.counters["allowed"] += 1
        return None

    def _replay_problem(self, signature, now_ms):
        """Remember an accepted signature for the window; why it is refused, if it is."""
        seen = self._seen
        horizon = now_ms - self.replay_window_ms
        while seen:
            oldest = next(iter(seen))
            if seen[oldest] > horizon:
                break
            del seen[oldest]
        accepted = seen.get(signature)
        if accepted is not None:
            return (f"The same signed request was accepted {now_ms - accepted} ms ago: refused "
                    "as a replay")
        if len(seen) >= MAX_REMEMBERED_SIGNATURES:
            return (f"More than {MAX_REMEMBERED_SIGNATURES} signed requests within the replay "
                    "window")
        seen[signature] = now_ms
        return None

    def check(self, request, channel, *, version=None, now_ms=0):
        """The hook form of :meth:`decide`: None (allowed) or the NO_PERMISSION answer
        (``None`` too for a refused oneway request, which gets no answer)."""
        remark = self.decide(request, channel, now_ms)
        if remark is None or request.is_oneway:
            return None
        return request.create_response(int(ResponseCode.NO_PERMISSION), remark, version=version)

    def _signature_problem(self, request):
        """Java ``PlainPermissionManager.validate``'s checks and messages."""
        ext = request.ext_fields or {}
        access_key = ext.get(ACCESS_KEY)
        if access_key is None:
            return "No accessKey is configured"
        account = self.accounts.get(access_key)
        if account is None:
            return f"No acl config for {access_key}"
        if not account.admin:
            return (f"Need admin permission for request code={request.code}, "
                    f"but accessKey={access_key} is not")
        expected = calculate_signature(signing_content(ext, request.body), account.secret_key)
        given = ext.get(SIGNATURE) or ""
        if not hmac.compare_digest(expected.encode("ascii"), given.encode("utf-8", "replace")):
            return f"Check signature failed for accessKey={access_key}"
        return None

    def config_refusal(self, props, request, channel):
        """None when UPDATE_NAMESRV_CONFIG's ``props`` (its body, as the handler decoded it,
        off the reactor when big) may be applied, else the refusal remark: this guard's own
        keys change only with a restart, whether access control is on or off."""
        touched = [key for key in ACL_CONFIG_KEYS if key in props]
        if not touched:
            return None
        return self._refuse(request, channel, "refused_config_key",
                            f"Can not update access control config ({', '.join(touched)}) "
                            "at runtime: edit the config file and restart.")

    def _refuse(self, request, channel, counter, remark):
        self.counters[counter] += 1
        if self.on_refused is not None:
            self.on_refused(request.code, getattr(channel, "remote_addr", ""), remark)
        return remark
