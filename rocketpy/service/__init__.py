"""rocketpy.service: the NameServer's Twisted services and ``twistd rocketnamesrv`` (``tap.py``).

Java's ``NamesrvController`` wires these by holding everything; here only
:func:`rocketpy.service.tap.makeService` knows every component, and each service gets the narrow
callables it needs.
"""
