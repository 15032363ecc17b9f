"""NameServer state layer: what UPDATE_NAMESRV_CONFIG and the controller's
UPDATE_CONTROLLER_CONFIG share (Java ``DefaultRequestProcessor.updateConfig`` and
``ControllerRequestProcessor``'s, 4.9.8-5.3.3): the body read as properties, and the refusal of a
value the next start would refuse. The NameServer's own guard is
:mod:`rocketpy.namesrv.processor.configguard`."""
from rocketpy.remoting.errors import DecodeBudgetExceeded

from .javaprops import PropertiesError, body_to_properties

__all__ = ["update_properties", "value_refusal", "shown_key"]


def shown_key(key):
    """``key`` fit for a remark and a log line: escapes for what is not printable ASCII."""
    text = key.encode("unicode_escape", "backslashreplace").decode("ascii")
    return text if len(text) <= 80 else text[:77] + "..."


def update_properties(body, budget):
    """``(properties, None)`` of a config update's body (UPDATE_NAMESRV_CONFIG,
    UPDATE_CONTROLLER_CONFIG), or ``(None, remark)`` of the SYSTEM_ERROR that refuses it: Java's
    for text ``string2Properties`` refuses, rocketpy's for one that would cost more than
    ``budget`` allows."""
    try:
        return body_to_properties(body, budget), None
    except PropertiesError:
        return None, "string2Properties error"
    except DecodeBudgetExceeded as exc:
        return None, f"[REFUSED] {exc}; nothing was applied"


def value_refusal(props, value_check):
    """The INVALID_PARAMETER remark for the first value of ``props`` that ``value_check(key,
    value)`` (the start-up check) refuses, or None: an update must never make the next start
    fail, nor be answered "success" and dropped (``properties2Object`` skips what it cannot
    parse)."""
    if value_check is None:
        return None
    for key, value in props.items():
        expected = value_check(key, value)
        if expected is not None:
            return f"Can not update config key '{shown_key(key)}': {value!r} is not {expected}."
    return None
