"""rocketpy.admin: mqadmin's NameServer commands in Python (``rocketpy-admin``).

:class:`~rocketpy.admin.api.MQAdmin` is the NameServer half of Java's ``DefaultMQAdminExt``
over the transport's :class:`~rocketpy.transport.client.RemotingClient`;
:mod:`rocketpy.admin.commands` holds the subcommands with mqadmin's options and printed layout;
:mod:`rocketpy.admin.cli` is the command line; :mod:`rocketpy.admin.acl` signs requests.
"""
from .api import MQAdmin

__all__ = ["MQAdmin"]
