"""Test helper: the JSON header reader's two tiers (rocketpy.remoting.frame), for the tests that
hold the usual-shape shortcut equal to the field-by-field reader."""
from rocketpy.remoting import frame as codec_frame
from rocketpy.remoting.errors import HeaderDecodeError


def usual_json_header(header):
    """The reader's usual-shape shortcut: its command, or None where it declines."""
    try:
        values = codec_frame._header_values(header)
    except HeaderDecodeError:
        return None
    return codec_frame._usual(values)


def full_json_header(header):
    """The reader field by field (the reference the shortcut is held to)."""
    return codec_frame._field_by_field(codec_frame._header_values(header))
