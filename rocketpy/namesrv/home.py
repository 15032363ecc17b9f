"""NameServer state layer: where the NameServer's and the controller's files go when their
settings do not say (under the user's home directory, Java's ``user.home``), and ``rocketmqHome``
(``$ROCKETMQ_HOME``, as ``mqnamesrv`` passes it). Both servers' settings take their defaults from
one :class:`Home`, read from an environment: the process's unless a test hands its own."""
import os
import pwd

__all__ = ["Home"]


class Home:
    """The home directory and ``ROCKETMQ_HOME`` of ``environ`` (``os.environ`` when None)."""

    def __init__(self, environ=None):
        environ = os.environ if environ is None else environ
        self.rocketmq_home = environ.get("ROCKETMQ_HOME")
        # as os.path.expanduser("~"): $HOME when set, else the account's directory
        home = environ["HOME"] if "HOME" in environ else pwd.getpwuid(os.getuid()).pw_dir
        self.user_home = home.rstrip("/") or "/"

    def path(self, *parts):
        return os.path.join(self.user_home, *parts)

    def namesrv_defaults(self):
        """``NamesrvConfig``'s keys whose default comes from the home."""
        return {"rocketmqHome": self.rocketmq_home,
                "kvConfigPath": self.path("namesrv", "kvConfig.json"),
                "configStorePath": self.path("namesrv", "namesrv.properties")}

    def controller_defaults(self):
        """``ControllerConfig``'s keys whose default comes from the home."""
        return {"rocketmqHome": self.rocketmq_home,
                "configStorePath": self.path("controller", "controller.properties")}

    def controller_store_path(self, controller_type):
        """``getControllerStorePath`` when ``controllerStorePath`` is empty."""
        return self.path(controller_type + "Controller")

    def acl_config_path(self):
        """``~/namesrv/plain_acl.yml``, beside the default kvConfig.json."""
        return self.path("namesrv", "plain_acl.yml")
