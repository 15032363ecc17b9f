"""Wire codec layer: the ``RemotingCommand`` value type (Java ``RemotingCommand``).

``ext_fields`` is ``None`` when the peer sent no ``extFields`` and ``{}`` for an empty map:
Java writes ``"extFields":{}`` exactly when the command carried a custom header, and keeping
that keeps our bytes equal to Java's. ``verbatim`` remembers how a peer wrote JSON header strings
holding raw control characters (fastjson reads them raw, writes them escaped), so a decoded
header is encoded back byte for byte; it takes no part in equality, and answers never inherit it."""
from dataclasses import dataclass, field

from .codes import FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode, SerializeType
from .encoder import encode_frame
from .javahash import hashmap_ordered

__all__ = ["RemotingCommand", "FLAG_RESPONSE", "FLAG_ONEWAY"]

JSON = SerializeType.JSON.value
JAVA = LanguageCode.JAVA.value


@dataclass(slots=True)
class RemotingCommand:
    code: int
    language: "int | str" = JAVA
    version: int = 0
    opaque: int = 0
    flag: int = 0
    remark: "str | None" = None
    ext_fields: "dict[str, str] | None" = None
    body: "bytes | None" = None
    serialize_type: int = JSON
    #: ``{string: JSON literal as the peer wrote it}`` for header strings with raw control
    #: characters; None for almost every command.
    verbatim: "dict[str, str] | None" = field(default=None, compare=False, repr=False)

    @property
    def is_response(self):
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self):
        return bool(self.flag & FLAG_ONEWAY)

    def encode(self):
        """The whole frame, length prefix included."""
        return encode_frame(self)

    @classmethod
    def request(cls, code, ext_fields=None, body=None, *, opaque=0, version=0, oneway=False,
                language=JAVA, serialize_type=JSON):
        """A request as a Java client builds it (``createRequestCommand``)."""
        return cls(code=code, language=language, version=version, opaque=opaque,
                   flag=FLAG_ONEWAY if oneway else 0, ext_fields=ext_fields, body=body,
                   serialize_type=serialize_type)

    def create_response(self, code, remark=None, ext_fields=None, body=None, *, version=None,
                        serialize_type=None):
        """The answer to this request: same opaque, response bit set (``createResponseCommand``).

        ``ext_fields`` comes out in Java ``HashMap`` order, as the Java server writes it; pass
        ``{}`` for a response that has a custom header with every field null.
        """
        if ext_fields:
            ext_fields = hashmap_ordered(ext_fields)
        return RemotingCommand(
            code=code, language=JAVA, version=self.version if version is None else version,
            opaque=self.opaque, flag=FLAG_RESPONSE, remark=remark, ext_fields=ext_fields,
            body=body, serialize_type=self.serialize_type if serialize_type is None else serialize_type)
