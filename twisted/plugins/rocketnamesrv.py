"""twistd plugin: ``twistd rocketnamesrv`` (options and services in rocketpy.service.tap)."""
from twisted.application.service import ServiceMaker

rocketnamesrv = ServiceMaker(
    "rocketpy NameServer", "rocketpy.service.tap",
    "Apache RocketMQ NameServer (remoting protocol), configured like mqnamesrv", "rocketnamesrv")
