"""NameServer state layer: rocketpy's own integer settings (bounds Java does not have), as small
tables of ``(property key, attribute, default, meaning)``: the one place their keys are written,
read by the start-up check, the config guard and the configuration page. Values are integers
>= 0; 0 turns a bound off."""

__all__ = ["IntSettings", "int_values"]


def int_values(props, table):
    """``{attribute: int}`` of the keys of ``table`` present in ``props`` (``-c`` / ``-D``
    text); ValueError names a bad key."""
    values = {}
    for key, attr, _, _ in table:
        text = str(props.get(key, "") or "").strip()
        if not text:
            continue
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{key} is not a number: {text!r}") from None
        if value < 0:
            raise ValueError(f"{key} must be >= 0, got {value}")
        values[attr] = value
    return values


class IntSettings:
    """The values of one table (:attr:`KEYS`), defaults unless given."""

    KEYS = ()

    def __init__(self, **values):
        for _, attr, default, _ in self.KEYS:
            setattr(self, attr, values.pop(attr, default))
        if values:
            raise TypeError(f"unknown {type(self).__name__} settings: {sorted(values)}")

    @classmethod
    def from_properties(cls, props):
        """From ``-c`` / ``-D`` properties; ValueError names a bad key."""
        return cls(**int_values(props or {}, cls.KEYS))

    def __repr__(self):
        inner = ", ".join(f"{attr}={getattr(self, attr)}" for _, attr, _, _ in self.KEYS)
        return f"{type(self).__name__}({inner})"
