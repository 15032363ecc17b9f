"""rocketpy: Apache RocketMQ NameServer and remoting protocol, in Python on Twisted."""

#: The release; setup.cfg reads it from here.
__version__ = "0.1.0"
