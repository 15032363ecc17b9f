"""Admin layer: request signing (Java ``AclClientRPCHook``) and where mqadmin finds its keys.

The signature is :func:`rocketpy.namesrv.acl.sign`, the very function the NameServer checks
with, so the two cannot drift. This module adds the client's part: the extFields order on the
wire (Java puts ``AccessKey``, ``SecurityToken``, the header's fields, then ``Signature`` into one
``HashMap``; after 5.0.0 the signature goes in before the header's fields, and the map is a
``HashMap(256)``) and mqadmin's key lookup (``$ROCKETMQ_HOME/conf/tools.yml``; no keys, no signing)."""
import os

from ..namesrv.acl import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, parse_accounts, sign
from ..remoting.codes import MQVersion
from ..remoting.javahash import hashmap_ordered

_V5_0_0 = int(MQVersion.V5_0_0)

__all__ = ["AclClientRPCHook", "tools_yml_credentials", "TOOLS_YML"]

#: ``MixAll.ACL_CONF_TOOLS_FILE``, under ``$ROCKETMQ_HOME``
TOOLS_YML = os.path.join("conf", "tools.yml")


class AclClientRPCHook:
    """An RPC hook (``hook(addr, request) -> request``) that signs every request."""

    def __init__(self, access_key, secret_key, security_token=None):
        self.access_key = access_key
        self.secret_key = secret_key
        self.security_token = security_token

    def __repr__(self):  # never print the secret
        return f"AclClientRPCHook(access_key={self.access_key!r})"

    def __call__(self, addr, request):
        signed = sign(request.ext_fields, request.body, self.access_key, self.secret_key,
                      self.security_token)
        java = {ACCESS_KEY: signed[ACCESS_KEY]}
        if self.security_token is not None:
            java[SECURITY_TOKEN] = self.security_token
        if request.version > _V5_0_0:
            # 5.x after 5.0.0: the hook's addExtField creates the map, a HashMap(256), before
            # the header's fields are written into it at encoding time
            java[SIGNATURE] = signed[SIGNATURE]
            java.update((k, v) for k, v in signed.items() if k not in java)
            request.ext_fields = hashmap_ordered(java, 256)
            return request
        java.update((k, v) for k, v in signed.items() if k not in java and k != SIGNATURE)
        java[SIGNATURE] = signed[SIGNATURE]
        request.ext_fields = hashmap_ordered(java)
        return request


def tools_yml_credentials(rocketmq_home=None):
    """``(accessKey, secretKey)`` from ``$ROCKETMQ_HOME/conf/tools.yml`` as mqadmin reads it,
    or None (no home, no file, blank keys: Java then signs nothing)."""
    home = rocketmq_home if rocketmq_home is not None else os.environ.get("ROCKETMQ_HOME")
    if not home:
        return None
    try:
        with open(os.path.join(home, TOOLS_YML), encoding="utf-8") as f:
            accounts = parse_accounts(f.read())
    except (OSError, UnicodeDecodeError):
        return None
    admins = [account for account in accounts.values() if account.admin]
    if not admins:
        return None
    return admins[0].access_key, admins[0].secret_key
