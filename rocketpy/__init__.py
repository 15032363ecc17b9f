"""rocketpy: Apache RocketMQ NameServer and remoting protocol, in Python on Twisted."""
